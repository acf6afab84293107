//! Costs (finance): Kubernetes cost by namespace, workload, team, client, cluster or usage
//! account, reconciled to the bill, drilling down to workloads and pods; the bill per usage
//! account beside it.

use std::collections::{BTreeMap, HashMap, HashSet};

use axum::response::Response;

use super::*;
use crate::engine::classify::family;
use crate::report::rollup::{Report, RollupRange};
use crate::report::table::{Cell, Nanos, Table, cell_order};

/// How the cluster list names gpuledger's split and AWS's.
const OUR_SPLIT: &str = "gpuledger's split";
const AWS_SPLIT: &str = "AWS's split";

/// Whose split divided each cluster's node cost in the range's months (both, in the order
/// met, where a cluster changed): AWS's (the CUR's split cost allocation data) or gpuledger's
/// from its Prometheus series. Months computed before either was kept name none.
fn split_methods(range: &RollupRange) -> BTreeMap<String, Vec<&'static str>> {
    let mut methods: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for (rollups, _) in &range.parts {
        for split in &rollups.kube_splits {
            let method =
                if split.method == crate::store::KubeSplitRollup::AWS { AWS_SPLIT } else { OUR_SPLIT };
            let known = methods.entry(split.cluster.clone()).or_default();
            if !known.contains(&method) {
                known.push(method);
            }
        }
    }
    methods
}

/// Costs (finance): grouped by namespace, workload, team, client or cluster, reconciled to
/// the bill; a namespace drills down to its workloads, a CronJob to its runs (Jobs) and a
/// workload to its pods.
pub async fn costs(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let mut content = Content::new("Costs", "costs", "/costs");
    content.account_filter = true;
    if let Some(range) = &view.range {
        let clusters: std::collections::BTreeSet<&str> = range.costs().map(|c| c.cluster.as_str()).collect();
        let mut splits = split_methods(range);
        splits.retain(|c, _| clusters.contains(c.as_str()));
        content.clusters = clusters
            .into_iter()
            .map(|c| {
                let label = match splits.get(c) {
                    Some(methods) => format!("{c} · {}", methods.join(", ")),
                    None => c.to_string(),
                };
                (c.to_string(), label)
            })
            .collect();
        let ours: Vec<&str> =
            splits.iter().filter(|(_, m)| m.contains(&OUR_SPLIT)).map(|(c, _)| c.as_str()).collect();
        if !ours.is_empty() {
            content.notes.push(format!(
                "Split by gpuledger ({}): each node-hour's cost in the bill that paid for it, divided among \
                 its pods from Prometheus by AWS's rules (gpuledger-split-v1), other currencies at the \
                 month's rate; the Data page reconciles each cluster to its bill.",
                ours.join(", ")
            ));
        }
        content.json.insert(
            "cluster_splits".into(),
            serde_json::json!(
                splits.iter().map(|(c, m)| serde_json::json!({"cluster": c, "split": m})).collect::<Vec<_>>()
            ),
        );
        check_drill_down(&filters, range, view.viewer.scope != crate::auth::Scope::All)?;
        content.crumbs = crumbs(&filters, range);
        let (caption, table, links) =
            match (given(&filters.group), given(&filters.namespace), given(&filters.workload)) {
                (Some("pod"), Some(namespace), Some(workload)) => {
                    pod_costs(&state, &filters, range, namespace, workload).await?
                }
                _ => {
                    let shown = match wants_html(&filters, &headers) {
                        true => Some(Shown { page: page_asked(&filters)?, sort: sort_asked(&filters)? }),
                        false => None,
                    };
                    let (grouped, chart, window) = grouped_costs(&filters, range, &mut content.notes, shown);
                    content.charts.push(chart);
                    content.window =
                        window.map(|(first, total)| Window { table: "costs".into(), first, total });
                    grouped
                }
            };
        content.tables.push(("costs".into(), caption, Report::of(table), links));
        let whole = range.parts.iter().all(|(_, whole)| *whole);
        if whole && view.viewer.scope.sees_fleet() && given(&filters.group) != Some("pod") {
            if range.only.is_none() && view.providers.len() > 1 {
                let caption = "The bill by provider: each provider's accounts summed, in USD at the month's \
                               rate (the Data page lists each bill in its own currency); choose a provider above \
                               to see its accounts alone";
                content.table("providers", caption, crate::report::rollup::providers(range));
            }
            let mut by_account = crate::report::rollup::accounts(range);
            if by_account.table.rows.len() > 1 || range.only.is_some() {
                name_accounts(&mut by_account, &view.accounts);
                let caption = "The bill by account of every provider (AWS payer and linked accounts, Azure \
                               subscriptions, Google projects, Oracle compartments): Kubernetes, instances \
                               not allocated to pods, other cost; the total is the amortized bill in USD";
                content.table("accounts", caption, by_account);
            }
        }
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// The ten largest grouped rows as bars split into split (used) and unused cost, the rest
/// summed into one bar; each bar links where its row does. Only the bars drawn are labelled.
fn top_bars(
    sums: &[(Key, [i64; 6])],
    label: &impl Fn(&Key) -> String,
    link: &impl Fn(&Key) -> Option<String>,
) -> Vec<charts::StackedBar> {
    let parts: Vec<[f64; 2]> =
        sums.iter().map(|(_, s)| [Nanos(s[0]).usd_f64(), Nanos(s[1]).usd_f64()]).collect();
    let slices: Vec<&[f64]> = parts.iter().map(|p| p.as_slice()).collect();
    let (order, rest) = charts::top_indices(&slices, 10);
    let mut bars: Vec<charts::StackedBar> = order
        .into_iter()
        .map(|i| charts::StackedBar {
            label: label(&sums[i].0),
            parts: parts[i].to_vec(),
            mark: None,
            href: link(&sums[i].0),
        })
        .collect();
    bars.extend(rest);
    bars
}

/// Fills the name column of an accounts table from the names the range's bills give.
fn name_accounts(report: &mut Report, names: &BTreeMap<String, String>) {
    let Some(column) = report.table.columns.iter().position(|c| *c == "name") else { return };
    for row in &mut report.table.rows {
        if let (Some(Cell::Text(id)), Some(Cell::Text(name))) = (row.first().cloned(), row.get_mut(column))
            && name.is_empty()
        {
            *name = names.get(&id).cloned().unwrap_or_default();
        }
    }
}

/// Refuses a grouping, namespace or workload the range does not have, naming the choices.
/// A scoped viewer is not told the name back (the answer is the same whether another
/// client has it or nobody does).
fn check_drill_down(filters: &Filters, range: &RollupRange, scoped: bool) -> Result<(), WebError> {
    let echo = |name: &str| if scoped { "of that name".to_string() } else { format!("{name:?}") };
    let group = given(&filters.group);
    if let Some(group) = group
        && !GROUPS.contains(&group)
        && group != "pod"
    {
        let choices = GROUPS.map(String::from).to_vec();
        return Err(WebError::bad("group", format!("{group:?} is not a grouping"), choices));
    }
    let namespace = given(&filters.namespace);
    if let Some(namespace) = namespace {
        let namespaces: std::collections::BTreeSet<&str> =
            range.costs().map(|c| c.namespace.as_str()).collect();
        if !namespaces.contains(namespace) {
            let choices = namespaces.into_iter().map(String::from).collect();
            return Err(WebError::bad(
                "namespace",
                format!("no namespace {} in {}", echo(namespace), range.label),
                choices,
            ));
        }
    }
    let workload = given(&filters.workload);
    if group == Some("pod") && (namespace.is_none() || workload.is_none()) {
        return Err(WebError::bad(
            "group",
            "group=pod needs a namespace and a workload",
            GROUPS.map(String::from).to_vec(),
        ));
    }
    // A workload's pods, or a CronJob's runs.
    if matches!(group, Some("pod" | "workload"))
        && let (Some(namespace), Some(workload)) = (namespace, workload)
    {
        // A workload's name, or a CronJob's (the family its runs make); the choices offered
        // are the rows of the workload view.
        let named = |c: &&crate::store::CostRollup| c.namespace == namespace;
        let known = range.costs().filter(named).any(|c| named_or_run_of(&c.workload, workload));
        if !known {
            let families: std::collections::BTreeSet<&str> =
                range.costs().filter(named).map(|c| family(&c.workload)).collect();
            let choices = families.into_iter().map(String::from).collect();
            return Err(WebError::bad(
                "workload",
                format!("no workload {} in that namespace", echo(workload)),
                choices,
            ));
        }
    }
    Ok(())
}

/// Whether `workload` is the one `asked` for, or a run of the CronJob of that name.
fn named_or_run_of(workload: &str, asked: &str) -> bool {
    workload == asked || family(workload) == asked
}

/// The way down to a namespace's workloads, a CronJob's runs or a workload's pods: Costs by
/// namespace (the same range, cluster and account), the namespace, a run's CronJob, the
/// workload. Empty at the top level.
fn crumbs(filters: &Filters, range: &RollupRange) -> Vec<(String, Option<String>)> {
    let Some(namespace) = given(&filters.namespace) else { return Vec::new() };
    let mut crumbs = vec![("Costs by namespace".to_string(), Some(costs_base(filters, range)))];
    let group = given(&filters.group);
    match given(&filters.workload).filter(|_| matches!(group, Some("pod" | "workload"))) {
        Some(workload) => {
            crumbs
                .push((namespace.to_string(), Some(costs_link(filters, range, "workload", namespace, None))));
            // A run's pods: the way back passes its CronJob's runs.
            let cronjob = family(workload);
            if group == Some("pod") && cronjob != workload {
                let runs = costs_link(filters, range, "workload", namespace, Some(cronjob));
                crumbs.push((cronjob.to_string(), Some(runs)));
            }
            crumbs.push((workload.to_string(), None));
        }
        None => crumbs.push((namespace.to_string(), None)),
    }
    crumbs
}

/// The Costs page's URL for the same range, cluster and account.
fn costs_base(filters: &Filters, range: &RollupRange) -> String {
    let mut link = format!("/costs?{}", range_query(range));
    for (key, value) in [("cluster", &filters.cluster), ("account", &filters.account)] {
        if let Some(value) = given(value) {
            link.push_str(&format!("&{key}={}", url_escape(value)));
        }
    }
    link
}

/// The Costs page's own URL for a drill-down: the same range, cluster and account, another
/// grouping.
fn costs_link(
    filters: &Filters,
    range: &RollupRange,
    group: &str,
    namespace: &str,
    workload: Option<&str>,
) -> String {
    drill_link(&costs_base(filters, range), group, namespace, workload)
}

/// [`costs_link`] from its base, made once for a table's rows.
fn drill_link(base: &str, group: &str, namespace: &str, workload: Option<&str>) -> String {
    let mut link = format!("{base}&group={group}&namespace={}", url_escape(namespace));
    if let Some(workload) = workload {
        link.push_str("&workload=");
        link.push_str(&url_escape(workload));
    }
    link
}

/// A table's caption, the table, and the link of each row's first cell.
type CostTable = (String, Table, Vec<Option<String>>);

/// The page of a grouped table the HTML asks for: its page number and order.
struct Shown<'a> {
    page: usize,
    sort: Option<(&'a str, bool)>,
}

/// A grouped table's key: the group's value, or for workloads the namespace and workload
/// (borrowed from the rollups: a churny month has some 80,000 workloads).
type Key<'a> = (&'a str, &'a str);

/// The order of the rows' labels (`namespace/workload` for workloads), without making them.
fn label_order(workloads: bool) -> impl Fn(&Key, &Key) -> std::cmp::Ordering {
    move |a, b| {
        if !workloads || a.0 == b.0 {
            return a.0.cmp(b.0).then(a.1.cmp(b.1));
        }
        let label =
            |k: &Key| k.0.bytes().chain(std::iter::once(b'/')).chain(k.1.bytes()).collect::<Vec<u8>>();
        let common = a.0.len().min(b.0.len());
        match a.0.as_bytes()[..common].cmp(&b.0.as_bytes()[..common]) {
            std::cmp::Ordering::Equal => label(a).cmp(&label(b)),
            unequal => unequal,
        }
    }
}

/// Kubernetes cost summed by the chosen group, with the lines that close it to the bill, and
/// the chart of its largest rows. Asked for a page (`shown`, the HTML), it sorts every row as
/// asked and makes only that page's rows: the first row's place and the number of rows it
/// returns beside the table then say which.
fn grouped_costs(
    filters: &Filters,
    range: &RollupRange,
    notes: &mut Vec<String>,
    shown: Option<Shown>,
) -> (CostTable, String, Option<(usize, usize)>) {
    let group =
        filters.group.clone().filter(|g| GROUPS.contains(&g.as_str())).unwrap_or_else(|| "namespace".into());
    let namespace = filters.namespace.clone().filter(|n| !n.is_empty());
    let cluster = filters.cluster.clone().filter(|c| !c.is_empty());
    let workloads = group == "workload";
    // A namespace's workload named too: a CronJob, whose runs are then the rows.
    let runs_of = given(&filters.workload).filter(|_| workloads && namespace.is_some());
    let mut by_key: HashMap<Key, [i64; 6]> = HashMap::new();
    // GPU-hours allocated and those no DCGM series measured: idle is unknown where none was.
    let mut gpu_hours: HashMap<Key, [f64; 2]> = HashMap::new();
    // The CronJobs whose row sums runs (Jobs named after them).
    let mut folded: HashSet<Key> = HashSet::new();
    let chosen = range.costs().filter(|c| {
        namespace.as_ref().is_none_or(|n| &c.namespace == n)
            && cluster.as_ref().is_none_or(|k| &c.cluster == k)
            && runs_of.is_none_or(|w| named_or_run_of(&c.workload, w))
    });
    for c in chosen {
        let key: Key = match group.as_str() {
            "workload" if runs_of.is_some() => (&c.namespace, &c.workload),
            // A CronJob's runs (some 80,000 Jobs in a churny month) are one row.
            "workload" => (&c.namespace, family(&c.workload)),
            "team" => (&c.team, ""),
            "client" => (&c.client, ""),
            "cluster" => (&c.cluster, ""),
            "account" => (&c.account, ""),
            _ => (&c.namespace, ""),
        };
        if workloads && key.1.len() != c.workload.len() {
            folded.insert(key);
        }
        let s = by_key.entry(key).or_default();
        s[0] += c.split_cost_nanos;
        s[1] += c.unused_cost_nanos;
        s[2] += c.net_cost_nanos;
        s[3] += c.public_on_demand_cost_nanos;
        s[4] += c.gpu_cost_nanos;
        s[5] += c.idle_gpu_cost_nanos;
        let hours = gpu_hours.entry(key).or_default();
        hours[0] += c.gpu_hours_allocated;
        hours[1] += c.gpu_hours_unmeasured;
    }
    let label =
        |(value, workload): &Key| if workloads { format!("{value}/{workload}") } else { value.to_string() };
    let unmeasured = |[allocated, unmeasured]: [f64; 2]| allocated > 0.0 && unmeasured >= allocated - 1e-9;
    let none_measured: Vec<String> = {
        let mut keys: Vec<&Key> = gpu_hours.iter().filter(|(_, h)| unmeasured(**h)).map(|(k, _)| k).collect();
        keys.sort_unstable();
        keys.into_iter().map(label).collect()
    };
    if !none_measured.is_empty() {
        let shown = none_measured.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        let more = none_measured.len().saturating_sub(5);
        notes.push(format!(
            "Idle GPU cost is empty where none of the GPU-hours was measured (no DCGM series for those GPUs): {shown}{}.",
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }
    if !folded.is_empty() {
        notes.push(
            "A CronJob's runs (Jobs named after it and their schedule) are one row under the CronJob's name; \
             it links to its runs, each run to its pods (`gpuledger report workloads` lists each Job)."
                .into(),
        );
    }
    let mut sums: Vec<(Key, [i64; 6])> = by_key.into_iter().collect();
    let order = label_order(workloads);
    sums.sort_unstable_by(|a, b| order(&a.0, &b.0));
    let line = |label: String, s: &[i64; 6], hours: [f64; 2]| {
        vec![
            Cell::Text(label),
            money(s[0]),
            money(s[1]),
            money(s[0] + s[1]),
            money(s[2]),
            money(s[3]),
            money(s[4]),
            if unmeasured(hours) { Cell::Usd(None) } else { money(s[5]) },
        ]
    };
    let base = costs_base(filters, range);
    let link = |(value, workload): &Key| match group.as_str() {
        "namespace" => Some(drill_link(&base, "workload", value, None)),
        "workload" if folded.contains(&(*value, *workload)) => {
            Some(drill_link(&base, "workload", value, Some(workload)))
        }
        "workload" => Some(drill_link(&base, "pod", value, Some(workload))),
        _ => None,
    };
    let bars = top_bars(&sums, &label, &link);
    let total: [i64; 6] = sums.iter().map(|(_, s)| s).fold([0; 6], |mut acc, s| {
        acc.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        acc
    });
    let columns = [&[column_of(&group)], &MONEY_COLUMNS[..], &["idle_gpu_cost"]].concat();
    // The HTML's page of a long table: every row sorted as asked, then only the page's made.
    let mut window = None;
    let mut rows = 0..sums.len();
    if let Some(Shown { page, sort }) = shown
        && sums.len() > PAGE_ROWS
    {
        if let Some((column, descending)) = sort
            && let Some(index) = columns.iter().position(|c| *c == column)
        {
            sort_sums(&mut sums, index, descending, &label);
        }
        let page = page.min(sums.len().div_ceil(PAGE_ROWS));
        rows = (page - 1) * PAGE_ROWS..(page * PAGE_ROWS).min(sums.len());
        window = Some((rows.start, sums.len()));
    }
    let kept = &sums[rows];
    let mut links: Vec<Option<String>> = kept.iter().map(|(key, _)| link(key)).collect();
    let total_hours = gpu_hours.values().fold([0.0; 2], |acc, h| [acc[0] + h[0], acc[1] + h[1]]);
    let mut totals = vec![line("Kubernetes total".into(), &total, total_hours)];
    links.push(None);
    let whole = range.parts.iter().all(|(_, whole)| *whole);
    if namespace.is_none() && cluster.is_none() && whole {
        let other = range.other_cost_micros();
        let unallocated = range.unallocated_ec2_micros();
        let bill: i64 = range.periods().map(|(p, _)| p.bill_amortized_micros.0).sum();
        // With other clouds' bills in the range, their instances and other cost are in these
        // lines too: named for every provider.
        let clouds = range.parts.iter().any(|(r, _)| r.accounts.iter().any(|a| a.provider != "aws"));
        let (unallocated_label, other_label) = match clouds {
            true => (
                "Instances not allocated to pods (every provider)",
                "Other cost (not Kubernetes, every provider)",
            ),
            false => ("EC2 not allocated to pods", "Other AWS cost (not Kubernetes)"),
        };
        for (label, micros) in
            [(unallocated_label, unallocated), (other_label, other), ("Bill (amortized)", bill)]
        {
            let mut row = vec![Cell::Text(label.into()), Cell::Usd(None), Cell::Usd(None)];
            row.push(Cell::Usd(Some(Nanos::from_micros(micros))));
            row.extend((0..4).map(|_| Cell::Usd(None)));
            totals.push(row);
            links.push(None);
        }
    } else if !whole {
        notes.push(
            "Unallocated EC2, other AWS cost and the bill are shown for whole billing months only.".into(),
        );
    } else {
        notes.push(
            "Unallocated EC2, other AWS cost and the bill are shown when no namespace or cluster is chosen."
                .into(),
        );
    }
    let table = Table {
        title: "Costs".into(),
        totals,
        columns,
        rows: kept.iter().map(|(key, s)| line(label(key), s, gpu_hours[key])).collect(),
    };
    let cluster_chosen = cluster.clone();
    let mut scope = cluster.map(|c| format!(" in cluster {c}")).unwrap_or_default();
    if let Some(narrowed) = range.narrowed_to() {
        scope.push_str(&format!(" in {narrowed}"));
    }
    let caption = match (&namespace, runs_of) {
        (Some(n), Some(cronjob)) => {
            format!("Runs of {n}/{cronjob}{scope}, each a Job named after the CronJob")
        }
        (Some(n), None) => format!("Workloads of {n}{scope}"),
        (None, _) if scope.is_empty() => format!("Kubernetes cost by {group}, reconciled to the bill"),
        (None, _) if cluster_chosen.is_none() => {
            format!("Kubernetes cost by {group}{scope}, reconciled to its bill")
        }
        (None, _) => format!("Kubernetes cost by {group}{scope}"),
    };
    let title = caption.split(',').next().unwrap_or(&caption);
    let chart = charts::stacked_bars(title, "USD", &["split cost (used)", "unused cost"], "", &bars);
    ((caption, table, links), chart, window)
}

/// Orders grouped rows by one of their table's columns (0 the label, then the money columns)
/// as [`Table::sort_by_column`] orders the rows made of them: only that column's cell is made
/// for each row, and compared by the same rule ([`cell_order`]), ties in the order they were in.
fn sort_sums(sums: &mut [(Key, [i64; 6])], column: usize, descending: bool, label: &impl Fn(&Key) -> String) {
    let cell = |(key, s): &(Key, [i64; 6])| match column {
        0 => Cell::Text(label(key)),
        1 => money(s[0]),
        2 => money(s[1]),
        3 => money(s[0] + s[1]),
        other => money(s[other - 2]),
    };
    let mut keyed: Vec<(Cell, (Key, [i64; 6]))> = sums.iter().map(|row| (cell(row), *row)).collect();
    keyed.sort_by(|a, b| cell_order(Some(&a.0), Some(&b.0), descending));
    sums.iter_mut().zip(keyed).for_each(|(slot, (_, row))| *slot = row);
}

/// One workload's pods over the range, from the pod-day aggregates of each period in it.
async fn pod_costs(
    state: &AppState,
    filters: &Filters,
    range: &RollupRange,
    namespace: &str,
    workload: &str,
) -> Result<CostTable, WebError> {
    use crate::store::PodCost;
    let cluster = filters.cluster.clone().filter(|c| !c.is_empty());
    let mut pods: BTreeMap<[String; 5], PodCost> = BTreeMap::new();
    // The Jobs of a CronJob asked for by its name.
    let mut runs = std::collections::BTreeSet::new();
    // Only workloads the viewer's rollups hold: a CronJob's runs are matched by name, and a
    // scoped viewer's rollups hold only their clients' runs.
    let visible: HashSet<&str> =
        range.costs().filter(|c| c.namespace == namespace).map(|c| c.workload.as_str()).collect();
    for (rollups, _) in &range.parts {
        let Ok(period) = rollups.period.period.parse::<Period>() else { continue };
        let (from, to) = (range.from.max(period.start()), range.to.min(period.end()));
        for pod in state.store.pod_costs(&rollups.period.period, namespace, workload, from, to).await? {
            let other_account = range.excludes(&pod.account);
            let other_workload =
                !named_or_run_of(&pod.workload, workload) || !visible.contains(pod.workload.as_str());
            if other_workload || other_account || cluster.as_ref().is_some_and(|c| c != &pod.cluster) {
                continue;
            }
            if pod.workload != workload {
                runs.insert(pod.workload.clone());
            }
            let option = pod.purchase_option.to_string();
            let key = [&pod.pod, &pod.cluster, &pod.node, &pod.instance_type, &option].map(String::clone);
            add_pod(pods.entry(key).or_default(), &pod);
        }
    }
    let line = |labels: &[String; 5], p: &PodCost| {
        let mut row: Vec<Cell> = labels.iter().map(|t| Cell::Text(t.clone())).collect();
        row.extend([
            Cell::Hours(p.gpu_hours),
            money(p.split_cost_nanos),
            money(p.unused_cost_nanos),
            money(p.split_cost_nanos + p.unused_cost_nanos),
            money(p.net_cost_nanos),
            money(p.public_on_demand_cost_nanos),
            money(p.gpu_cost_nanos),
        ]);
        row
    };
    let rows: Vec<Vec<Cell>> = pods.iter().map(|(labels, p)| line(labels, p)).collect();
    let mut total = PodCost::default();
    pods.values().for_each(|p| add_pod(&mut total, p));
    let totals = vec![line(
        &["Workload total".into(), String::new(), String::new(), String::new(), String::new()],
        &total,
    )];
    // The total links back to the namespace's workloads.
    let mut links: Vec<Option<String>> = vec![None; rows.len()];
    links.push(Some(costs_link(filters, range, "workload", namespace, None)));
    let table = Table {
        title: "Costs".into(),
        totals,
        columns: vec!["pod", "cluster", "node", "instance_type", "purchase_option", "gpu_hours"]
            .into_iter()
            .chain(MONEY_COLUMNS)
            .collect(),
        rows,
    };
    let caption = match runs.len() {
        0 => format!("Pods of {namespace}/{workload} (the total links back to {namespace}'s workloads)"),
        n => format!(
            "Pods of {namespace}/{workload}, {} runs of a CronJob (the total links back to {namespace}'s \
             workloads)",
            crate::report::table::thousands(n as f64, 0)
        ),
    };
    Ok((caption, table, links))
}

fn add_pod(sum: &mut crate::store::PodCost, pod: &crate::store::PodCost) {
    sum.gpu_hours += pod.gpu_hours;
    sum.gpu_cost_nanos += pod.gpu_cost_nanos;
    sum.split_cost_nanos += pod.split_cost_nanos;
    sum.unused_cost_nanos += pod.unused_cost_nanos;
    sum.net_cost_nanos += pod.net_cost_nanos;
    sum.public_on_demand_cost_nanos += pod.public_on_demand_cost_nanos;
}

/// The groupings of the Costs page (pods are reached by drilling down from a workload).
pub(super) const GROUPS: [&str; 6] = ["namespace", "workload", "team", "client", "cluster", "account"];

/// The money columns of the Costs tables, in the order `grouped_costs` and `pod_costs` fill them.
const MONEY_COLUMNS: [&str; 6] =
    ["split_cost", "unused_cost", "total_cost", "net_cost", "public_on_demand_cost", "gpu_cost"];

/// The first column's name for a grouping.
fn column_of(group: &str) -> &'static str {
    match group {
        "workload" => "namespace_workload",
        "team" => "team",
        "client" => "client",
        "cluster" => "cluster",
        "account" => "account",
        _ => "namespace",
    }
}
