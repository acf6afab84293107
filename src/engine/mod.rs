//! The engine: turns ingested cost and usage into the numbers people act on.
//!
//! - [`compute`]: a period's pod-days, GPU pod-hours and metrics joined with polars into
//!   rollups (cost, GPU-hours used/idle/unmeasured, spot, inference, P95), written whole;
//! - [`classify`]: clients from mapping rules, workload classes, platform namespaces;
//! - [`bills`]: the month's FOCUS bills of other providers, in the reporting currency, folded
//!   into a period's inputs;
//! - [`chargeback`]: direct cost, shares of the platform and idle pools, markup — exact;
//! - [`opportunities`]: idle GPU, Spot for training, MIG/time-slicing, right-sizing;
//! - [`usage`]: the bill's GPU allocation joined with measured utilization, per request;
//! - [`kube_split`]: a node-hour's cost split among its pods from Prometheus, by AWS's rules;
//! - [`cluster_split`]: one cluster's split for a period, node costs from its bill, grouped.
//! - [`forecast`]: daily series forecast 1–3 months ahead, each by the method its own
//!   rolling-origin backtest scores best;
//! - [`commitments`]: an hourly commitment simulated hour by hour against eligible usage, the
//!   best one, and advice from a short and a long lookback.

pub mod bills;
pub mod chargeback;
pub mod classify;
pub mod cluster_split;
pub mod commitments;
pub mod compute;
pub mod forecast;
pub mod kube_split;
pub mod opportunities;
pub mod pods;
pub mod usage;
