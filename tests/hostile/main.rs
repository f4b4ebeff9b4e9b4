//! Hostile peers: agents, request bodies, connections, foreign pages and
//! hosts.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;

mod connections;
mod foreign_pages;
mod hostile_agents;
mod hostile_input;
mod https_pages;
