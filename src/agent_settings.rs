//! How the gateway reaches one agent: `[[targets]]` entries (also what
//! inventory files and DNS discovery produce), the `[target_defaults]`
//! they fall back to, and the defaults behind those. A leaf module: the
//! fleet, the agent client, inventory and discovery read it without
//! importing the whole configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

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

/// Checks that a configured agent URL is something the gateway can call.
pub fn parse_agent_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("\"{raw}\" is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "\"{raw}\" must start with http:// or https:// (the agent's Jolokia URL)"
        ));
    }
    if url.host_str().is_none() {
        return Err(format!("\"{raw}\" has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "\"{}\" carries credentials; use the target's user and password keys",
            url.host_str().unwrap_or_default()
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("\"{raw}\" must not have a query or fragment"));
    }
    Ok(url)
}

/// Target names appear in URLs and logs: keep them plain.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "\"{name}\" contains '{c}'; use letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(())
}

/// Every problem of `[[targets]]` and `[target_defaults]`, each named by
/// its key.
pub fn problems(targets: &[TargetConfig], defaults: &TargetDefaults) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, t) in targets.iter().enumerate() {
        let key = format!("targets[{i}]");
        if let Err(why) = check_name(&t.name) {
            problems.push(format!("{key}.name: {why}"));
        }
        if let Some(first) = seen.insert(t.name.as_str(), i) {
            problems.push(format!(
                "{key}.name: \"{}\" is already used by targets[{first}]",
                t.name
            ));
        }
        if let Err(why) = parse_agent_url(&t.url) {
            problems.push(format!("{key}.url: {why}"));
        }
        let sources = [
            t.password.is_some(),
            t.password_env.is_some(),
            t.password_file.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() > 1 {
            problems.push(format!(
                "{key}: give only one of password, password_env, password_file"
            ));
        }
        if sources.iter().any(|s| *s) && t.user.is_none() {
            problems.push(format!("{key}: a password needs a user"));
        }
        if t.max_in_flight == Some(0) || t.max_response_bytes == Some(0) {
            problems.push(format!(
                "{key}: max_in_flight and max_response_bytes must be greater than zero"
            ));
        }
        for (field, d) in [
            ("connect_timeout", t.connect_timeout),
            ("request_timeout", t.request_timeout),
        ] {
            if d == Some(Duration::ZERO) {
                problems.push(format!("{key}.{field}: must be greater than zero"));
            }
        }
    }
    for (field, d) in [
        ("connect_timeout", defaults.connect_timeout),
        ("request_timeout", defaults.request_timeout),
    ] {
        if d == Some(Duration::ZERO) {
            problems.push(format!(
                "target_defaults.{field}: must be greater than zero"
            ));
        }
    }
    if defaults.max_in_flight == Some(0) || defaults.max_response_bytes == Some(0) {
        problems.push(
            "target_defaults: max_in_flight and max_response_bytes must be greater than zero"
                .into(),
        );
    }
    for (i, t) in targets.iter().enumerate() {
        if t.client_cert_file.is_some() != t.client_key_file.is_some() {
            problems.push(format!(
                "targets[{i}]: client_cert_file and client_key_file go together"
            ));
        }
    }
    problems
}
