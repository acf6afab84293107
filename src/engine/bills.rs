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

use std::collections::BTreeMap;

use crate::domain::fx::{FxRate, REPORTING_CURRENCY, rate_for};
use crate::money::{Micros, micros_from_nanos};
use crate::store::{AccountRollup, Bill, BillCharge, ComputeInputs, OtherCostGroup};

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
}

/// Whether a bill is one `fold_bills` counts: a FOCUS bill, but not the CUR's own bill through
/// AWS's FOCUS export (with an unknown payer, assumed to be it). `cur_billing_account` is the
/// payer of the month's CUR, `None` when the month has no CUR (every FOCUS bill counts).
pub fn counted(bill: &Bill, cur_billing_account: Option<&str>) -> bool {
    let cur_twin = bill.provider == "aws"
        && cur_billing_account.is_some_and(|payer| payer.is_empty() || bill.billing_account == payer);
    bill.format == "focus" && !cur_twin
}

/// Adds the month's FOCUS bills (but the CUR's own) to `inputs` in the reporting currency.
pub fn fold_bills(
    inputs: &mut ComputeInputs,
    cur_billing_account: Option<&str>,
    bills: &[Bill],
    charges: &[BillCharge],
    rates: &[FxRate],
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
            .filter(|c| matches!(c.charge_category.as_str(), "Usage" | "Purchase"))
            .collect();
        let effective = exact_shares(
            in_reporting(counted.iter().map(|c| c.effective_nanos).sum()),
            counted.iter().map(|c| in_reporting(c.effective_nanos)).collect(),
        );
        let billed = exact_shares(
            in_reporting(counted.iter().map(|c| c.billed_nanos).sum()),
            counted.iter().map(|c| in_reporting(c.billed_nanos)).collect(),
        );
        let mut groups: BTreeMap<(String, String, String, String), OtherCostGroup> = BTreeMap::new();
        let mut accounts: BTreeMap<String, AccountRollup> = BTreeMap::new();
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
                ..AccountRollup::default()
            });
            account.bill_unblended_micros += Micros(billed[index]);
            // Every charge of a GPU instance counts its cost (some of a node's rows, as GKE's
            // cost allocation splits it, carry none of its GPU-hours): as `report bill`'s
            // `gpu` counts them.
            if !charge.gpu_model.is_empty() {
                account.gpu_hours += charge.gpu_hours;
                if charge.pricing_category == "Dynamic" {
                    account.spot_gpu_hours += charge.gpu_hours;
                }
                account.gpu_fleet_micros += Micros(effective[index]);
            }
            if tag(NAMESPACE_TAG) == UNALLOCATED_NAMESPACE {
                inputs.unallocated_ec2_micros += effective[index];
                account.instance_cost_micros += Micros(effective[index]);
                continue;
            }
            account.other_cost_micros += Micros(effective[index]);
            inputs.other_cost_micros += effective[index];
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
            group.amortized_cost_micros += effective[index];
            group.usage_amount += charge.consumed_quantity;
        }
        let bill_effective: i64 = effective.iter().sum();
        inputs.bill_amortized_micros += bill_effective;
        inputs.bill_unblended_micros += billed.iter().sum::<i64>();
        inputs.other_groups.extend(groups.into_values());
        inputs.accounts.extend(accounts.into_values());
        folded.bills.push(format!("{}/{}", bill.provider, bill.billing_account));
        folded.amortized_micros += bill_effective;
    }
    Ok(folded)
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
        let missing = fold_bills(&mut inputs.clone(), Some("111111111111"), &bills, &charges, &[]);
        assert!(matches!(missing, Err(FoldError::MissingRate { ref currency, .. }) if currency == "EUR"));
        let rates = [FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test").unwrap()];
        let folded = fold_bills(&mut inputs, Some("111111111111"), &bills, &charges, &rates).unwrap();
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
        fold_bills(&mut inputs, Some(""), &[bill("gcp", "b", "USD")], &charges, &[]).unwrap();
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
