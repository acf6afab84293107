//! Chargeback: each client's direct cost, its shares of the shared pools, and markup, so
//! that clients + `(house)` + `(unassigned)` = the whole amortized bill.
//!
//! A client's **direct cost** is its pods' split cost plus the non-Kubernetes lines tagged
//! to it (an S3 bucket or EBS volume with its client tag), by category. Four pools are
//! shared ([`crate::domain::settings::Pool`]): **platform** (everything platform namespaces cost), **idle** (the
//! unused cost AWS pushed down to every other pod: capacity paid for and not requested),
//! **unallocated** (EC2 of a cluster not allocated to pods) and **shared** (cluster cost no
//! client's tag claims: the control plane, node root volumes).
//!
//! Each pool is divided by its own rule ([`ShareRule`]: by GPU cost, by direct cost, or
//! even) among those that take part, by largest remainder in nano-dollars, so the shares add
//! up to the pool exactly and none has the pool's opposite sign. Every client takes part;
//! `(unassigned)` (pods and lines no client claims) takes part by its weight under `gpu` and
//! `total` (the house pays for its own use) and not under `even` (it is not a client). An
//! exempt client's share is computed like any other and kept by `(house)`, as is a pool
//! nobody has weight for (a `gpu` pool in a month without GPU cost). Markup (basis points)
//! applies to direct + shared (+ discount) and is not on the bill.
//!
//! A client charged **net** ([`ChargeBasis::Net`]) also takes its share of the period's
//! discounts (EDP, private pricing), in proportion to its direct + shared cost among every
//! row's; so Σ (total − markup) = the amortized bill + the discounts passed to net clients
//! (the net bill when every row would take its share).

use std::collections::BTreeMap;

use super::classify::{PLATFORM, UNASSIGNED};
use crate::domain::settings::{ChargeBasis, EXEMPT, PerPool, Settings, ShareRule};
use crate::money::apportion_by_weight;
use crate::store::{ClientRollup, CostRollup, WorkloadClass};

pub use crate::domain::clients::HOUSE;

/// The period's non-Kubernetes cost, placed for chargeback; nano-dollars.
#[derive(Debug, Default, Clone)]
pub struct NonKubernetes {
    /// Lines a client claims by tag, per (client, provider, category) (an invoice itemizes
    /// them by provider); lines nobody claims and EC2 outside any cluster are
    /// `(unassigned)`'s.
    pub direct: BTreeMap<(String, String, &'static str), i64>,
    /// EC2 of clusters not allocated to pods.
    pub unallocated_pool: i64,
    /// Cluster lines no client claims.
    pub shared_pool: i64,
    /// GB-months of storage held by the lines each client claims.
    pub storage_gb_months: BTreeMap<String, f64>,
    /// The period's discounts (≤ 0), micro-dollars: shared by the clients charged net.
    pub discount_micros: i64,
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
    /// The part of `non_kubernetes` other providers than AWS billed, by provider.
    elsewhere: BTreeMap<String, crate::store::DirectByCategory>,
    /// Shares taken, by pool.
    shares: PerPool<i64>,
    /// A client charged net: its share of the discounts.
    discount: i64,
}

impl Entity {
    fn weight(&self, rule: ShareRule) -> i128 {
        let weight = match rule {
            ShareRule::Gpu => self.gpu,
            ShareRule::Total => self.split + self.non_kubernetes.iter().sum::<i64>(),
            ShareRule::Even => 1,
        };
        i128::from(weight.max(0))
    }

    /// Direct + shared cost: what a discount is shared by.
    fn charge(&self) -> i64 {
        self.split
            + self.non_kubernetes.iter().sum::<i64>()
            + self.shares.iter().map(|(_, nanos)| nanos).sum::<i64>()
    }
}

const CATEGORIES: [&str; 3] = ["storage", "network", "other"];

/// One row per client, then `(house)` (when a client is exempt or a pool went untaken) and
/// `(unassigned)`, from a period's cost rollups, its placed non-Kubernetes cost and the
/// settings in force for it.
pub fn chargeback(
    period: &str,
    costs: &[CostRollup],
    non_kubernetes: &NonKubernetes,
    settings: &Settings,
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
        match row.workload_class {
            WorkloadClass::Training => e.training += row.split_cost_nanos,
            WorkloadClass::Inference => e.inference += row.split_cost_nanos,
            _ => {}
        }
    }
    let idle_pool: i64 = entities.values().map(|e| e.unused).sum();
    for ((client, provider, category), nanos) in &non_kubernetes.direct {
        let index = CATEGORIES.iter().position(|c| c == category).unwrap_or(2);
        let entity = entities.entry(client.as_str()).or_default();
        entity.non_kubernetes[index] += nanos;
        if !["aws", ""].contains(&provider.as_str()) {
            entity.elsewhere.entry(provider.clone()).or_default()[index] += nanos;
        }
    }
    entities.entry(UNASSIGNED).or_default();
    let mut house = Entity::default();
    let pools = PerPool {
        platform: platform_pool,
        idle: idle_pool,
        unallocated: non_kubernetes.unallocated_pool,
        shared: non_kubernetes.shared_pool,
    };
    for (pool, amount) in pools.iter() {
        let rule = settings.pools.rule(pool);
        let takers: Vec<&str> =
            entities.keys().copied().filter(|name| rule != ShareRule::Even || *name != UNASSIGNED).collect();
        let weights: Vec<i128> = takers.iter().map(|name| entities[name].weight(rule)).collect();
        let Some(shares) = apportion_by_weight(amount, &weights) else {
            house.shares[pool] += amount;
            continue;
        };
        for (name, share) in takers.into_iter().zip(shares) {
            if name != UNASSIGNED && settings.terms(name).exempt {
                house.shares[pool] += share;
            } else if let Some(e) = entities.get_mut(name) {
                e.shares[pool] += share;
            }
        }
    }
    share_discounts(&mut entities, &house, non_kubernetes.discount_micros, settings);
    let row = |client: &str, e: &Entity, policy: String| {
        let mut row = ClientRollup {
            period: period.to_string(),
            client: client.to_string(),
            share_policy: policy,
            direct_cost_nanos: e.split,
            gpu_cost_nanos: e.gpu,
            non_kubernetes_direct_nanos: e.non_kubernetes.iter().sum(),
            gpu_split_nanos: e.gpu_split,
            cpu_split_nanos: e.cpu_split,
            memory_split_nanos: e.split - e.gpu_split - e.cpu_split,
            storage_nanos: e.non_kubernetes[0],
            storage_gb_months: non_kubernetes.storage_gb_months.get(client).copied().unwrap_or(0.0),
            network_nanos: e.non_kubernetes[1],
            other_direct_nanos: e.non_kubernetes[2],
            training_nanos: e.training,
            inference_nanos: e.inference,
            shared_platform_nanos: e.shares.platform,
            shared_idle_nanos: e.shares.idle,
            shared_unallocated_nanos: e.shares.unallocated,
            shared_infrastructure_nanos: e.shares.shared,
            discount_nanos: e.discount,
            ..ClientRollup::default()
        };
        row.set_provider_direct(&e.elsewhere);
        row
    };
    let mut rows: Vec<ClientRollup> = Vec::new();
    for (client, e) in entities.iter().filter(|(c, _)| **c != UNASSIGNED) {
        let terms = settings.terms(client);
        let policy = if terms.exempt { EXEMPT.to_string() } else { settings.pools.describe() };
        let mut r = row(client, e, policy);
        r.exempt = terms.exempt;
        r.charge_basis = terms.basis;
        r.markup_basis_points = terms.markup_basis_points;
        r.markup_nanos = markup(
            r.direct_total_nanos() + r.shared_total_nanos() + r.discount_nanos,
            terms.markup_basis_points,
        );
        rows.push(r);
    }
    if house.shares.iter().any(|(_, nanos)| nanos != 0) || rows.iter().any(|r| r.exempt) {
        rows.push(row(HOUSE, &house, "remainder".into()));
    }
    rows.push(row(UNASSIGNED, &entities[UNASSIGNED], "remainder".into()));
    rows
}

/// Shares the period's discounts (micro-dollars, ≤ 0) in proportion to every row's direct +
/// shared cost (the clients, `(unassigned)` and `(house)`), by largest remainder in whole
/// micro-dollars, and gives the clients charged net their share. The other rows' shares are
/// not charged to anyone: what they would be is what the house keeps of the discounts.
fn share_discounts(
    entities: &mut BTreeMap<&str, Entity>,
    house: &Entity,
    discount_micros: i64,
    settings: &Settings,
) {
    let net = |name: &str| name != UNASSIGNED && settings.terms(name).basis == ChargeBasis::Net;
    if discount_micros == 0 || !entities.keys().any(|name| net(name)) {
        return;
    }
    let weights: Vec<i128> =
        entities.values().chain([house]).map(|e| i128::from(e.charge().max(0))).collect();
    let Some(parts) = apportion_by_weight(discount_micros, &weights) else {
        return;
    };
    for ((name, e), part) in entities.iter_mut().zip(parts) {
        if net(name) {
            e.discount = part * 1000;
        }
    }
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
    use crate::domain::settings::{ClientTerms, PoolRules};

    fn row(client: &str, split: i64, unused: i64, gpu: i64) -> CostRollup {
        CostRollup {
            client: client.into(),
            split_cost_nanos: split,
            unused_cost_nanos: unused,
            gpu_cost_nanos: gpu,
            ..CostRollup::default()
        }
    }

    /// (client, platform, idle, unallocated, shared) shares of each row.
    fn shares(rows: &[ClientRollup]) -> Vec<(&str, i64, i64, i64, i64)> {
        rows.iter()
            .map(|r| {
                (
                    r.client.as_str(),
                    r.shared_platform_nanos,
                    r.shared_idle_nanos,
                    r.shared_unallocated_nanos,
                    r.shared_infrastructure_nanos,
                )
            })
            .collect()
    }

    #[test]
    fn four_clients_under_mixed_rules_and_an_exempt_one_share_each_pool_exactly() {
        // a, b, c, d are clients, d exempt; a pays 10 % markup. Pools: platform 1,001 (even),
        // idle 100 + 50 + 0 + 30 + 20 = 200 (gpu), unallocated 999 (total), shared 7 (gpu).
        let costs = [
            row("a", 1_000, 100, 800),
            row("b", 500, 50, 150),
            row("c", 300, 0, 50),
            row("d", 200, 30, 0),
            row(UNASSIGNED, 100, 20, 0),
            row(PLATFORM, 1_001, 0, 0),
        ];
        let placed = NonKubernetes { unallocated_pool: 999, shared_pool: 7, ..NonKubernetes::default() };
        let mut settings = Settings {
            pools: PoolRules {
                platform: ShareRule::Even,
                idle: ShareRule::Gpu,
                unallocated: ShareRule::Total,
                shared: ShareRule::Gpu,
            },
            ..Settings::default()
        };
        settings
            .clients
            .insert("a".into(), ClientTerms { markup_basis_points: 1_000, ..ClientTerms::default() });
        settings.clients.insert("d".into(), ClientTerms { exempt: true, ..ClientTerms::default() });
        let rows = chargeback("2026-10", &costs, &placed, &settings);
        // Platform, even over the four clients: 1,001 / 4 = 250.25 → 250 each, the unit left
        // to the first (a); d's 250 stays with the house.
        // Idle by GPU cost (800 : 150 : 50 : 0 : 0 of 1,000): 160, 30, 10.
        // Unallocated by direct cost (1,000 : 500 : 300 : 200 : 100 of 2,100): floors 475,
        // 237, 142, 95, 47 (996); the 3 left go to the largest remainders: b (.857), then a
        // and c (.714 each, a first). d's 95 stays with the house.
        // Shared by GPU cost: 7 × 0.8 = 5.6 → 5, 7 × 0.15 = 1.05 → 1, 0.35 → 0; the unit
        // left goes to a (.6).
        assert_eq!(
            shares(&rows),
            vec![
                ("a", 251, 160, 476, 6),
                ("b", 250, 30, 238, 1),
                ("c", 250, 10, 143, 0),
                ("d", 0, 0, 0, 0),
                (HOUSE, 250, 0, 95, 0),
                (UNASSIGNED, 0, 0, 47, 0),
            ]
        );
        let pool_sums: Vec<i64> =
            (0..4).map(|i| shares(&rows).iter().map(|s| [s.1, s.2, s.3, s.4][i]).sum()).collect();
        assert_eq!(pool_sums, vec![1_001, 200, 999, 7], "each pool adds up to the nano-dollar");
        assert!(rows.iter().all(|r| r.shared_total_nanos() >= 0), "no share is negative");
        assert!(rows[3].exempt && rows[3].share_policy == "exempt");
        assert_eq!(rows[0].share_policy, "platform:even idle:gpu unallocated:total shared:gpu");
        // a's markup: 10 % of 1,000 + 251 + 160 + 476 + 6 = 1,893 → 189.3 → 189.
        assert_eq!(rows[0].markup_nanos, 189);
        let without_markup: i64 = rows.iter().map(|r| r.total_nanos() - r.markup_nanos).sum();
        assert_eq!(without_markup, 1_000 + 100 + 500 + 50 + 300 + 200 + 30 + 100 + 20 + 1_001 + 999 + 7);
    }

    #[test]
    fn a_pool_nobody_has_weight_for_stays_with_the_house() {
        // No GPU cost anywhere: the gpu-rule platform pool has no takers.
        let costs = [row("a", 100, 0, 0), row(PLATFORM, 40, 0, 0)];
        let rows = chargeback("2026-10", &costs, &NonKubernetes::default(), &Settings::default());
        assert_eq!(shares(&rows), vec![("a", 0, 0, 0, 0), (HOUSE, 40, 0, 0, 0), (UNASSIGNED, 0, 0, 0, 0)]);
    }

    #[test]
    fn non_kubernetes_cost_is_direct_or_pooled_and_the_whole_bill_adds_up() {
        // a has pods (GPU 30 of 40) and a tagged bucket (storage 7); c has only a tagged
        // volume (storage 5) and no GPU cost; `(unassigned)` has pods (GPU 10), untagged
        // transfer (network 4) and a bastion (other 3). Shared pool 101 by GPU cost: a 75.75,
        // `(unassigned)` 25.25 → 75 and 25, the unit left to a (.75). Unallocated 20: 15, 5.
        let costs = [row("a", 100, 0, 30), row(UNASSIGNED, 40, 0, 10)];
        let mut placed = NonKubernetes { unallocated_pool: 20, shared_pool: 101, ..NonKubernetes::default() };
        placed.direct.insert(("a".into(), "aws".into(), "storage"), 7);
        placed.direct.insert(("c".into(), "aws".into(), "storage"), 5);
        placed.direct.insert((UNASSIGNED.into(), "aws".into(), "network"), 4);
        placed.direct.insert((UNASSIGNED.into(), "aws".into(), "other"), 3);
        let rows = chargeback("2026-10", &costs, &placed, &Settings::default());
        let view: Vec<(&str, i64, i64, i64, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r.client.as_str(),
                    r.direct_cost_nanos,
                    r.non_kubernetes_direct_nanos,
                    r.shared_infrastructure_nanos,
                    r.shared_unallocated_nanos,
                )
            })
            .collect();
        assert_eq!(view, vec![("a", 100, 7, 76, 15), ("c", 0, 5, 0, 0), (UNASSIGNED, 40, 7, 25, 5)]);
        assert_eq!((rows[2].network_nanos, rows[2].other_direct_nanos, rows[0].storage_nanos), (4, 3, 7));
        let whole: i64 = rows.iter().map(|r| r.total_nanos() - r.markup_nanos).sum();
        assert_eq!(whole, 100 + 40 + 7 + 5 + 4 + 3 + 101 + 20, "clients + unassigned = the whole bill");
    }

    #[test]
    fn a_client_charged_net_takes_its_share_of_the_discounts() {
        // a ($0.60 of pods, net, 10 % markup), b ($0.30, amortized), `(unassigned)` ($0.10);
        // discounts −7 µ$. By charge 6 : 3 : 1: 4.2, 2.1, 0.7 → 4, 2, 0, the micro-dollar
        // left to the largest remainder, `(unassigned)` (.7). Only a is charged net: −4 µ$.
        let costs =
            [row("a", 600_000_000, 0, 0), row("b", 300_000_000, 0, 0), row(UNASSIGNED, 100_000_000, 0, 0)];
        let placed = NonKubernetes { discount_micros: -7, ..NonKubernetes::default() };
        let mut settings = Settings::default();
        let net =
            ClientTerms { markup_basis_points: 1_000, basis: ChargeBasis::Net, ..ClientTerms::default() };
        settings.clients.insert("a".into(), net);
        let rows = chargeback("2026-10", &costs, &placed, &settings);
        let view: Vec<(&str, ChargeBasis, i64, i64)> = rows
            .iter()
            .map(|r| (r.client.as_str(), r.charge_basis, r.discount_nanos, r.markup_nanos))
            .collect();
        // a's markup: 10 % of 600,000,000 − 4,000 nano-dollars.
        assert_eq!(
            view,
            vec![
                ("a", ChargeBasis::Net, -4_000, 59_999_600),
                ("b", ChargeBasis::Amortized, 0, 0),
                (UNASSIGNED, ChargeBasis::Amortized, 0, 0),
            ]
        );
        let whole: i64 = rows.iter().map(|r| r.total_nanos() - r.markup_nanos).sum();
        assert_eq!(whole, 1_000_000_000 - 4_000, "the amortized bill less the discount passed on");
    }
}
