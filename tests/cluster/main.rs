//! Replicas sharing the fleet's background work (`[cluster]`): several
//! real `jmxgate serve` processes with their members in a real engine
//! (PostgreSQL, or Leases in a real kube-apiserver), probing counting
//! stand-in agents that record every probe.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/counting.rs"]
mod counting;
#[path = "../common/kube_api.rs"]
mod kube_api;
#[path = "../common/postgres.rs"]
mod postgres;
#[path = "../common/victoria.rs"]
mod victoria;

mod replicas;
