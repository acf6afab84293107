//! The scope every read of client data takes: which clients a user may see, and what
//! becomes of the rows of clients they may not.
//!
//! It is applied to a period's rollups as they are loaded ([`Scope::apply`]), before any
//! report or page sees them, so no page, twin, download or chart can show what the scope
//! left out.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::classify::PLATFORM;
use crate::money::{Micros, Nanos};
use crate::store::{ClientRollup, Rollups};

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
                seen.costs = rollups
                    .costs
                    .iter()
                    .map(|c| {
                        if self.names(&c.client) {
                            return c.clone();
                        }
                        let mut anonymous = c.clone();
                        for name in [&mut anonymous.namespace, &mut anonymous.workload, &mut anonymous.client]
                        {
                            *name = OTHER_CLIENTS.into();
                        }
                        anonymous.team = String::new();
                        anonymous
                    })
                    .collect();
                seen.opportunities = rollups
                    .opportunities
                    .iter()
                    .map(|o| {
                        if owned.get(&(o.namespace.as_str(), o.workload.as_str())) == Some(&true) {
                            return o.clone();
                        }
                        let mut anonymous = o.clone();
                        for name in [&mut anonymous.namespace, &mut anonymous.workload, &mut anonymous.family]
                        {
                            *name = OTHER_CLIENTS.into();
                        }
                        anonymous.evidence = String::new();
                        anonymous
                    })
                    .collect();
                seen.clients = anonymous_clients(self, &rollups.clients);
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
            Scope::Clients { others: Others::Anonymous, .. } => anonymous_clients(self, rows),
            Scope::Clients { others: Others::Hidden, .. } => {
                rows.iter().filter(|c| self.allows(&c.client)).cloned().collect()
            }
        }
    }
}

/// The clients in scope as they are, `(house)` and `(unassigned)` as they are (they are not
/// clients), and every other client summed into one [`OTHER_CLIENTS`] row.
fn anonymous_clients(scope: &Scope, rows: &[ClientRollup]) -> Vec<ClientRollup> {
    let not_a_client = |name: &str| name.starts_with('(');
    let mut kept: Vec<ClientRollup> =
        rows.iter().filter(|c| scope.allows(&c.client) || not_a_client(&c.client)).cloned().collect();
    let others: Vec<&ClientRollup> =
        rows.iter().filter(|c| !scope.allows(&c.client) && !not_a_client(&c.client)).collect();
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
    kept
}
