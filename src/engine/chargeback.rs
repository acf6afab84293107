//! Chargeback: each client's direct cost, its shares of the shared pools, and markup, so
//! that clients + `(unassigned)` = the whole amortized bill.
//!
//! A client's **direct cost** is its pods' split cost plus the non-Kubernetes lines tagged
//! to it (an S3 bucket or EBS volume with its client tag), by category. Three pools are
//! shared: the **platform** pool (everything platform namespaces cost), the **idle** pool
//! (the unused cost AWS pushed down to every non-platform pod: capacity paid for and not
//! requested) and the **infrastructure** pool (cluster cost no client claims — the control
//! plane, node root volumes — and EC2 of a cluster not allocated to pods). Each client takes
//! a share of each pool by its own policy — `gpu` (its GPU cost over everyone's), `total`
//! (its direct cost over everyone's), `even` (one recipient's part) or `none` — in whole
//! nano-dollars rounded down; `(unassigned)` (pods and lines no client claims, EC2 outside
//! any cluster) keeps the rest, so the shares of every pool add up to the pool exactly.
//! Markup (basis points) applies to direct + shared and is not on the bill.

use std::collections::BTreeMap;

use super::classify::{PLATFORM, UNASSIGNED};
use crate::store::{ClientRollup, ClientSettings, CostRollup};

/// The default policy for clients without settings.
pub const DEFAULT_POLICY: &str = "gpu";

/// Policies a client can have.
pub const POLICIES: &[&str] = &["gpu", "total", "even", "none"];

/// The period's non-Kubernetes cost, placed for chargeback; nano-dollars.
#[derive(Debug, Default, Clone)]
pub struct NonKubernetes {
    /// Lines a client claims by tag, per (client, category); lines nobody claims and EC2
    /// outside any cluster are `(unassigned)`'s.
    pub direct: BTreeMap<(String, &'static str), i64>,
    /// Cluster lines no client claims and EC2 of clusters not allocated to pods.
    pub infrastructure_pool: i64,
}

#[derive(Default)]
struct Entity {
    split: i64,
    unused: i64,
    gpu: i64,
    gpu_split: i64,
    cpu_split: i64,
    training: i64,
    inference: i64,
    /// storage, network, other.
    non_kubernetes: [i64; 3],
}

const CATEGORIES: [&str; 3] = ["storage", "network", "other"];

/// One row per client (and `(unassigned)`), from a period's cost rollups and its placed
/// non-Kubernetes cost.
pub fn chargeback(
    period: &str,
    costs: &[CostRollup],
    non_kubernetes: &NonKubernetes,
    settings: &[ClientSettings],
) -> Vec<ClientRollup> {
    let mut entities: BTreeMap<&str, Entity> = BTreeMap::new();
    let mut platform_pool = 0i64;
    for row in costs {
        if row.client == PLATFORM {
            platform_pool += row.split_cost_nanos + row.unused_cost_nanos;
            continue;
        }
        let e = entities.entry(row.client.as_str()).or_default();
        e.split += row.split_cost_nanos;
        e.unused += row.unused_cost_nanos;
        e.gpu += row.gpu_cost_nanos;
        e.gpu_split += row.gpu_split_nanos;
        e.cpu_split += row.cpu_split_nanos;
        match row.workload_class.as_str() {
            "training" => e.training += row.split_cost_nanos,
            "inference" => e.inference += row.split_cost_nanos,
            _ => {}
        }
    }
    let idle_pool: i64 = entities.values().map(|e| e.unused).sum();
    for ((client, category), nanos) in &non_kubernetes.direct {
        let index = CATEGORIES.iter().position(|c| c == category).unwrap_or(2);
        entities.entry(client.as_str()).or_default().non_kubernetes[index] += nanos;
    }
    entities.entry(UNASSIGNED).or_default();
    let infrastructure_pool = non_kubernetes.infrastructure_pool;
    let total_gpu: i128 = entities.values().map(|e| i128::from(e.gpu)).sum();
    let total_direct: i128 = entities.values().map(|e| i128::from(e.split)).sum();
    let recipients = entities.len() as i128;
    let policy_of = |client: &str| {
        settings
            .iter()
            .find(|s| s.name == client)
            .map_or((DEFAULT_POLICY.to_string(), 0), |s| (s.share_policy.clone(), s.markup_basis_points))
    };
    // A client's share of `pool`, rounded down; the house keeps the remainders.
    let share = |pool: i64, policy: &str, e: &Entity| -> i64 {
        let pool = i128::from(pool);
        let part = match policy {
            "gpu" if total_gpu > 0 => pool * i128::from(e.gpu) / total_gpu,
            "total" if total_direct > 0 => pool * i128::from(e.split) / total_direct,
            "even" => pool / recipients,
            _ => 0,
        };
        part as i64
    };
    let row = |client: &str, e: &Entity, policy: String, markup_basis_points: i64| ClientRollup {
        period: period.to_string(),
        client: client.to_string(),
        share_policy: policy,
        markup_basis_points,
        direct_cost_nanos: e.split,
        gpu_cost_nanos: e.gpu,
        non_kubernetes_direct_nanos: e.non_kubernetes.iter().sum(),
        gpu_split_nanos: e.gpu_split,
        cpu_split_nanos: e.cpu_split,
        memory_split_nanos: e.split - e.gpu_split - e.cpu_split,
        storage_nanos: e.non_kubernetes[0],
        network_nanos: e.non_kubernetes[1],
        other_direct_nanos: e.non_kubernetes[2],
        training_nanos: e.training,
        inference_nanos: e.inference,
        ..ClientRollup::default()
    };
    let mut rows: Vec<ClientRollup> = Vec::new();
    let (mut platform_given, mut idle_given, mut infrastructure_given) = (0i64, 0i64, 0i64);
    for (client, e) in entities.iter().filter(|(c, _)| **c != UNASSIGNED) {
        let (policy, markup_basis_points) = policy_of(client);
        let mut r = row(client, e, policy, markup_basis_points);
        r.shared_platform_nanos = share(platform_pool, &r.share_policy, e);
        r.shared_idle_nanos = share(idle_pool, &r.share_policy, e);
        r.shared_infrastructure_nanos = share(infrastructure_pool, &r.share_policy, e);
        platform_given += r.shared_platform_nanos;
        idle_given += r.shared_idle_nanos;
        infrastructure_given += r.shared_infrastructure_nanos;
        r.markup_nanos = markup(r.direct_total_nanos() + r.shared_total_nanos(), markup_basis_points);
        rows.push(r);
    }
    let mut house = row(UNASSIGNED, &entities[UNASSIGNED], "remainder".into(), 0);
    house.shared_platform_nanos = platform_pool - platform_given;
    house.shared_idle_nanos = idle_pool - idle_given;
    house.shared_infrastructure_nanos = infrastructure_pool - infrastructure_given;
    rows.push(house);
    rows
}

/// `amount × basis_points / 10,000`, rounded half away from zero.
fn markup(amount: i64, basis_points: i64) -> i64 {
    let scaled = i128::from(amount) * i128::from(basis_points);
    let rounded = if scaled >= 0 { (scaled + 5_000) / 10_000 } else { (scaled - 5_000) / 10_000 };
    rounded as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(client: &str, split: i64, unused: i64, gpu: i64) -> CostRollup {
        CostRollup {
            client: client.into(),
            split_cost_nanos: split,
            unused_cost_nanos: unused,
            gpu_cost_nanos: gpu,
            ..CostRollup::default()
        }
    }

    #[test]
    fn pools_are_shared_exactly_and_everything_adds_up() {
        // Platform pool 100 + 1 = 101; idle pool 10 + 20 + 0 = 30. GPU costs a 60, b 30, house
        // 10 (of 100). a (gpu policy): 101 × 0.6 = 60.6 → 60 and 30 × 0.6 = 18; b (even, 3
        // recipients): 101 / 3 = 33 and 30 / 3 = 10; the house keeps 101 − 93 = 8 and
        // 30 − 28 = 2. a's markup 10 % of 100 + 60 + 18 = 17.8 → 18.
        let costs = [
            row("a", 100, 10, 60),
            row("b", 50, 20, 30),
            row(UNASSIGNED, 40, 0, 10),
            row(PLATFORM, 100, 1, 0),
        ];
        let settings = [
            ClientSettings { name: "a".into(), share_policy: "gpu".into(), markup_basis_points: 1_000 },
            ClientSettings { name: "b".into(), share_policy: "even".into(), markup_basis_points: 0 },
        ];
        let rows = chargeback("2026-10", &costs, &NonKubernetes::default(), &settings);
        let view: Vec<(&str, i64, i64, i64, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r.client.as_str(),
                    r.direct_cost_nanos,
                    r.shared_platform_nanos,
                    r.shared_idle_nanos,
                    r.markup_nanos,
                )
            })
            .collect();
        assert_eq!(view, vec![("a", 100, 60, 18, 18), ("b", 50, 33, 10, 0), (UNASSIGNED, 40, 8, 2, 0)]);
        let without_markup: i64 =
            rows.iter().map(|r| r.direct_cost_nanos + r.shared_platform_nanos + r.shared_idle_nanos).sum();
        assert_eq!(without_markup, 100 + 10 + 50 + 20 + 40 + 101, "Σ = Kubernetes cost");
    }

    #[test]
    fn non_kubernetes_cost_is_direct_or_pooled_and_the_whole_bill_adds_up() {
        // a has pods (GPU 30 of 40) and a tagged bucket (storage 7); c has only a tagged
        // volume (storage 5) and no GPU cost; the house has pods (GPU 10), untagged transfer
        // (network 4) and a bastion (other 3). Infrastructure pool 101, gpu policy: a takes
        // 101 × 30/40 = 75.75 → 75, c 0, the house 26.
        let costs = [row("a", 100, 0, 30), row(UNASSIGNED, 40, 0, 10)];
        let mut placed = NonKubernetes { infrastructure_pool: 101, ..NonKubernetes::default() };
        placed.direct.insert(("a".into(), "storage"), 7);
        placed.direct.insert(("c".into(), "storage"), 5);
        placed.direct.insert((UNASSIGNED.into(), "network"), 4);
        placed.direct.insert((UNASSIGNED.into(), "other"), 3);
        let rows = chargeback("2026-10", &costs, &placed, &[]);
        let view: Vec<(&str, i64, i64, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r.client.as_str(),
                    r.direct_cost_nanos,
                    r.non_kubernetes_direct_nanos,
                    r.shared_infrastructure_nanos,
                )
            })
            .collect();
        assert_eq!(view, vec![("a", 100, 7, 75), ("c", 0, 5, 0), (UNASSIGNED, 40, 7, 26)]);
        assert_eq!((rows[2].network_nanos, rows[2].other_direct_nanos, rows[0].storage_nanos), (4, 3, 7));
        let whole: i64 = rows.iter().map(|r| r.total_nanos() - r.markup_nanos).sum();
        assert_eq!(whole, 100 + 40 + 7 + 5 + 4 + 3 + 101, "clients + unassigned = the whole bill");
    }
}
