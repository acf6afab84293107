//! The month's other bills in the ledger: each FOCUS bill of another provider (or another
//! AWS payer) converted to the reporting currency and folded into a period's compute inputs,
//! so chargeback, the Overview's spend and the accounts count every cloud the agency runs.
//!
//! - The AWS FOCUS export of the CUR's own bill is the same bill and is not counted twice.
//! - Usage and purchases are the amortized bill (EffectiveCost); tax, credits and adjustments
//!   stay in `report bill`'s bridge, as the CUR's do.
//! - A bill is converted once at the rate in force for its month; its charge groups take the
//!   converted total exactly (each group rounded, the rounding's few micro-dollars on the
//!   largest), so every figure adds up to the converted bill.
//! - A charge GKE's cost allocation names a namespace of (`k8s-namespace`) is that
//!   namespace's client's, by the namespace rules; its `kube:unallocated` capacity is the
//!   cluster's unallocated pool, as EC2 not allocated to pods is. Any other charge is placed
//!   by its `client` tag, a cluster's untagged charges go to the shared pool, the rest is
//!   unassigned.
//! - A bill whose currency has no rate for the month stops the compute with the command that
//!   sets one: nothing is shown converted at a guessed rate.

use std::collections::{BTreeMap, HashMap};

use crate::domain::fx::{FxRate, REPORTING_CURRENCY, rate_for};
use crate::money::{Micros, Nanos, apportion_by_weight, micros_from_nanos};
use crate::store::{
    AccountRollup, Bill, BillCharge, CapacityRollup, ComputeInputs, GpuPodHour, OtherCostGroup, PodDay,
    PodRecord, PurchaseOption,
};

/// Whether a FOCUS charge of `category` is in the amortized bill, as the CUR's is: usage and
/// purchases (amortized through `EffectiveCost`), not tax, credits or adjustments (the bridge).
pub fn in_amortized_bill(category: &str) -> bool {
    matches!(category, "Usage" | "Purchase")
}

/// The tag GKE's cost allocation names a charge's namespace with.
pub const NAMESPACE_TAG: &str = "k8s-namespace";
/// GKE's name for a node's capacity no pod requested.
pub const UNALLOCATED_NAMESPACE: &str = "kube:unallocated";
/// The tag each provider's Kubernetes writes a node's cluster in.
const CLUSTER_TAGS: [&str; 4] =
    ["goog-k8s-cluster-name", "aks-managed-cluster-name", "oke-cluster-name", "eks:cluster-name"];
/// How a FOCUS charge's service category reads in an other-cost group's usage type.
pub const FOCUS_USAGE_PREFIX: &str = "FOCUS:";

/// The bills folded into one period, for its summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    /// `provider/account` of each bill counted.
    pub bills: Vec<String>,
    pub amortized_micros: i64,
    /// The clusters whose pods gpuledger's split placed on them.
    pub split_clusters: Vec<String>,
}

/// A cluster whose nodes' cost gpuledger's split divides, on one FOCUS bill
/// ([`crate::engine::cluster_split::ClusterSplit::ledger_pods`]).
#[derive(Debug, Clone, Default)]
pub struct SplitNodes {
    pub cluster: String,
    /// The bill its virtual machines are in.
    pub provider: String,
    pub billing_account: String,
    /// Each virtual machine's charge period: (instance key, its charge group less tags and
    /// day ([`BillCharge::month_key`]), effective nanos), taken out of that group's month.
    pub taken: Vec<(String, String, i64)>,
    /// Its pods (`id` their index) and their days, in nanos of the bill's currency.
    pub pods: Vec<PodRecord>,
    pub days: Vec<PodDay>,
    /// Its pod-hours that held GPUs (`pod_id` the pod's index), in nanos of the bill's currency.
    pub hours: Vec<GpuPodHour>,
    /// The CUR paid for its nodes (an EKS cluster without AWS's split): no FOCUS bill's, and
    /// nothing `taken`; [`place_cur_splits`] places its pods.
    pub from_cur: bool,
}

impl SplitNodes {
    fn taken_nanos(&self) -> i64 {
        self.taken.iter().map(|t| t.2).sum()
    }

    /// Σ split + unused of its pod-days, in nanos of the bill's currency.
    pub fn pods_nanos(&self) -> i64 {
        self.days.iter().map(|d| d.split_cost_nanos + d.unused_cost_nanos).sum()
    }
}

/// Why a period's other bills cannot be counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error(
        "the {provider} bill {account} of {period} is in {currency} and no {currency}→{reporting} rate is in force for it: run `gpuledger fx set {currency} {reporting} RATE --from {period}`"
    )]
    MissingRate {
        provider: String,
        account: String,
        period: String,
        currency: String,
        reporting: &'static str,
    },
    #[error(
        "the {provider} bill {account} of {period} has virtual machines' costs of charge group {key} and no such usage group: run `gpuledger ingest focus --force` on it again"
    )]
    Inconsistent { provider: String, account: String, period: String, key: String },
}

/// Whether a bill is one `fold_bills` counts: a FOCUS bill, but not the CUR's own bill through
/// AWS's FOCUS export (with an unknown payer, assumed to be it). `cur_billing_account` is the
/// payer of the month's CUR, `None` when the month has no CUR (every FOCUS bill counts).
pub fn counted(bill: &Bill, cur_billing_account: Option<&str>) -> bool {
    let cur_twin = bill.provider == "aws"
        && cur_billing_account.is_some_and(|payer| payer.is_empty() || bill.billing_account == payer);
    bill.format == "focus" && !cur_twin
}

/// Adds the month's FOCUS bills (but the CUR's own) to `inputs` in the reporting currency,
/// with the pods of the clusters in `splits` on them. `charges` are the bills' month groups
/// ([`crate::store::BillStore::month_charges`]); `days` their GPU machines' groups by day
/// ([`crate::store::BillStore::gpu_charges`]), which date the fleet's capacity rows: a GPU
/// group whose days are not given is one row on its first day (as `report bill`, which reads
/// the month alone, folds it).
pub fn fold_bills(
    inputs: &mut ComputeInputs,
    cur_billing_account: Option<&str>,
    bills: &[Bill],
    (charges, days): (&[BillCharge], &[BillCharge]),
    rates: &[FxRate],
    splits: &[SplitNodes],
) -> Result<Folded, FoldError> {
    let mut folded = Folded::default();
    for bill in bills.iter().filter(|b| counted(b, cur_billing_account)) {
        let rate = if bill.currency == REPORTING_CURRENCY || bill.currency.is_empty() {
            None
        } else {
            Some(rate_for(rates, &bill.currency, REPORTING_CURRENCY, &bill.period).ok_or_else(|| {
                FoldError::MissingRate {
                    provider: bill.provider.clone(),
                    account: bill.billing_account.clone(),
                    period: bill.period.clone(),
                    currency: bill.currency.clone(),
                    reporting: REPORTING_CURRENCY,
                }
            })?)
        };
        let in_reporting = |nanos: i64| micros_from_nanos(rate.map_or(nanos, |r| r.convert(nanos)));
        let counted: Vec<&BillCharge> = charges
            .iter()
            .filter(|c| c.provider == bill.provider && c.billing_account == bill.billing_account)
            .filter(|c| in_amortized_bill(&c.charge_category))
            .collect();
        // Each GPU group's days, by the group's month identity (its tags too).
        let mut days_of: HashMap<(String, &str), Vec<&BillCharge>> = HashMap::new();
        for day in
            days.iter().filter(|c| c.provider == bill.provider && c.billing_account == bill.billing_account)
        {
            days_of.entry((day.month_key(), day.tags.as_str())).or_default().push(day);
        }
        let effective_nanos: i64 = counted.iter().map(|c| c.effective_nanos).sum();
        // Each charge's own amount: the accounts' bill and GPU fleet.
        let effective = exact_shares(
            in_reporting(effective_nanos),
            counted.iter().map(|c| in_reporting(c.effective_nanos)).collect(),
        );
        let billed = exact_shares(
            in_reporting(counted.iter().map(|c| c.billed_nanos).sum()),
            counted.iter().map(|c| in_reporting(c.billed_nanos)).collect(),
        );
        // Where it is placed: the charges less the split clusters' machines, then each split
        // cluster's pods and its rest, the same total converted once.
        let mine: Vec<&SplitNodes> = splits
            .iter()
            .filter(|s| {
                !s.from_cur && s.provider == bill.provider && s.billing_account == bill.billing_account
            })
            .collect();
        let (left, sub_account_of) = take_machines_out(bill, &counted, &mine)?;
        let parts: Vec<i64> = mine
            .iter()
            .flat_map(|s| {
                let pods = s.pods_nanos();
                [pods, s.taken_nanos() - pods]
            })
            .collect();
        let placed = exact_shares(
            in_reporting(effective_nanos),
            left.iter().chain(&parts).map(|&nanos| in_reporting(nanos)).collect(),
        );
        let mut groups: BTreeMap<(String, String, String, String), OtherCostGroup> = BTreeMap::new();
        let mut accounts: BTreeMap<String, AccountRollup> = BTreeMap::new();
        let mut capacity: BTreeMap<_, CapacityRollup> = BTreeMap::new();
        for (index, charge) in counted.iter().enumerate() {
            let tags: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&charge.tags).unwrap_or_default();
            let tag = |key: &str| tags.get(key).and_then(|v| v.as_str()).unwrap_or("").to_string();
            let cluster = CLUSTER_TAGS.iter().map(|key| tag(key)).find(|v| !v.is_empty()).unwrap_or_default();
            let account = accounts.entry(charge.sub_account_id.clone()).or_insert_with(|| AccountRollup {
                period: inputs.period.clone(),
                account: charge.sub_account_id.clone(),
                name: charge.sub_account_name.clone(),
                provider: bill.provider.clone(),
                currency: bill.currency.clone(),
                ..AccountRollup::default()
            });
            account.bill_unblended_micros += Micros(billed[index]);
            account.amortized_in_currency_nanos += Nanos(charge.effective_nanos);
            // Every charge of a GPU instance counts its cost (some of a node's rows, as GKE's
            // cost allocation splits it, carry none of its GPU-hours): as `report bill`'s
            // `gpu` counts them. The fleet's rows, as the CUR's instances are.
            let gpu = !charge.gpu_model.is_empty();
            if gpu {
                let purchase_option = PurchaseOption::of_pricing_category(&charge.pricing_category);
                // A row a day, the group's converted cost and list cost shared exactly by its
                // days' own.
                let its_days = days_of
                    .get(&(charge.month_key(), charge.tags.as_str()))
                    .cloned()
                    .unwrap_or_else(|| vec![*charge]);
                let share = |total: i64, of: fn(&BillCharge) -> i64| {
                    exact_shares(total, its_days.iter().map(|d| in_reporting(of(d))).collect())
                };
                let costs = share(effective[index], |d| d.effective_nanos);
                let lists = share(in_reporting(charge.list_nanos), |d| d.list_nanos);
                for ((day, cost), list) in its_days.iter().zip(costs).zip(lists) {
                    let key = (
                        day.day,
                        cluster.clone(),
                        charge.sub_account_id.clone(),
                        charge.resource_type.clone(),
                    );
                    let row = capacity
                        .entry((key, charge.gpu_model.clone(), purchase_option))
                        .or_insert_with(|| CapacityRollup {
                            period: inputs.period.clone(),
                            day: day.day,
                            provider: bill.provider.clone(),
                            cluster: cluster.clone(),
                            account: charge.sub_account_id.clone(),
                            instance_type: charge.resource_type.clone(),
                            gpu_model: charge.gpu_model.clone(),
                            purchase_option,
                            currency: bill.currency.clone(),
                            ..CapacityRollup::default()
                        });
                    row.gpu_hours_provisioned += day.gpu_hours;
                    row.amortized_cost_micros += cost;
                    row.public_on_demand_cost_micros += list;
                    row.amortized_in_currency_nanos += day.effective_nanos;
                }
            }
            // A charge the split took whole is its pods' now.
            if left[index] == 0 && charge.effective_nanos != 0 && placed[index] == 0 {
                continue;
            }
            if tag(NAMESPACE_TAG) == UNALLOCATED_NAMESPACE {
                inputs.unallocated_ec2_micros += placed[index];
                account.instance_cost_micros += Micros(placed[index]);
                continue;
            }
            account.other_cost_micros += Micros(placed[index]);
            inputs.other_cost_micros += placed[index];
            if gpu {
                inputs.gpu_fleet_in_other_micros += placed[index];
                account.gpu_fleet_in_other_micros += Micros(placed[index]);
            }
            // Tags as the CUR names them (`user_client`), so the same rules place them.
            let user_tags: BTreeMap<String, &serde_json::Value> =
                tags.iter().map(|(k, v)| (format!("user_{k}"), v)).collect();
            let usage_type =
                format!("{FOCUS_USAGE_PREFIX}{}:{}", charge.service_category, charge.resource_type);
            let key = (
                cluster.clone(),
                serde_json::to_string(&user_tags).unwrap_or_default(),
                charge.service_name.clone(),
                usage_type.clone(),
            );
            let group = groups.entry(key).or_insert_with(|| OtherCostGroup {
                cluster,
                tags: serde_json::to_string(&user_tags).unwrap_or_default(),
                service: charge.service_name.clone(),
                usage_type,
                provider: bill.provider.clone(),
                ..OtherCostGroup::default()
            });
            group.amortized_cost_micros += placed[index];
            group.usage_amount += charge.consumed_quantity;
        }
        for (k, split) in mine.iter().enumerate() {
            let (pods_micros, rest_micros) = (placed[left.len() + 2 * k], placed[left.len() + 2 * k + 1]);
            // The rest is the account's of its first machine, a pod's the account of its own.
            let first_account = split
                .taken
                .first()
                .and_then(|t| sub_account_of.get(t.0.as_str()))
                .copied()
                .unwrap_or_default();
            let account =
                |instance: &str| sub_account_of.get(instance).copied().unwrap_or(first_account).to_string();
            inputs.unallocated_ec2_micros += rest_micros;
            inputs.kubernetes_micros += pods_micros;
            let usd = pod_days_converted(&split.days, pods_micros * 1000, |nanos| {
                rate.map_or(nanos, |r| r.convert(nanos))
            });
            // The machines are each account's instance cost: its pods' (their Kubernetes
            // cost), and the rest on the first machine's account.
            let mut pods_of: BTreeMap<String, i64> = BTreeMap::new();
            for (day, (split_nanos, unused_nanos)) in split.days.iter().zip(&usd) {
                let pod = &split.pods[day.pod_id as usize];
                *pods_of.entry(account(&pod.instance_id)).or_default() += split_nanos + unused_nanos;
            }
            let instance =
                exact_shares(pods_micros, pods_of.values().map(|&nanos| micros_from_nanos(nanos)).collect());
            for (name, micros) in pods_of.keys().zip(instance) {
                if let Some(a) = accounts.get_mut(name) {
                    a.instance_cost_micros += Micros(micros);
                }
            }
            if let Some(a) = accounts.get_mut(first_account) {
                a.instance_cost_micros += Micros(rest_micros);
            }
            let convert = |nanos: i64| rate.map_or(nanos, |r| r.convert(nanos));
            add_split_pods(inputs, split, &usd, |pod| account(&pod.instance_id), convert);
            folded.split_clusters.push(split.cluster.clone());
        }
        let bill_effective: i64 = effective.iter().sum();
        inputs.bill_amortized_micros += bill_effective;
        inputs.bill_unblended_micros += billed.iter().sum::<i64>();
        inputs.other_groups.extend(groups.into_values());
        inputs.accounts.extend(accounts.into_values());
        inputs.bill_capacity.extend(capacity.into_values());
        folded.bills.push(format!("{}/{}", bill.provider, bill.billing_account));
        folded.amortized_micros += bill_effective;
    }
    Ok(folded)
}

/// Adds a split's pods to the period's, numbered after its last, each billed to `account`;
/// their days with (split, unused) `usd` in the reporting currency and their other amounts
/// (parts by resource, net cost) in the same ratios of it; their GPU pod-hours converted by
/// `convert`, as is their public on-demand cost (not money the bill adds up to).
fn add_split_pods(
    inputs: &mut ComputeInputs,
    split: &SplitNodes,
    usd: &[(i64, i64)],
    account: impl Fn(&PodRecord) -> String,
    convert: impl Fn(i64) -> i64,
) {
    let first_id = inputs.pods.iter().map(|p| p.id).max().unwrap_or(0) + 1;
    inputs.pods.extend(split.pods.iter().enumerate().map(|(i, pod)| PodRecord {
        id: first_id + i as i64,
        usage_account_id: account(pod),
        ..pod.clone()
    }));
    inputs.gpu_pod_hours.extend(split.hours.iter().map(|hour| GpuPodHour {
        pod_id: first_id + hour.pod_id,
        gpu_cost_nanos: convert(hour.gpu_cost_nanos),
        pod_cost_nanos: convert(hour.pod_cost_nanos),
        ..hour.clone()
    }));
    // An amount's part of a day's converted cost: its ratio of the day's cost.
    let part = |of: i64, whole: i64, converted: i64| {
        if whole == 0 { 0 } else { (i128::from(of) * i128::from(converted) / i128::from(whole)) as i64 }
    };
    inputs.pod_days.extend(split.days.iter().zip(usd).map(|(day, &(split_nanos, unused_nanos))| {
        let (whole, converted) = (day.split_cost_nanos + day.unused_cost_nanos, split_nanos + unused_nanos);
        PodDay {
            pod_id: first_id + day.pod_id,
            split_cost_nanos: split_nanos,
            unused_cost_nanos: unused_nanos,
            gpu_cost_nanos: part(day.gpu_cost_nanos, whole, converted),
            gpu_split_nanos: part(day.gpu_split_nanos, day.split_cost_nanos, split_nanos),
            cpu_split_nanos: part(day.cpu_split_nanos, day.split_cost_nanos, split_nanos),
            net_cost_nanos: part(day.net_cost_nanos, whole, converted),
            public_on_demand_cost_nanos: convert(day.public_on_demand_cost_nanos),
            ..day.clone()
        }
    }));
}

/// The pods of gpuledger's split of the clusters whose nodes the CUR paid for (EKS without
/// AWS's split cost allocation data): their cost comes out of the EC2 cost no pod was given,
/// rounded to the micro-dollar once per cluster and shared among their days exactly; each pod
/// billed to its instance's account. Returns the clusters placed.
pub fn place_cur_splits(inputs: &mut ComputeInputs, splits: &[SplitNodes]) -> Vec<String> {
    let mut placed = Vec::new();
    for split in splits.iter().filter(|s| s.from_cur) {
        let micros = micros_from_nanos(split.pods_nanos());
        inputs.unallocated_ec2_micros -= micros;
        inputs.kubernetes_micros += micros;
        let usd = pod_days_converted(&split.days, micros * 1000, |nanos| nanos);
        add_split_pods(inputs, split, &usd, |pod| pod.usage_account_id.clone(), |nanos| nanos);
        placed.push(split.cluster.clone());
    }
    placed
}

/// Each charge's effective nanos once the split clusters' machines are taken out of the
/// groups their rows were summed into (from several groups differing in their tags alone, in
/// proportion to what each has left), and each machine's sub-account.
fn take_machines_out<'a>(
    bill: &Bill,
    counted: &[&'a BillCharge],
    splits: &'a [&SplitNodes],
) -> Result<(Vec<i64>, HashMap<&'a str, &'a str>), FoldError> {
    let mut left: Vec<i64> = counted.iter().map(|c| c.effective_nanos).collect();
    let mut sub_account_of = HashMap::new();
    if splits.is_empty() {
        return Ok((left, sub_account_of));
    }
    let mut sets: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, charge) in counted.iter().enumerate() {
        sets.entry(charge.month_key()).or_default().push(i);
    }
    for split in splits {
        for (instance, key, nanos) in &split.taken {
            let Some(set) = sets.get(key) else {
                return Err(FoldError::Inconsistent {
                    provider: bill.provider.clone(),
                    account: bill.billing_account.clone(),
                    period: bill.period.clone(),
                    key: key.clone(),
                });
            };
            sub_account_of.entry(instance.as_str()).or_insert(counted[set[0]].sub_account_id.as_str());
            let weights: Vec<i128> = set.iter().map(|&i| i128::from(left[i].max(0))).collect();
            let parts = apportion_by_weight(*nanos, &weights).unwrap_or_else(|| {
                std::iter::once(*nanos).chain(std::iter::repeat(0)).take(set.len()).collect()
            });
            for (&i, part) in set.iter().zip(parts) {
                left[i] -= part;
            }
        }
    }
    Ok((left, sub_account_of))
}

/// The pod-days' (split, unused) in the reporting currency, adding up to `total` nanos
/// exactly: apportioned by their amounts in the bill's currency (each converted by `convert`
/// and the rounding put on the largest where they cannot weigh, as for credits).
fn pod_days_converted(days: &[PodDay], total: i64, convert: impl Fn(i64) -> i64) -> Vec<(i64, i64)> {
    let amounts: Vec<i64> = days.iter().flat_map(|d| [d.split_cost_nanos, d.unused_cost_nanos]).collect();
    let weights: Vec<i128> = amounts.iter().map(|&n| i128::from(n)).collect();
    let parts = apportion_by_weight(total, &weights)
        .unwrap_or_else(|| exact_shares(total, amounts.iter().map(|&n| convert(n)).collect()));
    parts.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// The pods' labels GKE's cost allocation writes on a charge (`k8s-label/KEY`), as the CUR
/// names a pod's (`user_KEY`), from a group's `user_`-prefixed tags: so the label rules, and
/// the `user_client` label where the labels are trusted, place it as they place a pod.
pub fn pod_labels(user_tags: &str) -> String {
    let tags: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(user_tags).unwrap_or_default();
    let labels: serde_json::Map<String, serde_json::Value> = tags
        .into_iter()
        .filter_map(|(key, value)| Some((format!("user_{}", key.strip_prefix("user_k8s-label/")?), value)))
        .collect();
    serde_json::Value::Object(labels).to_string()
}

/// `parts` adjusted to add up to `total` exactly: the difference rounding made goes to the
/// largest part (by magnitude).
fn exact_shares(total: i64, mut parts: Vec<i64>) -> Vec<i64> {
    let difference = total - parts.iter().sum::<i64>();
    if let Some(largest) = (0..parts.len()).max_by_key(|i| parts[*i].unsigned_abs()) {
        parts[largest] += difference;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bill(provider: &str, account: &str, currency: &str) -> Bill {
        Bill {
            period: "2026-10".into(),
            provider: provider.into(),
            billing_account: account.into(),
            format: "focus".into(),
            currency: currency.into(),
            ..Bill::default()
        }
    }

    fn charge(provider: &str, account: &str, category: &str, effective: i64, tags: &str) -> BillCharge {
        BillCharge {
            provider: provider.into(),
            billing_account: account.into(),
            sub_account_id: "sub".into(),
            charge_category: category.into(),
            service_name: "Virtual Machines".into(),
            service_category: "Compute".into(),
            tags: tags.into(),
            billed_nanos: effective,
            effective_nanos: effective,
            ..BillCharge::default()
        }
    }

    #[test]
    fn a_bill_in_euros_is_counted_once_at_its_rate_and_adds_up() {
        let mut inputs = ComputeInputs { period: "2026-10".into(), ..ComputeInputs::default() };
        let bills = [bill("azure", "ea", "EUR"), bill("aws", "111111111111", "USD")];
        // Three thirds of €1: converted at 1.0842 the bill is $1.084200, and the thirds
        // ($0.361400 each after rounding) still add up to it.
        let third = 333_333_333;
        let charges = [
            charge(
                "azure",
                "ea",
                "Usage",
                third,
                r#"{"client":"initech","aks-managed-cluster-name":"aks-weu"}"#,
            ),
            charge("azure", "ea", "Usage", third, r#"{"aks-managed-cluster-name":"aks-weu"}"#),
            charge("azure", "ea", "Usage", third + 1, r#"{"aks-managed-cluster-name":"aks-weu"}"#),
            charge("azure", "ea", "Tax", 500_000_000, "{}"),
            charge("aws", "111111111111", "Usage", 7_000_000_000, "{}"),
        ];
        let missing =
            fold_bills(&mut inputs.clone(), Some("111111111111"), &bills, (&charges, &[]), &[], &[]);
        assert!(matches!(missing, Err(FoldError::MissingRate { ref currency, .. }) if currency == "EUR"));
        let rates = [FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test").unwrap()];
        let folded =
            fold_bills(&mut inputs, Some("111111111111"), &bills, (&charges, &[]), &rates, &[]).unwrap();
        // The AWS FOCUS bill is the CUR's own: not counted. Tax is not the amortized bill.
        assert_eq!(folded.bills, vec!["azure/ea".to_string()]);
        assert_eq!(inputs.bill_amortized_micros, 1_084_200);
        assert_eq!(inputs.other_cost_micros, 1_084_200);
        let groups: i64 = inputs.other_groups.iter().map(|g| g.amortized_cost_micros).sum();
        assert_eq!(groups, 1_084_200);
        assert_eq!(inputs.other_groups.len(), 2);
        let tagged = inputs.other_groups.iter().find(|g| g.tags.contains("user_client")).unwrap();
        assert_eq!((tagged.cluster.as_str(), tagged.amortized_cost_micros), ("aks-weu", 361_400));
        assert_eq!(inputs.accounts.len(), 1);
        assert_eq!(inputs.accounts[0].provider, "azure");
        assert_eq!(inputs.accounts[0].amortized_micros(), Micros(1_084_200));
    }

    #[test]
    fn a_gpu_machine_is_the_fleets_capacity_wherever_its_cost_is_placed() {
        let mut inputs = ComputeInputs { period: "2026-10".into(), ..ComputeInputs::default() };
        // A Spot GPU VM outside any cluster (€10, 8 GPU-hours, €20 at list) and a CPU VM (€2).
        let gpu = BillCharge {
            gpu_model: "A100-80GB".into(),
            gpu_hours: 8.0,
            pricing_category: "Dynamic".into(),
            resource_type: "Standard_ND96amsr_A100_v4".into(),
            list_nanos: 20_000_000_000,
            ..charge("azure", "ea", "Usage", 10_000_000_000, "{}")
        };
        let cpu = charge("azure", "ea", "Usage", 2_000_000_000, "{}");
        let rates = [FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test").unwrap()];
        fold_bills(&mut inputs, None, &[bill("azure", "ea", "EUR")], (&[gpu, cpu], &[]), &rates, &[])
            .unwrap();
        // One capacity row, Azure's, at €10 × 1.0842 = $10.842000 and €20 at list $21.684000.
        let rows: Vec<(&str, &str, &str, PurchaseOption, f64, i64, i64)> = inputs
            .bill_capacity
            .iter()
            .map(|c| {
                (
                    c.provider.as_str(),
                    c.account.as_str(),
                    c.gpu_model.as_str(),
                    c.purchase_option,
                    c.gpu_hours_provisioned,
                    c.amortized_cost_micros,
                    c.public_on_demand_cost_micros,
                )
            })
            .collect();
        assert_eq!(rows, [("azure", "sub", "A100-80GB", PurchaseOption::Spot, 8.0, 10_842_000, 21_684_000)]);
        // No cluster took it: the fleet's part in other cost, of the bill's $13.010400.
        assert_eq!(inputs.gpu_fleet_in_other_micros, 10_842_000);
        assert_eq!(inputs.other_cost_micros, 13_010_400);
    }

    #[test]
    fn a_gpu_machines_capacity_is_a_row_a_day_its_month_shared_exactly() {
        let mut inputs = ComputeInputs { period: "2026-10".into(), ..ComputeInputs::default() };
        // One GPU group over three days, €10 in all (8 GPU-hours, €20 at list), as the month's
        // sum says it and as each day does.
        let day = |day: i64, nanos: i64, hours: f64, list: i64| BillCharge {
            day,
            gpu_model: "A100-80GB".into(),
            gpu_hours: hours,
            resource_type: "Standard_ND96amsr_A100_v4".into(),
            list_nanos: list,
            ..charge("azure", "ea", "Usage", nanos, "{}")
        };
        let (d1, d2, d3) = (1_790_812_800, 1_790_899_200, 1_790_985_600);
        let days = [
            day(d1, 3_333_333_333, 2.0, 6_000_000_000),
            day(d2, 3_333_333_333, 3.0, 7_000_000_000),
            day(d3, 3_333_333_334, 3.0, 7_000_000_000),
        ];
        let month = day(d1, 10_000_000_000, 8.0, 20_000_000_000);
        let rates = [FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test").unwrap()];
        let bills = [bill("azure", "ea", "EUR")];
        fold_bills(&mut inputs, None, &bills, (&[month], &days), &rates, &[]).unwrap();
        // €3.333333333 × 1.0842 = $3.614000 a day; at list €6 → $6.505200, €7 → $7.589400.
        let rows: Vec<(i64, f64, i64, i64)> = inputs
            .bill_capacity
            .iter()
            .map(|c| {
                (c.day, c.gpu_hours_provisioned, c.amortized_cost_micros, c.public_on_demand_cost_micros)
            })
            .collect();
        assert_eq!(
            rows,
            [
                (d1, 2.0, 3_614_000, 6_505_200),
                (d2, 3.0, 3_614_000, 7_589_400),
                (d3, 3.0, 3_614_000, 7_589_400)
            ]
        );
        // The month as before: $10.842000, 8 GPU-hours, $21.684000 at list.
        assert_eq!(inputs.gpu_fleet_in_other_micros, 10_842_000);
        // And in the bill's euros, unconverted: €10 in all.
        let euros: Vec<(&str, i64)> = inputs.bill_capacity.iter().map(|c| c.in_bill_currency()).collect();
        assert_eq!(euros, [("EUR", 3_333_333_333), ("EUR", 3_333_333_333), ("EUR", 3_333_333_334)]);
    }

    #[test]
    fn a_split_clusters_machines_are_its_pods_and_its_rest_the_unallocated_pool() {
        let mut inputs = ComputeInputs { period: "2026-10".into(), ..ComputeInputs::default() };
        let cluster = r#"{"aks-managed-cluster-name":"aks-weu"}"#;
        let machines = charge("azure", "ea", "Usage", 10_000_000_000, cluster);
        let disks = BillCharge {
            service_category: "Storage".into(),
            ..charge("azure", "ea", "Usage", 2_000_000_000, cluster)
        };
        // Two machines, €6 and €4, the whole €10 group; their pods got €8 (two days of one
        // pod, €5 + €1 unused, and €2 of another), the €2 rest no pod was given.
        let day = |pod_id: i64, split: i64, unused: i64| PodDay {
            pod_id,
            day: 1_790_812_800,
            split_cost_nanos: split,
            unused_cost_nanos: unused,
            net_cost_nanos: split + unused,
            public_on_demand_cost_nanos: 2 * (split + unused),
            ..PodDay::default()
        };
        let split = SplitNodes {
            cluster: "aks-weu".into(),
            provider: "azure".into(),
            billing_account: "ea".into(),
            taken: vec![
                ("vm-1".into(), machines.month_key(), 6_000_000_000),
                ("vm-2".into(), machines.month_key(), 4_000_000_000),
            ],
            pods: vec![
                PodRecord {
                    namespace: "acme-llm".into(),
                    instance_id: "vm-1".into(),
                    ..PodRecord::default()
                },
                PodRecord {
                    namespace: "kube-system".into(),
                    instance_id: "vm-2".into(),
                    ..PodRecord::default()
                },
            ],
            // The first pod's €6: €4 its GPUs' (€3 of its €5 split), €1 of split its vCPUs'.
            days: vec![
                PodDay {
                    gpu_cost_nanos: 4_000_000_000,
                    gpu_split_nanos: 3_000_000_000,
                    cpu_split_nanos: 1_000_000_000,
                    ..day(0, 5_000_000_000, 1_000_000_000)
                },
                day(1, 2_000_000_000, 0),
            ],
            hours: vec![GpuPodHour {
                pod_id: 0,
                hour: 1_790_812_800,
                gpu_hours: 1.0,
                gpu_cost_nanos: 4_000_000_000,
                pod_cost_nanos: 6_000_000_000,
            }],
            from_cur: false,
        };
        let rates = [FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test").unwrap()];
        let bills = [bill("azure", "ea", "EUR")];
        let charges = [machines, disks];
        let folded = fold_bills(&mut inputs, None, &bills, (&charges, &[]), &rates, &[split]).unwrap();
        assert_eq!(folded.split_clusters, vec!["aks-weu".to_string()]);
        // €12 at 1.0842 is $13.010400: the pods' €8 $8.673600, the rest's €2 and the disks'
        // €2 $2.168400 each.
        assert_eq!(inputs.bill_amortized_micros, 13_010_400);
        assert_eq!(inputs.kubernetes_micros, 8_673_600);
        assert_eq!(inputs.unallocated_ec2_micros, 2_168_400);
        assert_eq!(inputs.other_cost_micros, 2_168_400);
        assert_eq!(inputs.other_groups.len(), 1, "the machines' group is the pods' now");
        let ids: Vec<(i64, &str)> = inputs.pods.iter().map(|p| (p.id, p.usage_account_id.as_str())).collect();
        assert_eq!(ids, [(1, "sub"), (2, "sub")]);
        // $8.673600 by the pod-days' euros: 5/8, 1/8 and 2/8 of it.
        let days: Vec<(i64, i64, i64)> =
            inputs.pod_days.iter().map(|d| (d.pod_id, d.split_cost_nanos, d.unused_cost_nanos)).collect();
        assert_eq!(days, [(1, 5_421_000_000, 1_084_200_000), (2, 2_168_400_000, 0)]);
        assert_eq!(inputs.pod_days[0].net_cost_nanos, 6_505_200_000);
        // Its parts by resource in the same ratios of its dollars: 4/6, 3/5 and 1/5.
        let first = &inputs.pod_days[0];
        assert_eq!(
            (first.gpu_cost_nanos, first.gpu_split_nanos, first.cpu_split_nanos),
            (4_336_800_000, 3_252_600_000, 1_084_200_000)
        );
        // Its GPU pod-hour, converted at 1.0842, numbered as its pod.
        let hour = &inputs.gpu_pod_hours[0];
        assert_eq!(
            (hour.pod_id, hour.gpu_cost_nanos, hour.pod_cost_nanos),
            (1, 4_336_800_000, 6_505_200_000)
        );
        // Its public on-demand cost, €12 at list, is converted as it is: $13.010400.
        assert_eq!(inputs.pod_days[0].public_on_demand_cost_nanos, 13_010_400_000);
        // The account's instances are the machines: its pods' $8.673600 and the $2.168400 rest.
        let account = &inputs.accounts[0];
        assert_eq!(
            (account.instance_cost_micros, account.other_cost_micros),
            (Micros(10_842_000), Micros(2_168_400))
        );
        // A machine whose group the bill no longer has: said, not dropped.
        let stale = SplitNodes {
            taken: vec![("vm-3".into(), "0123456789abcdef".into(), 1)],
            ..SplitNodes { provider: "azure".into(), billing_account: "ea".into(), ..SplitNodes::default() }
        };
        let mut again = ComputeInputs::default();
        let refused = fold_bills(&mut again, None, &bills, (&charges, &[]), &rates, &[stale]);
        assert!(matches!(refused, Err(FoldError::Inconsistent { ref key, .. }) if key == "0123456789abcdef"));
    }

    #[test]
    fn gkes_unallocated_capacity_is_the_clusters_unallocated_pool() {
        let mut inputs = ComputeInputs { period: "2026-10".into(), ..ComputeInputs::default() };
        let charges = [
            charge(
                "gcp",
                "b",
                "Usage",
                2_000_000_000,
                r#"{"k8s-namespace":"acme-llm","goog-k8s-cluster-name":"gke"}"#,
            ),
            charge(
                "gcp",
                "b",
                "Usage",
                1_000_000_000,
                r#"{"k8s-namespace":"kube:unallocated","goog-k8s-cluster-name":"gke"}"#,
            ),
        ];
        fold_bills(&mut inputs, Some(""), &[bill("gcp", "b", "USD")], (&charges, &[]), &[], &[]).unwrap();
        assert_eq!(inputs.unallocated_ec2_micros, 1_000_000);
        assert_eq!(inputs.other_cost_micros, 2_000_000);
        assert_eq!(inputs.bill_amortized_micros, 3_000_000);
        assert!(inputs.other_groups[0].tags.contains(r#""user_k8s-namespace":"acme-llm""#));
        assert_eq!(
            pod_labels(r#"{"user_k8s-label/client":"acme","user_k8s-namespace":"acme-llm"}"#),
            r#"{"user_client":"acme"}"#
        );
    }
}
