//! The composition root: the whole configuration turned into a running
//! [`Gateway`]. Each module owns its section of the file and checks it
//! (`config` composes them); this room is where they meet: the state a
//! reload replaces is built here from every section, and the gateway is
//! started and reloaded with it. Nothing below it imports `config`.

use std::sync::Arc;

use crate::access::AccessControl;
use crate::agent_settings::{AgentSettings, TargetConfig};
use crate::config::Config;
use crate::doors::access::Elevation;
use crate::doors::console::sign_in::SignIn;
use crate::doors::mcp::jsonrpc::BatchBounds;
use crate::doors::prometheus::exporter::Exporter;
use crate::doors::ConsoleSignIn;
use crate::fleet::{Fleet, GatewayBounds, Listings, SourceName};
use crate::health::HealthBook;
use crate::jobs::otlp::Exports;
use crate::metrics::Metrics;
use crate::pipeline::authenticate::Authenticator;
use crate::pipeline::lifecycle::Fixed;
use crate::pipeline::sections::Sections;
use crate::pipeline::state::{self, Setup, State};
use crate::pipeline::Gateway;

impl Gateway {
    pub fn new(config: &Config) -> Result<Gateway, String> {
        let (setup, configured) = setup_of(config);
        Gateway::assemble(
            setup,
            configured,
            Fixed {
                server: &config.server,
                health: &config.health,
                audit: config.audit.as_ref(),
                replica_id: config.replica_id(),
            },
            Sections::default()
                .with(Elevation::new(&config.access.store))
                .with(Exports::default())
                .with(crate::doors::mcp::logging::LogLevels::default())
                .with(crate::doors::console::trend::Trends::default()),
            crate::doors::access::settle,
        )
    }

    /// Replaces targets, roles, policies and credential stores at once.
    /// In-flight requests finish under the set they started with.
    /// Listeners and the audit log keep their settings until a restart.
    pub fn reload(&self, config: &Config) -> Result<(), String> {
        let (setup, configured) = setup_of(config);
        self.reconfigure(setup, configured)
    }
}

/// What `serve` would fail on that the configuration's own checks don't
/// see: each file it opens (the HTTPS listener's certificate, key and
/// CA; policies; users; token keys; rules files; the targets'
/// certificates and passwords), read as `serve` reads it. Each part is
/// built on its own, so every part's problem is named in one run, not
/// only the first.
pub fn file_problems(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(tls) = &config.server.tls {
        if let Err(e) = crate::tls::ReloadingTls::new(tls.clone()) {
            problems.push(format!("server.tls: {e}"));
        }
    }
    if let Err(e) = AccessControl::new(&config.roles, &config.access) {
        problems.push(e);
    }
    if let Err(e) = Authenticator::from_config_after(&config.auth, None) {
        problems.push(e);
    }
    if let Err(e) = config.sections() {
        problems.push(e);
    }
    let targets: Vec<TargetConfig> = config
        .targets
        .iter()
        .chain(config.inventory_targets.iter().flatten())
        .cloned()
        .collect();
    if let Err(e) = Fleet::with_budget(
        &targets,
        &config.target_defaults,
        &GatewayBounds::default(),
        &HealthBook::default(),
    ) {
        problems.push(e);
    }
    problems
}

/// What the gateway keeps of `config` (for the reloads and discovery
/// changes to come), and its configured sources, handed to the source
/// book: the targets are held there only, not a second time in the kept
/// configuration (at 100,000 targets, 50 MB).
fn setup_of(config: &Config) -> (Arc<dyn Setup>, Listings) {
    let mut kept = config.clone();
    let configured = std::iter::once((SourceName::Config, std::mem::take(&mut kept.targets)))
        .chain(
            kept.inventory
                .iter()
                .zip(std::mem::take(&mut kept.inventory_targets))
                .enumerate()
                .map(|(position, (inventory, targets))| {
                    (
                        SourceName::Inventory {
                            position,
                            file: inventory.targets_file.display().to_string().into(),
                        },
                        targets,
                    )
                }),
        )
        .collect();
    (Arc::new(kept), configured)
}

/// Joins `[cluster]`'s members, when configured, before any background
/// work starts: the engine unreachable or the replica id in use is an
/// error here. `None`: no `[cluster]`, this replica does everything.
pub async fn join_cluster(
    gateway: &Gateway,
    config: &Config,
) -> Result<Option<crate::cluster::Started>, String> {
    let Some(cluster) = &config.cluster else {
        return Ok(None);
    };
    crate::cluster::start(cluster, gateway.cluster(), gateway.metrics.clone())
        .await
        .map(Some)
}

impl Config {
    /// The doors' and the jobs' sections of a new state, each as its door
    /// or job reads it (`doors::DoorSections`, `jobs::JobSections`).
    fn sections(&self) -> Result<Sections, String> {
        let console_sign_in: ConsoleSignIn =
            SignIn::new(&self.console, self.auth.bearer.as_ref())?.map(Arc::new);
        let mcp_batch = BatchBounds {
            max_items: self.server.max_bulk_items,
            max_bytes: usize::try_from(self.target_defaults.max_response_bytes())
                .unwrap_or(usize::MAX),
            deadline: self.target_defaults.request_timeout(),
        };
        let prometheus = Arc::new(Exporter::new(&self.prometheus)?);
        Ok(Sections::default()
            .with(self.mcp.clone())
            .with(self.console.clone())
            .with(console_sign_in)
            .with(self.events.clone())
            .with(self.otlp.clone())
            .with(mcp_batch)
            .with(prometheus))
    }
}

impl Setup for Config {
    fn state(
        &self,
        targets: Vec<TargetConfig>,
        metrics: &Arc<Metrics>,
        bounds: &GatewayBounds,
        health: &HealthBook,
        previous: Option<&State>,
    ) -> Result<State, String> {
        let fleet = Arc::new(Fleet::with_budget(
            &targets,
            &self.target_defaults,
            bounds,
            health,
        )?);
        let default_target = state::default_target(self.server.default_target.as_deref(), &fleet)?;
        let access = Arc::new(AccessControl::new(&self.roles, &self.access)?);
        let authenticator =
            Authenticator::from_config_after(&self.auth, previous.map(|p| &*p.authenticator))?
                .with_metrics(metrics.clone());
        let anonymous = self.access.anonymous_role.is_some();
        let http_methods = self.server.http_methods(&self.auth, anonymous);
        let tls_methods = self.server.tls_methods(&self.auth, anonymous);
        authenticator.check_methods("server.auth", &http_methods)?;
        if self.server.tls.is_some() {
            authenticator.check_methods("server.tls_auth", &tls_methods)?;
        }
        let sections = self.sections()?;
        Ok(State {
            fleet,
            default_target,
            access,
            authenticator: Arc::new(authenticator),
            http_methods,
            tls_methods,
            allowed_hosts: crate::pipeline::hosts::AllowedHosts::new(
                self.server.allowed_hosts.as_deref(),
            ),
            max_body_bytes: self.server.max_body_bytes,
            body_read_timeout: self.server.body_read_timeout,
            max_bulk_items: self.server.max_bulk_items,
            max_targets_per_item: self.server.max_targets_per_item,
            pending_timeout: self.access.pending_timeout,
            max_pending_requests: self.access.max_pending_requests,
            list_cache: crate::pipeline::dispatch::list_cache::ListCache::new(&self.list_cache)
                .map(Arc::new),
            sections,
        })
    }

    fn default_target(&self) -> Option<&str> {
        self.server.default_target.as_deref()
    }

    fn target_defaults(&self) -> &AgentSettings {
        &self.target_defaults
    }

    fn discovery(&self) -> &crate::discovery::DiscoveryConfig {
        &self.discovery
    }

    fn listen_addresses(&self) -> Vec<std::net::SocketAddr> {
        Config::listen_addresses(self)
    }
}

/// A valid config with one target per name (nothing listens there), for
/// the tests of the parts this room composes.
#[cfg(test)]
pub(crate) fn test_config(names: &[&str]) -> Config {
    let targets: String = names
        .iter()
        .map(|n| format!("[[targets]]\nname = \"{n}\"\nurl = \"http://127.0.0.1:1/{n}\"\n"))
        .collect();
    Config::parse(&format!("[server]\nlisten = \"127.0.0.1:0\"\n{targets}"))
        .and_then(Config::validate)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use crate::doors::DoorSections as _;
    use crate::jobs::JobSections as _;

    /// `Sections::get` panics on a section the composition root forgot:
    /// every door's and job's is put in, at start and after a reload.
    #[test]
    fn every_door_and_job_finds_its_section() {
        let config = super::test_config(&["a"]);
        let gateway = crate::pipeline::Gateway::new(&config).unwrap();
        gateway.reload(&config).unwrap();
        let state = gateway.state.load();
        let _ = (state.mcp(), state.mcp_batch(), state.prometheus());
        let _ = (state.console(), state.console_sign_in());
        let _ = (state.events(), state.otlp());
        let _ = crate::doors::access::elevation(&gateway);
        let _ = crate::jobs::otlp::exports(&gateway);
        let _ = crate::doors::mcp::logging_levels(&gateway);
        let _: &crate::doors::console::trend::Trends = gateway.rooms.get();
    }
}
