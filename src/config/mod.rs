//! The gateway's configuration: one TOML file (`config/gateway.toml` is the
//! documented example), read into [`Config`] and checked as a whole so that
//! a user sees every problem at once, each named by file and key.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
use crate::principal::AuthMethod;
pub use crate::secret::Secret;

/// Default largest request body the gateway accepts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default largest number of items in one bulk request.
pub const DEFAULT_MAX_BULK_ITEMS: usize = 1000;
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 1024;
/// Default time a client has to send a request's head (and how long a
/// kept-alive connection may sit idle).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has to send a request's whole body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on open client connections, all listeners together.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
pub const DEFAULT_MAX_KEPT_AGENT_CONNECTIONS: usize = 1024;
pub const DEFAULT_MAX_BUFFERED_BYTES: u64 = 512 * 1024 * 1024;

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address of the plain HTTP listener, e.g. `127.0.0.1:8080`. Leave it
    /// out (and set `tls`) for an HTTPS-only gateway.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// Authentication methods the HTTP listener accepts: `basic`,
    /// `bearer`, `kubernetes`, `anonymous`. Default: the configured `[auth.*]` methods,
    /// or `anonymous` when there are none.
    #[serde(default)]
    pub auth: Option<Vec<AuthMethod>>,
    /// The HTTPS listener (optionally verifying client certificates).
    #[serde(default)]
    pub tls: Option<crate::tls::TlsConfig>,
    /// Methods the HTTPS listener accepts (`mtls` as well). Default: the
    /// configured `[auth.*]` methods, or `anonymous` when there are none.
    #[serde(default)]
    pub tls_auth: Option<Vec<AuthMethod>>,
    /// Target for requests that name none (all types but `version`, which
    /// the gateway answers itself).
    #[serde(default)]
    pub default_target: Option<String>,
    /// Requests with a larger body are refused with HTTP 413.
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// Bulk requests with more items are refused with HTTP 400.
    #[serde(default = "default_max_bulk_items")]
    pub max_bulk_items: usize,
    /// Client requests the gateway works on at once; more are refused at
    /// once with HTTP 503 and `Retry-After: 1`. Needs a restart.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// Of those, how many anonymous callers (no credentials) may hold at
    /// once, so that they can never take every slot from callers with
    /// credentials. Default: a quarter of `max_concurrent_requests` (at
    /// least 1). Needs a restart.
    #[serde(default)]
    pub max_anonymous_requests: Option<usize>,
    /// Time a client has to send a request's head, counted from when the
    /// gateway starts waiting for it (so also how long a kept-alive
    /// connection may sit idle); then the connection is closed. Needs a
    /// restart.
    #[serde(default = "default_header_read_timeout", with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// Time a client has to send a request's whole body once its head
    /// arrived; then HTTP 408 and the connection is closed.
    #[serde(default = "default_body_read_timeout", with = "humantime_serde")]
    pub body_read_timeout: Duration,
    /// Open client connections, HTTP and HTTPS listeners together; at the
    /// cap a new connection takes an idle one's place, and waits in the
    /// listen backlog when every one is busy. Needs a restart.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Serving threads, each with an event loop, its share of the client
    /// connections and its own agent connections. Default: one per CPU
    /// the process may use. Needs a restart.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Bytes of agent answers held while they are received and parsed,
    /// all targets together. An answer that would exceed it fails with
    /// status 503 (`jmxgate.GatewayBusy`). Needs a restart.
    #[serde(default = "default_max_buffered_bytes")]
    pub max_buffered_bytes: u64,
    /// Exchanges with agents in flight at once, all targets together: a
    /// fan-out to thousands of targets opens at most this many
    /// connections at a time, the rest wait their turn (within their
    /// deadline). Needs a restart.
    #[serde(default = "default_max_agent_exchanges")]
    pub max_agent_exchanges: usize,
    /// Agent connections kept open for reuse, all targets together. Past
    /// it, an exchange that needs a new connection asks the agent to
    /// close it after the answer (one already kept for a target stays),
    /// so a fan-out to 100,000 agents doesn't leave 100,000 idle
    /// connections (and file descriptors) behind. Needs a restart.
    #[serde(default = "default_max_kept_agent_connections")]
    pub max_kept_agent_connections: usize,
    /// Most targets one item may reach through a selector, unless the
    /// caller's roles say otherwise (the largest of their limits applies).
    #[serde(default = "default_max_targets_per_item")]
    pub max_targets_per_item: usize,
    /// The URL clients use to reach the gateway, reported by `version` in
    /// `details.url`. Defaults to the request's own scheme and `Host`:
    /// `http://<Host>/jolokia`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// `Host` header values the HTTP and HTTPS listeners answer (a name
    /// or address, optionally with `:port`; `"*"` for any); others get
    /// HTTP 421 (DNS rebinding). Unset: a listener bound to a loopback
    /// address answers `localhost`, `127.0.0.1` and `[::1]` (any port)
    /// only, other listeners every name.
    #[serde(default)]
    pub allowed_hosts: Option<Vec<String>>,
}

fn default_max_body_bytes() -> usize {
    DEFAULT_MAX_BODY_BYTES
}

fn default_max_bulk_items() -> usize {
    DEFAULT_MAX_BULK_ITEMS
}

fn default_max_concurrent_requests() -> usize {
    DEFAULT_MAX_CONCURRENT_REQUESTS
}

fn default_header_read_timeout() -> Duration {
    DEFAULT_HEADER_READ_TIMEOUT
}

fn default_body_read_timeout() -> Duration {
    DEFAULT_BODY_READ_TIMEOUT
}

impl ServerConfig {
    /// `max_anonymous_requests`, or a quarter of `max_concurrent_requests`.
    pub fn max_anonymous_requests(&self) -> usize {
        self.max_anonymous_requests
            .unwrap_or(self.max_concurrent_requests / 4)
            .clamp(1, self.max_concurrent_requests.max(1))
    }

    /// `workers`, or one per CPU.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or_else(crate::worker::default_count)
    }
}

fn default_max_connections() -> usize {
    DEFAULT_MAX_CONNECTIONS
}

fn default_max_agent_exchanges() -> usize {
    512
}

fn default_max_kept_agent_connections() -> usize {
    DEFAULT_MAX_KEPT_AGENT_CONNECTIONS
}

fn default_max_buffered_bytes() -> u64 {
    DEFAULT_MAX_BUFFERED_BYTES
}

fn default_max_targets_per_item() -> usize {
    100
}

/// `[list_cache]`: one shared copy of each agent's `list` answer,
/// revalidated with `ifModifiedSince` and filtered per caller afterwards.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListCacheConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Bytes of cached answers kept, all targets together; the least
    /// used go first.
    #[serde(default = "default_list_cache_bytes")]
    pub max_bytes: u64,
    /// How long a cached answer is served without asking the agent
    /// whether its MBeans changed. `0s` (the default) asks every time;
    /// the question is cheap (the agent answers 304 without a body).
    #[serde(default, with = "humantime_serde")]
    pub fresh_for: Duration,
}

impl Default for ListCacheConfig {
    fn default() -> Self {
        ListCacheConfig {
            enabled: true,
            max_bytes: default_list_cache_bytes(),
            fresh_for: Duration::ZERO,
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_list_cache_bytes() -> u64 {
    256 * 1024 * 1024
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

impl ServerConfig {
    /// The methods the HTTP listener accepts.
    pub fn http_methods(&self, auth: &AuthConfig) -> Vec<AuthMethod> {
        self.auth
            .clone()
            .unwrap_or_else(|| default_methods(auth, false))
    }

    /// The methods the HTTPS listener accepts.
    pub fn tls_methods(&self, auth: &AuthConfig) -> Vec<AuthMethod> {
        self.tls_auth
            .clone()
            .unwrap_or_else(|| default_methods(auth, true))
    }
}

fn default_methods(auth: &AuthConfig, tls: bool) -> Vec<AuthMethod> {
    let mut m = Vec::new();
    if tls && auth.mtls.is_some() {
        m.push(AuthMethod::Mtls);
    }
    if auth.basic.is_some() {
        m.push(AuthMethod::Basic);
    }
    if auth.bearer.is_some() {
        m.push(AuthMethod::Bearer);
    }
    if auth.kubernetes.is_some() {
        m.push(AuthMethod::Kubernetes);
    }
    if m.is_empty() {
        m.push(AuthMethod::Anonymous);
    }
    m
}

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
        if self.server.listen.is_none() && self.server.tls.is_none() {
            problems.push(
                "server: no listener; set server.listen (HTTP) or [server.tls] (HTTPS)".into(),
            );
        }
        // An empty list would refuse every caller with a bare 401.
        for (key, methods) in [
            ("server.auth", &self.server.auth),
            ("server.tls_auth", &self.server.tls_auth),
        ] {
            if methods.as_ref().is_some_and(Vec::is_empty) {
                problems.push(format!(
                    "{key}: an empty list accepts no caller at all; list the methods (\"basic\", \"bearer\", \"kubernetes\", \"anonymous\"{}), or leave it out for the default",
                    if key == "server.tls_auth" { ", \"mtls\"" } else { "" }
                ));
            }
        }
        if self.server.tls.is_none() && self.server.tls_auth.is_some() {
            problems.push("server.tls_auth: there is no [server.tls] listener".into());
        }
        if self
            .server
            .auth
            .as_ref()
            .is_some_and(|m| m.contains(&AuthMethod::Mtls))
        {
            problems.push("server.auth: \"mtls\" needs TLS; list it in server.tls_auth".into());
        }
        if let Some(hosts) = &self.server.allowed_hosts {
            problems.extend(crate::pipeline::hosts::problems(hosts));
        }
        if self.server.max_body_bytes == 0 {
            problems.push("server.max_body_bytes: must be greater than zero".into());
        }
        if self.server.max_bulk_items == 0 {
            problems.push("server.max_bulk_items: must be greater than zero".into());
        }
        if self.server.max_concurrent_requests == 0 {
            problems.push("server.max_concurrent_requests: must be greater than zero".into());
        }
        if self.server.max_anonymous_requests == Some(0) {
            problems.push(
                "server.max_anonymous_requests: must be greater than zero (use roles without \
                 access.anonymous_role to refuse anonymous callers)"
                    .into(),
            );
        }
        if self.server.workers == Some(0) {
            problems.push(
                "server.workers: must be greater than zero (leave it out for one per CPU)".into(),
            );
        }
        if self.server.max_connections == 0 {
            problems.push("server.max_connections: must be greater than zero".into());
        }
        for (key, timeout) in [
            ("header_read_timeout", self.server.header_read_timeout),
            ("body_read_timeout", self.server.body_read_timeout),
        ] {
            if timeout.is_zero() {
                problems.push(format!("server.{key}: must be longer than 0s"));
            }
        }
        if self.server.max_agent_exchanges == 0 {
            problems.push(
                "server.max_agent_exchanges: 0 would let no request reach any agent; use 1 or more"
                    .into(),
            );
        }
        if self.server.max_buffered_bytes < 1024 * 1024 {
            problems.push(format!(
                "server.max_buffered_bytes: {} is less than 1 MiB; no list answer would fit",
                self.server.max_buffered_bytes
            ));
        }
        problems.extend(self.discovery.problems());
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(c.targets[0].labels["env"], "prod");
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
