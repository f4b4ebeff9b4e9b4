//! Authorization by policy: jolokia-access.xml through the gateway, and the
//! restrictor against Jolokia's own.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;

mod cors_and_reach;
mod policy_through_gateway;
mod restrictor_conformance;
