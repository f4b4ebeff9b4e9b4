//! Where targets come from and how they are kept: DNS and Kubernetes
//! discovery, the deployment manifests, inventory files, health, and a
//! large fleet.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/kube_api.rs"]
mod kube_api;

mod dns_discovery;
mod fleet_scale;
mod inventory_files;
mod kubernetes_discovery;
mod kubernetes_manifests;
mod target_health;
