//! Clients (agency): chargeback by client with the policy in force.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::*;
use crate::report::rollup::{self};
use crate::report::table::Cell;

/// Clients (agency): chargeback with the policy in force.
pub async fn clients(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Clients", "clients", "/clients");
    if let Some(range) = &range {
        let report = rollup::clients(range);
        let links = report
            .table
            .rows
            .iter()
            .map(|row| match row.first() {
                Some(Cell::Text(client)) => {
                    Some(format!("/clients/{}?{}", url_escape(client), range_query(range)))
                }
                _ => None,
            })
            .collect();
        content.tables.push((
            "clients".into(),
            "Chargeback by client (direct cost, shares of the platform, idle and infrastructure pools, markup); each client links to its detail"
                .into(),
            report,
            links,
        ));
        content.notes.push(
            "Direct cost is each client's pods' split cost plus the AWS resources tagged to it (user_client). \
             The platform pool (kube-system, monitoring, gpu-operator), the idle pool (unused capacity AWS \
             pushed down to pods) and the infrastructure pool (cluster cost no client claims: control plane, \
             root volumes, EC2 not allocated to pods) are shared by each client's policy; (unassigned) keeps \
             the rest and every untagged line, so the clients and (unassigned) add up to the whole amortized \
             bill."
                .into(),
        );
    }
    answer(&state, &filters, &headers, &view, content).await
}
