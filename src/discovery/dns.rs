//! `[[discovery.dns]]`: targets found in DNS.
//!
//! * `record = "srv"` (the default for names starting with `_`): every SRV
//!   answer is one agent, reached at the SRV target host and port, e.g.
//!   `_jolokia._tcp.kafka.example.` → `http://kafka-0.kafka.example:8778/jolokia`.
//!   The host name goes into the URL as it is (so HTTPS certificates match);
//!   the gateway resolves it again when it connects, with the system
//!   resolver.
//! * `record = "a"` (the default otherwise): every A and AAAA answer is one
//!   agent at the configured `port`, e.g. the pods behind a Kubernetes
//!   headless Service.
//!
//! A discovered target is named `<name_prefix><host-or-ip>-<port>` (anything
//! but letters, digits, `.`, `_` and `-` becomes `-`), carries the entry's
//! `labels` plus `discovered_by = "dns"`, and shares the entry's
//! credentials, TLS files and limits.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::rr::{Name, RData, RecordType};
use hickory_resolver::{Resolver, TokioResolver};
use serde::Deserialize;

use crate::agent_settings::{AgentSettings, NoOtherKeys, TargetConfig};

/// Label every discovered target carries, with the value `dns`.
pub const DISCOVERED_BY_LABEL: &str = "discovered_by";
/// Default re-resolution period.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// Default agent path.
pub const DEFAULT_PATH: &str = "/jolokia";

/// Which records to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    /// SRV records: host and port per answer.
    Srv,
    /// A and AAAA records, with the configured port.
    A,
}

/// How the gateway talks to discovered agents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    #[default]
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One `[[discovery.dns]]` entry: a DNS name whose records are agents.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DnsDiscovery {
    /// The name to resolve, e.g. `_jolokia._tcp.kafka.example.` (SRV) or
    /// `kafka-headless.ns.svc.cluster.local.` (A/AAAA). End it with a dot
    /// to skip the resolver's search domains.
    pub name: String,
    /// `srv` or `a` (A and AAAA). Default: `srv` when the name starts with
    /// `_`, else `a`.
    #[serde(default)]
    pub record: Option<RecordKind>,
    /// Agent port for `record = "a"` (required there); SRV answers carry
    /// their own port, so it is ignored for `srv`.
    #[serde(default)]
    pub port: Option<u16>,
    /// `http` (default) or `https`.
    #[serde(default)]
    pub scheme: Scheme,
    /// Path of the agent's Jolokia endpoint. Default `/jolokia`.
    #[serde(default = "default_path")]
    pub path: String,
    /// How often the name is resolved again. Default `30s`.
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// Deadline of one DNS query (the resolver tries twice). Default: the
    /// system resolver's (`options timeout:` in /etc/resolv.conf, else 5s).
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// A nameserver to ask instead of the system resolver's
    /// (/etc/resolv.conf): `10.0.0.2` (port 53) or `127.0.0.1:5353`. UDP,
    /// then TCP for truncated answers.
    #[serde(default)]
    pub nameserver: Option<String>,
    /// Put before every target name: `<prefix><host-or-ip>-<port>`.
    #[serde(default)]
    pub name_prefix: String,
    /// Labels of every discovered target (besides `discovered_by = "dns"`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,

    /// Shared by every discovered target; same keys and meaning as in
    /// `[[targets]]`.
    #[serde(flatten)]
    pub agent: std::sync::Arc<AgentSettings>,
    #[serde(flatten, default)]
    pub no_other_keys: NoOtherKeys,
}

fn default_path() -> String {
    DEFAULT_PATH.into()
}

fn default_interval() -> Duration {
    DEFAULT_INTERVAL
}

impl DnsDiscovery {
    /// A minimal entry (every other key at its default), mostly for tests
    /// and programmatic use.
    pub fn new(name: impl Into<String>) -> DnsDiscovery {
        DnsDiscovery {
            name: name.into(),
            record: None,
            port: None,
            scheme: Scheme::Http,
            path: default_path(),
            interval: DEFAULT_INTERVAL,
            timeout: None,
            nameserver: None,
            name_prefix: String::new(),
            labels: BTreeMap::new(),
            agent: Default::default(),
            no_other_keys: NoOtherKeys,
        }
    }

    /// The records asked for: `record`, else SRV for `_service._proto`
    /// names and A/AAAA for the rest.
    pub fn record_kind(&self) -> RecordKind {
        self.record.unwrap_or(if self.name.starts_with('_') {
            RecordKind::Srv
        } else {
            RecordKind::A
        })
    }

    /// Checks what the TOML types can't; the message names the key of
    /// each problem (`port: ...`), several separated by `; `.
    pub fn validate(&self) -> Result<(), String> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// Every problem, each as `key: why` (the key relative to the entry).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.name.trim().is_empty() {
            p.push("name: must not be empty".to_string());
        } else if let Err(why) = parse_dns_name(&self.name) {
            p.push(format!("name: {why}"));
        }
        match (self.record_kind(), self.port) {
            (RecordKind::A, None) => p.push(
                "port: required with record = \"a\" (A/AAAA records carry no port)".to_string(),
            ),
            (RecordKind::A, Some(0)) => p.push("port: must be between 1 and 65535".to_string()),
            _ => {}
        }
        if !self.path.starts_with('/') {
            p.push(format!("path: \"{}\" must start with '/'", self.path));
        } else if let Err(why) = crate::agent_settings::parse_agent_url(&agent_url(
            self.scheme,
            "agent.example",
            8778,
            &self.path,
        )) {
            p.push(format!(
                "path: \"{}\" does not make an agent URL: {why}",
                self.path
            ));
        }
        if self.interval.is_zero() {
            p.push("interval: must be greater than zero".to_string());
        }
        if self.timeout == Some(Duration::ZERO) {
            p.push("timeout: must be greater than zero".to_string());
        }
        if let Some(ns) = &self.nameserver {
            if let Err(why) = parse_nameserver(ns) {
                p.push(format!("nameserver: {why}"));
            }
        }
        if let Some(c) = self.name_prefix.chars().find(|c| !is_name_char(*c)) {
            p.push(format!(
                "name_prefix: \"{}\" contains '{c}'; use letters, digits, '-', '_' and '.'",
                self.name_prefix
            ));
        }
        if self.labels.contains_key(DISCOVERED_BY_LABEL) {
            p.push(format!(
                "labels.{DISCOVERED_BY_LABEL}: set by discovery itself (to \"dns\")"
            ));
        }
        p.extend(self.agent.problems());
        p
    }

    /// The target for an agent at `host` (a host name, or an IP address in
    /// its usual text form) and `port`.
    pub fn target(&self, host: &str, port: u16) -> TargetConfig {
        let mut labels = self.labels.clone();
        labels.insert(DISCOVERED_BY_LABEL.into(), "dns".into());
        TargetConfig {
            name: target_name(&self.name_prefix, host, port),
            url: agent_url(self.scheme, host, port, &self.path),
            labels: labels.into(),
            agent: self.agent.clone(),
            // The gateway names the source when it takes the target in.
            origin: Default::default(),
            no_other_keys: NoOtherKeys,
        }
    }

    /// Resolves the name once and returns its targets, sorted by name,
    /// each name once. Fails (naming the DNS name, the record type and the
    /// cause: NXDOMAIN, no records, timeout, ...) rather than returning an
    /// empty or partial set.
    pub async fn resolve(&self) -> Result<Vec<TargetConfig>, String> {
        let kind = self.record_kind();
        let fail = |what: &str, why: String| {
            format!(
                "DNS name \"{}\" ({what} via {}): {why}",
                self.name,
                self.via()
            )
        };
        let name = parse_dns_name(&self.name).map_err(|why| fail(kind_label(kind), why))?;
        let resolver = self.resolver().map_err(|why| fail(kind_label(kind), why))?;
        let mut targets = match kind {
            RecordKind::Srv => {
                let lookup = resolver
                    .lookup(name, RecordType::SRV)
                    .await
                    .map_err(|e| fail("SRV", self.cause(&e, "SRV")))?;
                let mut targets = Vec::new();
                let mut unavailable = false;
                for record in lookup.answers() {
                    if let RData::SRV(srv) = &record.data {
                        if srv.target.is_root() {
                            // RFC 2782: "." means the service is decidedly
                            // not available at this domain.
                            unavailable = true;
                            continue;
                        }
                        targets.push(self.target(&srv_host(&srv.target), srv.port));
                    }
                }
                if targets.is_empty() {
                    return Err(fail(
                        "SRV",
                        if unavailable {
                            "no usable SRV records (target \".\": service not available)".into()
                        } else {
                            "no SRV records".into()
                        },
                    ));
                }
                targets
            }
            RecordKind::A => {
                let port = self
                    .port
                    .ok_or_else(|| fail("A/AAAA", "no port configured".into()))?;
                let (v4, v6) = tokio::join!(
                    resolver.lookup(name.clone(), RecordType::A),
                    resolver.lookup(name, RecordType::AAAA)
                );
                let mut ips = Vec::new();
                for (what, result) in [("A", v4), ("AAAA", v6)] {
                    match result {
                        Ok(lookup) => {
                            ips.extend(lookup.answers().iter().filter_map(|r| match &r.data {
                                RData::A(a) => Some(IpAddr::V4(a.0)),
                                RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                                _ => None,
                            }))
                        }
                        // A name without addresses of one family is fine;
                        // anything else fails the whole resolution, so a
                        // lost answer never shrinks the set.
                        Err(e) if e.is_no_records_found() && !e.is_nx_domain() => {}
                        Err(e) => return Err(fail(what, self.cause(&e, what))),
                    }
                }
                if ips.is_empty() {
                    return Err(fail("A/AAAA", "no A or AAAA records".into()));
                }
                ips.iter()
                    .map(|ip| self.target(&ip.to_string(), port))
                    .collect()
            }
        };
        targets.sort_by(|a, b| a.name.cmp(&b.name));
        targets.dedup_by(|a, b| a.name == b.name);
        Ok(targets)
    }

    /// A resolver for this entry: the configured nameserver, else the
    /// system's configuration. Built per resolution: nothing is cached
    /// between two rounds, and changes of /etc/resolv.conf are seen.
    fn resolver(&self) -> Result<TokioResolver, String> {
        let mut builder = match &self.nameserver {
            Some(ns) => {
                let addr = parse_nameserver(ns)?;
                let mut server = NameServerConfig::udp_and_tcp(addr.ip());
                for connection in &mut server.connections {
                    connection.port = addr.port();
                }
                let mut builder = Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![server]),
                    TokioRuntimeProvider::default(),
                );
                builder.options_mut().use_hosts_file = ResolveHosts::Never;
                builder
            }
            None => TokioResolver::builder_tokio()
                .map_err(|e| format!("cannot read the system resolver configuration: {e}"))?,
        };
        if let Some(timeout) = self.timeout {
            builder.options_mut().timeout = timeout;
        }
        builder
            .build()
            .map_err(|e| format!("cannot build a resolver: {e}"))
    }

    fn via(&self) -> String {
        match &self.nameserver {
            Some(ns) => format!("nameserver {ns}"),
            None => "the system resolver".into(),
        }
    }

    /// A resolver error in words.
    fn cause(&self, e: &NetError, what: &str) -> String {
        if e.is_nx_domain() {
            "NXDOMAIN: the name does not exist".into()
        } else if e.is_no_records_found() {
            format!("no {what} records")
        } else if let NetError::Dns(DnsError::ResponseCode(code)) = e {
            // SERVFAIL, REFUSED, ...
            format!(
                "the nameserver answered {} ({code})",
                format!("{code:?}").to_ascii_uppercase()
            )
        } else if matches!(e, NetError::Timeout) {
            match self.timeout {
                Some(t) => format!(
                    "timed out (no answer within {} per try)",
                    humantime::format_duration(t)
                ),
                None => "timed out (no answer from the nameserver)".into(),
            }
        } else {
            e.to_string()
        }
    }
}

fn kind_label(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Srv => "SRV",
        RecordKind::A => "A/AAAA",
    }
}

fn parse_dns_name(name: &str) -> Result<Name, String> {
    Name::from_str_relaxed(name.trim()).map_err(|e| format!("\"{name}\" is not a DNS name ({e})"))
}

/// `10.0.0.2` (port 53) or `127.0.0.1:5353` / `[fd00::2]:5353`.
pub fn parse_nameserver(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    text.parse::<SocketAddr>()
        .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
        .map_err(|_| {
            format!(
                "\"{text}\" is not an IP address with an optional port, like 10.0.0.2 or 127.0.0.1:5353"
            )
        })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Replaces every character a target name can't have (anything but ASCII
/// letters, digits, `.`, `_`, `-`) with `-`.
pub fn sanitise_name(raw: &str) -> String {
    raw.chars()
        .map(|c| if is_name_char(c) { c } else { '-' })
        .collect()
}

/// `<prefix><host-or-ip>-<port>`, sanitised: `kafka-10.0.0.7-8778`,
/// `kafka-fd00--7-8778`, `kafka-broker-0.kafka.example-8778`.
pub fn target_name(prefix: &str, host: &str, port: u16) -> String {
    sanitise_name(&format!("{prefix}{host}-{port}"))
}

/// An SRV target as a host name for a URL: lower case, without the
/// trailing dot of the fully qualified form.
pub fn srv_host(target: &Name) -> String {
    let text = target.to_ascii().to_ascii_lowercase();
    match text.strip_suffix('.') {
        Some(host) if !host.is_empty() => host.to_string(),
        _ => text,
    }
}

/// The agent URL; IPv6 addresses in brackets.
pub fn agent_url(scheme: Scheme, host: &str, port: u16, path: &str) -> String {
    let scheme = scheme.as_str();
    if host.contains(':') && !host.starts_with('[') {
        format!("{scheme}://[{host}]:{port}{path}")
    } else {
        format!("{scheme}://{host}:{port}{path}")
    }
}

/// Logs what one resolution of `config` gave: a failure once per distinct
/// cause (warning), the recovery (info); `failing` holds the cause while
/// it lasts. The targets, when it resolved.
fn note_result(
    config: &DnsDiscovery,
    failing: &mut Option<String>,
    kept: usize,
    result: Result<Vec<TargetConfig>, String>,
) -> Option<Vec<TargetConfig>> {
    match result {
        Ok(targets) => {
            if failing.take().is_some() {
                tracing::info!(
                    dns_name = %config.name,
                    targets = targets.len(),
                    "DNS discovery resolves again"
                );
            }
            Some(targets)
        }
        Err(why) => {
            if failing.as_deref() != Some(why.as_str()) {
                tracing::warn!(
                    dns_name = %config.name,
                    "DNS discovery failed, keeping the {kept} target(s) found before: {why}"
                );
            } else {
                tracing::debug!(dns_name = %config.name, "DNS discovery still failing: {why}");
            }
            *failing = Some(why);
            None
        }
    }
}

/// Resolves one entry every `interval`, as one source of the fleet: sends
/// [`Change::Restart`](crate::fleet::Change::Restart) with its targets
/// (sorted by name; a name twice counts once) whenever they differ from
/// the ones last sent, and [`Change::Up`](crate::fleet::Change::Up) when
/// its resolutions start failing or succeed again (and at the first one).
///
/// A failed resolution (NXDOMAIN, no records, timeout, ...) sends no
/// targets, so the fleet keeps the ones last sent until the name resolves
/// again; the cause is logged with `tracing::warn!` (once per distinct
/// cause; the recovery at info). An entry that never resolved contributes
/// nothing. A send waits while the one folding the fleet's sources is
/// busy. Returns when `events` is closed.
pub async fn watch_entry(
    config: DnsDiscovery,
    events: tokio::sync::mpsc::Sender<crate::fleet::Change>,
) {
    use crate::fleet::Change;
    let mut failing: Option<String> = None;
    let mut up: Option<bool> = None;
    let mut handed_over: Vec<String> = Vec::new();
    let mut kept = 0;
    loop {
        let next = tokio::time::Instant::now() + config.interval;
        let result = config.resolve().await;
        let now_up = result.is_ok();
        if let Some(mut targets) = note_result(&config, &mut failing, kept, result) {
            targets.sort_by(|a, b| a.name.cmp(&b.name));
            targets.dedup_by(|a, b| a.name == b.name);
            let fingerprint = fingerprint(&targets);
            if fingerprint != handed_over {
                tracing::info!(
                    dns_name = %config.name,
                    targets = targets.len(),
                    "DNS discovery: the discovered targets changed"
                );
                handed_over = fingerprint;
                kept = targets.len();
                if events.send(Change::Restart(targets)).await.is_err() {
                    return;
                }
            }
        }
        if up != Some(now_up) {
            up = Some(now_up);
            if events.send(Change::Up(now_up)).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = events.closed() => return,
        }
    }
}

/// Everything about a set of targets, for comparing two sets
/// (`TargetConfig` is not `PartialEq`; its `Debug` shows every field, and
/// discovered targets carry no inline password).
pub(crate) fn fingerprint(targets: &[TargetConfig]) -> Vec<String> {
    targets.iter().map(|t| format!("{t:?}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv_entry() -> DnsDiscovery {
        let mut d = DnsDiscovery::new("_jolokia._tcp.kafka.example.");
        d.name_prefix = "kafka-".into();
        d.labels.insert("app".into(), "kafka".into());
        std::sync::Arc::make_mut(&mut d.agent).user = Some("monitor".into());
        std::sync::Arc::make_mut(&mut d.agent).password_env = Some("KAFKA_JOLOKIA_PW".into());
        std::sync::Arc::make_mut(&mut d.agent).ca_file = Some("/etc/jmxgate/kafka-ca.pem".into());
        std::sync::Arc::make_mut(&mut d.agent).request_timeout = Some(Duration::from_secs(3));
        d
    }

    #[test]
    fn record_kind_defaults_from_the_name() {
        assert_eq!(srv_entry().record_kind(), RecordKind::Srv);
        let mut d = DnsDiscovery::new("kafka-headless.ns.svc.cluster.local.");
        assert_eq!(d.record_kind(), RecordKind::A);
        d.record = Some(RecordKind::Srv);
        assert_eq!(d.record_kind(), RecordKind::Srv);
    }

    #[test]
    fn a_target_from_host_and_port() {
        let t = srv_entry().target("broker-0.kafka.example", 8778);
        assert_eq!(t.name, "kafka-broker-0.kafka.example-8778");
        assert_eq!(t.url, "http://broker-0.kafka.example:8778/jolokia");
        assert_eq!(t.labels.get("app"), Some("kafka"));
        assert_eq!(t.labels.get(DISCOVERED_BY_LABEL), Some("dns"));
        assert_eq!(t.labels.len(), 2);
        assert_eq!(t.agent.user.as_deref(), Some("monitor"));
        assert_eq!(t.agent.password_env.as_deref(), Some("KAFKA_JOLOKIA_PW"));
        assert!(t.agent.password.is_none());
        assert_eq!(
            t.agent.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/jmxgate/kafka-ca.pem"))
        );
        assert_eq!(t.agent.request_timeout, Some(Duration::from_secs(3)));
        assert_eq!(t.agent.connect_timeout, None);
    }

    #[test]
    fn ipv6_goes_into_urls_in_brackets_and_into_names_sanitised() {
        let mut d = DnsDiscovery::new("kafka-headless.ns.svc.cluster.local.");
        d.port = Some(8778);
        d.scheme = Scheme::Https;
        d.path = "/actuator/jolokia".into();
        let t = d.target("fd00::7", 8778);
        assert_eq!(t.url, "https://[fd00::7]:8778/actuator/jolokia");
        assert_eq!(t.name, "fd00--7-8778");
        crate::agent_settings::parse_agent_url(&t.url).unwrap();
        let t = d.target("10.0.0.7", 8778);
        assert_eq!(t.url, "https://10.0.0.7:8778/actuator/jolokia");
        assert_eq!(t.name, "10.0.0.7-8778");
        // Already bracketed: not twice.
        assert_eq!(
            agent_url(Scheme::Http, "[::1]", 1, "/jolokia"),
            "http://[::1]:1/jolokia"
        );
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitise_name("a b/c:d%e"), "a-b-c-d-e");
        assert_eq!(sanitise_name("ok-1_2.3"), "ok-1_2.3");
        assert_eq!(sanitise_name("héllo"), "h-llo");
        assert_eq!(
            target_name("p-", "::ffff:10.0.0.1", 80),
            "p---ffff-10.0.0.1-80"
        );
    }

    #[test]
    fn srv_hosts_lose_the_trailing_dot_and_case() {
        let n = Name::from_ascii("Broker-0.Kafka.Example.").unwrap();
        assert_eq!(srv_host(&n), "broker-0.kafka.example");
        let n = Name::from_ascii("broker-1.kafka").unwrap();
        assert_eq!(srv_host(&n), "broker-1.kafka");
    }

    #[test]
    fn nameservers_parse_with_and_without_port() {
        assert_eq!(
            parse_nameserver("127.0.0.1:5353").unwrap(),
            "127.0.0.1:5353".parse().unwrap()
        );
        assert_eq!(
            parse_nameserver("10.0.0.2").unwrap(),
            "10.0.0.2:53".parse().unwrap()
        );
        assert_eq!(
            parse_nameserver("[::1]:5353").unwrap(),
            "[::1]:5353".parse().unwrap()
        );
        assert!(parse_nameserver("dns.example:53")
            .unwrap_err()
            .contains("dns.example"));
    }

    #[test]
    fn validation_names_the_key() {
        assert_eq!(srv_entry().validate(), Ok(()));

        let mut d = DnsDiscovery::new("headless.example.");
        let err = d.validate().unwrap_err();
        assert!(err.starts_with("port: required"), "{err}");
        d.port = Some(8778);
        assert_eq!(d.validate(), Ok(()));

        let mut d = srv_entry();
        d.name = " ".into();
        d.path = "jolokia".into();
        d.interval = Duration::ZERO;
        d.timeout = Some(Duration::ZERO);
        d.nameserver = Some("localhost".into());
        d.name_prefix = "kafka/".into();
        d.labels.insert(DISCOVERED_BY_LABEL.into(), "me".into());
        std::sync::Arc::make_mut(&mut d.agent).password_file = Some("pw".into());
        std::sync::Arc::make_mut(&mut d.agent).client_cert_file = Some("cert.pem".into());
        std::sync::Arc::make_mut(&mut d.agent).max_in_flight = Some(0);
        let problems = d.problems();
        for key in [
            "name:",
            "path:",
            "interval:",
            "timeout:",
            "nameserver:",
            "name_prefix:",
            "labels.discovered_by:",
            "password: give only one",
            "client_cert_file:",
            "max_in_flight:",
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(key)),
                "{key} missing in {problems:?}"
            );
        }
        assert_eq!(d.validate().unwrap_err(), problems.join("; "));

        let mut d = srv_entry();
        std::sync::Arc::make_mut(&mut d.agent).user = None;
        assert!(d.validate().unwrap_err().starts_with("user: a password"));
        let mut d = srv_entry();
        d.path = "/jolokia?x=1".into();
        assert!(d.validate().unwrap_err().starts_with("path:"));
    }

    #[test]
    fn parses_from_toml_with_defaults_and_rejects_unknown_keys() {
        let d: DnsDiscovery = toml::from_str(
            r#"
            name = "_jolokia._tcp.kafka.example."
            interval = "1m 30s"
            nameserver = "127.0.0.1:5353"
            labels = { app = "kafka" }
            "#,
        )
        .unwrap();
        assert_eq!(d.record_kind(), RecordKind::Srv);
        assert_eq!(d.scheme, Scheme::Http);
        assert_eq!(d.path, "/jolokia");
        assert_eq!(d.interval, Duration::from_secs(90));
        assert_eq!(d.timeout, None);
        assert_eq!(d.labels["app"], "kafka");

        let d: DnsDiscovery = toml::from_str(
            "name = \"h.example.\"\nrecord = \"a\"\nport = 8778\nscheme = \"https\"\ntimeout = \"300ms\"\n",
        )
        .unwrap();
        assert_eq!(d.record_kind(), RecordKind::A);
        assert_eq!(d.scheme, Scheme::Https);
        assert_eq!(d.timeout, Some(Duration::from_millis(300)));

        let err = toml::from_str::<DnsDiscovery>("name = \"x.\"\nrecords = \"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("records"), "{err}");
        let err = toml::from_str::<DnsDiscovery>("name = \"x.\"\nrecord = \"mx\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mx"), "{err}");
    }

    #[test]
    fn discovered_targets_pass_the_gateway_configuration_check() {
        let mut config = crate::Config::parse(
            r#"
            [server]
            listen = "127.0.0.1:8080"

            [[discovery.dns]]
            name = "_jolokia._tcp.kafka.example."
            name_prefix = "kafka-"
            user = "monitor"
            password_env = "PW"

            [[discovery.dns]]
            name = "kafka-headless.ns.svc.cluster.local."
            port = 8778
            scheme = "https"
            "#,
        )
        .unwrap();
        let srv = &config.discovery.dns[0];
        let a = &config.discovery.dns[1];
        let found = vec![
            srv.target(
                &srv_host(&Name::from_ascii("B-0.Kafka.Example.").unwrap()),
                8778,
            ),
            a.target("10.1.2.3", 8778),
            a.target("fd00::1:2", 8778),
        ];
        config.targets.extend(found);
        let config = config.validate().unwrap();
        for t in &config.targets {
            crate::agent_settings::parse_agent_url(&t.url).unwrap();
        }
    }

    #[test]
    fn configuration_check_reports_discovery_problems_by_key() {
        let problems = crate::Config::parse(
            r#"
            [server]
            listen = "127.0.0.1:8080"

            [[discovery.dns]]
            name = "_jolokia._tcp.kafka.example."

            [[discovery.dns]]
            name = "kafka-headless.ns.svc.cluster.local."
            interval = "0s"
            "#,
        )
        .unwrap()
        .validate()
        .unwrap_err();
        let all = problems.join("\n");
        assert!(all.contains("discovery.dns[1].port: required"), "{all}");
        assert!(
            all.contains("discovery.dns[1].interval: must be greater"),
            "{all}"
        );
        assert!(!all.contains("discovery.dns[0]"), "{all}");
    }

    #[test]
    fn fingerprints_see_every_field() {
        let d = srv_entry();
        let a = vec![d.target("h", 1)];
        let mut b = a.clone();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let mut labels = b[0].labels.to_map();
        labels.insert("x".into(), "y".into());
        b[0].labels = labels.into();
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
