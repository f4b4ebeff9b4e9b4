//! How the gateway reaches one agent: `[[targets]]` entries (also what
//! inventory files and DNS discovery produce), the `[target_defaults]`
//! they fall back to, and the defaults behind those. A leaf module: the
//! fleet, the agent client, inventory and discovery read it without
//! importing the whole configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::secret::Secret;

/// Default connect timeout towards an agent.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Default deadline for a whole agent exchange (send, agent work, answer).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Default bound on concurrent exchanges with one agent.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;
/// Default largest agent answer the gateway reads.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDefaults {
    #[serde(default, with = "humantime_serde")]
    pub connect_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    #[serde(default)]
    pub max_response_bytes: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// Unique name; also the path segment of the virtual agent URL
    /// `/jolokia/targets/<name>/`.
    pub name: String,
    /// The agent's own Jolokia URL, e.g. `http://10.0.0.7:8778/jolokia`.
    pub url: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default, with = "humantime_serde")]
    pub connect_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
    /// Concurrent exchanges with this agent (more wait for a slot).
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// Larger answers fail with a 502 for their items.
    #[serde(default)]
    pub max_response_bytes: Option<u64>,
    /// HTTP Basic user towards the agent.
    #[serde(default)]
    pub user: Option<String>,
    /// Password given inline. Prefer `password_env` or `password_file`.
    #[serde(default)]
    pub password: Option<Secret>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File whose content (trailing newline removed) is the password.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// PEM file with the CA certificates that sign the agent's HTTPS
    /// certificate. Without it the system's trust store is used.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) the gateway presents to an agent that
    /// requires one; with `client_key_file`.
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
    /// Use a proxy request's own `target.user`/`target.password` towards
    /// this agent. Off by default: client-supplied target credentials are
    /// never forwarded.
    #[serde(default)]
    pub allow_credentials_passthrough: bool,
}
