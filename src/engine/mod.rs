//! The engine: turns ingested cost and usage into the numbers people act on.
//!
//! Today: GPU usage joined with the bill's GPU allocation ([`usage`]), computed per report
//! request. Materialized rollups (polars) are the next step; see the issue tracker.

pub mod usage;
