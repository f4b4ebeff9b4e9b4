//! The audit log: records, the chain and its verifier, syslog shipping,
//! signed checkpoints, and the golden file every door writes.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;

mod audit_checkpoints;
mod audit_golden;
mod audit_log;
mod audit_syslog;
