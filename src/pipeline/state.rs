//! What a reload replaces, as one value: targets, roles and policies,
//! credential stores and request limits. The gateway holds it in an
//! `ArcSwap`; each request reads it once. A change of discovered targets
//! alone replaces only the fleet ([`State::with_fleet`]): credential
//! caches, the list cache and Prometheus plans stay warm.

use std::sync::Arc;

use crate::access::AccessControl;
use crate::agent_settings::{AgentSettings, TargetConfig};
use crate::fleet::{Fleet, GatewayBounds, Target};
use crate::health::HealthBook;
use crate::metrics::Metrics;

use super::authenticate::{AuthMethod, Authenticator};

#[derive(Clone)]
pub struct State {
    pub fleet: Arc<Fleet>,
    pub default_target: Option<Arc<Target>>,
    pub access: Arc<AccessControl>,
    /// Shared by the states a discovery change makes: its caches stay.
    pub authenticator: Arc<Authenticator>,
    pub http_methods: Vec<AuthMethod>,
    pub tls_methods: Vec<AuthMethod>,
    /// `server.allowed_hosts`: the `Host` names the listeners answer.
    pub allowed_hosts: super::hosts::AllowedHosts,
    pub max_body_bytes: usize,
    pub body_read_timeout: std::time::Duration,
    pub max_bulk_items: usize,
    /// Targets one item may reach through a selector, unless roles say.
    pub max_targets_per_item: usize,
    /// `access.pending_timeout` and `access.max_pending_requests`.
    pub pending_timeout: std::time::Duration,
    pub max_pending_requests: u64,
    /// Starts empty after a reload: targets or credentials may have changed.
    pub list_cache: Option<Arc<super::dispatch::list_cache::ListCache>>,
    /// The doors' and the jobs' sections (`[mcp]`, `[prometheus]`,
    /// `[console]`, `[events]`, `[otlp]`, and what each makes of its
    /// own), replaced with the rest; each reads its own.
    pub sections: super::sections::Sections,
}

impl State {
    /// The request limits in force, as `version` reports them.
    pub fn limits(&self) -> crate::version::Limits {
        crate::version::Limits {
            max_body_bytes: self.max_body_bytes,
            max_bulk_items: self.max_bulk_items,
        }
    }

    /// This state with another fleet (the configuration that made this
    /// state, with its `server.default_target`, still in force); fails as
    /// [`Setup::state`] would when the default target is gone.
    pub fn with_fleet(&self, default: Option<&str>, fleet: Arc<Fleet>) -> Result<State, String> {
        Ok(State {
            default_target: default_target(default, &fleet)?,
            fleet,
            ..self.clone()
        })
    }
}

/// `server.default_target`, found in `fleet`.
pub fn default_target(default: Option<&str>, fleet: &Fleet) -> Result<Option<Arc<Target>>, String> {
    default
        .map(|name| {
            fleet
                .by_name(name)
                .cloned()
                .ok_or_else(|| format!("server.default_target: no target is named \"{name}\""))
        })
        .transpose()
}

/// The configuration the gateway runs under, as its life outside any one
/// request needs it: the configured sources of the fleet, a whole new
/// [`State`] for the fleet's targets, and the few settings a change of
/// discovered targets reads. The composition root (`app`) implements it
/// for the whole configuration; the phases see no other section.
pub trait Setup: Send + Sync {
    /// Builds everything, with the fleet's `targets` (every source's
    /// listing folded) in place of the configured ones, or fails naming
    /// what is wrong; nothing is half-applied. `previous` is the state a
    /// reload replaces: what it counted against callers carries over.
    fn state(
        &self,
        targets: Vec<TargetConfig>,
        metrics: &Arc<Metrics>,
        bounds: &GatewayBounds,
        health: &HealthBook,
        previous: Option<&State>,
    ) -> Result<State, String>;

    /// `server.default_target`.
    fn default_target(&self) -> Option<&str>;

    /// `[target_defaults]`.
    fn target_defaults(&self) -> &AgentSettings;

    /// `[[discovery.dns]]` and `[[discovery.kubernetes]]`.
    fn discovery(&self) -> &crate::discovery::DiscoveryConfig;

    /// The addresses the gateway's listeners bind.
    fn listen_addresses(&self) -> Vec<std::net::SocketAddr>;
}
