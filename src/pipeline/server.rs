//! `[server]`: the listeners and the limits every request is held to.
//! The section is the pipeline's; the configuration composes it.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::authenticate::AuthConfig;
use crate::principal::AuthMethod;

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

impl ServerConfig {
    /// The methods the HTTP listener accepts. `anonymous`: an
    /// `access.anonymous_role` is set, so callers without credentials are
    /// taken beside the configured methods unless `server.auth` says
    /// otherwise.
    pub fn http_methods(&self, auth: &AuthConfig, anonymous: bool) -> Vec<AuthMethod> {
        self.auth
            .clone()
            .unwrap_or_else(|| default_methods(auth, false, anonymous))
    }

    /// The methods the HTTPS listener accepts (see
    /// [`http_methods`](Self::http_methods)).
    pub fn tls_methods(&self, auth: &AuthConfig, anonymous: bool) -> Vec<AuthMethod> {
        self.tls_auth
            .clone()
            .unwrap_or_else(|| default_methods(auth, true, anonymous))
    }

    /// Why `access.anonymous_role` would have no effect: every listener's
    /// methods are listed by hand without `"anonymous"`.
    pub fn anonymous_problem(&self, auth: &AuthConfig, role: &str) -> Option<String> {
        let listeners: Vec<(&str, Vec<AuthMethod>)> = [
            self.listen
                .is_some()
                .then(|| ("server.auth", self.http_methods(auth, true))),
            self.tls
                .is_some()
                .then(|| ("server.tls_auth", self.tls_methods(auth, true))),
        ]
        .into_iter()
        .flatten()
        .collect();
        if listeners.is_empty()
            || listeners
                .iter()
                .any(|(_, m)| m.contains(&AuthMethod::Anonymous))
        {
            return None;
        }
        let keys: Vec<&str> = listeners.iter().map(|(k, _)| *k).collect();
        Some(format!(
            "access.anonymous_role: \"{role}\" would never be given, as {} leaves out \"anonymous\"; \
             add \"anonymous\" to {} to let callers without credentials in with that role, \
             or remove access.anonymous_role",
            keys.join(" and "),
            keys[0]
        ))
    }
}

fn default_methods(auth: &AuthConfig, tls: bool, anonymous: bool) -> Vec<AuthMethod> {
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
    if m.is_empty() || anonymous {
        m.push(AuthMethod::Anonymous);
    }
    m
}

impl ServerConfig {
    /// What is wrong with the section, each problem named by its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.listen.is_none() && self.tls.is_none() {
            problems.push(
                "server: no listener; set server.listen (HTTP) or [server.tls] (HTTPS)".into(),
            );
        }
        // An empty list would refuse every caller with a bare 401.
        for (key, methods) in [
            ("server.auth", &self.auth),
            ("server.tls_auth", &self.tls_auth),
        ] {
            if methods.as_ref().is_some_and(Vec::is_empty) {
                problems.push(format!(
                    "{key}: an empty list accepts no caller at all; list the methods (\"basic\", \"bearer\", \"kubernetes\", \"anonymous\"{}), or leave it out for the default",
                    if key == "server.tls_auth" { ", \"mtls\"" } else { "" }
                ));
            }
        }
        if self.tls.is_none() && self.tls_auth.is_some() {
            problems.push("server.tls_auth: there is no [server.tls] listener".into());
        }
        if self
            .auth
            .as_ref()
            .is_some_and(|m| m.contains(&AuthMethod::Mtls))
        {
            problems.push("server.auth: \"mtls\" needs TLS; list it in server.tls_auth".into());
        }
        if let Some(hosts) = &self.allowed_hosts {
            problems.extend(super::hosts::problems(hosts));
        }
        if self.max_body_bytes == 0 {
            problems.push("server.max_body_bytes: must be greater than zero".into());
        }
        if self.max_bulk_items == 0 {
            problems.push("server.max_bulk_items: must be greater than zero".into());
        }
        if self.max_concurrent_requests == 0 {
            problems.push("server.max_concurrent_requests: must be greater than zero".into());
        }
        if self.max_anonymous_requests == Some(0) {
            problems.push(
                "server.max_anonymous_requests: must be greater than zero (use roles without \
             access.anonymous_role to refuse anonymous callers)"
                    .into(),
            );
        }
        if self.workers == Some(0) {
            problems.push(
                "server.workers: must be greater than zero (leave it out for one per CPU)".into(),
            );
        }
        if self.max_connections == 0 {
            problems.push("server.max_connections: must be greater than zero".into());
        }
        for (key, timeout) in [
            ("header_read_timeout", self.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout),
        ] {
            if timeout.is_zero() {
                problems.push(format!("server.{key}: must be longer than 0s"));
            }
        }
        if self.max_agent_exchanges == 0 {
            problems.push(
                "server.max_agent_exchanges: 0 would let no request reach any agent; use 1 or more"
                    .into(),
            );
        }
        if self.max_buffered_bytes < 1024 * 1024 {
            problems.push(format!(
                "server.max_buffered_bytes: {} is less than 1 MiB; no list answer would fit",
                self.max_buffered_bytes
            ));
        }
        problems
    }
}
