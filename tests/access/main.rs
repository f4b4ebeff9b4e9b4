//! Just-in-time access: the access-requests API and four-eyes, the store,
//! and replicas sharing it.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/four_eyes.rs"]
mod four_eyes;
#[path = "../common/haproxy.rs"]
mod haproxy;
#[path = "../common/postgres.rs"]
mod postgres;

mod access_replicas;
mod access_requests;
mod access_store;
mod four_eyes_bypasses;
