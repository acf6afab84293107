//! The web edge through `router()` and `oneshot`, no socket: the home page says plainly when
//! the database is empty, and lists what an ingest wrote (with its JSON twin).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use gpuledger::money::format_usd;
use gpuledger::store;
use gpuledger::synth::{CurFormat, Scale};
use gpuledger::web::{AppState, router};
use http_body_util::BodyExt;
use tower::ServiceExt;

use crate::ingest_cur::{export_root, generate, ingest};

async fn get(state: &AppState, uri: &str) -> (StatusCode, String) {
    let response = router(state.clone())
        .oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn the_home_page_says_when_the_database_is_empty_and_lists_what_was_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let database = store::connect(&format!("sqlite:{}", dir.path().join("web.db").display())).await.unwrap();
    let state = AppState::new(database);

    let (status, health) = get(&state, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&health).unwrap()["database"], "sqlite");
    let (status, page) = get(&state, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("The database is empty"), "{page}");

    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 41);
    ingest(state.store.as_ref(), &export_root(dir.path()).display().to_string(), false).await;
    let summary = state.store.periods().await.unwrap().remove(0);
    let (_, page) = get(&state, "/").await;
    assert!(!page.contains("The database is empty"));
    assert!(page.contains("<td>2026-10</td>"), "{page}");
    // The bill total as people read it, e.g. $108,138.71.
    assert!(page.contains(&format_usd(summary.bill_amortized_micros)), "{page}");
    assert!(page.contains("succeeded"));

    let (_, json) = get(&state, "/?format=json").await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["periods"][0]["period"], "2026-10");
    assert_eq!(json["periods"][0]["bill_amortized_micros"], summary.bill_amortized_micros);
    assert_eq!(json["ingest_runs"][0]["status"], "succeeded");
}
