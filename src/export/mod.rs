//! Writing what gpuledger knows in formats other tools read.
//!
//! - [`focus`]: a month's FOCUS bills as FOCUS 1.3, with gpuledger's split of each node's
//!   cost among its pods as allocated charges, written by [`crate::sources::focus_file`].

pub mod focus;
