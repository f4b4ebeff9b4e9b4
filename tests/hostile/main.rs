//! Hostile agents, hostile input and the hardening rounds' findings.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;

mod hardening;
mod hardening_round3;
mod hardening_round4;
mod hostile_agents;
mod hostile_input;
