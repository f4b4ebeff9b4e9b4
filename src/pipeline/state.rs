//! What a reload replaces, as one value: targets, roles and policies,
//! credential stores and request limits. The gateway holds it in an
//! `ArcSwap`; each request reads it once. A change of discovered targets
//! alone replaces only the fleet ([`State::with_fleet`]): credential
//! caches, the list cache and Prometheus plans stay warm.

use std::sync::Arc;

use crate::access::AccessControl;
use crate::config::Config;
use crate::fleet::{Fleet, Target};

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
    /// `[mcp]`: where assistants connect, how big a tool result may be.
    pub mcp: crate::doors::mcp::config::McpConfig,
    /// An MCP batch's bounds: a Jolokia bulk's (items, answer bytes, time).
    pub mcp_batch: crate::doors::mcp::jsonrpc::BatchBounds,
    /// `[prometheus]`: the scrape endpoint, its modules and plans.
    pub prometheus: Arc<crate::doors::prometheus::exporter::Exporter>,
    /// `[console]`: where the pages are.
    pub console: crate::doors::console::config::ConsoleConfig,
    /// `[console.oidc]`: signing in at the provider.
    pub console_sign_in: Option<Arc<crate::doors::console::sign_in::SignIn>>,
    /// `[events]`: who is told of the journal's events.
    pub events: crate::jobs::webhooks::config::EventsConfig,
}

impl State {
    /// The request limits in force, as `version` reports them.
    pub fn limits(&self) -> crate::version::Limits {
        crate::version::Limits {
            max_body_bytes: self.max_body_bytes,
            max_bulk_items: self.max_bulk_items,
        }
    }

    /// Builds everything, or fails naming what is wrong; nothing is
    /// half-applied. `previous` is the state a reload replaces: what it
    /// counted against callers carries over.
    pub fn from_config(
        config: &Config,
        metrics: &Arc<crate::metrics::Metrics>,
        bounds: &crate::fleet::GatewayBounds,
        health: &crate::health::HealthBook,
        previous: Option<&State>,
    ) -> Result<State, String> {
        let fleet = Arc::new(Fleet::with_budget(
            &config.targets,
            &config.target_defaults,
            bounds,
            health,
        )?);
        let default_target = default_target(config, &fleet)?;
        let access = Arc::new(AccessControl::new(&config.roles, &config.access)?);
        let authenticator =
            Authenticator::from_config_after(&config.auth, previous.map(|p| &*p.authenticator))?
                .with_metrics(metrics.clone());
        let http_methods = config.server.http_methods(&config.auth);
        let tls_methods = config.server.tls_methods(&config.auth);
        authenticator.check_methods("server.auth", &http_methods)?;
        if config.server.tls.is_some() {
            authenticator.check_methods("server.tls_auth", &tls_methods)?;
        }
        Ok(State {
            fleet,
            default_target,
            access,
            authenticator: Arc::new(authenticator),
            http_methods,
            tls_methods,
            allowed_hosts: super::hosts::AllowedHosts::new(config.server.allowed_hosts.as_deref()),
            max_body_bytes: config.server.max_body_bytes,
            body_read_timeout: config.server.body_read_timeout,
            max_bulk_items: config.server.max_bulk_items,
            max_targets_per_item: config.server.max_targets_per_item,
            pending_timeout: config.access.pending_timeout,
            max_pending_requests: config.access.max_pending_requests,
            list_cache: super::dispatch::list_cache::ListCache::new(&config.list_cache)
                .map(Arc::new),
            mcp: config.mcp.clone(),
            console: config.console.clone(),
            console_sign_in: crate::doors::console::sign_in::SignIn::new(
                &config.console,
                config.auth.bearer.as_ref(),
            )?
            .map(Arc::new),
            events: config.events.clone(),
            mcp_batch: crate::doors::mcp::jsonrpc::BatchBounds {
                max_items: config.server.max_bulk_items,
                max_bytes: usize::try_from(config.target_defaults.max_response_bytes())
                    .unwrap_or(usize::MAX),
                deadline: config.target_defaults.request_timeout(),
            },
            prometheus: Arc::new(crate::doors::prometheus::exporter::Exporter::new(
                &config.prometheus,
            )?),
        })
    }

    /// This state with another fleet (the configuration that made this
    /// state, `config`, still in force); fails as
    /// [`from_config`](Self::from_config) would when the default target
    /// is gone.
    pub fn with_fleet(&self, config: &Config, fleet: Arc<Fleet>) -> Result<State, String> {
        Ok(State {
            default_target: default_target(config, &fleet)?,
            fleet,
            ..self.clone()
        })
    }
}

/// `server.default_target`, found in `fleet`.
fn default_target(config: &Config, fleet: &Fleet) -> Result<Option<Arc<Target>>, String> {
    config
        .server
        .default_target
        .as_deref()
        .map(|name| {
            fleet
                .by_name(name)
                .cloned()
                .ok_or_else(|| format!("server.default_target: no target is named \"{name}\""))
        })
        .transpose()
}
