//! The configured fleet: the only agents the gateway will ever connect to.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use url::Url;

pub mod sources;

pub use sources::{Change, Listings, SourceBook, SourceEvent, SourceName};

use crate::agent_settings::{AgentSettings, TargetConfig};
use crate::client::{AgentClient, BufferBudget, ClientError, SharedConnections};
use crate::health::{HealthBook, TargetHealth};
use crate::secret::Secret;

/// One agent of the fleet, ready to be called.
#[derive(Debug)]
pub struct Target {
    pub name: String,
    pub labels: crate::agent_settings::Labels,
    pub request_timeout: Duration,
    pub client: AgentClient,
    /// Shared with the health book: survives reloads.
    pub health: Arc<TargetHealth>,
    /// A proxy request's own `target.user`/`target.password` may be used.
    pub allow_credentials_passthrough: bool,
    /// Where the target came from (configuration, inventory, a discovery
    /// source).
    pub origin: crate::agent_settings::Origin,
}

/// What every target's client shares with the whole gateway: the bytes
/// of answers being received (`server.max_buffered_bytes`) and the
/// exchanges in flight (`server.max_agent_exchanges`), and the agent
/// connections kept open (`server.max_kept_agent_connections`). Default:
/// no bounds.
#[derive(Debug, Clone, Default)]
pub struct GatewayBounds {
    pub budget: Option<Arc<BufferBudget>>,
    pub exchanges: Option<Arc<tokio::sync::Semaphore>>,
    pub max_kept_connections: Option<usize>,
}

/// All targets, indexed by name and by endpoint.
pub struct Fleet {
    targets: Vec<Arc<Target>>,
    by_name: HashMap<String, Arc<Target>>,
    by_endpoint: HashMap<EndpointKey, Arc<Target>>,
    /// Targets whose endpoint another target already has: while there are
    /// none, removing a target frees its endpoint without a search.
    endpoint_repeats: usize,
    /// The connection pools of the targets' clients; targets a
    /// [`changed`](Fleet::changed) fleet adds join them, so a discovery
    /// change keeps every other target's connections.
    shared: Arc<SharedConnections>,
    /// The targets' `namespace` labels, each once: made at the first
    /// question (a caller whose roles come from Kubernetes RBAC), then
    /// kept for this fleet's life.
    namespaces: std::sync::OnceLock<Vec<String>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("targets", &self.targets)
            .finish_non_exhaustive()
    }
}

impl Default for Fleet {
    fn default() -> Fleet {
        Fleet {
            targets: Vec::new(),
            by_name: HashMap::new(),
            by_endpoint: HashMap::new(),
            endpoint_repeats: 0,
            shared: SharedConnections::new(),
            namespaces: std::sync::OnceLock::new(),
        }
    }
}

/// What a discovery change does to a fleet: targets to add or replace
/// (by name), names to remove. See [`Fleet::changed`].
#[derive(Debug, Default)]
pub struct FleetChange {
    /// Shared with the source book's listing (and a Pod set's).
    pub upserts: Vec<Arc<TargetConfig>>,
    pub removed: Vec<String>,
}

/// Scheme, host, port and path of an agent URL, compared the way a client
/// means them: host case and default ports and a trailing `/` don't matter.
/// One string (`http://host:8778/jolokia`), not four fields: a fleet holds
/// one per target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointKey(Box<str>);

impl EndpointKey {
    pub fn of(url: &Url) -> Option<EndpointKey> {
        Some(EndpointKey(
            format!(
                "{}://{}:{}{}",
                url.scheme().to_ascii_lowercase(),
                url.host_str()?.to_ascii_lowercase(),
                url.port_or_known_default()?,
                url.path().trim_end_matches('/')
            )
            .into(),
        ))
    }
}

pub use crate::agent_settings::parse_agent_url;

impl Target {
    /// The agent's Jolokia URL (held once, by its client).
    pub fn url(&self) -> Url {
        self.client.url()
    }

    /// Asks the target for its `version` and records the outcome in its
    /// health and `agent_up`.
    pub async fn probe(&self, metrics: &crate::metrics::Metrics) {
        let target = self;
        let started = std::time::Instant::now();
        let outcome = match target.client.probe_version().await {
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
    /// credentials, which are the operator's business. Serialised
    /// directly (100,000 of them in well under a second).
    pub fn view(&self) -> TargetView<'_> {
        let s = self.health.snapshot();
        TargetView {
            name: &self.name,
            labels: &self.labels,
            origin: &self.origin,
            health: HealthView {
                state: match s.up {
                    Some(true) => "up",
                    Some(false) => "down",
                    None => "unknown",
                },
                breaker: if s.open_since.is_some() {
                    "open"
                } else {
                    "closed"
                },
                consecutive_failures: s.consecutive_failures,
                latency_ms: s
                    .latency
                    .map(|d| (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0),
                last_check: s
                    .last_check
                    .map(|t| humantime::format_rfc3339_seconds(t).to_string()),
                last_error: s.last_error,
            },
            agent: AgentView {
                version: s.agent_version,
                protocol: s.protocol,
            },
        }
    }

    /// [`view`](Self::view) as a JSON value.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a target view serialises")
    }
}

/// One entry of `GET /jolokia/targets`.
#[derive(Debug, serde::Serialize)]
pub struct TargetView<'a> {
    pub(crate) name: &'a str,
    pub(crate) labels: &'a crate::agent_settings::Labels,
    /// `configuration`, `inventory`, `discovery.dns`, `discovery.kubernetes[0]`.
    pub(crate) origin: &'a crate::agent_settings::Origin,
    pub(crate) health: HealthView,
    pub(crate) agent: AgentView,
}

#[derive(Debug, serde::Serialize)]
pub(crate) struct HealthView {
    pub(crate) state: &'static str,
    pub(crate) breaker: &'static str,
    pub(crate) consecutive_failures: u32,
    pub(crate) latency_ms: Option<f64>,
    pub(crate) last_check: Option<String>,
    pub(crate) last_error: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub(crate) struct AgentView {
    pub(crate) version: Option<String>,
    pub(crate) protocol: Option<String>,
}

/// A page of `GET /jolokia/targets`: `?limit=N` targets after the one
/// named by `?after=<name>` (in fleet order), so 100,000 targets can be
/// read in pieces.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PageRequest {
    pub limit: Option<usize>,
    pub after: Option<String>,
}

impl PageRequest {
    /// Reads `limit` and `after` from a query string; other parameters are
    /// not this function's business.
    pub fn from_query(query: Option<&str>) -> Result<PageRequest, String> {
        let mut page = PageRequest::default();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "limit" => {
                    page.limit = match value.parse::<usize>() {
                        Ok(n) if n > 0 => Some(n),
                        _ => {
                            return Err(format!(
                                "limit={value}: give a number of targets, 1 or more"
                            ))
                        }
                    }
                }
                "after" => page.after = Some(value.into_owned()),
                _ => {}
            }
        }
        Ok(page)
    }

    /// The targets of this page among `targets` (those the caller may
    /// see), and the name to ask `after` for the next page, if any.
    pub fn select<'a>(
        &self,
        targets: impl Iterator<Item = &'a Arc<Target>>,
    ) -> Result<(Vec<&'a Arc<Target>>, Option<String>), String> {
        let mut targets = targets.peekable();
        if let Some(after) = &self.after {
            // Only names the caller may see count: others are "not in
            // your list", the same as names that don't exist.
            if !targets.by_ref().any(|t| t.name == *after) {
                return Err(format!(
                    "after={after}: no such target in your target list; use the name a previous page ended with"
                ));
            }
        }
        let limit = self.limit.unwrap_or(usize::MAX);
        let page: Vec<_> = targets.by_ref().take(limit).collect();
        let next = match (page.last(), targets.peek()) {
            (Some(last), Some(_)) => Some(last.name.clone()),
            _ => None,
        };
        Ok((page, next))
    }
}

impl Fleet {
    /// Builds clients for every configured target. Fails on the first
    /// target whose credentials or TLS material can't be loaded.
    pub fn new(targets: &[TargetConfig], defaults: &AgentSettings) -> Result<Fleet, String> {
        Fleet::with_budget(
            targets,
            defaults,
            &GatewayBounds::default(),
            &HealthBook::default(),
        )
    }

    /// The configured targets, their clients sharing the gateway's bounds.
    pub fn with_budget(
        targets: &[TargetConfig],
        defaults: &AgentSettings,
        bounds: &GatewayBounds,
        health: &HealthBook,
    ) -> Result<Fleet, String> {
        let mut fleet = Fleet::default();
        let shared = fleet.shared.clone();
        let mut built = targets
            .iter()
            .map(|t| {
                build_target(t, defaults, bounds, health, &shared)
                    .map_err(|e| format!("target \"{}\": {e}", t.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Discovered targets come with their own copies of equal labels.
        crate::agent_settings::share_labels(built.iter_mut().map(|t| &mut t.labels));
        for target in built {
            fleet.insert(Arc::new(target));
        }
        Ok(fleet)
    }

    /// This fleet with `change` made: only the targets it names are built
    /// (or dropped); every other target is this fleet's own, with its
    /// client and connections. Replaced targets keep their place, new ones
    /// come last. A target that can't be built is left out (its earlier
    /// self too) and named in the second value; the rest of the change is
    /// made.
    pub fn changed(
        &self,
        change: &FleetChange,
        defaults: &AgentSettings,
        bounds: &GatewayBounds,
        health: &HealthBook,
    ) -> (Fleet, Vec<(String, String)>) {
        let mut failed = Vec::new();
        let mut fresh: HashMap<&str, Arc<Target>> = HashMap::new();
        for t in &change.upserts {
            match build_target(t, defaults, bounds, health, &self.shared) {
                Ok(target) => {
                    fresh.insert(&t.name, Arc::new(target));
                }
                Err(e) => failed.push((t.name.clone(), e)),
            }
        }
        let removed: std::collections::HashSet<&str> = change
            .removed
            .iter()
            .chain(failed.iter().map(|(name, _)| name))
            .map(String::as_str)
            .collect();
        let fresh_count = fresh.len();
        let mut targets = Vec::with_capacity(self.targets.len() + fresh.len());
        for t in &self.targets {
            if removed.contains(t.name.as_str()) {
                continue;
            }
            targets.push(fresh.remove(t.name.as_str()).unwrap_or_else(|| t.clone()));
        }
        // In the order the change gave them.
        for t in &change.upserts {
            if let Some(target) = fresh.remove(t.name.as_str()) {
                targets.push(target);
            }
        }
        let unchanged_endpoints = self.endpoint_repeats == 0
            && fresh_count == 0
            && targets.len() + removed.len() == self.targets.len();
        let mut fleet = Fleet {
            targets: Vec::new(),
            by_name: HashMap::with_capacity(targets.len()),
            by_endpoint: HashMap::new(),
            endpoint_repeats: 0,
            shared: self.shared.clone(),
            namespaces: std::sync::OnceLock::new(),
        };
        if unchanged_endpoints {
            // Only removals, no endpoint shared: the others' stay as they are.
            fleet.by_endpoint = self.by_endpoint.clone();
            for t in self
                .targets
                .iter()
                .filter(|t| removed.contains(t.name.as_str()))
            {
                if let Some(key) = EndpointKey::of(&t.url()) {
                    fleet.by_endpoint.remove(&key);
                }
            }
            for t in targets {
                fleet.by_name.insert(t.name.clone(), t.clone());
                fleet.targets.push(t);
            }
        } else {
            fleet.by_endpoint.reserve(targets.len());
            for t in targets {
                fleet.insert(t);
            }
        }
        (fleet, failed)
    }

    fn insert(&mut self, target: Arc<Target>) {
        if let Some(key) = EndpointKey::of(&target.url()) {
            // Two names for one agent: the first one configured wins.
            match self.by_endpoint.entry(key) {
                std::collections::hash_map::Entry::Occupied(_) => self.endpoint_repeats += 1,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(target.clone());
                }
            }
        }
        self.by_name.insert(target.name.clone(), target.clone());
        self.targets.push(target);
    }

    /// The namespaces of the targets (their `namespace` labels), sorted,
    /// each once.
    pub fn namespaces(&self) -> &[String] {
        self.namespaces.get_or_init(|| {
            let set: std::collections::BTreeSet<&str> = self
                .targets
                .iter()
                .filter_map(|t| t.labels.get("namespace"))
                .collect();
            set.into_iter().map(str::to_string).collect()
        })
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
    bounds: &GatewayBounds,
    health: &HealthBook,
    shared: &Arc<SharedConnections>,
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
    let client = AgentClient::builder(url)
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
        .buffer_budget(bounds.budget.clone())
        .exchange_limit(bounds.exchanges.clone())
        .max_kept_connections(bounds.max_kept_connections.unwrap_or(usize::MAX))
        .shared_connections(shared.clone())
        .build()
        .map_err(|e: ClientError| e.to_string())?;
    Ok(Target {
        name: t.name.clone(),
        labels: t.labels.clone(),
        request_timeout,
        client,
        health: health.for_target(&t.name),
        allow_credentials_passthrough: settings.allow_credentials_passthrough(),
        origin: t.origin.clone(),
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

    fn fleet_of(n: usize) -> Fleet {
        let targets: Vec<TargetConfig> = (0..n)
            .map(|i| TargetConfig::new(format!("t{i}"), format!("http://h:1/t{i}/jolokia")))
            .collect();
        Fleet::new(&targets, &AgentSettings::default()).unwrap()
    }

    #[test]
    fn pages_follow_fleet_order_and_say_where_to_go_on() {
        let fleet = fleet_of(5);
        let names = |page: &[&Arc<Target>]| page.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        let first = PageRequest::from_query(Some("limit=2")).unwrap();
        let (page, next) = first.select(fleet.iter()).unwrap();
        assert_eq!(
            (names(&page), next.as_deref()),
            (vec!["t0".into(), "t1".into()], Some("t1"))
        );
        let last = PageRequest::from_query(Some("limit=3&after=t1")).unwrap();
        let (page, next) = last.select(fleet.iter()).unwrap();
        assert_eq!((names(&page).len(), next), (3, None));
        // A name the caller doesn't see is not a place to start from.
        let hidden = PageRequest::from_query(Some("after=t3")).unwrap();
        assert!(hidden
            .select(fleet.iter().filter(|t| t.name != "t3"))
            .is_err());
        assert!(PageRequest::from_query(Some("limit=0")).is_err());
        assert_eq!(
            PageRequest::from_query(None)
                .unwrap()
                .select(fleet.iter())
                .unwrap()
                .0
                .len(),
            5
        );
    }

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
