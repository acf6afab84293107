//! One integration-test binary for gpuledger, so the crate and its dependencies link once;
//! each module below is one area of the crate, tested through its public API.

mod alerts;
mod app;
mod archive;
mod auth;
mod bill;
mod browser;
mod cost_explorer;
mod deliveries;
mod docs;
mod edge_limits;
mod engine;
mod generate;
mod helpers;
mod ingest_cur;
mod ingest_prometheus;
mod invoices;
mod pipeline_run;
mod prom_server;
mod prometheus_rules;
mod runs;
mod s3;
mod spark;
mod store_story;
mod usage_accounts;
mod web;
mod web_edge;
