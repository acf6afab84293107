//! Alerts: the cost alerts firing and resolved, each with its evidence and the page that
//! explains it. For viewers who see the whole fleet (the alerts name clients and the bill).

use axum::response::Response;

use super::*;
use crate::report::rollup::Report;

/// Alerts: firing first, then resolved; the JSON twin is `alerts list --format json`'s.
pub async fn alerts(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let mut content = Content::new("Alerts", "alerts", "/alerts");
    // Alerts are listed as they fired, not by month: no month picker.
    content.ranged = false;
    let alerts = state.store.alerts().await?;
    let firing = alerts.iter().filter(|a| a.state == "firing").count();
    content.notes.push(if alerts.is_empty() {
        "No cost alert has fired. Alerts are evaluated after every ingest and compute \
         (`gpuledger alerts evaluate` runs them now); thresholds: `gpuledger alerts thresholds`."
            .into()
    } else {
        format!(
            "{firing} firing, {} resolved. Evaluated after every ingest and compute against the newest month; \
             webhooks (`gpuledger alerts webhook add`) get each alert once when it fires and once when it resolves.",
            alerts.len() - firing
        )
    });
    let links = alerts.iter().map(|a| Some(a.link.clone())).collect();
    content.tables.push((
        "alert_list".into(),
        "Cost alerts: each rule links to the page that explains it".into(),
        Report::of(crate::alerts::table(&alerts)),
        links,
    ));
    content.json.insert("alerts".into(), crate::alerts::to_json(&alerts)["alerts"].clone());
    answer(&state, &filters, &headers, &view, content).await
}
