//! The scope every read of client data takes: which clients a user may see, and what
//! becomes of the rows of clients they may not.
//!
//! It is applied to a period's rollups as they are loaded ([`Scope::apply`]), before any
//! report or page sees them, so no page, twin, download or chart can show what the scope
//! left out.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::clients::PLATFORM;
use crate::money::{Micros, Nanos};
use crate::store::{ClientRollup, CostRollup, Opportunity, PurchaseOption, Rollups, WorkloadClass};

/// The name other clients' rows take for a manager.
pub const OTHER_CLIENTS: &str = "(other clients)";

/// What a scoped user is shown of clients outside the scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Others {
    /// Their figures stay in fleet totals, under [`OTHER_CLIENTS`], with no client,
    /// namespace, workload or team name (managers).
    Anonymous,
    /// Nothing of them, and no fleet-wide figure either: the bill, capacity, the heatmap and
    /// shared pool totals are withheld (client users).
    Hidden,
}

/// Which clients a user may see.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every client and the whole fleet.
    All,
    /// Only these clients.
    Clients { clients: BTreeSet<String>, others: Others },
}

impl Scope {
    pub fn clients(clients: impl IntoIterator<Item = String>, others: Others) -> Scope {
        Scope::Clients { clients: clients.into_iter().collect(), others }
    }

    /// Whether fleet pages may name a cost row of `client` to this scope: its own clients,
    /// and the platform namespaces (shared infrastructure such as `kube-system`, no client's),
    /// unless other clients are hidden altogether.
    fn names(&self, client: &str) -> bool {
        self.allows(client) || (self.sees_fleet() && client == PLATFORM)
    }

    /// Whether the user may see `client`'s numbers.
    pub fn allows(&self, client: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Clients { clients, .. } => clients.contains(client),
        }
    }

    /// Whether fleet-wide figures (the bill, capacity, pool totals) may be shown.
    pub fn sees_fleet(&self) -> bool {
        !matches!(self, Scope::Clients { others: Others::Hidden, .. })
    }

    /// A short stable text naming the scope, for cache keys.
    pub fn key(&self) -> String {
        match self {
            Scope::All => "all".into(),
            Scope::Clients { clients, others } => {
                let names: Vec<&str> = clients.iter().map(String::as_str).collect();
                format!("{others:?}:{}", names.join("\u{1f}"))
            }
        }
    }

    /// A period's rollups as this scope may see them.
    pub fn apply(&self, rollups: &Rollups) -> Rollups {
        let Scope::Clients { others, .. } = self else { return rollups.clone() };
        let mut seen = Rollups { period: rollups.period.clone(), ..Rollups::default() };
        // A workload belongs to the scope when every one of its rows does (label-based mapping
        // can split a namespace between clients): its opportunities follow it.
        let mut owned: BTreeMap<(&str, &str), bool> = BTreeMap::new();
        for c in &rollups.costs {
            let entry = owned.entry((c.namespace.as_str(), c.workload.as_str())).or_insert(true);
            *entry &= self.names(&c.client);
        }
        match others {
            Others::Anonymous => {
                seen.capacity = rollups.capacity.clone();
                seen.heatmap = rollups.heatmap.clone();
                seen.utilization = rollups.utilization.clone();
                seen.accounts = rollups.accounts.clone();
                let (named, others): (Vec<&CostRollup>, Vec<&CostRollup>) =
                    rollups.costs.iter().partition(|c| self.names(&c.client));
                let (anonymous, costs_withheld) = anonymous_costs(&others);
                seen.costs = named.into_iter().cloned().chain(anonymous).collect();
                // Each anonymous opportunity is one workload: its client is the one its cost
                // rows name.
                let mut client_of: BTreeMap<(&str, &str), &str> = BTreeMap::new();
                for c in &others {
                    client_of.insert((c.namespace.as_str(), c.workload.as_str()), c.client.as_str());
                }
                let (kept, foreign): (Vec<&Opportunity>, Vec<&Opportunity>) = rollups
                    .opportunities
                    .iter()
                    .partition(|o| owned.get(&(o.namespace.as_str(), o.workload.as_str())) == Some(&true));
                let foreign: Vec<(&Opportunity, &str)> = foreign
                    .into_iter()
                    .map(|o| {
                        let client = client_of.get(&(o.namespace.as_str(), o.workload.as_str()));
                        // No cost row names it: its namespace stands for its client.
                        (o, client.copied().unwrap_or(o.namespace.as_str()))
                    })
                    .collect();
                let (anonymous, opportunities_withheld) = anonymous_opportunities(&foreign);
                seen.opportunities = kept.into_iter().cloned().chain(anonymous).collect();
                let (clients, clients_withheld, columns) = anonymous_clients(self, &rollups.clients);
                seen.clients = clients;
                seen.withheld_client_columns = columns;
                seen.withheld_others =
                    costs_withheld || opportunities_withheld || clients_withheld || columns != 0;
            }
            Others::Hidden => {
                let period = &mut seen.period;
                period.kubernetes_cost_nanos = Nanos(0);
                for fleet in [
                    &mut period.bill_unblended_micros,
                    &mut period.bill_amortized_micros,
                    &mut period.unallocated_ec2_micros,
                    &mut period.other_cost_micros,
                    &mut period.unused_savings_plan_micros,
                    &mut period.unused_reservation_micros,
                ] {
                    *fleet = Micros(0);
                }
                period.storage_micros = None;
                period.network_micros = None;
                period.unattributed_gpu_hours = 0.0;
                period.measured_unbilled_gpu_hours = 0.0;
                period.p95_cost_per_inference = 0.0;
                period.settings = String::new();
                seen.costs = rollups.costs.iter().filter(|c| self.allows(&c.client)).cloned().collect();
                seen.opportunities = rollups
                    .opportunities
                    .iter()
                    .filter(|o| owned.get(&(o.namespace.as_str(), o.workload.as_str())) == Some(&true))
                    .cloned()
                    .collect();
                seen.clients = rollups.clients.iter().filter(|c| self.allows(&c.client)).cloned().collect();
                // The accounts their own pods ran in, by name only: an account's bill is fleet-wide.
                let theirs: BTreeSet<&str> = seen.costs.iter().map(|c| c.account.as_str()).collect();
                seen.accounts = rollups
                    .accounts
                    .iter()
                    .filter(|a| theirs.contains(a.account.as_str()))
                    .map(|a| crate::store::AccountRollup {
                        period: a.period.clone(),
                        account: a.account.clone(),
                        provider: a.provider.clone(),
                        name: a.name.clone(),
                        ..Default::default()
                    })
                    .collect();
            }
        }
        seen
    }

    /// Chargeback rows as this scope may see them (a restated period's snapshot).
    pub fn clients_of(&self, rows: &[ClientRollup]) -> Vec<ClientRollup> {
        match self {
            Scope::All => rows.to_vec(),
            // A snapshot's line is shown whole or not at all.
            Scope::Clients { others: Others::Anonymous, .. } => match anonymous_clients(self, rows) {
                (rows, _, 0) => rows,
                (rows, _, _) => rows.into_iter().filter(|c| c.client != OTHER_CLIENTS).collect(),
            },
            Scope::Clients { others: Others::Hidden, .. } => {
                rows.iter().filter(|c| self.allows(&c.client)).cloned().collect()
            }
        }
    }
}

/// A real client, not one of gpuledger's own names (`(house)`, `(unassigned)`).
fn is_client(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('(')
}

/// The clients in scope as they are, `(house)` and `(unassigned)` as they are (they are not
/// clients), and every other client summed into one [`OTHER_CLIENTS`] row when at least two
/// clients make it up: one other client's sum would be that client's own figures. The flag
/// says the row was withheld; the bits ([`ClientColumn::bit`]) the row's columns that one
/// other client alone makes up ([`withheld_columns`]).
fn anonymous_clients(scope: &Scope, rows: &[ClientRollup]) -> (Vec<ClientRollup>, bool, u32) {
    let mut kept: Vec<ClientRollup> =
        rows.iter().filter(|c| scope.allows(&c.client) || !is_client(&c.client)).cloned().collect();
    let others: Vec<&ClientRollup> =
        rows.iter().filter(|c| !scope.allows(&c.client) && is_client(&c.client)).collect();
    if others.len() == 1 {
        return (kept, true, 0);
    }
    let columns = withheld_columns(&others);
    if let Some(first) = others.first() {
        let mut sum = ClientRollup {
            period: first.period.clone(),
            client: OTHER_CLIENTS.into(),
            share_policy: first.share_policy.clone(),
            ..ClientRollup::default()
        };
        for c in &others {
            sum.add(c);
        }
        kept.push(sum);
    }
    (kept, false, columns)
}

/// A figure of a client's chargeback line, as the clients report names its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientColumn {
    DirectTotal,
    KubernetesDirect,
    NonKubernetesDirect,
    Gpu,
    Cpu,
    Memory,
    Storage,
    Network,
    OtherDirect,
    Platform,
    Idle,
    Unallocated,
    Infrastructure,
    Shared,
    Markup,
    Discount,
    Total,
    Training,
    Inference,
}

impl ClientColumn {
    pub const ALL: [ClientColumn; 19] = [
        ClientColumn::DirectTotal,
        ClientColumn::KubernetesDirect,
        ClientColumn::NonKubernetesDirect,
        ClientColumn::Gpu,
        ClientColumn::Cpu,
        ClientColumn::Memory,
        ClientColumn::Storage,
        ClientColumn::Network,
        ClientColumn::OtherDirect,
        ClientColumn::Platform,
        ClientColumn::Idle,
        ClientColumn::Unallocated,
        ClientColumn::Infrastructure,
        ClientColumn::Shared,
        ClientColumn::Markup,
        ClientColumn::Discount,
        ClientColumn::Total,
        ClientColumn::Training,
        ClientColumn::Inference,
    ];

    /// Its bit in a set of withheld columns.
    pub fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Its column in the clients report.
    pub fn column(self) -> &'static str {
        use crate::domain::settings::Pool;
        match self {
            ClientColumn::DirectTotal => "direct_cost",
            ClientColumn::KubernetesDirect => "kubernetes_direct_cost",
            ClientColumn::NonKubernetesDirect => "non_kubernetes_direct_cost",
            ClientColumn::Gpu => "gpu_cost",
            ClientColumn::Cpu => "cpu_cost",
            ClientColumn::Memory => "memory_cost",
            ClientColumn::Storage => "storage_cost",
            ClientColumn::Network => "network_cost",
            ClientColumn::OtherDirect => "other_cost",
            ClientColumn::Platform => Pool::Platform.column(),
            ClientColumn::Idle => Pool::Idle.column(),
            ClientColumn::Unallocated => Pool::Unallocated.column(),
            ClientColumn::Infrastructure => Pool::Shared.column(),
            ClientColumn::Shared => "shared_cost",
            ClientColumn::Markup => "markup",
            ClientColumn::Discount => "discount",
            ClientColumn::Total => "total_cost",
            ClientColumn::Training => "training_cost",
            ClientColumn::Inference => "inference_cost",
        }
    }

    /// The column of the clients report's `name`, when it is a figure of a client's line.
    pub fn of_column(name: &str) -> Option<ClientColumn> {
        ClientColumn::ALL.into_iter().find(|c| c.column() == name)
    }

    /// Its figure in a client's line.
    fn of(self, c: &ClientRollup) -> i64 {
        match self {
            ClientColumn::DirectTotal => c.direct_total_nanos(),
            ClientColumn::KubernetesDirect => c.direct_cost_nanos,
            ClientColumn::NonKubernetesDirect => c.non_kubernetes_direct_nanos,
            ClientColumn::Gpu => c.gpu_split_nanos,
            ClientColumn::Cpu => c.cpu_split_nanos,
            ClientColumn::Memory => c.memory_split_nanos,
            ClientColumn::Storage => c.storage_nanos,
            ClientColumn::Network => c.network_nanos,
            ClientColumn::OtherDirect => c.other_direct_nanos,
            ClientColumn::Platform => c.shared_platform_nanos,
            ClientColumn::Idle => c.shared_idle_nanos,
            ClientColumn::Unallocated => c.shared_unallocated_nanos,
            ClientColumn::Infrastructure => c.shared_infrastructure_nanos,
            ClientColumn::Shared => c.shared_total_nanos(),
            ClientColumn::Markup => c.markup_nanos,
            ClientColumn::Discount => c.discount_nanos,
            ClientColumn::Total => {
                c.direct_total_nanos() + c.shared_total_nanos() + c.discount_nanos + c.markup_nanos
            }
            ClientColumn::Training => c.training_nanos,
            ClientColumn::Inference => c.inference_nanos,
        }
    }
}

/// The sums a client's line shows beside their parts: each figure = Σ its parts.
const CLIENT_SUMS: [(ClientColumn, &[ClientColumn]); 5] = {
    use ClientColumn::*;
    [
        (DirectTotal, &[KubernetesDirect, NonKubernetesDirect]),
        (KubernetesDirect, &[Gpu, Cpu, Memory]),
        (NonKubernetesDirect, &[Storage, Network, OtherDirect]),
        (Shared, &[Platform, Idle, Unallocated, Infrastructure]),
        (Total, &[DirectTotal, Shared, Discount, Markup]),
    ]
};

/// The columns of the other clients' summed line to withhold, as bits: every column that one
/// of them alone makes up (the others' figure there is 0), and with each withheld column the
/// sum it is a part of and that sum's other parts, up to the total (else the sum less its
/// shown parts, or a part from its sum and its siblings, would give the lone client's figure
/// back). A withheld sum's own parts stay shown: each is made up by two clients or more, and
/// with the sum's siblings withheld too it is no longer found by subtraction.
pub fn withheld_columns(others: &[&ClientRollup]) -> u32 {
    let alone = |column: ClientColumn| {
        others.iter().filter(|c| column.of(c) != 0).map(|c| c.client.as_str()).collect::<BTreeSet<_>>().len()
            == 1
    };
    let mut withheld = ClientColumn::ALL.into_iter().filter(|c| alone(*c)).fold(0, |bits, c| bits | c.bit());
    loop {
        let before = withheld;
        for (sum, parts) in CLIENT_SUMS {
            if parts.iter().any(|part| withheld & part.bit() != 0) {
                withheld |= parts.iter().fold(sum.bit(), |bits, part| bits | part.bit());
            }
        }
        if withheld == before {
            return withheld;
        }
    }
}

/// How many times an anonymous cost row may be blurred: each level blanks one more of its
/// dimensions (the day stays: date ranges must still hold).
const BLUR_LEVELS: usize = 6;

/// Other clients' cost rows as a manager may see them: names blanked, and summed into groups
/// none of which is one client's alone. Rows are grouped by day, cluster, class, GPU model,
/// purchase option and account; the rows of a group that is exactly one client's are blurred
/// (the account blanked, then the cluster, the purchase option, the GPU model and the class,
/// one more at each level) and grouped again with the others blurred as far, and so are the
/// rows of a client that alone makes up one of its group's columns (#69: its inference
/// requests, say); what is still one client's alone at the last level is withheld. Every
/// figure a page sums is then a sum of whole groups, each column of each made up by two
/// clients or more (or by none: unassigned cost), so no sum is one other client's figure.
/// The flag says something was withheld.
fn anonymous_costs(others: &[&CostRollup]) -> (Vec<CostRollup>, bool) {
    type Key = (i64, String, WorkloadClass, String, PurchaseOption, String);
    let blur = |c: &CostRollup, level: usize| -> Key {
        (
            c.day,
            if level >= 2 { String::new() } else { c.cluster.clone() },
            if level >= 5 { WorkloadClass::Other } else { c.workload_class.clone() },
            if level >= 4 { String::new() } else { c.gpu_model.clone() },
            if level >= 3 { PurchaseOption::Unknown } else { c.purchase_option },
            if level >= 1 { String::new() } else { c.account.clone() },
        )
    };
    let start = |c: &CostRollup, key: &Key| {
        let (day, cluster, workload_class, gpu_model, purchase_option, account) = key.clone();
        CostRollup {
            period: c.period.clone(),
            day,
            cluster,
            namespace: OTHER_CLIENTS.into(),
            workload: OTHER_CLIENTS.into(),
            workload_class,
            client: OTHER_CLIENTS.into(),
            gpu_model,
            purchase_option,
            account,
            ..CostRollup::default()
        }
    };
    let rows = others.iter().map(|c| (*c, c.client.as_str())).collect();
    groups_of_two(rows, BLUR_LEVELS, blur, cost_columns, start, add_cost)
}

/// Sums rows, each with its client, into groups of two clients or more (or of none, which
/// show no client), in which every column is made up by two clients or more (or none):
/// rows are grouped by `key(row, 0)`; the rows of a group that is one client's alone, and in
/// any group the rows that alone give a column its figure (`columns(row)`: the bits of the
/// row's columns that are not zero), are grouped again by `key(row, 1)` with the others left
/// so far, and so on for `levels` levels; what is still left after the last is left out. A
/// group's sum begins as `start(first row, key)` and takes each row by `add`. Returns the
/// sums and whether anything was left out.
fn groups_of_two<'a, R, K: Ord, S>(
    rows: Vec<(&'a R, &'a str)>,
    levels: usize,
    key: impl Fn(&R, usize) -> K,
    columns: impl Fn(&R) -> u32,
    start: impl Fn(&R, &K) -> S,
    add: impl Fn(&mut S, &R),
) -> (Vec<S>, bool) {
    let mut pending = rows;
    let mut out = Vec::new();
    for level in 0..levels {
        let mut groups: BTreeMap<K, Vec<(&'a R, &'a str)>> = BTreeMap::new();
        for (row, client) in pending.drain(..) {
            groups.entry(key(row, level)).or_default().push((row, client));
        }
        for (group_key, mut rows) in groups {
            pending.extend(lone_columns_out(&mut rows, &columns));
            let clients: BTreeSet<&str> = rows.iter().map(|(_, c)| *c).filter(|c| is_client(c)).collect();
            if clients.len() == 1 {
                pending.extend(rows);
                continue;
            }
            let Some((first, _)) = rows.first() else { continue };
            let mut sum = start(first, &group_key);
            for (row, _) in &rows {
                add(&mut sum, row);
            }
            out.push(sum);
        }
    }
    (out, !pending.is_empty())
}

/// Takes out of a group the rows that alone give one of its columns its figure: for each
/// column that one client's rows alone make up, that client's rows with that column, until
/// every column left is two clients' or more (or none's). Returns the rows taken out.
fn lone_columns_out<'a, R>(
    rows: &mut Vec<(&'a R, &'a str)>,
    columns: impl Fn(&R) -> u32,
) -> Vec<(&'a R, &'a str)> {
    let mut taken = Vec::new();
    loop {
        let mut owners: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
        for (row, client) in rows.iter().filter(|(_, c)| is_client(c)) {
            let bits = columns(row);
            for bit in (0..32).map(|b| 1u32 << b).filter(|b| bits & b != 0) {
                owners.entry(bit).or_default().insert(client);
            }
        }
        let lone: Vec<(u32, &str)> = owners
            .into_iter()
            .filter(|(_, clients)| clients.len() == 1)
            .map(|(bit, clients)| (bit, *clients.first().expect("one client")))
            .collect();
        if lone.is_empty() {
            return taken;
        }
        let (out, kept): (Vec<_>, Vec<_>) = rows.drain(..).partition(|(row, client)| {
            lone.iter().any(|(bit, owner)| owner == client && columns(row) & bit != 0)
        });
        *rows = kept;
        taken.extend(out);
    }
}

/// The bits of a cost row's summed columns that are not zero (the memory peak is a maximum,
/// no one's figure once two clients are grouped, and is not among them).
fn cost_columns(c: &CostRollup) -> u32 {
    let integers = [
        c.split_cost_nanos,
        c.unused_cost_nanos,
        c.net_cost_nanos,
        c.public_on_demand_cost_nanos,
        c.gpu_cost_nanos,
        c.idle_gpu_cost_nanos,
        c.idle_cost_nanos,
        c.serving_cost_nanos,
        c.gpu_split_nanos,
        c.cpu_split_nanos,
        c.inference_hours,
        c.inference_hours_above_p95,
    ];
    let reals = [
        c.gpu_hours_allocated,
        c.gpu_hours_used,
        c.gpu_hours_idle,
        c.gpu_hours_unmeasured,
        c.spot_gpu_hours,
        c.requests,
        c.prompt_tokens,
        c.generation_tokens,
        c.vcpu_hours,
        c.memory_gb_hours,
    ];
    let nonzero = integers.iter().map(|v| *v != 0).chain(reals.iter().map(|v| *v != 0.0));
    nonzero.enumerate().fold(0, |bits, (i, set)| if set { bits | 1 << i } else { bits })
}

/// Adds one cost row's sums to another (the memory peak is the larger of the two).
fn add_cost(sum: &mut CostRollup, c: &CostRollup) {
    sum.split_cost_nanos += c.split_cost_nanos;
    sum.unused_cost_nanos += c.unused_cost_nanos;
    sum.net_cost_nanos += c.net_cost_nanos;
    sum.public_on_demand_cost_nanos += c.public_on_demand_cost_nanos;
    sum.gpu_cost_nanos += c.gpu_cost_nanos;
    sum.idle_gpu_cost_nanos += c.idle_gpu_cost_nanos;
    sum.idle_cost_nanos += c.idle_cost_nanos;
    sum.serving_cost_nanos += c.serving_cost_nanos;
    sum.gpu_split_nanos += c.gpu_split_nanos;
    sum.cpu_split_nanos += c.cpu_split_nanos;
    sum.gpu_hours_allocated += c.gpu_hours_allocated;
    sum.gpu_hours_used += c.gpu_hours_used;
    sum.gpu_hours_idle += c.gpu_hours_idle;
    sum.gpu_hours_unmeasured += c.gpu_hours_unmeasured;
    sum.spot_gpu_hours += c.spot_gpu_hours;
    sum.peak_fb_used_mib = sum.peak_fb_used_mib.max(c.peak_fb_used_mib);
    sum.requests += c.requests;
    sum.prompt_tokens += c.prompt_tokens;
    sum.generation_tokens += c.generation_tokens;
    sum.inference_hours += c.inference_hours;
    sum.inference_hours_above_p95 += c.inference_hours_above_p95;
    sum.vcpu_hours += c.vcpu_hours;
    sum.memory_gb_hours += c.memory_gb_hours;
}

/// Other clients' opportunities (each one workload's, with its client), summed by kind, GPU
/// model and purchase option, then by kind alone, into groups of two clients or more; what is
/// one client's alone is withheld (the flag says so).
fn anonymous_opportunities(others: &[(&Opportunity, &str)]) -> (Vec<Opportunity>, bool) {
    type Key = (String, String, PurchaseOption);
    let key = |o: &Opportunity, level: usize| -> Key {
        match level {
            0 => (o.kind.clone(), o.gpu_model.clone(), o.purchase_option),
            _ => (o.kind.clone(), String::new(), PurchaseOption::Unknown),
        }
    };
    let start = |o: &Opportunity, (kind, gpu_model, purchase_option): &Key| Opportunity {
        period: o.period.clone(),
        kind: kind.clone(),
        namespace: OTHER_CLIENTS.into(),
        workload: OTHER_CLIENTS.into(),
        family: OTHER_CLIENTS.into(),
        gpu_model: gpu_model.clone(),
        purchase_option: *purchase_option,
        monthly_nanos: 0,
        evidence: String::new(),
    };
    let add = |sum: &mut Opportunity, o: &Opportunity| sum.monthly_nanos += o.monthly_nanos;
    groups_of_two(others.to_vec(), 2, key, |_| 0, start, add)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(client: &str, gpu_model: &str, idle: i64) -> CostRollup {
        CostRollup {
            period: "2026-10".into(),
            day: 1_790_812_800,
            cluster: "ml-prod".into(),
            namespace: format!("{client}-ns"),
            workload: format!("{client}-train"),
            client: client.into(),
            gpu_model: gpu_model.into(),
            idle_gpu_cost_nanos: idle,
            ..CostRollup::default()
        }
    }

    fn client(name: &str, direct: i64) -> ClientRollup {
        ClientRollup {
            period: "2026-10".into(),
            client: name.into(),
            direct_cost_nanos: direct,
            ..Default::default()
        }
    }

    fn manager() -> Scope {
        Scope::clients(["acme".to_string()], Others::Anonymous)
    }

    fn anonymous(seen: &Rollups) -> Vec<(&str, i64)> {
        seen.costs
            .iter()
            .filter(|c| c.client == OTHER_CLIENTS)
            .map(|c| (c.gpu_model.as_str(), c.idle_gpu_cost_nanos))
            .collect()
    }

    /// #37: when one other client alone runs a GPU model, the anonymous line of that model was
    /// that client's idle cost to the nano-dollar. It is withheld now, and the page is told.
    #[test]
    fn an_anonymous_figure_is_never_one_other_clients_alone() {
        let rollups = Rollups {
            costs: vec![
                cost("acme", "A100", 100),
                cost("globex", "A100", 20),
                cost("initech", "A100", 3),
                cost("globex", "T4", 7_000),
            ],
            clients: vec![client("acme", 100), client("globex", 7_020), client("initech", 3)],
            ..Rollups::default()
        };
        let seen = manager().apply(&rollups);
        // globex's and initech's A100 rows make one group of two clients; globex's T4 row is
        // alone at every blur and withheld.
        assert_eq!(anonymous(&seen), [("A100", 23)]);
        assert!(seen.withheld_others);
        assert!(seen.costs.iter().any(|c| c.client == "acme" && c.idle_gpu_cost_nanos == 100));
        let others: Vec<i64> =
            seen.clients.iter().filter(|c| c.client == OTHER_CLIENTS).map(|c| c.direct_cost_nanos).collect();
        assert_eq!(others, [7_023], "two other clients: one summed row");

        // A second client on T4: its rows and globex's are one group, nothing is withheld.
        let mut both = rollups.clone();
        both.costs.push(cost("initech", "T4", 500));
        let seen = manager().apply(&both);
        assert_eq!(anonymous(&seen), [("A100", 23), ("T4", 7_500)]);
        assert!(!seen.withheld_others);

        // One other client in all: its chargeback row would be its own; withheld.
        let alone = Rollups {
            costs: vec![cost("acme", "A100", 100), cost("globex", "A100", 20)],
            clients: vec![client("acme", 100), client("globex", 20)],
            ..Rollups::default()
        };
        let seen = manager().apply(&alone);
        assert!(anonymous(&seen).is_empty());
        assert!(seen.clients.iter().all(|c| c.client == "acme"));
        assert!(seen.withheld_others);
    }

    /// #69: the "(other clients)" line of two clients showed umbrella's inference cost to the
    /// nano-dollar where initech had none. A column one other client alone makes up is
    /// withheld, and with a part of a sum the sum and its other parts, up to the total.
    #[test]
    fn a_column_one_other_client_alone_makes_up_is_withheld() {
        let with = |name: &str, direct: i64, inference: i64, storage: i64| ClientRollup {
            gpu_split_nanos: direct,
            inference_nanos: inference,
            storage_nanos: storage,
            non_kubernetes_direct_nanos: storage,
            ..client(name, direct)
        };
        let rollups = Rollups {
            clients: vec![
                with("acme", 100, 5, 0),
                with("initech", 300, 0, 0),
                with("umbrella", 700, 2_102, 0),
            ],
            ..Rollups::default()
        };
        let seen = manager().apply(&rollups);
        assert_eq!(seen.withheld_client_columns, ClientColumn::Inference.bit());
        assert!(seen.withheld_others);
        let others = seen.clients.iter().find(|c| c.client == OTHER_CLIENTS).unwrap();
        assert_eq!(others.direct_cost_nanos, 1_000, "the sum of two clients stays");
        // Both make up the inference cost: nothing withheld.
        let mut both = rollups.clone();
        both.clients[1].inference_nanos = 9;
        assert_eq!(manager().apply(&both).withheld_client_columns, 0);
        // Storage of one client: its sum (non-Kubernetes direct) and that sum's sum, up to the
        // total, with their other parts; the Kubernetes parts (two clients each) stay.
        let mut storage = both.clone();
        storage.clients[2] = with("umbrella", 700, 2_102, 40);
        let bits = manager().apply(&storage).withheld_client_columns;
        let withheld: Vec<&str> =
            ClientColumn::ALL.into_iter().filter(|c| bits & c.bit() != 0).map(ClientColumn::column).collect();
        assert_eq!(
            withheld,
            [
                "direct_cost",
                "kubernetes_direct_cost",
                "non_kubernetes_direct_cost",
                "storage_cost",
                "network_cost",
                "other_cost",
                "shared_cost",
                "markup",
                "discount",
                "total_cost",
            ]
        );
    }

    /// #69, per column: umbrella alone serves requests among the other clients; its serving row
    /// in a group with globex's and initech's would make the group's requests umbrella's. That
    /// row is taken out of every group and withheld; its other row stays in the sum.
    #[test]
    fn a_column_one_other_client_alone_makes_up_keeps_its_rows_out_of_the_groups() {
        let serving = CostRollup {
            workload: "umbrella-serve".into(),
            requests: 1_000.0,
            ..cost("umbrella", "A100", 50)
        };
        let rollups = Rollups {
            costs: vec![
                cost("acme", "A100", 100),
                cost("globex", "A100", 20),
                cost("initech", "A100", 3),
                serving.clone(),
                cost("umbrella", "A100", 5),
            ],
            ..Rollups::default()
        };
        let seen = manager().apply(&rollups);
        assert_eq!(anonymous(&seen), [("A100", 28)]);
        assert!(seen.withheld_others);
        assert!(seen.costs.iter().filter(|c| c.client == OTHER_CLIENTS).all(|c| c.requests == 0.0));
        // A second client serving: the column is two clients', nothing is withheld.
        let mut both = rollups.clone();
        both.costs.push(CostRollup {
            workload: "globex-serve".into(),
            requests: 7.0,
            ..cost("globex", "A100", 1)
        });
        let seen = manager().apply(&both);
        assert_eq!(anonymous(&seen), [("A100", 79)]);
        let requests: f64 = seen.costs.iter().filter(|c| c.client == OTHER_CLIENTS).map(|c| c.requests).sum();
        assert_eq!(requests, 1_007.0);
        assert!(!seen.withheld_others);
    }

    /// A row blurred past its account and cluster joins another client's row of the same day,
    /// class and model: one group of two clients, in no cluster.
    #[test]
    fn a_lone_row_is_blurred_until_it_joins_another_clients() {
        let mut east = cost("globex", "A100", 20);
        east.cluster = "ml-east".into();
        let rollups = Rollups {
            costs: vec![cost("acme", "A100", 100), east, cost("initech", "A100", 3)],
            ..Rollups::default()
        };
        let seen = manager().apply(&rollups);
        let blurred: Vec<(&str, &str, i64)> = seen
            .costs
            .iter()
            .filter(|c| c.client == OTHER_CLIENTS)
            .map(|c| (c.cluster.as_str(), c.gpu_model.as_str(), c.idle_gpu_cost_nanos))
            .collect();
        assert_eq!(blurred, [("", "A100", 23)]);
        assert!(!seen.withheld_others);
    }
}
