//! Clients of the gateway: real HTTP clients, Java clients, the Rust client
//! and the CLI.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod java_clients;
mod real_clients;
mod rust_client_and_cli;
