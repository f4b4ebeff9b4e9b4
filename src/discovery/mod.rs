//! Discovery of targets: instead of (or beside) listing every agent under
//! `[[targets]]`, let the gateway find them. Each mechanism produces plain
//! [`TargetConfig`](crate::config::TargetConfig)s, so a discovered target is
//! checked, built and reached exactly like a configured one.
//!
//! Only DNS for now (`[[discovery.dns]]`, see [`dns`]): SRV records (host and
//! port per answer) or the A/AAAA records of a headless service with a
//! configured port.
//!
//! # Wiring discovery into the gateway
//!
//! [`watch`] re-resolves every `interval` and hands over the whole
//! discovered set whenever it changes. It knows nothing of the gateway: the
//! caller merges the set into the configuration it loaded and reloads.
//!
//! ```no_run
//! # use std::sync::{Arc, Mutex};
//! # fn example(gateway: Arc<jmxgate::Gateway>, source: jmxgate::config::ConfigSource) {
//! let config = source.load().expect("valid configuration");
//! // The latest discovered targets, also for reloads triggered by
//! // SIGHUP or a changed file: they must add it before `Gateway::reload`.
//! let discovered = Arc::new(Mutex::new(Vec::new()));
//! let (latest, gw) = (discovered.clone(), gateway.clone());
//! let task = tokio::spawn(jmxgate::discovery::watch(
//!     config.discovery.dns.clone(),
//!     move |targets| {
//!         *latest.lock().unwrap() = targets.clone();
//!         let mut config = match source.load() {
//!             Ok(c) => c,
//!             Err(e) => return tracing::error!("{e}"),
//!         };
//!         config.targets.extend(targets);
//!         // validate() catches a discovered name that clashes with a
//!         // configured target; the previous set then stays in force.
//!         match config.validate().map_err(|p| p.join("; ")) {
//!             Ok(config) => match gw.reload(&config) {
//!                 Ok(()) => tracing::info!("discovered targets installed"),
//!                 Err(e) => tracing::error!("discovered targets not installed: {e}"),
//!             },
//!             Err(e) => tracing::error!("discovered targets not installed: {e}"),
//!         }
//!     },
//! ));
//! // When a reload changes `config.discovery`, `task.abort()` and spawn a
//! // new watch with the new settings (`DiscoveryConfig` is `PartialEq`).
//! # drop(task);
//! # }
//! ```
//!
//! `on_change` runs on the watch task between two resolutions; it should
//! not block for long (a reload is fine).

pub mod dns;

use serde::Deserialize;

pub use dns::{watch, DnsDiscovery, RecordKind, Scheme};

/// `[discovery]`: the ways targets are discovered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// `[[discovery.dns]]`: one entry per DNS name to resolve.
    #[serde(default)]
    pub dns: Vec<DnsDiscovery>,
}

impl DiscoveryConfig {
    /// True when nothing is to be discovered.
    pub fn is_empty(&self) -> bool {
        self.dns.is_empty()
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
            .collect()
    }
}
