//! Chargeback: each client's direct cost, its shares of the shared pools, and markup.
//!
//! Two pools are shared: the **platform** pool (everything platform namespaces cost) and the
//! **idle** pool (the unused cost AWS pushed down to every non-platform pod: capacity paid
//! for and not requested). A client's direct cost is its pods' split cost. Each client takes
//! a share of each pool by its own policy — `gpu` (its GPU cost over everyone's), `total`
//! (its direct cost over everyone's), `even` (one recipient's part) or `none` — in whole
//! nano-dollars rounded down; `(unassigned)` (pods no client claims) keeps the rest, so the
//! shares of every pool add up to the pool exactly and Σ clients + unassigned = Kubernetes
//! cost. Markup (basis points) applies to direct + shared and is not on the bill.

use std::collections::BTreeMap;

use super::classify::{PLATFORM, UNASSIGNED};
use crate::store::{ClientRollup, ClientSettings, CostRollup};

/// The default policy for clients without settings.
pub const DEFAULT_POLICY: &str = "gpu";

/// Policies a client can have.
pub const POLICIES: &[&str] = &["gpu", "total", "even", "none"];

#[derive(Default)]
struct Entity {
    split: i64,
    unused: i64,
    gpu: i64,
}

/// One row per client (and `(unassigned)`), from a period's cost rollups.
pub fn chargeback(period: &str, costs: &[CostRollup], settings: &[ClientSettings]) -> Vec<ClientRollup> {
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
    }
    let idle_pool: i64 = entities.values().map(|e| e.unused).sum();
    entities.entry(UNASSIGNED).or_default();
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
    let mut rows: Vec<ClientRollup> = Vec::new();
    let (mut platform_given, mut idle_given) = (0i64, 0i64);
    for (client, e) in entities.iter().filter(|(c, _)| **c != UNASSIGNED) {
        let (policy, markup_basis_points) = policy_of(client);
        let shared_platform = share(platform_pool, &policy, e);
        let shared_idle = share(idle_pool, &policy, e);
        platform_given += shared_platform;
        idle_given += shared_idle;
        rows.push(ClientRollup {
            period: period.to_string(),
            client: client.to_string(),
            share_policy: policy,
            markup_basis_points,
            direct_cost_nanos: e.split,
            gpu_cost_nanos: e.gpu,
            shared_platform_nanos: shared_platform,
            shared_idle_nanos: shared_idle,
            markup_nanos: markup(e.split + shared_platform + shared_idle, markup_basis_points),
        });
    }
    let house = &entities[UNASSIGNED];
    rows.push(ClientRollup {
        period: period.to_string(),
        client: UNASSIGNED.to_string(),
        share_policy: "remainder".into(),
        markup_basis_points: 0,
        direct_cost_nanos: house.split,
        gpu_cost_nanos: house.gpu,
        shared_platform_nanos: platform_pool - platform_given,
        shared_idle_nanos: idle_pool - idle_given,
        markup_nanos: 0,
    });
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
        let rows = chargeback("2026-10", &costs, &settings);
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
}
