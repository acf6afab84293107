//! gpuledger: what a Kubernetes GPU fleet on AWS costs, who used it, how much of it sat idle
//! and what was saved — read from the bill itself (CUR 2.0 with EKS split cost allocation
//! data) and joined with what the GPUs did (DCGM and inference metrics).
//!
//! Data flows one way: sources → ingest → [`store`] → engine → [`web`] and exports.
//! What is here today:
//!
//! - [`cli`]: the command line, one typed configuration, every option also an env variable;
//!   [`cmd`]: one module per command, each a thin layer over the library;
//! - [`store`]: the storage trait with its SQLite (embedded default) and Postgres backends;
//! - [`synth`]: the generator of realistic CUR 2.0 exports, DCGM/inference metrics and
//!   `truth.json`, for the demo, tests and benchmarks;
//! - [`split`]: AWS's split cost allocation arithmetic; [`catalog`]: EC2 instance types;
//! - [`sources`]: CUR 2.0 exports from a folder or S3, found through their manifests;
//!   Prometheus (HTTP API) and OpenMetrics files, bucketed into half-open hours;
//! - [`ingest`]: classification, reconciliation and the atomic per-period replace; the
//!   atomic replace of a metrics window;
//! - [`engine`]: cost joined with usage (GPU-hours used, idle, unmeasured);
//! - [`pipeline`]: ingest → compute as one recorded job (runs, pending periods);
//! - [`report`]: command-line reports (table, CSV, JSON);
//! - [`web`]: the axum router: the dashboard pages with their JSON/CSV/XLSX twins, `/metrics`;
//! - [`invoice`]: per-client invoices, credit and debit notes, their PDFs;
//! - [`settings`]: client terms, pool rules, mappings and engine settings, each with the
//!   month it takes effect;
//! - [`money`], [`period`]: exact money and billing periods.

/// `FromStr` for an enum with `ALL` and `as_str`: each value parses from the name it is
/// stored and shown by (defined before the modules, so every one of them can use it).
macro_rules! parse_by_name {
    ($enum:ty, $what:literal) => {
        impl std::str::FromStr for $enum {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                <$enum>::ALL
                    .into_iter()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| format!("unknown {} {text:?}", $what))
            }
        }
    };
}

pub mod alerts;
pub mod archive;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod cmd;
pub mod engine;
pub mod ingest;
pub mod invoice;
pub mod money;
pub mod period;
pub mod pipeline;
pub mod report;
pub mod settings;
pub mod sources;
pub mod split;
pub mod store;
pub mod synth;
pub mod web;
