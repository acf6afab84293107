//! The ground floor: the types gpuledger stores and shares between its parts, with their
//! names, texts and arithmetic, importing nothing above [`crate::money`], [`crate::period`]
//! and the small helpers. [`crate::store`] reads and writes them; every part above uses them.
//!
//! - [`clients`]: gpuledger's own client names and the rules that map namespaces to clients;
//! - [`settings`]: client terms, pools and share rules, engine settings and alert thresholds,
//!   each version with the month it takes effect;
//! - [`invoices`]: invoices and notes as documents;
//! - [`users`]: users, roles, sessions and the audit log;
//! - [`alerts`]: alerts, their events and the webhooks they go to;
//! - [`fx`]: exchange rates with the month they take effect, and conversion;
//! - [`plans`]: planned changes to demand, layered onto forecasts;
//! - [`runs`]: the recorded runs (their kinds and statuses) and a CUR ingest's reconciliation.

pub mod alerts;
pub mod clients;
pub mod fx;
pub mod invoices;
pub mod plans;
pub mod runs;
pub mod settings;
pub mod users;
