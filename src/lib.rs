//! gpuledger: what a Kubernetes GPU fleet on AWS costs, who used it, how much of it sat idle
//! and what was saved — read from the bill itself (CUR 2.0 with EKS split cost allocation
//! data) and joined with what the GPUs did (DCGM and inference metrics).
//!
//! Modules in layers, lowest first; each uses its own layer and those below
//! (docs/ARCHITECTURE.md states the rule, `scripts/imports` checks it):
//!
//! 1. [`money`], [`period`]: exact money and billing periods; [`catalog`]: EC2 instance
//!    types; [`split`]: AWS's split cost allocation arithmetic; [`text`], [`host`]: digests,
//!    redacted URLs, the machine's name and its processes;
//! 2. [`domain`]: the stored, shared types: clients and their rules, settings (client terms,
//!    pools and share rules, engine settings, alert thresholds), invoices as documents, users
//!    and roles, alerts, runs;
//! 3. [`store`]: the storage trait with its SQLite (embedded default) and Postgres backends;
//! 4. [`auth`]: roles' powers, passwords, tokens and the [`auth::Scope`] every read of client
//!    data takes; [`sources`]: CUR 2.0 exports from a folder or S3, Prometheus and
//!    OpenMetrics, Cost Explorer, Spark; [`synth`]: the generator of realistic exports,
//!    metrics and `truth.json`;
//! 5. [`ingest`]: classification, reconciliation and the atomic per-period replace;
//!    [`engine`]: cost joined with usage (GPU-hours used, idle, unmeasured), chargeback,
//!    opportunities;
//! 6. [`report`]: reports as tables, CSV and JSON; [`archive`]: old periods to files;
//!    [`export`]: FOCUS 1.3 out, with gpuledger's split as allocated charges;
//! 7. [`invoice`]: per-client invoices, notes and their PDFs; [`alerts`]: cost alerts and
//!    their delivery; [`pipeline`]: ingest → compute as one recorded job;
//! 8. [`web`]: the dashboard (pages declared once in [`web::registry`]); [`cli`], [`cmd`]:
//!    the command line, one module per command.

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
pub mod domain;
pub mod engine;
pub mod export;
pub mod host;
pub mod ingest;
pub mod invoice;
pub mod money;
pub mod period;
pub mod pipeline;
pub mod report;
pub mod sources;
pub mod split;
pub mod store;
pub mod synth;
pub mod text;
pub mod web;
