//! Discovery of targets: instead of (or beside) listing every agent under
//! `[[targets]]`, let the gateway find them. Each mechanism produces plain
//! [`TargetConfig`](crate::agent_settings::TargetConfig)s, so a discovered target is
//! checked, built and reached exactly like a configured one.
//!
//! DNS (`[[discovery.dns]]`, see [`dns`]): SRV records (host and port per
//! answer) or the A/AAAA records of a headless service with a configured
//! port. Kubernetes (`[[discovery.kubernetes]]`, see [`kubernetes`]): the
//! Pods of a cluster, watched through its API server.
//!
//! # Wiring discovery into the gateway
//!
//! Nothing to wire by hand: [`Gateway::spawn_discovery`] starts
//! [`dns::watch_entry`] for each `[[discovery.dns]]` entry and
//! [`kubernetes::watch`] for each `[[discovery.kubernetes]]` entry of the
//! configuration the gateway was built with (`jmxgate serve` calls it).
//! Each entry is one source of the fleet (`dns[0]`, `kubernetes[0]`, …),
//! a stream of [`Change`]s that one task folds beside the configuration's
//! targets and inventory files ([`crate::fleet::sources`]): DNS hands over
//! its whole listing ([`Change::Restart`]), Kubernetes what changed
//! ([`Change::Apply`]), both whether they work ([`Change::Up`],
//! `jmxgate_discovery_up`). Only the targets that are new or differ are
//! built and only those gone are dropped: every other target keeps its
//! client, connections and health, and roles and credential caches stay.
//! [`Gateway::reload`] rebuilds from the new configuration plus every
//! source's last listing, so a SIGHUP or a changed file keeps what
//! discovery found. A name two sources give is kept by the first of them
//! in [`SourceName`](crate::fleet::SourceName)'s order (configured
//! targets first), and the other is logged once; a target that can't be
//! built is left out with an error, the rest go in.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn example(config: jmxgate::Config) -> Result<(), String> {
//! let gateway = Arc::new(jmxgate::Gateway::new(&config)?);
//! // `None` when the configuration has no discovery entry. The task
//! // holds the gateway weakly and keeps discovering until aborted.
//! let discovery = gateway.spawn_discovery();
//! # if let Some(task) = discovery { task.abort(); }
//! # Ok(())
//! # }
//! ```
//!
//! Another source of targets (a service registry, a cloud API) is fed the
//! same way: hand its whole listing to
//! `gateway.set_discovered_by("registry", targets)` whenever it changes,
//! or only what changed with `gateway.discovered_by("registry",
//! Change::Apply { .. })`. Discovery settings themselves are read once;
//! changing them needs a restart.
//!
//! [`Gateway::spawn_discovery`]: crate::Gateway::spawn_discovery
//! [`Gateway::discovered_by`]: crate::Gateway::discovered_by
//! [`Gateway::reload`]: crate::Gateway::reload

pub mod dns;
pub mod kubernetes;

use serde::Deserialize;

pub use dns::{DnsDiscovery, RecordKind, Scheme};
pub use kubernetes::KubernetesDiscovery;

pub use crate::fleet::Change;

/// `[discovery]`: the ways targets are discovered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// `[[discovery.dns]]`: one entry per DNS name to resolve.
    #[serde(default)]
    pub dns: Vec<DnsDiscovery>,
    /// `[[discovery.kubernetes]]`: one entry per cluster (or part of one)
    /// whose Pods are agents.
    #[serde(default)]
    pub kubernetes: Vec<KubernetesDiscovery>,
}

impl DiscoveryConfig {
    /// True when nothing is to be discovered.
    pub fn is_empty(&self) -> bool {
        self.dns.is_empty() && self.kubernetes.is_empty()
    }

    /// What works but deserves a warning (`discovery.kubernetes[0].user:
    /// …`), for the log at start and for the configuration check.
    pub fn warnings(&self) -> Vec<String> {
        self.kubernetes
            .iter()
            .enumerate()
            .flat_map(|(i, k)| {
                k.warnings()
                    .into_iter()
                    .map(move |w| format!("discovery.kubernetes[{i}].{w}"))
            })
            .collect()
    }

    /// Every problem of every entry, each prefixed with its key
    /// (`discovery.dns[0].port: ...`), for the configuration check.
    pub fn problems(&self) -> Vec<String> {
        self.dns
            .iter()
            .enumerate()
            .flat_map(|(i, d)| {
                d.problems()
                    .into_iter()
                    .map(move |p| format!("discovery.dns[{i}].{p}"))
            })
            .chain(self.kubernetes.iter().enumerate().flat_map(|(i, k)| {
                k.problems()
                    .into_iter()
                    .map(move |p| format!("discovery.kubernetes[{i}].{p}"))
            }))
            .collect()
    }
}
