//! Writing what gpuledger knows in formats other tools read.
//!
//! - [`focus`]: a month's FOCUS bills as FOCUS 1.3, with gpuledger's split of each node's
//!   cost among its pods as allocated charges;
//! - [`focus_file`]: FOCUS rows to gzip CSV or Parquet (the generator's bills use it too).

pub mod focus;
pub mod focus_file;
