//! The gateway's configuration: one TOML file (`config/gateway.toml` is the
//! documented example), read into [`Config`] and checked as a whole so that
//! a user sees every problem at once, each named by file and key.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod source;

pub use source::ConfigSource;

/// Re-exported where they were always found.
pub use crate::access::{AccessConfig, RoleConfig};
pub use crate::agent_settings::{
    AgentSettings, TargetConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_REQUEST_TIMEOUT,
};
use crate::pipeline::authenticate::AuthConfig;
pub use crate::pipeline::dispatch::list_cache::ListCacheConfig;
pub use crate::pipeline::server::{
    ServerConfig, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_MAX_BULK_ITEMS, DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_KEPT_AGENT_CONNECTIONS,
};
use crate::principal::AuthMethod;
pub use crate::secret::Secret;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    /// Defaults applied to every target that does not set its own value.
    #[serde(default)]
    pub target_defaults: AgentSettings,
    #[serde(default)]
    pub targets: Vec<TargetConfig>,
    /// More targets from inventory files (TOML, JSON or YAML), re-read on
    /// every reload.
    #[serde(default)]
    pub inventory: Vec<crate::inventory::InventoryConfig>,
    /// Each `[[inventory]]` file's targets, read by
    /// [`add_inventories`](Config::add_inventories): one source of the
    /// fleet each, beside `targets`.
    #[serde(skip)]
    pub inventory_targets: Vec<Vec<TargetConfig>>,
    /// Who may do what. Without it (and without roles) the gateway is open:
    /// every caller may do everything on every target.
    #[serde(default)]
    pub access: AccessConfig,
    #[serde(default)]
    pub roles: Vec<RoleConfig>,
    /// Credential stores for callers.
    #[serde(default)]
    pub auth: AuthConfig,
    /// The admin listener: metrics, health and readiness.
    #[serde(default)]
    pub admin: Option<crate::admin::config::AdminConfig>,
    /// Where logs go and how they look.
    #[serde(default)]
    pub log: LogConfig,
    /// The tamper-evident audit files. Without it, audit records go to the
    /// log only.
    #[serde(default)]
    pub audit: Option<crate::audit::AuditConfig>,
    /// The shared cache of `list` answers.
    #[serde(default)]
    pub list_cache: ListCacheConfig,
    /// Background probes and the circuit breaker per target.
    #[serde(default)]
    pub health: crate::health::HealthConfig,
    /// Targets found at run time (`[[discovery.dns]]`, `[[discovery.kubernetes]]`).
    #[serde(default)]
    pub discovery: crate::discovery::DiscoveryConfig,
    /// The MCP endpoint for AI assistants.
    #[serde(default)]
    pub mcp: crate::doors::mcp::config::McpConfig,
    /// The fleet console (`[console]`).
    #[serde(default)]
    pub console: crate::doors::console::config::ConsoleConfig,
    /// Webhooks told of the fleet's events (`[[events.webhooks]]`).
    #[serde(default)]
    pub events: crate::jobs::webhooks::config::EventsConfig,
    /// The Prometheus scrape endpoint and its rules files.
    #[serde(default)]
    pub prometheus: crate::doors::prometheus::config::PrometheusConfig,
    /// Pushes of the fleet's metrics over OTLP (`[[otlp.exports]]`).
    #[serde(default)]
    pub otlp: crate::jobs::otlp::config::OtlpConfig,
    /// Replicas sharing the background work (`[cluster]`); without it,
    /// this replica does all of it.
    #[serde(default)]
    pub cluster: Option<crate::cluster::ClusterConfig>,
}

/// `[log]`: the log on stderr.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `text` (for people), `json` (one object per line), `quiet`
    /// (errors only).
    #[serde(default)]
    pub format: LogFormat,
    /// A `RUST_LOG`-style filter, e.g. `info,jmxgate::audit=warn`.
    /// `RUST_LOG` itself wins when set. Unset: see [`Config::log_filter`].
    #[serde(default)]
    pub filter: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
    Quiet,
}

/// Everything wrong with a config file, each problem on its own line.
#[derive(Debug)]
pub struct ConfigError {
    pub file: PathBuf,
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{}: {} problem{} in the configuration",
            self.file.display(),
            n,
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads, parses and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        ConfigSource::file(path).load_with_env(&[])
    }

    /// The log filter: `log.filter` when set; otherwise `info`, with the
    /// per-item audit events left out when the audit files hold them
    /// (formatting each item twice costs every request).
    pub fn log_filter(&self) -> &str {
        match (&self.log.filter, &self.audit) {
            (Some(filter), _) => filter,
            // sqlx's own INFO lines (each migration, idle pings) say
            // nothing an operator acts on; the store's failures are ours.
            (None, Some(_)) => "info,sqlx=warn,jmxgate::audit=warn",
            (None, None) => "info,sqlx=warn",
        }
    }

    /// The addresses the gateway's listeners bind: `[server] listen`,
    /// `[server.tls] listen` and `[admin] listen`.
    pub fn listen_addresses(&self) -> Vec<SocketAddr> {
        self.server
            .listen
            .into_iter()
            .chain(self.server.tls.as_ref().map(|t| t.listen))
            .chain(self.admin.as_ref().map(|a| a.listen))
            .collect()
    }

    /// Parses TOML text; syntax and type errors carry the key and line.
    pub fn parse(text: &str) -> Result<Config, Vec<String>> {
        toml::from_str(text).map_err(|e| vec![e.to_string().trim_end().replace('\n', "\n    ")])
    }

    /// Reads every `[[inventory]]` file into `inventory_targets`. A file
    /// that can't be read, or that lists a name twice, is an error naming
    /// it; a name two sources give is the fleet's to settle.
    pub fn add_inventories(&mut self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        self.inventory_targets = self
            .inventory
            .iter()
            .map(|inventory| {
                crate::inventory::load_checked(inventory).unwrap_or_else(|p| {
                    problems.extend(p);
                    Vec::new()
                })
            })
            .collect();
        crate::agent_settings::share_labels(
            self.targets
                .iter_mut()
                .chain(self.inventory_targets.iter_mut().flatten())
                .map(|t| &mut t.labels),
        );
        let mut settings = crate::agent_settings::SettingsPool::default();
        for t in self
            .targets
            .iter_mut()
            .chain(self.inventory_targets.iter_mut().flatten())
        {
            settings.share(&mut t.agent);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Checks what TOML types can't: unique names, usable URLs, one password
    /// source, references that exist.
    pub fn validate(mut self) -> Result<Config, Vec<String>> {
        let mut problems = crate::agent_settings::problems(&self.targets, &self.target_defaults);
        if let Some(audit) = &mut self.audit {
            problems.extend(audit.problems());
        }
        if let Some(d) = &self.server.default_target {
            if !self
                .targets
                .iter()
                .chain(self.inventory_targets.iter().flatten())
                .any(|t| t.name == *d)
            {
                problems.push(format!("server.default_target: no target is named \"{d}\""));
            }
        }
        problems.extend(crate::access::problems(&self.roles, &self.access));
        if let Some(role) = &self.access.anonymous_role {
            problems.extend(self.server.anonymous_problem(&self.auth, role));
        }
        if let Some(k) = &self.auth.kubernetes {
            for role in k.role_names() {
                if !self.roles.iter().any(|r| r.name == *role) {
                    problems.push(format!(
                        "auth.kubernetes: role \"{role}\" is not among [[roles]]"
                    ));
                }
            }
        }
        problems.extend(self.mcp.problems());
        let role_names: Vec<String> = self.roles.iter().map(|r| r.name.clone()).collect();
        problems.extend(self.console.problems(&role_names));
        if let Some(oidc) = self.console.oidc.as_ref().filter(|_| self.console.enabled) {
            match &self.auth.bearer {
                None => problems.push(
                    "console.oidc: needs [auth.bearer], which verifies the access tokens the sign-in gets".into(),
                ),
                Some(bearer) if oidc.issuer.is_none() && bearer.issuer.is_none() => problems.push(
                    "console.oidc.issuer: not set, here or as auth.bearer.issuer".into(),
                ),
                Some(_) => {}
            }
            for (key, methods) in [
                ("server.auth", &self.server.auth),
                ("server.tls_auth", &self.server.tls_auth),
            ] {
                if methods
                    .as_ref()
                    .is_some_and(|m| !m.contains(&AuthMethod::Bearer))
                {
                    problems.push(format!(
                        "console.oidc: {key} leaves out \"bearer\", so the sign-in's tokens would not be accepted there"
                    ));
                }
            }
        }
        problems.extend(self.events.problems());
        problems.extend(self.health.problems());
        if let Some(basic) = &self.auth.basic {
            problems.extend(basic.problems());
        }
        problems.extend(self.prometheus.problems());
        let modules = self.prometheus.open_telemetry_blocks();
        problems.extend(self.otlp.problems(&modules, &role_names));
        problems.extend(self.server.problems());
        problems.extend(self.discovery.problems());
        problems.extend(self.cluster_problems());
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(problems)
        }
    }
}

impl Config {
    /// This replica's id: `JMXGATE_REPLICA_ID`, else `cluster.replica_id`,
    /// else `audit.replica_id`, else the hostname.
    pub fn replica_id(&self) -> String {
        std::env::var(crate::audit::REPLICA_ENV)
            .ok()
            .filter(|e| !e.is_empty())
            .or_else(|| self.cluster.as_ref()?.replica_id.clone())
            .or_else(|| self.audit.as_ref()?.replica_id.clone())
            .or_else(crate::audit::default_replica_id)
            .unwrap_or_else(|| "jmxgate".to_string())
    }

    /// `[cluster]`, its replica id resolved (see [`Config::replica_id`])
    /// and its `advertise_url` (the `[admin]` listener's address when it
    /// is one address: the replicas read each other's probe results
    /// there).
    fn cluster_problems(&mut self) -> Vec<String> {
        let id = self.replica_id();
        let admin = self.admin.as_ref().map(|a| a.listen);
        let Some(cluster) = &mut self.cluster else {
            return Vec::new();
        };
        let mut problems = cluster.problems();
        if let Some(p) = cluster.replica_id_problem(&id) {
            problems.push(format!("cluster.replica_id: {p}"));
        }
        cluster.replica_id = Some(id);
        match (admin, &cluster.advertise_url) {
            (None, _) => problems.push(
                "cluster: needs [admin] listen: the replicas read each other's health probes from the admin listener's /cluster/health".into(),
            ),
            (Some(listen), None) if listen.ip().is_unspecified() => problems.push(format!(
                "cluster.advertise_url: needed, as [admin] listen = \"{listen}\" is no address another replica can connect to; set where they reach this replica's admin listener, e.g. JMXGATE__CLUSTER__ADVERTISE_URL=http://$(POD_IP):{} in a pod",
                listen.port()
            )),
            (Some(listen), None) => cluster.advertise_url = Some(format!("http://{listen}")),
            (Some(_), Some(_)) => {}
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MINIMAL: &str = r#"
        [server]
        listen = "127.0.0.1:8080"

        [[targets]]
        name = "orders-1"
        url = "http://127.0.0.1:8778/jolokia"
        labels = { env = "prod", app = "orders" }
        request_timeout = "3s"
    "#;

    #[test]
    fn parses_the_minimal_example() {
        let c = Config::parse(MINIMAL).unwrap().validate().unwrap();
        assert_eq!(c.targets[0].labels.get("env"), Some("prod"));
        assert_eq!(
            c.targets[0].agent.request_timeout,
            Some(Duration::from_secs(3))
        );
        assert_eq!(c.server.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    }

    #[test]
    fn audit_files_take_item_events_out_of_the_default_log() {
        let plain = Config::parse(MINIMAL).unwrap();
        assert_eq!(plain.log_filter(), "info,sqlx=warn");
        let audited = Config::parse(&format!("{MINIMAL}\n[audit]\ndir = \"audit\"\n")).unwrap();
        assert_eq!(audited.log_filter(), "info,sqlx=warn,jmxgate::audit=warn");
        let chosen = Config::parse(&format!(
            "[log]\nfilter = \"debug\"\n{MINIMAL}\n[audit]\ndir = \"audit\"\n"
        ))
        .unwrap();
        assert_eq!(chosen.log_filter(), "debug");
    }

    #[test]
    fn zero_limits_that_were_taken_as_one_are_refused() {
        let text = format!(
            "{MINIMAL}\n[health]\nmax_probes_in_flight = 0\n\
             [auth.basic]\nusers_file = \"users.toml\"\nmax_failures = 0\nmax_queued_checks = 0\n"
        );
        let problems = Config::parse(&text).unwrap().validate().unwrap_err();
        for key in [
            "health.max_probes_in_flight",
            "auth.basic.max_failures",
            "auth.basic.max_queued_checks",
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(&format!("{key}: must be greater than zero"))),
                "{key}: {problems:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::parse("[server]\nlisten = \"127.0.0.1:1\"\nlisten_port = 3\n")
            .unwrap_err()
            .join("\n");
        assert!(err.contains("listen_port"), "{err}");
    }

    #[test]
    fn an_empty_method_list_is_refused_with_the_choices() {
        let text = MINIMAL.replace(
            "listen = \"127.0.0.1:8080\"",
            "listen = \"127.0.0.1:8080\"\nauth = []",
        );
        let all = Config::parse(&text)
            .unwrap()
            .validate()
            .unwrap_err()
            .join("\n");
        assert!(
            all.contains("server.auth: an empty list accepts no caller"),
            "{all}"
        );
        assert!(all.contains("\"anonymous\""), "{all}");
        let anonymous = MINIMAL.replace(
            "listen = \"127.0.0.1:8080\"",
            "listen = \"127.0.0.1:8080\"\nauth = [\"anonymous\"]",
        );
        assert!(Config::parse(&anonymous).unwrap().validate().is_ok());
    }

    #[test]
    fn all_problems_are_reported_together() {
        let text = r#"
            [server]
            listen = "127.0.0.1:8080"
            default_target = "nope"
            [[targets]]
            name = "a b"
            url = "ftp://x/jolokia"
            [[targets]]
            name = "a b"
            url = "http://h:1/jolokia"
            password = "x"
        "#;
        let problems = Config::parse(text).unwrap().validate().unwrap_err();
        let all = problems.join("\n");
        assert!(all.contains("targets[0].name"), "{all}");
        assert!(all.contains("targets[0].url"), "{all}");
        assert!(all.contains("already used by targets[0]"), "{all}");
        assert!(all.contains("a password needs a user"), "{all}");
        assert!(all.contains("server.default_target"), "{all}");
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
