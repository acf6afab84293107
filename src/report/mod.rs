//! Command-line reports: the same numbers as the pages, as a table for people or CSV/JSON
//! for scripts (stdout).
//!
//! `report namespaces` JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10",
//!  "rows": [{"cluster": "ml-prod", "namespace": "acme-llm", "split_cost": 1.5, "unused_cost": 0.25,
//!            "total_cost": 1.75, "net_total_cost": 1.7, "public_on_demand_total_cost": 2.4}],
//!  "kubernetes_total": 1.75, "unallocated_ec2_cost": 0.5, "other_cost": 9.5,
//!  "bill_unblended_total": 12.0, "bill_amortized_total": 11.75}
//! ```
//!
//! Amounts are USD as JSON numbers with at most six decimals; `cluster` appears only with
//! `--by-cluster`. Rows are rounded so that they add up: Σ rows' `total_cost` =
//! `kubernetes_total` (largest remainder, [`NamespaceReport::rounded_rows`]). `kubernetes_total` + `unallocated_ec2_cost` (EC2 instance cost no pod was
//! given) + `other_cost` = `bill_amortized_total` exactly.

pub mod bill;
pub mod capacity;
pub mod commitments;
pub mod cross_check;
pub mod forecast;
pub mod pod_split;
pub mod rollup;
pub mod split_check;
pub mod spot;
pub mod table;
pub mod usage;

use serde_json::{Value, json};

use crate::money::{apportion_micros, format_usd, micros_from_nanos, usd_decimal};
use crate::period::Period;
use crate::store::{NamespaceCost, Store, StoreError};

/// How a report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no cost data for {0}: run `gpuledger ingest cur SOURCE` first")]
    NoData(Period),
    #[error("no GPU or inference data for {0}: run `gpuledger ingest prometheus` (and `ingest cur`) first")]
    NoUsage(Period),
    #[error("nothing computed for {0}: run `gpuledger compute` (ingest runs it) first")]
    NotComputed(String),
    /// An account filter naming no account of the range (the choices it has).
    #[error("no usage account {account:?} in {label}; its accounts: {}", choices.join(", "))]
    NoAccount { account: String, label: String, choices: Vec<String> },
    /// A provider filter naming no provider with a bill in the range (the ones that have).
    #[error("no {provider} bill in {label}; its providers: {}", choices.join(", "))]
    NoProvider { provider: String, label: String, choices: Vec<String> },
    /// No Kubernetes series stored for the cluster and period.
    #[error(
        "no Kubernetes nodes of cluster {cluster:?} in {period}: run `gpuledger ingest prometheus --kube-state-metrics` first"
    )]
    NoKubernetes { cluster: String, period: Period },
    /// The CUR has no split cost allocation rows for the cluster: nothing to check against.
    #[error(
        "the CUR of {period} has no split cost allocation data for cluster {cluster:?} (is it turned on for the export?): there is no AWS split to check against"
    )]
    NoAwsSplit { cluster: String, period: Period },
    /// Neither the CUR nor a FOCUS bill has a cost for the cluster's nodes.
    #[error(
        "no bill of {period} has a cost for the nodes of cluster {cluster:?}: run `gpuledger ingest cur` or `gpuledger ingest focus` for the bill that pays for them"
    )]
    NoNodeCosts { cluster: String, period: Period },
    /// The cluster's VMs are billed in more than one currency.
    #[error("{0}")]
    TwoCurrencies(String),
    /// A stored setting this gpuledger cannot read.
    #[error("{0}")]
    Settings(String),
}

impl From<crate::engine::cluster_split::SplitError> for ReportError {
    fn from(e: crate::engine::cluster_split::SplitError) -> ReportError {
        use crate::engine::cluster_split::SplitError;
        match e {
            SplitError::Store(e) => ReportError::Store(e),
            SplitError::NoKubernetes { cluster, period } => ReportError::NoKubernetes { cluster, period },
            SplitError::NoNodeCosts { cluster, period } => ReportError::NoNodeCosts { cluster, period },
            e @ SplitError::TwoCurrencies { .. } => ReportError::TwoCurrencies(e.to_string()),
        }
    }
}

/// Per-namespace Kubernetes cost for a period (or a range of days), with other cost and
/// the bill.
#[derive(Debug, Clone)]
pub struct NamespaceReport {
    /// `YYYY-MM`, or `FROM/TO` for a range.
    pub period: String,
    pub by_cluster: bool,
    pub rows: Vec<NamespaceCost>,
    pub bill_unblended_micros: i64,
    pub bill_amortized_micros: i64,
    pub unallocated_ec2_micros: i64,
}

impl NamespaceReport {
    pub async fn load(
        store: &dyn Store,
        period: Period,
        cluster: Option<&str>,
        by_cluster: bool,
    ) -> Result<NamespaceReport, ReportError> {
        let summary = store
            .periods()
            .await?
            .into_iter()
            .find(|p| p.period == period.to_string())
            .ok_or(ReportError::NoData(period))?;
        // Rollups when computed (a few thousand rows); the facts otherwise.
        if let Some(rollups) = store.rollups(&period.to_string()).await? {
            let parts = vec![std::sync::Arc::new(rollups)];
            let range =
                rollup::RollupRange::from_parts(period.to_string(), period.start(), period.end(), parts)?;
            return Ok(NamespaceReport::from_rollups(&range, cluster, by_cluster));
        }
        let rows = store.namespace_costs(&period.to_string(), cluster, by_cluster).await?;
        Ok(NamespaceReport {
            period: period.to_string(),
            by_cluster,
            rows,
            bill_unblended_micros: summary.bill_unblended_micros,
            bill_amortized_micros: summary.bill_amortized_micros,
            unallocated_ec2_micros: summary.unallocated_ec2_micros,
        })
    }

    /// From rollups, for any range; the bill (and so other cost) counts the billing periods
    /// wholly inside the range.
    pub fn from_rollups(
        range: &rollup::RollupRange,
        cluster: Option<&str>,
        by_cluster: bool,
    ) -> NamespaceReport {
        let mut rows: std::collections::BTreeMap<(String, String), NamespaceCost> = Default::default();
        for c in range.costs().filter(|c| cluster.is_none_or(|want| c.cluster == want)) {
            let grouped_cluster = if by_cluster { c.cluster.clone() } else { String::new() };
            let row =
                rows.entry((grouped_cluster.clone(), c.namespace.clone())).or_insert_with(|| NamespaceCost {
                    cluster: grouped_cluster,
                    namespace: c.namespace.clone(),
                    split_cost_nanos: 0,
                    unused_cost_nanos: 0,
                    net_split_cost_nanos: 0,
                    net_unused_cost_nanos: 0,
                    public_on_demand_split_cost_nanos: 0,
                    public_on_demand_unused_cost_nanos: 0,
                });
            row.split_cost_nanos += c.split_cost_nanos;
            row.unused_cost_nanos += c.unused_cost_nanos;
            // Rollups keep net and public on-demand as split + unused totals.
            row.net_split_cost_nanos += c.net_cost_nanos;
            row.public_on_demand_split_cost_nanos += c.public_on_demand_cost_nanos;
        }
        let whole = |f: fn(&crate::store::PeriodRollup) -> i64| -> i64 {
            range.periods().filter(|(_, whole)| *whole).map(|(p, _)| f(p)).sum()
        };
        NamespaceReport {
            period: range.label.clone(),
            by_cluster,
            rows: rows.into_values().collect(),
            bill_unblended_micros: whole(|p| p.bill_unblended_micros.0),
            bill_amortized_micros: whole(|p| p.bill_amortized_micros.0),
            unallocated_ec2_micros: whole(|p| p.unallocated_ec2_micros.0),
        }
    }

    pub fn kubernetes_total_micros(&self) -> i64 {
        micros_from_nanos(self.rows.iter().map(|r| r.split_cost_nanos + r.unused_cost_nanos).sum())
    }

    pub fn other_cost_micros(&self) -> i64 {
        self.bill_amortized_micros - self.kubernetes_total_micros() - self.unallocated_ec2_micros
    }

    /// Each row's (split, unused, total) in micro-dollars, rounded so that the rows add up:
    /// totals to the Kubernetes total and splits to the rounded sum of splits (largest
    /// remainder), unused = total − split. So rows + unallocated EC2 + other cost = the bill
    /// in every format, to the micro-dollar.
    pub fn rounded_rows(&self) -> Vec<(i64, i64, i64)> {
        let totals: Vec<i64> = self.rows.iter().map(|r| r.split_cost_nanos + r.unused_cost_nanos).collect();
        let splits: Vec<i64> = self.rows.iter().map(|r| r.split_cost_nanos).collect();
        let totals = apportion_micros(&totals, self.kubernetes_total_micros());
        let splits = apportion_micros(&splits, micros_from_nanos(splits.iter().sum()));
        totals.into_iter().zip(splits).map(|(total, split)| (split, total - split, total)).collect()
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Json => serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n",
            OutputFormat::Csv => self.to_csv(),
            OutputFormat::Table => self.to_table(),
        }
    }

    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .zip(self.rounded_rows())
            .map(|(r, (split, unused, total))| {
                let mut row = json!({
                    "namespace": r.namespace,
                    "split_cost": usd(split),
                    "unused_cost": usd(unused),
                    "total_cost": usd(total),
                    "net_total_cost": usd(micros_from_nanos(r.net_split_cost_nanos + r.net_unused_cost_nanos)),
                    "public_on_demand_total_cost":
                        usd(micros_from_nanos(r.public_on_demand_split_cost_nanos + r.public_on_demand_unused_cost_nanos)),
                });
                if self.by_cluster {
                    row["cluster"] = json!(r.cluster);
                }
                row
            })
            .collect();
        json!({
            "period": self.period.to_string(),
            "rows": rows,
            "kubernetes_total": usd(self.kubernetes_total_micros()),
            "unallocated_ec2_cost": usd(self.unallocated_ec2_micros),
            "other_cost": usd(self.other_cost_micros()),
            "bill_unblended_total": usd(self.bill_unblended_micros),
            "bill_amortized_total": usd(self.bill_amortized_micros),
        })
    }

    fn to_csv(&self) -> String {
        let mut out = String::new();
        let cluster_head = if self.by_cluster { "cluster," } else { "" };
        out.push_str(&format!(
            "{cluster_head}namespace,split_cost,unused_cost,total_cost,net_total_cost,public_on_demand_total_cost\n"
        ));
        for (r, (split, unused, total)) in self.rows.iter().zip(self.rounded_rows()) {
            let cluster = if self.by_cluster { format!("{},", csv_cell(&r.cluster)) } else { String::new() };
            out.push_str(&format!(
                "{cluster}{},{},{},{},{},{}\n",
                csv_cell(&r.namespace),
                usd_decimal(split),
                usd_decimal(unused),
                usd_decimal(total),
                usd_decimal(micros_from_nanos(r.net_split_cost_nanos + r.net_unused_cost_nanos)),
                usd_decimal(micros_from_nanos(
                    r.public_on_demand_split_cost_nanos + r.public_on_demand_unused_cost_nanos
                )),
            ));
        }
        let blank = if self.by_cluster { "," } else { "" };
        out.push_str(&format!(
            "{blank}(EC2 not allocated to pods),,,{},,\n",
            usd_decimal(self.unallocated_ec2_micros)
        ));
        out.push_str(&format!("{blank}(other AWS cost),,,{},,\n", usd_decimal(self.other_cost_micros())));
        out.push_str(&format!(
            "{blank}(bill total amortized),,,{},,\n",
            usd_decimal(self.bill_amortized_micros)
        ));
        out
    }

    fn to_table(&self) -> String {
        let heading = if self.by_cluster { "cluster / namespace" } else { "namespace" };
        let mut lines: Vec<[String; 6]> =
            vec![[heading, "split", "unused", "total", "net total", "on-demand total"].map(String::from)];
        for (r, (split, unused, total)) in self.rows.iter().zip(self.rounded_rows()) {
            let name = if self.by_cluster {
                format!("{} / {}", r.cluster, r.namespace)
            } else {
                r.namespace.clone()
            };
            lines.push([
                name,
                format_usd(split),
                format_usd(unused),
                format_usd(total),
                format_usd(micros_from_nanos(r.net_split_cost_nanos + r.net_unused_cost_nanos)),
                format_usd(micros_from_nanos(
                    r.public_on_demand_split_cost_nanos + r.public_on_demand_unused_cost_nanos,
                )),
            ]);
        }
        for (label, micros) in [
            ("Kubernetes total", self.kubernetes_total_micros()),
            ("EC2 not allocated to pods", self.unallocated_ec2_micros),
            ("Other AWS cost", self.other_cost_micros()),
            ("Bill (amortized)", self.bill_amortized_micros),
            ("Bill (unblended)", self.bill_unblended_micros),
        ] {
            lines.push([
                label.into(),
                String::new(),
                String::new(),
                format_usd(micros),
                String::new(),
                String::new(),
            ]);
        }
        let widths: Vec<usize> =
            (0..6).map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0)).collect();
        let mut out = format!("Kubernetes cost by namespace, {}\n", self.period);
        for line in &lines {
            let cells: Vec<String> = line
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, &w))| if i == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

/// Dollars as a JSON number with at most six decimals.
fn usd(micros: i64) -> Value {
    json!(micros as f64 / 1e6)
}

/// Quotes a CSV cell when needed and neutralizes text a spreadsheet would run as a formula
/// (`= + - @`, and a leading tab or carriage return, which some spreadsheets skip before
/// reading a formula).
pub fn csv_cell(text: &str) -> String {
    let risky = text.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let text = if risky { format!("'{text}") } else { text.to_string() };
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_neutralized_and_quoted() {
        assert_eq!(csv_cell("acme-llm"), "acme-llm");
        assert_eq!(csv_cell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        // A leading tab or carriage return is neutralized too; a carriage return is quoted.
        assert_eq!(csv_cell("\t=1+1"), "'\t=1+1");
        assert_eq!(csv_cell("\r=1+1"), "\"'\r=1+1\"");
        assert_eq!(csv_cell("a\rb"), "\"a\rb\"");
    }

    #[test]
    fn other_cost_closes_the_bill() {
        let row = |ns: &str, split: i64, unused: i64| NamespaceCost {
            cluster: String::new(),
            namespace: ns.into(),
            split_cost_nanos: split,
            unused_cost_nanos: unused,
            net_split_cost_nanos: split,
            net_unused_cost_nanos: unused,
            public_on_demand_split_cost_nanos: split,
            public_on_demand_unused_cost_nanos: unused,
        };
        let report = NamespaceReport {
            period: "2026-10".into(),
            by_cluster: false,
            rows: vec![row("a", 1_500_000_000, 250_000_000), row("b", 2_000_000_000, 0)],
            bill_unblended_micros: 10_000_000,
            bill_amortized_micros: 9_000_000,
            unallocated_ec2_micros: 500_000,
        };
        // 9.00 − (1.50 + 0.25 + 2.00) − 0.50 = 4.75
        assert_eq!(report.other_cost_micros(), 4_750_000);
        let json = report.to_json();
        assert_eq!(json["rows"][0]["total_cost"], 1.75);
        assert_eq!(json["unallocated_ec2_cost"], 0.5);
        assert_eq!(json["other_cost"], 4.75);
        assert!(json["rows"][0].get("cluster").is_none());
        assert!(report.render(OutputFormat::Csv).ends_with("(bill total amortized),,,9.000000,,\n"));
    }
}
