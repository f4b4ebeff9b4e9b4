//! How the gateway reaches one agent: `[[targets]]` entries (also what
//! inventory files and DNS discovery produce), the `[target_defaults]`
//! they fall back to, and the defaults behind those. A leaf module: the
//! fleet, the agent client, inventory and discovery read it without
//! importing the whole configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

/// How the gateway talks to one agent: the keys `[target_defaults]`, each
/// `[[targets]]` entry and each `[[discovery.dns]]` entry share. An entry's
/// unset keys fall back to `[target_defaults]`, then to the built-in
/// defaults above.
// Deserialised by hand (below) so that a bad value names its key even
// when the settings are flattened into an entry, where serde's own errors
// lose the key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSettings {
    pub connect_timeout: Option<Duration>,
    pub request_timeout: Option<Duration>,
    /// Concurrent exchanges with this agent (more wait for a slot).
    pub max_in_flight: Option<usize>,
    /// Larger answers fail with a 502 for their items.
    pub max_response_bytes: Option<u64>,
    /// HTTP Basic user towards the agent.
    pub user: Option<String>,
    /// Password given inline. Prefer `password_env` or `password_file`.
    pub password: Option<Secret>,
    /// Name of an environment variable holding the password.
    pub password_env: Option<String>,
    /// File whose content (trailing newline removed) is the password.
    pub password_file: Option<PathBuf>,
    /// PEM file with the CA certificates that sign the agent's HTTPS
    /// certificate. Without it the system's trust store is used.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) the gateway presents to an agent that
    /// requires one; with `client_key_file`.
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    /// Use a proxy request's own `target.user`/`target.password` towards
    /// this agent. Off by default: client-supplied target credentials are
    /// never forwarded.
    pub allow_credentials_passthrough: Option<bool>,
    /// Not a key: set by Kubernetes discovery, whose targets have these
    /// settings' `user` and password or none, never `[target_defaults]`'
    /// (which would go to every Pod, whoever runs it).
    pub own_credentials_only: bool,
}

impl AgentSettings {
    /// The keys, as written in the configuration.
    pub const KEYS: &'static [&'static str] = &[
        "connect_timeout",
        "request_timeout",
        "max_in_flight",
        "max_response_bytes",
        "user",
        "password",
        "password_env",
        "password_file",
        "ca_file",
        "client_cert_file",
        "client_key_file",
        "allow_credentials_passthrough",
    ];

    /// These settings, each unset key taken from `defaults`. The user and
    /// its password come as one group, and so do the client certificate
    /// and its key: an entry that sets any of a group uses none of the
    /// defaults' group. With `own_credentials_only`, none of the defaults'
    /// credentials either way.
    pub fn over(&self, defaults: &AgentSettings) -> AgentSettings {
        let (user, password, password_env, password_file) =
            if self.has_credentials() || self.own_credentials_only {
                (
                    &self.user,
                    &self.password,
                    &self.password_env,
                    &self.password_file,
                )
            } else {
                (
                    &defaults.user,
                    &defaults.password,
                    &defaults.password_env,
                    &defaults.password_file,
                )
            };
        let identity = if self.client_cert_file.is_some() || self.client_key_file.is_some() {
            self
        } else {
            defaults
        };
        AgentSettings {
            connect_timeout: self.connect_timeout.or(defaults.connect_timeout),
            request_timeout: self.request_timeout.or(defaults.request_timeout),
            max_in_flight: self.max_in_flight.or(defaults.max_in_flight),
            max_response_bytes: self.max_response_bytes.or(defaults.max_response_bytes),
            user: user.clone(),
            password: password.clone(),
            password_env: password_env.clone(),
            password_file: password_file.clone(),
            ca_file: self.ca_file.clone().or_else(|| defaults.ca_file.clone()),
            client_cert_file: identity.client_cert_file.clone(),
            client_key_file: identity.client_key_file.clone(),
            allow_credentials_passthrough: self
                .allow_credentials_passthrough
                .or(defaults.allow_credentials_passthrough),
            own_credentials_only: self.own_credentials_only,
        }
    }

    /// Makes the relative file names in these settings relative to `base`
    /// (the directory of the file they were read from).
    /// The files these settings name (a password, a CA bundle, a client
    /// certificate and its key).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        [
            &self.password_file,
            &self.ca_file,
            &self.client_cert_file,
            &self.client_key_file,
        ]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
    }

    pub fn make_paths_relative_to(&mut self, base: &Path) {
        for file in [
            &mut self.password_file,
            &mut self.ca_file,
            &mut self.client_cert_file,
            &mut self.client_key_file,
        ]
        .into_iter()
        .flatten()
        {
            if file.is_relative() {
                *file = base.join(&*file);
            }
        }
    }

    /// Whether a user or a password is set.
    pub fn has_credentials(&self) -> bool {
        self.user.is_some() || self.password_sources() > 0
    }

    fn password_sources(&self) -> usize {
        [
            self.password.is_some(),
            self.password_env.is_some(),
            self.password_file.is_some(),
        ]
        .into_iter()
        .filter(|s| *s)
        .count()
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT)
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT)
    }

    pub fn max_response_bytes(&self) -> u64 {
        self.max_response_bytes
            .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
    }

    pub fn allow_credentials_passthrough(&self) -> bool {
        self.allow_credentials_passthrough.unwrap_or(false)
    }

    /// Every problem, each as `key: why` with the key relative to the
    /// entry holding these settings.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, d) in [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
        ] {
            if d == Some(Duration::ZERO) {
                problems.push(format!("{key}: must be greater than zero"));
            }
        }
        if self.max_in_flight == Some(0) {
            problems.push("max_in_flight: must be greater than zero".into());
        }
        if self.max_response_bytes == Some(0) {
            problems.push("max_response_bytes: must be greater than zero".into());
        }
        if self.password_sources() > 1 {
            problems
                .push("password: give only one of password, password_env, password_file".into());
        }
        if self.password_sources() > 0 && self.user.is_none() {
            problems.push("user: a password needs a user".into());
        }
        if self.client_cert_file.is_some() != self.client_key_file.is_some() {
            problems.push("client_cert_file: goes together with client_key_file".into());
        }
        problems
    }
}

impl<'de> Deserialize<'de> for AgentSettings {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("AgentSettings", AgentSettings::KEYS, SettingsVisitor)
    }
}

struct SettingsVisitor;

impl<'de> serde::de::Visitor<'de> for SettingsVisitor {
    type Value = AgentSettings;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("agent settings")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<AgentSettings, A::Error> {
        /// The next value, an error naming `key`.
        fn value<'de, T: Deserialize<'de>, A: serde::de::MapAccess<'de>>(
            map: &mut A,
            key: &str,
        ) -> Result<T, A::Error> {
            map.next_value()
                .map_err(|e| serde::de::Error::custom(format_args!("{key}: {e}")))
        }
        fn duration<'de, A: serde::de::MapAccess<'de>>(
            map: &mut A,
            key: &str,
        ) -> Result<Option<Duration>, A::Error> {
            Ok(Some(
                value::<humantime_serde::Serde<Duration>, A>(map, key)?.into_inner(),
            ))
        }
        let mut s = AgentSettings::default();
        while let Some(key) = map.next_key::<String>()? {
            let key = key.as_str();
            match key {
                "connect_timeout" => s.connect_timeout = duration(&mut map, key)?,
                "request_timeout" => s.request_timeout = duration(&mut map, key)?,
                "max_in_flight" => s.max_in_flight = value(&mut map, key)?,
                "max_response_bytes" => s.max_response_bytes = value(&mut map, key)?,
                "user" => s.user = value(&mut map, key)?,
                "password" => s.password = value(&mut map, key)?,
                "password_env" => s.password_env = value(&mut map, key)?,
                "password_file" => s.password_file = value(&mut map, key)?,
                "ca_file" => s.ca_file = value(&mut map, key)?,
                "client_cert_file" => s.client_cert_file = value(&mut map, key)?,
                "client_key_file" => s.client_key_file = value(&mut map, key)?,
                "allow_credentials_passthrough" => {
                    s.allow_credentials_passthrough = value(&mut map, key)?
                }
                other => {
                    return Err(serde::de::Error::unknown_field(other, AgentSettings::KEYS));
                }
            }
        }
        Ok(s)
    }
}

pub use crate::labels::Labels;

/// Makes targets with equal labels share one [`Labels`] value.
pub fn share_labels<'a>(labels: impl IntoIterator<Item = &'a mut Labels>) {
    let mut pool = crate::labels::LabelPool::default();
    for l in labels {
        *l = pool.share(std::mem::take(l));
    }
}

/// Agent settings handed out shared: a target whose settings equal one
/// seen before gets that one's [`Arc`]. Holds at most
/// [`SettingsPool::MAX`] distinct values (an entry's own, one per
/// namespace with credentials, a few inventory variants); past that,
/// settings stay as they are.
#[derive(Debug, Default)]
pub struct SettingsPool(Vec<Arc<AgentSettings>>);

impl SettingsPool {
    pub const MAX: usize = 64;

    /// `settings`, or an equal value shared before.
    pub fn share(&mut self, settings: &mut Arc<AgentSettings>) {
        if let Some(seen) = self.0.iter().find(|seen| **seen == *settings) {
            *settings = seen.clone();
        } else if self.0.len() < Self::MAX {
            self.0.push(settings.clone());
        }
    }
}

/// Where a target came from, as `GET /jolokia/targets` shows it. Never a
/// file path or an address: those are the operator's business.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Origin {
    /// A `[[targets]]` entry of the configuration.
    #[default]
    Configured,
    /// An `[[inventory]]` file's entry.
    Inventory,
    /// A discovery source (`dns`, `kubernetes[0]`, …); one shared name.
    Discovered(std::sync::Arc<str>),
}

impl serde::Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Configured => f.write_str("configuration"),
            Origin::Inventory => f.write_str("inventory"),
            Origin::Discovered(source) => write!(f, "discovery.{source}"),
        }
    }
}

/// One agent the gateway reaches: a `[[targets]]` entry, an inventory
/// file's entry, or what discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TargetConfig {
    /// Unique name; also the path segment of the virtual agent URL
    /// `/jolokia/targets/<name>/`.
    pub name: String,
    /// The agent's own Jolokia URL, e.g. `http://10.0.0.7:8778/jolokia`.
    pub url: String,
    #[serde(default)]
    pub labels: Labels,
    /// Shared by the targets with equal settings (see [`SettingsPool`]):
    /// about 250 bytes each, the same for most of a fleet.
    #[serde(flatten)]
    pub agent: Arc<AgentSettings>,
    /// Set by whoever made the entry, never read from a file.
    #[serde(skip)]
    pub origin: Origin,
    #[serde(flatten, default)]
    pub no_other_keys: NoOtherKeys,
}

impl TargetConfig {
    /// A target named `name` at `url`, every setting at its default.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> TargetConfig {
        TargetConfig {
            name: name.into(),
            url: url.into(),
            labels: Labels::default(),
            agent: Arc::default(),
            origin: Origin::Configured,
            no_other_keys: NoOtherKeys,
        }
    }
}

/// Takes the place of `#[serde(deny_unknown_fields)]`, which serde does not
/// offer next to `flatten`: as the last flattened field of a struct it is
/// handed only the keys no other field took, and refuses the first one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoOtherKeys;

impl<'de> Deserialize<'de> for NoOtherKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Refuse;
        impl<'de> serde::de::Visitor<'de> for Refuse {
            type Value = NoOtherKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("no further keys")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<NoOtherKeys, A::Error> {
                match map.next_key::<String>()? {
                    Some(key) => Err(serde::de::Error::custom(format_args!(
                        "unknown field `{key}`"
                    ))),
                    None => Ok(NoOtherKeys),
                }
            }
        }
        deserializer.deserialize_map(Refuse)
    }
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
pub fn problems(targets: &[TargetConfig], defaults: &AgentSettings) -> Vec<String> {
    let mut problems: Vec<String> = defaults
        .problems()
        .into_iter()
        .map(|p| format!("target_defaults.{p}"))
        .collect();
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
        problems.extend(t.agent.problems().into_iter().map(|p| format!("{key}.{p}")));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml_text: &str) -> AgentSettings {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn an_entry_takes_unset_keys_from_the_defaults() {
        let defaults = settings(
            "request_timeout = \"3s\"\nmax_in_flight = 2\nca_file = \"ca.pem\"\n\
             user = \"monitor\"\npassword_env = \"PW\"\nallow_credentials_passthrough = true\n",
        );
        let own = settings("request_timeout = \"1s\"\n");
        let s = own.over(&defaults);
        assert_eq!(s.request_timeout(), Duration::from_secs(1));
        assert_eq!(s.connect_timeout(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(s.max_in_flight(), 2);
        assert_eq!(s.max_response_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
        assert_eq!(s.ca_file.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(s.user.as_deref(), Some("monitor"));
        assert_eq!(s.password_env.as_deref(), Some("PW"));
        assert!(s.allow_credentials_passthrough());
        assert!(!AgentSettings::default().allow_credentials_passthrough());
    }

    #[test]
    fn credentials_and_client_identity_are_taken_as_groups() {
        let defaults = settings(
            "user = \"monitor\"\npassword_env = \"PW\"\n\
             client_cert_file = \"c.pem\"\nclient_key_file = \"k.pem\"\n",
        );
        // A user of its own: the defaults' password must not go with it.
        let s = settings("user = \"other\"\n").over(&defaults);
        assert_eq!(s.user.as_deref(), Some("other"));
        assert_eq!(s.password_env, None);
        let s = settings("client_cert_file = \"mine.pem\"\n").over(&defaults);
        assert_eq!(s.client_cert_file.as_deref(), Some(Path::new("mine.pem")));
        assert_eq!(s.client_key_file, None);
        // A discovered Pod's settings: their own credentials or none.
        let pod = AgentSettings {
            own_credentials_only: true,
            ..AgentSettings::default()
        };
        let s = pod.over(&defaults);
        assert_eq!((s.user, s.password_env), (None, None));
        assert_eq!(s.client_cert_file.as_deref(), Some(Path::new("c.pem")));
        let pod = AgentSettings {
            user: Some("shop".into()),
            ..pod
        };
        assert_eq!(pod.over(&defaults).user.as_deref(), Some("shop"));
        // Never a key of a file.
        let err = toml::from_str::<AgentSettings>("own_credentials_only = true\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field"), "{err}");
    }

    #[test]
    fn problems_name_their_key() {
        let s = settings(
            "connect_timeout = \"0s\"\nmax_in_flight = 0\nmax_response_bytes = 0\n\
             password = \"x\"\npassword_file = \"pw\"\nclient_key_file = \"k.pem\"\n",
        );
        let problems = s.problems();
        for key in [
            "connect_timeout:",
            "max_in_flight:",
            "max_response_bytes:",
            "password: give only one",
            "user: a password needs a user",
            "client_cert_file:",
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(key)),
                "{key} missing in {problems:?}"
            );
        }
        assert!(AgentSettings::default().problems().is_empty());
    }

    #[test]
    fn unknown_keys_are_refused_in_every_format() {
        let err =
            toml::from_str::<TargetConfig>("name = \"a\"\nurl = \"http://h/j\"\nusr = \"x\"\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("unknown field `usr`"), "{err}");
        let err = serde_json::from_str::<TargetConfig>(
            r#"{"name":"a","url":"http://h/j","pasword":"x"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `pasword`"), "{err}");
        let err = serde_saphyr::from_str::<TargetConfig>("name: a\nurl: http://h/j\nca: x\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `ca`"), "{err}");
        let err = toml::from_str::<AgentSettings>("timeout = \"1s\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("timeout"), "{err}");

        // A bad value names its key, flattened or not.
        let err = toml::from_str::<TargetConfig>(
            "name = \"a\"\nurl = \"http://h/j\"\nrequest_timeout = \"soon\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("request_timeout: invalid value"), "{err}");
        let err = serde_json::from_str::<TargetConfig>(
            r#"{"name":"a","url":"http://h/j","max_in_flight":"x"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("max_in_flight: invalid type"), "{err}");
        let err = toml::from_str::<AgentSettings>("user = 7\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("user: invalid type"), "{err}");

        let t: TargetConfig = toml::from_str(
            "name = \"a\"\nurl = \"http://h/j\"\nrequest_timeout = \"2s\"\nlabels = { app = \"kafka\" }\n",
        )
        .unwrap();
        assert_eq!(t.agent.request_timeout, Some(Duration::from_secs(2)));
        assert_eq!(t.labels.get("app"), Some("kafka"));
    }
}
