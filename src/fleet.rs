//! The configured fleet: the only agents the gateway will ever connect to.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;

use url::Url;

use crate::agent_settings::{AgentSettings, TargetConfig};
use crate::client::{AgentClient, BufferBudget, ClientError};
use crate::health::{HealthBook, TargetHealth};
use crate::secret::Secret;

/// One agent of the fleet, ready to be called.
#[derive(Debug)]
pub struct Target {
    pub name: String,
    pub url: Url,
    pub labels: BTreeMap<String, String>,
    pub request_timeout: Duration,
    pub client: AgentClient,
    /// Shared with the health book: survives reloads.
    pub health: Arc<TargetHealth>,
    /// A proxy request's own `target.user`/`target.password` may be used.
    pub allow_credentials_passthrough: bool,
}

/// All targets, indexed by name and by endpoint.
#[derive(Debug, Default)]
pub struct Fleet {
    targets: Vec<Arc<Target>>,
    by_name: HashMap<String, Arc<Target>>,
    by_endpoint: HashMap<EndpointKey, Arc<Target>>,
}

/// Scheme, host, port and path of an agent URL, compared the way a client
/// means them: host case and default ports and a trailing `/` don't matter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointKey {
    scheme: String,
    host: String,
    port: u16,
    path: String,
}

impl EndpointKey {
    pub fn of(url: &Url) -> Option<EndpointKey> {
        Some(EndpointKey {
            scheme: url.scheme().to_ascii_lowercase(),
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default()?,
            path: url.path().trim_end_matches('/').to_string(),
        })
    }
}

pub use crate::agent_settings::parse_agent_url;

impl Target {
    /// Asks the target for its `version` and records the outcome in its
    /// health and `agent_up`.
    pub async fn probe(&self, metrics: &crate::metrics::Metrics) {
        let target = self;
        let started = std::time::Instant::now();
        let outcome = match target
            .client
            .bulk(&[crate::protocol::Request::version()])
            .await
        {
            Ok(mut answers) => {
                let answer = answers.swap_remove(0);
                if answer.is_error() {
                    Err(format!("version failed: {}", answer.error_text()))
                } else {
                    let value: serde_json::Value = answer.field("value").unwrap_or_default();
                    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_string);
                    Ok((started.elapsed(), text("agent"), text("protocol")))
                }
            }
            Err(e) => Err(e.to_string()),
        };
        metrics.probed(&target.health, outcome.is_ok());
        target.health.record_probe(outcome);
    }

    /// The target as `GET /jolokia/targets` shows it: never its URL or
    /// credentials, which are the operator's business.
    pub fn describe(&self) -> serde_json::Value {
        let target = self;
        let s = target.health.snapshot();
        let rfc3339 = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        serde_json::json!({
            "name": target.name,
            "labels": target.labels,
            "health": {
                "state": match s.up { Some(true) => "up", Some(false) => "down", None => "unknown" },
                "breaker": if s.open_since.is_some() { "open" } else { "closed" },
                "consecutive_failures": s.consecutive_failures,
                "latency_ms": s.latency.map(|d| (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0),
                "last_check": s.last_check.map(rfc3339),
                "last_error": s.last_error,
            },
            "agent": {"version": s.agent_version, "protocol": s.protocol},
        })
    }
}

impl Fleet {
    /// Builds clients for every configured target. Fails on the first
    /// target whose credentials or TLS material can't be loaded.
    pub fn new(targets: &[TargetConfig], defaults: &AgentSettings) -> Result<Fleet, String> {
        Fleet::with_budget(targets, defaults, None, &HealthBook::default())
    }

    /// The configured targets, their clients sharing one budget for
    /// answers being received.
    pub fn with_budget(
        targets: &[TargetConfig],
        defaults: &AgentSettings,
        budget: Option<Arc<BufferBudget>>,
        health: &HealthBook,
    ) -> Result<Fleet, String> {
        let mut fleet = Fleet::default();
        for t in targets {
            let target = build_target(t, defaults, budget.clone(), health)
                .map_err(|e| format!("target \"{}\": {e}", t.name))?;
            fleet.insert(target);
        }
        Ok(fleet)
    }

    fn insert(&mut self, target: Target) {
        let target = Arc::new(target);
        if let Some(key) = EndpointKey::of(&target.url) {
            // Two names for one agent: the first one configured wins.
            self.by_endpoint
                .entry(key)
                .or_insert_with(|| target.clone());
        }
        self.by_name.insert(target.name.clone(), target.clone());
        self.targets.push(target);
    }

    pub fn by_name(&self, name: &str) -> Option<&Arc<Target>> {
        self.by_name.get(name)
    }

    pub fn by_endpoint(&self, key: &EndpointKey) -> Option<&Arc<Target>> {
        self.by_endpoint.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Target>> {
        self.targets.iter()
    }

    pub fn len(&self) -> usize {
        self.targets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

fn build_target(
    t: &TargetConfig,
    defaults: &AgentSettings,
    budget: Option<Arc<BufferBudget>>,
    health: &HealthBook,
) -> Result<Target, String> {
    let url = parse_agent_url(&t.url)?;
    let settings = t.agent.over(defaults);
    let password = load_password(&settings)?;
    let credentials = match (&settings.user, password) {
        (Some(user), Some(pw)) => Some((user.clone(), pw)),
        (Some(user), None) => Some((user.clone(), Secret::new(""))),
        _ => None,
    };
    let request_timeout = settings.request_timeout();
    let client = AgentClient::builder(url.clone())
        .connect_timeout(settings.connect_timeout())
        .request_timeout(request_timeout)
        .credentials(credentials)
        .ca_file(settings.ca_file.clone())
        .identity(
            settings
                .client_cert_file
                .clone()
                .zip(settings.client_key_file.clone()),
        )
        .max_in_flight(settings.max_in_flight())
        .max_response_bytes(settings.max_response_bytes())
        .buffer_budget(budget)
        .build()
        .map_err(|e: ClientError| e.to_string())?;
    Ok(Target {
        name: t.name.clone(),
        url,
        labels: t.labels.clone(),
        request_timeout,
        client,
        health: health.for_target(&t.name),
        allow_credentials_passthrough: settings.allow_credentials_passthrough(),
    })
}

fn load_password(t: &AgentSettings) -> Result<Option<Secret>, String> {
    if let Some(p) = &t.password {
        return Ok(Some(p.clone()));
    }
    if let Some(var) = &t.password_env {
        return std::env::var(var)
            .map(|v| Some(Secret::new(v)))
            .map_err(|_| format!("password_env: environment variable {var} is not set"));
    }
    if let Some(file) = &t.password_file {
        return std::fs::read_to_string(file)
            .map(|v| Some(Secret::new(v.trim_end_matches(['\r', '\n']))))
            .map_err(|e| format!("password_file {}: {e}", file.display()));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_keys_ignore_case_default_port_and_trailing_slash() {
        let a = EndpointKey::of(&Url::parse("http://Agent.Example:80/jolokia/").unwrap());
        let b = EndpointKey::of(&Url::parse("http://agent.example/jolokia").unwrap());
        assert_eq!(a, b);
        let c = EndpointKey::of(&Url::parse("https://agent.example/jolokia").unwrap());
        assert_ne!(a, c);
    }

    #[test]
    fn agent_urls_must_be_plain_http() {
        assert!(parse_agent_url("http://h:8778/jolokia").is_ok());
        assert!(parse_agent_url("https://h/jolokia").is_ok());
        for bad in [
            "ftp://h/jolokia",
            "service:jmx:rmi:///jndi/rmi://h:1/jmxrmi",
            "http://u:p@h/jolokia",
            "http://h/jolokia?x=1",
            "jolokia",
        ] {
            assert!(parse_agent_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_in_a_url_are_not_echoed() {
        let err = parse_agent_url("http://admin:s3cret@h/jolokia").unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
