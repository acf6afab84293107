//! Reports read from rollups (`gpuledger compute`), for one billing period or any range of
//! whole days. JSON contracts (stable; fields may be added, never renamed), all shaped
//! `{"period", "rows": [...], ...}` where `period` is `YYYY-MM` or `FROM/TO` (dates, TO
//! exclusive). Money in USD, ratios as fractions (0.724), `null` where undefined:
//!
//! - `workloads`: `namespace, workload, workload_class, client, split_cost, unused_cost,
//!   total_cost, gpu_hours, used_gpu_hours, idle_gpu_hours, idle_gpu_cost, spot_gpu_hours,
//!   requests` (a client page's `workloads` by family adds `runs` after `workload`);
//! - `clients`: `client, share_policy, exempt, direct_cost, kubernetes_direct_cost,
//!   non_kubernetes_direct_cost, shared_platform_cost, shared_idle_cost,
//!   shared_unallocated_cost, shared_infrastructure_cost, shared_cost, markup_rate, markup,
//!   total_cost, gpu_cost, cpu_cost, memory_cost, storage_cost, network_cost, other_cost,
//!   training_cost, inference_cost` (+ top-level `kubernetes_total` and `amortized_total`; Σ
//!   rows' `total_cost − markup` = `amortized_total` exactly, `(house)` (exempt clients'
//!   shares, when any) and `(unassigned)` included; the
//!   direct-cost breakdown is `gpu + cpu + memory` = `kubernetes_direct_cost` and
//!   `storage + network + other` = `non_kubernetes_direct_cost`);
//! - `gpu`: `namespace, gpu_model, provisioned_gpu_hours, allocated_gpu_hours,
//!   used_gpu_hours, idle_gpu_hours, unallocated_gpu_hours, utilization,
//!   unmeasured_gpu_hours, unattributed_gpu_hours, utilization_of_provisioned,
//!   gpu_fleet_cost, accelerator_cost, idle_cost, idle_accelerator_cost,
//!   unallocated_gpu_cost, flags`; one `(all)` row per GPU model carries the fleet's
//!   provisioned and unallocated hours and its fleet cost (every instance-hour of the model)
//!   and unallocated cost (fleet − the pods' split cost); a namespace row's fleet cost is its
//!   pods' split + unused on GPU instances (unallocated 0); `idle_cost` is the full cost of
//!   idle GPU pod-hours (every resource the pod reserved), `accelerator_cost` and
//!   `idle_accelerator_cost` AWS's accelerator rows alone; `(unattributed)` rows hold GPU time
//!   no pod held in the metrics;
//! - `spot`: `namespace, workload_class, gpu_hours, spot_gpu_hours, spot_adoption, flags`;
//! - `savings`: `month, public_on_demand_cost, actual_cost, realized_savings, spot_savings,
//!   commitment_savings, other_savings, savings_plan_savings, reserved_savings,
//!   unused_commitment`: a whole month's unused commitment (Savings Plan commitment and
//!   reservations not used) is subtracted from its Savings Plan and RI savings, so
//!   `realized_savings = public − actual − unused_commitment` and `commitment_savings =
//!   savings_plan_savings + reserved_savings` (+ `opportunities`: the `opportunities` rows,
//!   `total_monthly_savings`, `monthly_spend`, `months`);
//! - `opportunities`: `kind, namespace, family, workload (= family), gpu_model,
//!   purchase_option, monthly_savings, evidence, provider` (the providers the family's pods
//!   ran on, by their accounts: `aws`, or several joined by `, `), one row per kind and
//!   workload family, a waterfall: Σ `monthly_savings` ≤ `monthly_spend`;
//! - `accounts`: `account, provider, name, kubernetes_cost, unallocated_ec2_cost, other_cost,
//!   amortized_cost, unblended_cost, gpu_hours`, one row per usage account of the whole
//!   periods in the range (the payer's own lines included), with a total row; Σ
//!   `amortized_cost` = the amortized bill (top-level `amortized_total`);
//! - `providers`: `provider, name, accounts, kubernetes_cost, unallocated_ec2_cost,
//!   other_cost, amortized_cost, unblended_cost, share`, the `accounts` rows summed per
//!   provider (`aws`, `azure`, `gcp`, `oci`), with a total row; Σ `amortized_cost` = the
//!   amortized bill across the clouds (top-level `amortized_total`);
//! - with a provider filter (`--provider`, [`RollupRange::only_provider`]) every report above
//!   covers that provider's accounts as an account filter covers one account;
//! - with an account filter (`--account`, [`RollupRange::only_account`]) every report above
//!   covers that account's pods, instances and bill only, and `clients` becomes the clients'
//!   Kubernetes cost in the account: `client, kubernetes_direct_cost` (split cost, as the
//!   chargeback counts direct cost), `unused_cost, kubernetes_cost, gpu_cost, gpu_hours,
//!   share` (+ `account`), since shared pools are charged on the whole fleet and are not
//!   split by account.
//!
//! Flags follow docs/METRICS.md ("Targets and flags"): utilization < 40 %, idle > 20 % of allocated, Spot adoption
//! < 30 % for training.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::table::{Cell, Extras, MoneyJson, Nanos, Table};
use super::{OutputFormat, ReportError};
use crate::auth::Scope;
use crate::auth::{ClientColumn, OTHER_CLIENTS};
use crate::domain::settings::Pool;
use crate::period::Period;
use crate::store::{
    CapacityRollup, ChargebackSnapshot, ClientRollup, CostRollup, Opportunity, PeriodRollup, PurchaseOption,
    Rollups, Store, WorkloadClass,
};

/// A range of whole UTC days `[from, to)` and the computed rollups that cover it (shared,
/// so the dashboard can keep them in memory and answer from them without copying).
#[derive(Debug, Clone, Default)]
pub struct RollupRange {
    /// `YYYY-MM` or `YYYY-MM-DD/YYYY-MM-DD`.
    pub label: String,
    pub from: i64,
    pub to: i64,
    /// Each overlapping period's rollups and whether it lies wholly in the range (its client
    /// rollups, opportunities and other cost count only then).
    pub parts: Vec<(Arc<Rollups>, bool)>,
    /// The usage account the rollups were narrowed to ([`RollupRange::only_account`]).
    pub account: Option<String>,
    /// The provider whose accounts the rollups were narrowed to ([`RollupRange::only_provider`]).
    pub provider: Option<String>,
    /// The accounts the rollups were narrowed to, by either.
    pub only: Option<std::collections::BTreeSet<String>>,
}

impl RollupRange {
    /// Loads the rollups of every billing period overlapping `[from, to)`, as `scope` may
    /// see them.
    pub async fn load(
        store: &dyn Store,
        scope: &Scope,
        label: String,
        from: i64,
        to: i64,
    ) -> Result<RollupRange, ReportError> {
        let mut found = Vec::new();
        let mut period = Period::containing(from);
        while period.start() < to {
            if let Some(r) = store.rollups(&period.to_string()).await? {
                found.push(Arc::new(if *scope == Scope::All { r } else { scope.apply(&r) }));
            }
            period = period.next();
        }
        RollupRange::from_parts(label, from, to, found)
    }

    /// A range over rollups already at hand (one per period, any order).
    pub fn from_parts(
        label: String,
        from: i64,
        to: i64,
        rollups: Vec<Arc<Rollups>>,
    ) -> Result<RollupRange, ReportError> {
        let mut parts: Vec<(Arc<Rollups>, bool)> = rollups
            .into_iter()
            .filter_map(|r| {
                let period: Period = r.period.period.parse().ok()?;
                (period.start() < to && period.end() > from)
                    .then(|| (r.clone(), period.start() >= from && period.end() <= to))
            })
            .collect();
        parts.sort_by(|a, b| a.0.period.period.cmp(&b.0.period.period));
        if parts.is_empty() {
            return Err(ReportError::NotComputed(label));
        }
        Ok(RollupRange { label, from, to, parts, account: None, provider: None, only: None })
    }

    /// The usage accounts of the range (those the bill names, and those of its pods and
    /// instances), each with its name when the export gives one.
    pub fn accounts(&self) -> BTreeMap<String, String> {
        let mut accounts: BTreeMap<String, String> = BTreeMap::new();
        for (r, _) in &self.parts {
            for a in &r.accounts {
                let name = accounts.entry(a.account.clone()).or_default();
                if name.is_empty() {
                    *name = a.name.clone();
                }
            }
            for account in r.costs.iter().map(|c| &c.account).chain(r.capacity.iter().map(|c| &c.account)) {
                accounts.entry(account.clone()).or_default();
            }
        }
        accounts.remove("");
        accounts
    }

    /// The provider of each account the range's bills name (`aws` for the CUR's, and for an
    /// account only pods or instances name).
    pub fn providers(&self) -> BTreeMap<String, String> {
        let mut providers = BTreeMap::new();
        for (r, _) in &self.parts {
            for a in r.accounts.iter().filter(|a| !a.provider.is_empty()) {
                providers.entry(a.account.clone()).or_insert_with(|| a.provider.clone());
            }
        }
        providers
    }

    /// Every provider with an account in the range.
    pub fn provider_ids(&self) -> std::collections::BTreeSet<String> {
        self.account_keys().into_iter().map(|(provider, _)| provider).collect()
    }

    /// An account's provider, `aws` when no bill says otherwise.
    pub fn provider_of<'a>(providers: &'a BTreeMap<String, String>, account: &str) -> &'a str {
        providers.get(account).map_or("aws", String::as_str)
    }

    /// The provider of each cluster a bill other than the CUR pays for (gpuledger's split of
    /// Azure, Google or Oracle nodes); every other cluster runs on the CUR's instances.
    pub fn cluster_providers(&self) -> BTreeMap<String, String> {
        let mut providers = BTreeMap::new();
        for (r, _) in &self.parts {
            for k in r.kube_splits.iter().filter(|k| !k.provider.is_empty()) {
                providers.entry(k.cluster.clone()).or_insert_with(|| k.provider.clone());
            }
        }
        providers
    }

    /// The account a pod's cost row is billed to, with its provider (its cluster's): the
    /// same id on two clouds is two accounts.
    pub fn cost_account<'a>(providers: &'a BTreeMap<String, String>, c: &'a CostRollup) -> AccountKey<'a> {
        AccountKey { provider: providers.get(&c.cluster).map_or("aws", String::as_str), account: &c.account }
    }

    /// Every account of the range with its provider: the bills' accounts with theirs, the
    /// pods' with their cluster's, the machines' with theirs.
    fn account_keys(&self) -> std::collections::BTreeSet<(String, String)> {
        let clusters = self.cluster_providers();
        let mut keys = std::collections::BTreeSet::new();
        for (r, _) in &self.parts {
            keys.extend(r.accounts.iter().map(|a| (a.provider.clone(), a.account.clone())));
            for c in &r.costs {
                let key = RollupRange::cost_account(&clusters, c);
                keys.insert((key.provider.to_string(), c.account.clone()));
            }
            keys.extend(r.capacity.iter().map(|c| (c.provider().to_string(), c.account.clone())));
        }
        keys.retain(|(_, account)| !account.is_empty());
        keys
    }

    /// The range as one usage account sees it: its pods' cost rows, its instances'
    /// capacity, its own bill in place of the fleet's (unallocated EC2, other cost, unused
    /// commitment), the opportunities of workloads that ran in it. Fleet-wide figures with
    /// no account (the GPU heatmap, GPU time no pod held, the client chargeback, whose shared
    /// pools span accounts) are left out. An account the range does not have is an error
    /// naming those it has.
    pub fn only_account(&self, account: &str) -> Result<RollupRange, ReportError> {
        let accounts = self.accounts();
        if !accounts.contains_key(account) {
            return Err(ReportError::NoAccount {
                account: account.to_string(),
                label: self.label.clone(),
                choices: accounts.into_keys().collect(),
            });
        }
        // The same id on two clouds: both, unless a provider was chosen first.
        let keys = self.account_keys().into_iter().filter(|(_, a)| a == account).collect();
        let mut range = self.only_accounts(&keys);
        range.account = Some(account.to_string());
        Ok(range)
    }

    /// The range as one provider's accounts see it (`aws`, `azure`, `gcp`, `oci`), as
    /// [`RollupRange::only_account`] narrows to one. A provider with no account in the range
    /// is an error naming those it has.
    pub fn only_provider(&self, provider: &str) -> Result<RollupRange, ReportError> {
        let accounts: std::collections::BTreeSet<(String, String)> =
            self.account_keys().into_iter().filter(|(p, _)| p == provider).collect();
        if accounts.is_empty() {
            return Err(ReportError::NoProvider {
                provider: provider.to_string(),
                label: self.label.clone(),
                choices: self.provider_ids().into_iter().collect(),
            });
        }
        let mut range = self.only_accounts(&accounts);
        range.provider = Some(provider.to_string());
        Ok(range)
    }

    /// The range narrowed as a report asks: to a provider's accounts, then to one account.
    pub fn narrowed(self, provider: Option<&str>, account: Option<&str>) -> Result<RollupRange, ReportError> {
        let range = match provider {
            Some(provider) => self.only_provider(provider)?,
            None => self,
        };
        match account {
            Some(account) => range.only_account(account),
            None => Ok(range),
        }
    }

    /// How a caption names what the range was narrowed to (`account 222222222222`,
    /// `Azure`), `None` for the whole fleet.
    pub fn narrowed_to(&self) -> Option<String> {
        match (&self.account, &self.provider) {
            (Some(account), _) => Some(format!("account {account}")),
            (None, Some(provider)) => Some(crate::sources::focus::provider_name(provider).to_string()),
            (None, None) => None,
        }
    }

    /// Whether the range was narrowed to some accounts, and whether `account` is one of them.
    pub fn excludes(&self, account: &str) -> bool {
        self.only.as_ref().is_some_and(|only| !only.contains(account))
    }

    /// The range as `accounts` (provider, account) see it together: their bills summed in
    /// place of the fleet's.
    fn only_accounts(&self, accounts: &std::collections::BTreeSet<(String, String)>) -> RollupRange {
        let clusters = self.cluster_providers();
        let has =
            |provider: &str, account: &str| accounts.contains(&(provider.to_string(), account.to_string()));
        let parts = self
            .parts
            .iter()
            .map(|(r, whole)| {
                let mut period = r.period.clone();
                let mut own = crate::store::AccountRollup::default();
                for account in r.accounts.iter().filter(|a| has(&a.provider, &a.account)) {
                    own.add(account);
                }
                period.bill_unblended_micros = own.bill_unblended_micros;
                period.bill_amortized_micros = own.amortized_micros();
                period.kubernetes_cost_nanos = own.kubernetes_cost_nanos;
                period.unallocated_ec2_micros = own.unallocated_ec2_nanos().rounded_micros();
                period.gpu_fleet_in_other_micros = own.gpu_fleet_in_other_micros;
                period.other_cost_micros = own.other_cost_micros;
                period.unused_savings_plan_micros = own.unused_savings_plan_micros;
                period.unused_reservation_micros = own.unused_reservation_micros;
                // An account's bill is not kept by category.
                (period.storage_micros, period.network_micros) = (None, None);
                period.unattributed_gpu_hours = 0.0;
                period.measured_unbilled_gpu_hours = 0.0;
                let costs: Vec<CostRollup> = r
                    .costs
                    .iter()
                    .filter(|c| has(RollupRange::cost_account(&clusters, c).provider, &c.account))
                    .cloned()
                    .collect();
                // Opportunities are by workload family (a CronJob's runs are one).
                let family = crate::engine::classify::family;
                let families: std::collections::BTreeSet<(&str, &str)> =
                    costs.iter().map(|c| (c.namespace.as_str(), family(&c.workload))).collect();
                let opportunities = r
                    .opportunities
                    .iter()
                    .filter(|o| families.contains(&(o.namespace.as_str(), family(&o.workload))))
                    .cloned()
                    .collect();
                let narrowed = Rollups {
                    period,
                    capacity: r.capacity.iter().filter(|c| has(c.provider(), &c.account)).cloned().collect(),
                    heatmap: Vec::new(),
                    utilization: Vec::new(),
                    clients: Vec::new(),
                    opportunities,
                    accounts: r.accounts.iter().filter(|a| has(&a.provider, &a.account)).cloned().collect(),
                    kube_splits: r
                        .kube_splits
                        .iter()
                        .filter(|k| costs.iter().any(|c| c.cluster == k.cluster))
                        .cloned()
                        .collect(),
                    costs,
                    withheld_others: r.withheld_others,
                    withheld_client_columns: r.withheld_client_columns,
                };
                (Arc::new(narrowed), *whole)
            })
            .collect();
        let ids: std::collections::BTreeSet<String> = accounts.iter().map(|(_, a)| a.clone()).collect();
        let only = match &self.only {
            Some(before) => before.intersection(&ids).cloned().collect(),
            None => ids,
        };
        RollupRange {
            label: self.label.clone(),
            from: self.from,
            to: self.to,
            parts,
            account: self.account.clone(),
            provider: self.provider.clone(),
            only: Some(only),
        }
    }

    /// The range of one billing period.
    pub async fn period(
        store: &dyn Store,
        scope: &Scope,
        period: Period,
    ) -> Result<RollupRange, ReportError> {
        RollupRange::load(store, scope, period.to_string(), period.start(), period.end()).await
    }

    /// Cost rollups of the range's days.
    pub fn costs(&self) -> impl Iterator<Item = &CostRollup> {
        let (from, to) = (self.from, self.to);
        self.parts.iter().flat_map(move |(r, _)| r.costs.iter().filter(move |c| c.day >= from && c.day < to))
    }

    /// Capacity rollups of the range's days.
    pub fn capacity(&self) -> impl Iterator<Item = &CapacityRollup> {
        let (from, to) = (self.from, self.to);
        self.parts
            .iter()
            .flat_map(move |(r, _)| r.capacity.iter().filter(move |c| c.day >= from && c.day < to))
    }

    /// Client rollups of the periods wholly in the range.
    pub fn clients(&self) -> impl Iterator<Item = &ClientRollup> {
        self.parts.iter().filter(|(_, whole)| *whole).flat_map(|(r, _)| r.clients.iter())
    }

    /// Opportunities of the periods wholly in the range.
    pub fn opportunities(&self) -> impl Iterator<Item = &Opportunity> {
        self.parts.iter().filter(|(_, whole)| *whole).flat_map(|(r, _)| r.opportunities.iter())
    }

    /// Each period's figures, with whether it lies wholly in the range.
    pub fn periods(&self) -> impl Iterator<Item = (&PeriodRollup, bool)> {
        self.parts.iter().map(|(r, whole)| (&r.period, *whole))
    }

    /// Other AWS cost of the periods wholly inside the range (daily detail is not rolled up).
    pub fn other_cost_micros(&self) -> i64 {
        self.periods().filter(|(_, whole)| *whole).map(|(p, _)| p.other_cost_micros.0).sum()
    }

    /// EC2 cost not allocated to pods, of the periods wholly inside the range.
    pub fn unallocated_ec2_micros(&self) -> i64 {
        self.periods().filter(|(_, whole)| *whole).map(|(p, _)| p.unallocated_ec2_micros.0).sum()
    }

    fn kubernetes_nanos(&self) -> i64 {
        self.costs().map(|c| c.split_cost_nanos + c.unused_cost_nanos).sum()
    }
}

/// A report's table and the fields its JSON carries beside `rows`.
#[derive(Debug, Clone)]
pub struct Report {
    pub table: Table,
    pub extra: Extras,
}

impl Report {
    /// A report of the table alone.
    pub fn of(table: Table) -> Report {
        Report { table, extra: Extras::default() }
    }

    /// Prints for `label` (the period or range) in `format`.
    pub fn render(&self, format: OutputFormat, label: &str) -> String {
        self.table.render(format, label, self.extra.to_map(MoneyJson::Number))
    }

    /// As JSON for `label`, amounts written as `money` says.
    pub fn json(&self, label: &str, money: MoneyJson) -> serde_json::Value {
        self.table.json(label, self.extra.to_map(money), money)
    }
}

fn usd(nanos: i64) -> Cell {
    Cell::Usd(Some(Nanos(nanos)))
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 1e-12).then(|| part / whole)
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_string())
}

/// Per workload: cost, GPU-hours, idle, Spot, requests.
pub fn workloads(range: &RollupRange) -> Report {
    by_workload(range, false)
}

/// [`workloads`] with a CronJob's runs (Jobs named `cronjob-<schedule>`) summed into one row
/// of the CronJob, and a `runs` column: how many workloads each row sums (1 for any other).
pub fn workload_families(range: &RollupRange) -> Report {
    by_workload(range, true)
}

fn by_workload(range: &RollupRange, families: bool) -> Report {
    #[derive(Default)]
    struct W<'a> {
        split: i64,
        unused: i64,
        idle_cost: i64,
        allocated: f64,
        used: f64,
        idle: f64,
        spot: f64,
        requests: f64,
        names: std::collections::BTreeSet<&'a str>,
    }
    let mut rows: BTreeMap<(&str, &str, &str, &str), W> = BTreeMap::new();
    for c in range.costs() {
        let workload = if families { crate::engine::classify::family(&c.workload) } else { &c.workload };
        let w = rows.entry((&c.namespace, workload, c.workload_class.as_str(), &c.client)).or_default();
        if families {
            w.names.insert(&c.workload);
        }
        w.split += c.split_cost_nanos;
        w.unused += c.unused_cost_nanos;
        w.idle_cost += c.idle_gpu_cost_nanos;
        w.allocated += c.gpu_hours_allocated;
        w.used += c.gpu_hours_used;
        w.idle += c.gpu_hours_idle;
        w.spot += c.spot_gpu_hours;
        w.requests += c.requests;
    }
    let mut table = Table {
        title: "Cost and GPU-hours by workload".into(),
        totals: Vec::new(),
        columns: vec![
            "namespace",
            "workload",
            "workload_class",
            "client",
            "split_cost",
            "unused_cost",
            "total_cost",
            "gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "idle_gpu_cost",
            "spot_gpu_hours",
            "requests",
        ],
        rows: rows
            .iter()
            .map(|((ns, workload, class, client), w)| {
                vec![
                    text(ns),
                    text(workload),
                    text(class),
                    text(client),
                    usd(w.split),
                    usd(w.unused),
                    usd(w.split + w.unused),
                    Cell::Hours(w.allocated),
                    Cell::Hours(w.used),
                    Cell::Hours(w.idle),
                    usd(w.idle_cost),
                    Cell::Hours(w.spot),
                    Cell::Count(w.requests),
                ]
            })
            .collect(),
    };
    if families {
        table.columns.insert(2, "runs");
        for (row, w) in table.rows.iter_mut().zip(rows.values()) {
            row.insert(2, Cell::Count(w.names.len() as f64));
        }
    }
    let mut extra = Extras::default();
    extra.usd("kubernetes_total", range.kubernetes_nanos());
    Report { table, extra }
}

/// An account with its provider: the same id on two clouds is two accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccountKey<'a> {
    pub provider: &'a str,
    pub account: &'a str,
}

/// Per usage account of the whole periods in the range: its Kubernetes cost, EC2 no pod was
/// given, other cost, amortized and unblended bill, and its pods' GPU-hours.
/// One account's (or provider's) bill over the range's whole periods, in nano-dollars.
#[derive(Default)]
struct AccountSums {
    name: String,
    kubernetes: i64,
    unallocated: i64,
    other: i64,
    unblended: i64,
    /// The pods' allocated GPU-hours.
    gpu_hours: f64,
    /// The GPU fleet the bills name: its GPU-hours, those at Spot (preemptible) prices, and
    /// its amortized cost (the CUR's GPU instances; a FOCUS bill's GPU instance charges).
    fleet_gpu_hours: f64,
    spot_gpu_hours: f64,
    fleet: i64,
    /// The fleet's cost in the bills' currencies (meaningful with one, as `in_currency`).
    fleet_in_currency: i64,
    /// The pods' used GPU-hours and their measured allocated GPU-hours (utilization's).
    used_gpu_hours: f64,
    measured_gpu_hours: f64,
    /// The bills' currencies, and the amortized cost in them (meaningful with one currency):
    /// a FOCUS bill's own figures, unconverted; the CUR's dollars.
    currencies: std::collections::BTreeSet<String>,
    in_currency: i64,
}

impl AccountSums {
    fn add(&mut self, other: &AccountSums) {
        self.kubernetes += other.kubernetes;
        self.unallocated += other.unallocated;
        self.other += other.other;
        self.unblended += other.unblended;
        self.gpu_hours += other.gpu_hours;
        self.fleet_gpu_hours += other.fleet_gpu_hours;
        self.spot_gpu_hours += other.spot_gpu_hours;
        self.fleet += other.fleet;
        self.fleet_in_currency += other.fleet_in_currency;
        self.used_gpu_hours += other.used_gpu_hours;
        self.measured_gpu_hours += other.measured_gpu_hours;
        self.currencies.extend(other.currencies.iter().cloned());
        self.in_currency += other.in_currency;
    }

    /// The bill currency, the amortized cost and the GPU fleet's cost in it, when the bills
    /// are in one currency.
    fn in_bill_currency(&self) -> [Cell; 3] {
        match self.currencies.len() {
            1 => [
                text(self.currencies.first().map_or("", String::as_str)),
                Cell::Money(Some(Nanos(self.in_currency))),
                Cell::Money(Some(Nanos(self.fleet_in_currency))),
            ],
            _ => [text(""), Cell::Money(None), Cell::Money(None)],
        }
    }

    /// Used ÷ measured allocated GPU-hours (METRICS.md "GPU utilization"); none without pods
    /// measured (no DCGM series for the provider's GPUs, or no pods split on its nodes).
    fn utilization(&self) -> Option<f64> {
        ratio(self.used_gpu_hours, self.measured_gpu_hours)
    }

    fn amortized(&self) -> i64 {
        self.kubernetes + self.unallocated + self.other
    }
}

/// Each usage account's bill over the range's whole periods, and its pods' GPU-hours.
fn account_sums(range: &RollupRange) -> BTreeMap<(String, String), AccountSums> {
    let clusters = range.cluster_providers();
    let mut rows: BTreeMap<(String, String), AccountSums> = BTreeMap::new();
    for (r, whole) in &range.parts {
        if !*whole {
            continue;
        }
        for a in &r.accounts {
            let row = rows.entry((a.provider.clone(), a.account.clone())).or_default();
            if row.name.is_empty() {
                row.name = a.name.clone();
            }
            let (kubernetes, unallocated, other) =
                (a.kubernetes_cost_nanos.0, a.unallocated_ec2_nanos().0, a.other_cost_micros.nanos().0);
            row.kubernetes += kubernetes;
            row.unallocated += unallocated;
            row.other += other;
            row.unblended += a.unblended_nanos().0;
            let (currency, in_currency) = a.in_bill_currency(kubernetes + unallocated + other);
            row.currencies.insert(currency.to_string());
            row.in_currency += in_currency;
        }
        for c in &r.costs {
            let key = RollupRange::cost_account(&clusters, c);
            let row = rows.entry((key.provider.to_string(), c.account.clone())).or_default();
            row.gpu_hours += c.gpu_hours_allocated;
            row.used_gpu_hours += c.gpu_hours_used;
            row.measured_gpu_hours += c.gpu_hours_allocated - c.gpu_hours_unmeasured;
        }
        // The GPU fleet: every provider's machines.
        for c in r.capacity.iter().filter(|c| c.is_gpu()) {
            let row = rows.entry((c.provider().to_string(), c.account.clone())).or_default();
            row.fleet_gpu_hours += c.gpu_hours_provisioned;
            if c.purchase_option == crate::store::PurchaseOption::Spot {
                row.spot_gpu_hours += c.gpu_hours_provisioned;
            }
            row.fleet += c.amortized_cost_micros * 1_000;
            let (currency, in_currency) = c.in_bill_currency();
            row.currencies.insert(currency.to_string());
            row.fleet_in_currency += in_currency;
        }
    }
    rows
}

/// Each provider's accounts summed, and how many they are (an account is its provider's: the
/// same id on two clouds is two accounts).
fn provider_sums(range: &RollupRange) -> BTreeMap<String, (AccountSums, u32)> {
    let mut rows: BTreeMap<String, (AccountSums, u32)> = BTreeMap::new();
    for ((provider, _), sums) in account_sums(range) {
        let row = rows.entry(provider).or_default();
        row.0.add(&sums);
        row.1 += 1;
    }
    rows
}

/// Which providers' GPU fleets have no measured GPU-hours, said as the pages say it ("GPU
/// utilization is not measured on OCI: …"); `None` when every provider's is.
pub fn unmeasured_providers_note(range: &RollupRange) -> Option<String> {
    let names: Vec<String> = provider_sums(range)
        .into_iter()
        .filter(|(_, (sums, _))| sums.fleet_gpu_hours > 0.0 && sums.utilization().is_none())
        .map(|(id, _)| crate::sources::focus::provider_name(&id).to_string())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "GPU utilization is not measured on {}: no DCGM series for its pods' GPUs (or no pods on its \
             GPU machines), so it is n/a there, not 0 %.",
            names.join(", ")
        )
    })
}

/// Each provider's amortized bill over the range's whole periods, nano-dollars, by its name.
pub fn spend_by_provider(range: &RollupRange) -> Vec<(String, i64)> {
    provider_sums(range)
        .into_iter()
        .map(|(id, (sums, _))| (crate::sources::focus::provider_name(&id).to_string(), sums.amortized()))
        .collect()
}

/// `providers`: the bill per provider over the range's whole periods, its accounts summed
/// (`accounts`' rows grouped): Σ `amortized_cost` = the amortized bill across the clouds.
pub fn providers(range: &RollupRange) -> Report {
    let rows = provider_sums(range);
    let mut total = (AccountSums::default(), 0);
    for (sums, accounts) in rows.values() {
        total.0.add(sums);
        total.1 += accounts;
    }
    let whole = total.0.amortized();
    let line = |provider: &str, (a, accounts): &(AccountSums, u32)| {
        let name = if provider == "Total" { "" } else { crate::sources::focus::provider_name(provider) };
        let [currency, in_currency, fleet_in_currency] = a.in_bill_currency();
        vec![
            text(provider),
            text(name),
            Cell::Count(f64::from(*accounts)),
            usd(a.kubernetes),
            usd(a.unallocated),
            usd(a.other),
            usd(a.amortized()),
            currency,
            in_currency,
            usd(a.unblended),
            Cell::Ratio(ratio(a.amortized() as f64, whole as f64)),
            Cell::Hours(a.fleet_gpu_hours),
            Cell::Ratio(ratio(a.spot_gpu_hours, a.fleet_gpu_hours)),
            usd(a.fleet),
            fleet_in_currency,
            Cell::Rate(ratio(a.fleet as f64 / 1e9, a.fleet_gpu_hours)),
            Cell::Ratio(a.utilization()),
        ]
    };
    let table = Table {
        title: "Cost by provider".into(),
        totals: vec![line("Total", &total)],
        columns: vec![
            "provider",
            "name",
            "accounts",
            "kubernetes_cost",
            "unallocated_ec2_cost",
            "other_cost",
            "amortized_cost",
            "bill_currency",
            "amortized_in_bill_currency",
            "unblended_cost",
            "share",
            "gpu_hours",
            "spot_gpu_share",
            "gpu_fleet_cost",
            "gpu_fleet_cost_in_bill_currency",
            "cost_per_gpu_hour",
            "gpu_utilization",
        ],
        rows: rows.iter().map(|(provider, row)| line(provider, row)).collect(),
    };
    let mut extra = Extras::default();
    extra.usd("amortized_total", crate::money::micros_from_nanos(whole) * 1000);
    Report { table, extra }
}

pub fn accounts(range: &RollupRange) -> Report {
    type A = AccountSums;
    let rows = account_sums(range);
    let line = |(provider, account): (&str, &str), a: &A| {
        vec![
            text(account),
            text(provider),
            text(&a.name),
            usd(a.kubernetes),
            usd(a.unallocated),
            usd(a.other),
            usd(a.kubernetes + a.unallocated + a.other),
            usd(a.unblended),
            Cell::Hours(a.gpu_hours),
        ]
    };
    let mut total = A::default();
    for a in rows.values() {
        total.add(a);
    }
    let amortized = total.amortized();
    let table = Table {
        title: "Cost by usage account".into(),
        totals: vec![line(("", "Total"), &total)],
        columns: vec![
            "account",
            "provider",
            "name",
            "kubernetes_cost",
            "unallocated_ec2_cost",
            "other_cost",
            "amortized_cost",
            "unblended_cost",
            "gpu_hours",
        ],
        rows: rows.iter().map(|((provider, account), a)| line((provider, account), a)).collect(),
    };
    let mut extra = Extras::default();
    extra.usd("amortized_total", crate::money::micros_from_nanos(amortized) * 1000);
    Report { table, extra }
}

/// GPU-hours and GPU cost per usage account over the range's days: its GPU instances'
/// provisioned hours and cost, its pods' allocated, used and idle GPU-hours and idle cost.
pub fn gpu_by_account(range: &RollupRange) -> Report {
    #[derive(Default)]
    struct G {
        provisioned: f64,
        fleet_micros: i64,
        allocated: f64,
        used: f64,
        idle: f64,
        unmeasured: f64,
        idle_cost: i64,
    }
    // Keyed with the provider: the same id on two clouds is two accounts.
    let mut rows: BTreeMap<(&str, &str), G> = BTreeMap::new();
    for c in range.capacity().filter(|c| c.is_gpu()) {
        let g = rows.entry((c.provider(), c.account.as_str())).or_default();
        g.provisioned += c.gpu_hours_provisioned;
        g.fleet_micros += c.amortized_cost_micros;
    }
    let clusters = range.cluster_providers();
    for c in range.costs().filter(|c| c.gpu_hours_allocated > 0.0) {
        let g =
            rows.entry((RollupRange::cost_account(&clusters, c).provider, c.account.as_str())).or_default();
        g.allocated += c.gpu_hours_allocated;
        g.used += c.gpu_hours_used;
        g.idle += c.gpu_hours_idle;
        g.unmeasured += c.gpu_hours_unmeasured;
        g.idle_cost += c.idle_cost_nanos;
    }
    let names = range.accounts();
    let line = |(provider, account): &(&str, &str), g: &G| {
        vec![
            text(account),
            text(provider),
            text(names.get(*account).map_or("", String::as_str)),
            Cell::Hours(g.provisioned),
            Cell::Hours(g.allocated),
            Cell::Hours(g.used),
            Cell::Hours(g.idle),
            Cell::Ratio(ratio(g.used, g.allocated - g.unmeasured)),
            Cell::Usd(Some(Nanos::from_micros(g.fleet_micros))),
            usd(g.idle_cost),
        ]
    };
    let table = Table {
        title: "GPU-hours by usage account".into(),
        totals: Vec::new(),
        columns: vec![
            "account",
            "provider",
            "name",
            "provisioned_gpu_hours",
            "allocated_gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "utilization",
            "gpu_fleet_cost",
            "idle_cost",
        ],
        rows: rows.iter().map(|(key, g)| line(key, g)).collect(),
    };
    Report::of(table)
}

/// Each client's Kubernetes cost per usage account over the range's days: its direct cost
/// as the chargeback counts it (split cost), the unused cost its pods were given (which the
/// chargeback pools as idle), and their sum. The chargeback's shared pools are fleet-wide
/// and not split by account.
pub fn clients_by_account(range: &RollupRange) -> Report {
    let mut rows: BTreeMap<(&str, &str), (i64, i64, f64)> = BTreeMap::new();
    for c in range.costs() {
        let row = rows.entry((c.client.as_str(), c.account.as_str())).or_default();
        row.0 += c.split_cost_nanos;
        row.1 += c.unused_cost_nanos;
        row.2 += c.gpu_hours_allocated;
    }
    let names = range.accounts();
    let providers = range.providers();
    let table = Table {
        title: "Kubernetes cost by client and usage account".into(),
        totals: Vec::new(),
        columns: vec![
            "client",
            "account",
            "provider",
            "name",
            "kubernetes_direct_cost",
            "unused_cost",
            "kubernetes_cost",
            "gpu_hours",
        ],
        rows: rows
            .iter()
            .map(|((client, account), (split, unused, hours))| {
                vec![
                    text(client),
                    text(account),
                    text(RollupRange::provider_of(&providers, account)),
                    text(names.get(*account).map_or("", String::as_str)),
                    usd(*split),
                    usd(*unused),
                    usd(split + unused),
                    Cell::Hours(*hours),
                ]
            })
            .collect(),
    };
    Report::of(table)
}

/// Under an account filter: each client's Kubernetes cost in the account (pods on its
/// instances): direct (split) cost as the chargeback counts it, unused cost, their sum, GPU
/// cost and GPU-hours, and its share of the account's Kubernetes cost.
fn clients_in_account(range: &RollupRange) -> Report {
    let mut rows: BTreeMap<&str, (i64, i64, i64, f64)> = BTreeMap::new();
    for c in range.costs() {
        let row = rows.entry(c.client.as_str()).or_default();
        row.0 += c.split_cost_nanos;
        row.1 += c.unused_cost_nanos;
        row.2 += c.gpu_cost_nanos;
        row.3 += c.gpu_hours_allocated;
    }
    let whole: i64 = rows.values().map(|r| r.0 + r.1).sum();
    let line = |client: &str, r: &(i64, i64, i64, f64)| {
        vec![
            text(client),
            usd(r.0),
            usd(r.1),
            usd(r.0 + r.1),
            usd(r.2),
            Cell::Hours(r.3),
            Cell::Ratio(ratio((r.0 + r.1) as f64, whole as f64)),
        ]
    };
    let total =
        rows.values().fold((0, 0, 0, 0.0), |acc, r| (acc.0 + r.0, acc.1 + r.1, acc.2 + r.2, acc.3 + r.3));
    let table = Table {
        title: format!("Kubernetes cost by client in {}", range.narrowed_to().unwrap_or_default()),
        totals: vec![line("Total", &total)],
        columns: vec![
            "client",
            "kubernetes_direct_cost",
            "unused_cost",
            "kubernetes_cost",
            "gpu_cost",
            "gpu_hours",
            "share",
        ],
        rows: rows.iter().map(|(client, r)| line(client, r)).collect(),
    };
    let mut extra = Extras::default();
    if let Some(account) = &range.account {
        extra.insert("account", json!(account));
    }
    if let Some(provider) = &range.provider {
        extra.insert("provider", json!(provider));
    }
    Report { table, extra }
}

/// Each client's chargeback summed over the whole periods of the range; the policy and markup
/// rate are the latest period's.
pub fn client_sums(range: &RollupRange) -> BTreeMap<String, ClientRollup> {
    let mut sums: BTreeMap<String, ClientRollup> = BTreeMap::new();
    for c in range.clients() {
        let sum = sums.entry(c.client.clone()).or_insert_with(|| ClientRollup {
            period: c.period.clone(),
            client: c.client.clone(),
            ..ClientRollup::default()
        });
        sum.add(c);
        sum.share_policy = c.share_policy.clone();
        sum.markup_basis_points = c.markup_basis_points;
        sum.exempt = c.exempt;
        sum.charge_basis = c.charge_basis;
    }
    sums
}

/// Per client: direct cost (Kubernetes and not), shares of the platform, idle, unallocated
/// and shared non-Kubernetes pools, markup, total, and what the direct cost paid for. Σ rows'
/// `total_cost − markup` = the amortized bill of the whole periods, to the micro-dollar, plus
/// the discounts passed to clients charged net (`discount`, whole micro-dollars): direct cost
/// and markup are rounded row by row, and the rows' shared cost is apportioned (largest
/// remainder) so that the rounded rows add up; its four parts are each rounded on their own.
pub fn clients(range: &RollupRange) -> Report {
    if range.only.is_some() {
        return clients_in_account(range);
    }
    let sums = client_sums(range);
    let rows: Vec<&ClientRollup> = sums.values().collect();
    let bill: i64 = range.periods().filter(|(_, whole)| *whole).map(|(p, _)| p.bill_amortized_micros.0).sum();
    let rounded = |nanos: i64| crate::money::micros_from_nanos(nanos);
    let direct: Vec<i64> = rows.iter().map(|c| rounded(c.direct_total_nanos())).collect();
    let shared_nanos: Vec<i64> = rows.iter().map(|c| c.shared_total_nanos()).collect();
    let discount: Vec<i64> = rows.iter().map(|c| rounded(c.discount_nanos)).collect();
    let discounts: i64 = discount.iter().sum();
    let shared = crate::money::apportion_micros(&shared_nanos, bill - direct.iter().sum::<i64>());
    let micros = |m: i64| Cell::Usd(Some(Nanos::from_micros(m)));
    let table = Table {
        title: "Chargeback by client".into(),
        totals: Vec::new(),
        columns: [
            "client",
            "share_policy",
            "exempt",
            "direct_cost",
            "kubernetes_direct_cost",
            "non_kubernetes_direct_cost",
        ]
        .into_iter()
        .chain(Pool::ALL.map(Pool::column))
        .chain([
            "shared_cost",
            "markup_rate",
            "markup",
            "total_cost",
            "gpu_cost",
            "cpu_cost",
            "memory_cost",
            "storage_cost",
            "network_cost",
            "other_cost",
            "training_cost",
            "inference_cost",
            "charge_basis",
            "discount",
        ])
        .collect(),
        rows: rows
            .iter()
            .zip(direct.iter().zip(&shared).zip(&discount))
            .map(|(c, ((&direct, &shared), &discount))| {
                let markup = rounded(c.markup_nanos);
                let shares: Vec<Cell> = c.shares().iter().map(|(_, nanos)| usd(nanos)).collect();
                [
                    text(&c.client),
                    text(&c.share_policy),
                    Cell::Flag(c.exempt),
                    micros(direct),
                    usd(c.direct_cost_nanos),
                    usd(c.non_kubernetes_direct_nanos),
                ]
                .into_iter()
                .chain(shares)
                .chain([
                    micros(shared),
                    Cell::Ratio(Some(c.markup_basis_points as f64 / 10_000.0)),
                    micros(markup),
                    micros(direct + shared + discount + markup),
                    usd(c.gpu_split_nanos),
                    usd(c.cpu_split_nanos),
                    usd(c.memory_split_nanos),
                    usd(c.storage_nanos),
                    usd(c.network_nanos),
                    usd(c.other_direct_nanos),
                    usd(c.training_nanos),
                    usd(c.inference_nanos),
                    text(c.charge_basis.as_str()),
                    micros(discount),
                ])
                .collect::<Vec<_>>()
            })
            .collect(),
    };
    let mut table = table;
    withhold_other_clients_columns(&mut table, range);
    let mut extra = Extras::default();
    extra.usd("discounts_passed_on", discounts * 1000);
    let whole_costs: i64 =
        range.periods().filter(|(_, whole)| *whole).map(|(p, _)| p.kubernetes_cost_nanos.0).sum();
    extra.usd("kubernetes_total", whole_costs);
    extra.usd("amortized_total", bill * 1000);
    extra.insert("note", json!("clients are computed per whole billing period"));
    Report { table, extra }
}

/// The "(other clients)" line's columns that one other client alone makes up in any period of
/// the range, shown as withheld (no figure), not as that client's.
fn withhold_other_clients_columns(table: &mut Table, range: &RollupRange) {
    let withheld = range.parts.iter().fold(0, |bits, (part, _)| bits | part.withheld_client_columns);
    if withheld == 0 {
        return;
    }
    let columns: Vec<usize> = table
        .columns
        .iter()
        .enumerate()
        .filter(|(_, name)| ClientColumn::of_column(name).is_some_and(|c| withheld & c.bit() != 0))
        .map(|(i, _)| i)
        .collect();
    for row in &mut table.rows {
        if matches!(row.first(), Some(Cell::Text(client)) if client == OTHER_CLIENTS) {
            for &i in &columns {
                row[i] = Cell::Usd(None);
            }
        }
    }
}

/// Each client's charge as it stood before the compute that last changed the period
/// (`snapshot`) and as it stands now, with the difference: what a credit or debit note would
/// carry. Clients present on one side only count as zero on the other.
pub fn restatement(current: &[ClientRollup], snapshot: &ChargebackSnapshot) -> Report {
    let index = |rows: &[ClientRollup]| -> BTreeMap<String, ClientRollup> {
        rows.iter().map(|c| (c.client.clone(), c.clone())).collect()
    };
    let (before, after) = (index(&snapshot.clients), index(current));
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let zero = ClientRollup::default();
    let rows = names
        .into_iter()
        .map(|name| {
            let (b, a) = (before.get(name).unwrap_or(&zero), after.get(name).unwrap_or(&zero));
            vec![
                text(name),
                usd(b.direct_total_nanos()),
                usd(a.direct_total_nanos()),
                usd(b.shared_total_nanos()),
                usd(a.shared_total_nanos()),
                usd(b.markup_nanos),
                usd(a.markup_nanos),
                usd(b.total_nanos()),
                usd(a.total_nanos()),
                usd(a.total_nanos() - b.total_nanos()),
            ]
        })
        .collect();
    let table = Table {
        title: format!("{}: chargeback before and after the last change", snapshot.period),
        totals: Vec::new(),
        columns: vec![
            "client",
            "direct_cost_before",
            "direct_cost_after",
            "shared_cost_before",
            "shared_cost_after",
            "markup_before",
            "markup_after",
            "total_cost_before",
            "total_cost_after",
            "difference",
        ],
        rows,
    };
    let mut extra = Extras::default();
    let replaced_at = chrono::DateTime::from_timestamp(snapshot.replaced_at, 0).map(|t| t.to_rfc3339());
    extra.insert("replaced_at", json!(replaced_at));
    extra.insert("replaced_revision", json!(snapshot.revision));
    Report { table, extra }
}

/// GPU-hours per namespace and GPU model, with the fleet's provisioned and unallocated hours.
pub fn gpu(range: &RollupRange, unattributed: &BTreeMap<String, f64>) -> Report {
    #[derive(Default)]
    struct G {
        provisioned: f64,
        allocated: f64,
        used: f64,
        idle: f64,
        unmeasured: f64,
        unattributed: f64,
        /// Nano-dollars: the pods' split + unused on GPU instances (the `(all)` row: every
        /// instance-hour of the model, in `fleet_micros`), their split alone, their
        /// accelerator rows, and the full and accelerator cost of idle GPU pod-hours.
        pods_cost: i64,
        pods_split: i64,
        accelerator: i64,
        idle_cost: i64,
        idle_accelerator: i64,
        fleet_micros: i64,
    }
    let mut rows: BTreeMap<(String, String), G> = BTreeMap::new();
    for (model, hours) in unattributed {
        rows.entry(("(unattributed)".to_string(), model.clone())).or_default().unattributed += hours;
    }
    // Every pod on a GPU instance (DaemonSets and CPU pods beside the GPUs included).
    for c in range.costs().filter(|c| c.gpu_hours_allocated > 0.0 || !c.gpu_model.is_empty()) {
        for namespace in [c.namespace.as_str(), "(all)"] {
            let g = rows.entry((namespace.to_string(), c.gpu_model.clone())).or_default();
            g.allocated += c.gpu_hours_allocated;
            g.used += c.gpu_hours_used;
            g.idle += c.gpu_hours_idle;
            g.unmeasured += c.gpu_hours_unmeasured;
            g.pods_cost += c.split_cost_nanos + c.unused_cost_nanos;
            g.pods_split += c.split_cost_nanos;
            g.accelerator += c.gpu_cost_nanos;
            g.idle_cost += c.idle_cost_nanos;
            g.idle_accelerator += c.idle_gpu_cost_nanos;
        }
    }
    for c in range.capacity().filter(|c| c.is_gpu()) {
        let g = rows.entry(("(all)".to_string(), c.gpu_model.clone())).or_default();
        g.provisioned += c.gpu_hours_provisioned;
        g.fleet_micros += c.amortized_cost_micros;
    }
    let table = Table {
        title: "GPU-hours by namespace and GPU model".into(),
        totals: Vec::new(),
        columns: vec![
            "namespace",
            "gpu_model",
            "provisioned_gpu_hours",
            "allocated_gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "unallocated_gpu_hours",
            "unmeasured_gpu_hours",
            "unattributed_gpu_hours",
            "utilization",
            "utilization_of_provisioned",
            "gpu_fleet_cost",
            "accelerator_cost",
            "idle_cost",
            "idle_accelerator_cost",
            "unallocated_gpu_cost",
            "flags",
        ],
        rows: rows
            .iter()
            .map(|((namespace, model), g)| {
                let utilization = ratio(g.used, g.allocated - g.unmeasured);
                let measured = utilization.is_some();
                let all = namespace == "(all)";
                // The model's fleet is every instance-hour of it; a namespace's share of the
                // fleet is its pods' cost there. What no pod requested: fleet − pods' split.
                let fleet = if all { g.fleet_micros * 1000 } else { g.pods_cost };
                let unallocated = if all { fleet - g.pods_split } else { 0 };
                let mut flags = Vec::new();
                if utilization.is_some_and(|u| u < 0.40) {
                    flags.push("utilization below 40 %");
                }
                if ratio(g.idle, g.allocated).is_some_and(|i| i > 0.20) {
                    flags.push("idle above 20 %");
                }
                vec![
                    text(namespace),
                    text(model),
                    Cell::Hours(g.provisioned),
                    Cell::Hours(g.allocated),
                    Cell::Hours(g.used),
                    Cell::Hours(g.idle),
                    Cell::Hours(if namespace == "(all)" {
                        (g.provisioned - g.allocated).max(0.0)
                    } else {
                        0.0
                    }),
                    Cell::Hours(g.unmeasured),
                    Cell::Hours(g.unattributed),
                    Cell::Ratio(utilization),
                    // Nothing measured (no utilization series): its use and idle are unknown.
                    Cell::Ratio(if all && measured { ratio(g.used, g.provisioned) } else { None }),
                    usd(fleet),
                    usd(g.accelerator),
                    Cell::Usd(measured.then_some(Nanos(g.idle_cost))),
                    Cell::Usd(measured.then_some(Nanos(g.idle_accelerator))),
                    usd(unallocated),
                    Cell::Text(flags.join("; ")),
                ]
            })
            .collect(),
    };
    let mut extra = Extras::default();
    extra.insert(
        "unattributed_gpu_hours",
        json!(crate::report::table::round6(unattributed.values().sum::<f64>())),
    );
    // Measured on pods the bill gave no accelerator rows (the same name as the live report's).
    let unbilled: f64 = range.periods().map(|(p, _)| p.measured_unbilled_gpu_hours).sum();
    extra.insert("metrics_without_bill_gpu_hours", json!(crate::report::table::round6(unbilled)));
    extra.insert("idle_threshold", json!(range.periods().next().map_or(0.1, |(p, _)| p.idle_threshold)));
    Report { table, extra }
}

/// Spot adoption of GPU-hours per namespace and workload class.
pub fn spot(range: &RollupRange) -> Report {
    let mut rows: BTreeMap<(&str, &WorkloadClass), (f64, f64)> = BTreeMap::new();
    for c in range.costs().filter(|c| c.gpu_hours_allocated > 0.0) {
        for namespace in [c.namespace.as_str(), "(all)"] {
            let r = rows.entry((namespace, &c.workload_class)).or_default();
            r.0 += c.gpu_hours_allocated;
            r.1 += c.spot_gpu_hours;
        }
    }
    let table = Table {
        title: "Spot adoption (GPU-hours)".into(),
        totals: Vec::new(),
        columns: vec!["namespace", "workload_class", "gpu_hours", "spot_gpu_hours", "spot_adoption", "flags"],
        rows: rows
            .iter()
            .map(|((namespace, class), (hours, spot))| {
                let adoption = ratio(*spot, *hours);
                let flag = **class == WorkloadClass::Training && adoption.is_some_and(|a| a < 0.30);
                vec![
                    text(namespace),
                    text(class.as_str()),
                    Cell::Hours(*hours),
                    Cell::Hours(*spot),
                    Cell::Ratio(adoption),
                    Cell::Text(if flag { "training Spot adoption below 30 %".into() } else { String::new() }),
                ]
            })
            .collect(),
    };
    Report::of(table)
}

/// Realized savings per month: public on-demand cost − actual, by purchase option.
pub fn savings(range: &RollupRange) -> Report {
    // Per month: public on-demand, actual, Spot savings, Savings Plan savings, RI savings,
    // other savings, unused Savings Plan commitment, unused reservations.
    let mut months: BTreeMap<&str, [i64; 8]> = BTreeMap::new();
    for c in range.costs() {
        let m = months.entry(&c.period).or_default();
        let actual = c.split_cost_nanos + c.unused_cost_nanos;
        let saved = c.public_on_demand_cost_nanos - actual;
        m[0] += c.public_on_demand_cost_nanos;
        m[1] += actual;
        match c.purchase_option {
            PurchaseOption::Spot => m[2] += saved,
            PurchaseOption::SavingsPlans => m[3] += saved,
            PurchaseOption::Reserved => m[4] += saved,
            PurchaseOption::OnDemand | PurchaseOption::Unknown => m[5] += saved,
        }
    }
    // Commitment is bought by the month: a whole month's unused part is subtracted.
    for (p, whole) in range.periods() {
        if let (true, Some(m)) = (whole, months.get_mut(p.period.as_str())) {
            m[6] = p.unused_savings_plan_micros.nanos().0;
            m[7] = p.unused_reservation_micros.nanos().0;
        }
    }
    let cells = |label: &str, m: &[i64; 8]| {
        let unused = m[6] + m[7];
        vec![
            text(label),
            usd(m[0]),
            usd(m[1]),
            usd(m[0] - m[1] - unused),
            usd(m[2]),
            usd(m[3] + m[4] - unused),
            usd(m[5]),
            usd(m[3] - m[6]),
            usd(m[4] - m[7]),
            usd(unused),
        ]
    };
    let total = months.values().fold([0i64; 8], |mut t, m| {
        for (sum, value) in t.iter_mut().zip(m) {
            *sum += value;
        }
        t
    });
    let table = Table {
        title: "Realized savings (public on-demand − actual, Kubernetes cost, unused commitment subtracted)"
            .into(),
        totals: vec![cells("total", &total)],
        columns: vec![
            "month",
            "public_on_demand_cost",
            "actual_cost",
            "realized_savings",
            "spot_savings",
            "commitment_savings",
            "other_savings",
            "savings_plan_savings",
            "reserved_savings",
            "unused_commitment",
        ],
        rows: months.iter().map(|(month, m)| cells(month, m)).collect(),
    };
    // The opportunities still open, as rows, beside the realized savings.
    let open = opportunities(range);
    let mut extra = Extras::default();
    extra.insert("opportunities", super::table::Extra::Rows(open.table.clone()));
    for field in ["total_monthly_savings", "monthly_spend", "months"] {
        if let Some(value) = open.extra.get(field) {
            extra.insert(field, value.clone());
        }
    }
    Report { table, extra }
}

/// (kind, namespace, family, GPU model, purchase option).
type FamilyKey = (String, String, String, String, PurchaseOption);

/// Opportunities per workload family, ranked by dollars per month: over a range of several
/// whole months, each family's month averaged (its total over the range / the months). Each
/// family's opportunities are a waterfall (`engine::opportunities`), so their total never
/// exceeds the range's monthly Kubernetes spend.
pub fn opportunities(range: &RollupRange) -> Report {
    let months = range.periods().filter(|(_, whole)| *whole).count().max(1) as i64;
    // The providers each workload family's pods ran on (by their accounts).
    let ids = range.providers();
    let mut ran_on: BTreeMap<(&str, &str), std::collections::BTreeSet<&str>> = BTreeMap::new();
    for c in range.costs() {
        ran_on
            .entry((c.namespace.as_str(), crate::engine::classify::family(&c.workload)))
            .or_default()
            .insert(RollupRange::provider_of(&ids, &c.account));
    }
    let mut sums: BTreeMap<FamilyKey, (i64, String, std::collections::BTreeSet<&str>)> = BTreeMap::new();
    for o in range.opportunities() {
        let family = if o.family.is_empty() { o.workload.clone() } else { o.family.clone() };
        let key = (o.kind.clone(), o.namespace.clone(), family, o.gpu_model.clone(), o.purchase_option);
        let entry = sums.entry(key).or_default();
        entry.0 += o.monthly_nanos;
        // The latest month's evidence.
        entry.1 = o.evidence.clone();
        let family_of = crate::engine::classify::family(&o.workload);
        if let Some(providers) = ran_on.get(&(o.namespace.as_str(), family_of)) {
            entry.2.extend(providers);
        }
    }
    let mut list: Vec<(&FamilyKey, i64, &String, String)> = sums
        .iter()
        .map(|(key, (total, evidence, providers))| {
            (key, total / months, evidence, providers.iter().copied().collect::<Vec<_>>().join(", "))
        })
        .collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let table = Table {
        title: "Opportunities (USD per month)".into(),
        totals: Vec::new(),
        columns: vec![
            "kind",
            "namespace",
            "family",
            "workload",
            "gpu_model",
            "purchase_option",
            "monthly_savings",
            "evidence",
            "provider",
        ],
        rows: list
            .iter()
            .map(|((kind, namespace, family, model, purchase), monthly, evidence, providers)| {
                vec![
                    text(kind),
                    text(namespace),
                    text(family),
                    text(family),
                    text(model),
                    text(purchase.as_str()),
                    usd(*monthly),
                    text(evidence),
                    text(providers),
                ]
            })
            .collect(),
    };
    let total: i64 = list.iter().map(|(_, monthly, _, _)| monthly).sum();
    let mut extra = Extras::default();
    extra.usd("total_monthly_savings", total);
    extra.usd("monthly_spend", range.kubernetes_nanos() / months);
    extra.insert("months", json!(months));
    Report { table, extra }
}

/// A month whose data stops before its end (AWS delivers the current month as it goes): the
/// days with data and the days of the month; `None` for a whole month.
pub fn month_progress(rollups: &Rollups) -> Option<(i64, i64)> {
    let period: Period = rollups.period.period.parse().ok()?;
    let last_day = rollups.costs.iter().map(|c| c.day).max()?;
    let days = (last_day - period.start()) / 86_400 + 1;
    let of = i64::from(period.days());
    (days < of).then_some((days, of))
}

/// Kubernetes cost (split + unused) of a period's first `days` days, nano-dollars.
pub fn cost_through(rollups: &Rollups, days: i64) -> i64 {
    let Ok(period) = rollups.period.period.parse::<Period>() else { return 0 };
    let end = period.start() + days * 86_400;
    rollups.costs.iter().filter(|c| c.day < end).map(|c| c.split_cost_nanos + c.unused_cost_nanos).sum()
}

/// The headline figures of one computed period, as the Overview shows them against their
/// targets: each computed once, here, from the period's rollups.
#[derive(Debug, Default, Clone, Copy)]
pub struct Headline {
    pub bill_amortized_micros: i64,
    /// GPU fleet cost: every instance-hour of GPU instances, pods or not, of every provider
    /// (the capacity rollups', as `providers`' `gpu_fleet_cost` sums them).
    pub gpu_fleet_nanos: i64,
    /// Of the fleet cost, what no pod requested (fleet − the pods' split cost there).
    pub unallocated_gpu_nanos: i64,
    /// The accelerator rows' cost (split + unused): AWS's accelerator share.
    pub gpu_cost_nanos: i64,
    /// The accelerator rows of idle GPU pod-hours.
    pub idle_gpu_cost_nanos: i64,
    /// The full cost of idle GPU pod-hours (every resource the pods reserved).
    pub idle_cost_nanos: i64,
    pub gpu_hours_allocated: f64,
    pub gpu_hours_used: f64,
    pub gpu_hours_idle: f64,
    pub gpu_hours_unmeasured: f64,
    pub training_gpu_hours: f64,
    pub training_spot_gpu_hours: f64,
    pub public_on_demand_nanos: i64,
    /// Split + unused: what the period actually cost in Kubernetes.
    pub actual_nanos: i64,
    /// Commitment paid for and not used.
    pub unused_commitment_nanos: i64,
}

impl Headline {
    pub fn of(rollups: &Rollups) -> Headline {
        let p = &rollups.period;
        let mut h = Headline {
            bill_amortized_micros: p.bill_amortized_micros.0,
            unused_commitment_nanos: (p.unused_savings_plan_micros + p.unused_reservation_micros).nanos().0,
            ..Headline::default()
        };
        h.gpu_fleet_nanos =
            rollups.capacity.iter().filter(|c| c.is_gpu()).map(|c| c.amortized_cost_micros).sum::<i64>()
                * 1000;
        h.unallocated_gpu_nanos = h.gpu_fleet_nanos;
        for c in &rollups.costs {
            if !c.gpu_model.is_empty() {
                h.unallocated_gpu_nanos -= c.split_cost_nanos;
            }
            h.gpu_cost_nanos += c.gpu_cost_nanos;
            h.idle_gpu_cost_nanos += c.idle_gpu_cost_nanos;
            h.idle_cost_nanos += c.idle_cost_nanos;
            h.gpu_hours_allocated += c.gpu_hours_allocated;
            h.gpu_hours_used += c.gpu_hours_used;
            h.gpu_hours_idle += c.gpu_hours_idle;
            h.gpu_hours_unmeasured += c.gpu_hours_unmeasured;
            if c.workload_class == WorkloadClass::Training {
                h.training_gpu_hours += c.gpu_hours_allocated;
                h.training_spot_gpu_hours += c.spot_gpu_hours;
            }
            h.public_on_demand_nanos += c.public_on_demand_cost_nanos;
            h.actual_nanos += c.split_cost_nanos + c.unused_cost_nanos;
        }
        h
    }

    /// The headline of several periods together: money and hours summed, ratios of the sums.
    pub fn sum<'a>(heads: impl IntoIterator<Item = &'a Headline>) -> Headline {
        let mut s = Headline::default();
        for h in heads {
            s.bill_amortized_micros += h.bill_amortized_micros;
            s.gpu_fleet_nanos += h.gpu_fleet_nanos;
            s.unallocated_gpu_nanos += h.unallocated_gpu_nanos;
            s.gpu_cost_nanos += h.gpu_cost_nanos;
            s.idle_gpu_cost_nanos += h.idle_gpu_cost_nanos;
            s.idle_cost_nanos += h.idle_cost_nanos;
            s.gpu_hours_allocated += h.gpu_hours_allocated;
            s.gpu_hours_used += h.gpu_hours_used;
            s.gpu_hours_idle += h.gpu_hours_idle;
            s.gpu_hours_unmeasured += h.gpu_hours_unmeasured;
            s.training_gpu_hours += h.training_gpu_hours;
            s.training_spot_gpu_hours += h.training_spot_gpu_hours;
            s.public_on_demand_nanos += h.public_on_demand_nanos;
            s.actual_nanos += h.actual_nanos;
            s.unused_commitment_nanos += h.unused_commitment_nanos;
        }
        s
    }

    /// Used over measured allocated GPU-hours (allocated hours without metrics are left out,
    /// as in `report gpu`); undefined when nothing was measured.
    pub fn utilization(&self) -> Option<f64> {
        self.measured().then(|| self.gpu_hours_used / (self.gpu_hours_allocated - self.gpu_hours_unmeasured))
    }

    /// Allocated GPU-hours without metrics, over allocated.
    pub fn unmeasured_share(&self) -> Option<f64> {
        (self.gpu_hours_allocated > 0.0).then(|| self.gpu_hours_unmeasured / self.gpu_hours_allocated)
    }

    /// Idle over allocated GPU-hours; undefined when nothing was measured.
    pub fn idle_share(&self) -> Option<f64> {
        self.measured().then(|| self.gpu_hours_idle / self.gpu_hours_allocated)
    }

    /// Whether any allocated GPU-hour was measured: idle cost is known only then (a month
    /// without utilization series has none, not $0.00).
    pub fn measured(&self) -> bool {
        self.gpu_hours_allocated - self.gpu_hours_unmeasured > 1e-9
    }

    /// The idle cost and its accelerator part, when measured.
    pub fn idle_costs(&self) -> Option<(i64, i64)> {
        self.measured().then_some((self.idle_cost_nanos, self.idle_gpu_cost_nanos))
    }

    /// Spot over all GPU-hours of training workloads.
    pub fn spot_adoption(&self) -> Option<f64> {
        (self.training_gpu_hours > 0.0).then(|| self.training_spot_gpu_hours / self.training_gpu_hours)
    }

    /// Public on-demand − actual − unused commitment.
    pub fn realized_savings_nanos(&self) -> i64 {
        self.public_on_demand_nanos - self.actual_nanos - self.unused_commitment_nanos
    }
}

/// A workload's serving month: cost (nano-USD), requests, tokens, serving hours, hours above P95.
#[derive(Default)]
struct Served {
    cost: i64,
    requests: f64,
    tokens: f64,
    hours: i64,
    above_p95: i64,
}

/// Cost per inference and per 1M tokens by serving workload over the range: the cost of the
/// pod-hours that served (GPU, CPU, memory; split + unused) over the successful requests of
/// those hours, with the serving hours and those above the fleet's P95 of hourly cost per
/// inference. Requests are the pods' own: matched by cluster, namespace and pod.
pub fn inference(range: &RollupRange) -> Report {
    let mut sums: BTreeMap<(String, String), Served> = BTreeMap::new();
    for c in range.costs() {
        let s = sums.entry((c.namespace.clone(), c.workload.clone())).or_default();
        s.cost += c.serving_cost_nanos;
        s.requests += c.requests;
        s.tokens += c.prompt_tokens + c.generation_tokens;
        s.hours += c.inference_hours;
        s.above_p95 += c.inference_hours_above_p95;
    }
    let table = Table {
        title: "Inference".into(),
        totals: Vec::new(),
        columns: vec![
            "namespace",
            "workload",
            "requests",
            "tokens",
            "cost",
            "cost_per_inference",
            "cost_per_million_tokens",
            "serving_hours",
            "hours_above_p95",
        ],
        rows: sums
            .iter()
            .filter(|(_, s)| s.requests > 0.0)
            .map(|((ns, w), s)| {
                let cost = s.cost as f64 / 1e9;
                vec![
                    Cell::Text(ns.clone()),
                    Cell::Text(w.clone()),
                    Cell::Count(s.requests),
                    Cell::Count(s.tokens),
                    Cell::Usd(Some(Nanos(s.cost))),
                    Cell::Rate(Some(cost / s.requests)),
                    Cell::Usd((s.tokens > 0.0).then(|| Nanos::from_usd(cost / (s.tokens / 1e6)))),
                    Cell::Count(s.hours as f64),
                    Cell::Count(s.above_p95 as f64),
                ]
            })
            .collect(),
    };
    Report::of(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_whose_data_stops_early_is_in_progress() {
        // November 2026 (30 days) with cost on days 1–22: in progress, 22 of 30; $1 a day.
        let start: i64 = "2026-11".parse::<Period>().unwrap().start();
        let day = |n: i64| CostRollup {
            day: start + (n - 1) * 86_400,
            split_cost_nanos: 1_000_000_000,
            ..CostRollup::default()
        };
        let mut r = Rollups {
            period: PeriodRollup { period: "2026-11".into(), ..PeriodRollup::default() },
            ..Rollups::default()
        };
        r.costs = (1..=22).map(day).collect();
        assert_eq!(month_progress(&r), Some((22, 30)));
        assert_eq!(cost_through(&r, 10), 10_000_000_000);
        r.costs.extend((23..=30).map(day));
        assert_eq!(month_progress(&r), None, "a whole month");
    }
}
