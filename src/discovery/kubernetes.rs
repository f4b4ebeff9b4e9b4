//! `[[discovery.kubernetes]]`: targets found among a cluster's Pods.
//!
//! Two halves. The pure core, [`KubernetesDiscovery::pod_target`], turns
//! one Pod into a [`TargetConfig`] or says why it is skipped; it trusts
//! nothing a Pod says: the address is always the Pod's own `status.podIP`,
//! the port one the Pod declares, and annotations may only choose the
//! scheme and path (`jmxgate.io/scheme`, `jmxgate.io/path`, else
//! hawtio-online's `hawt.io/protocol`, `hawt.io/jolokiaPath`), or opt a
//! Pod out (`jmxgate.io/scrape: "false"`). The I/O edge, [`watch`], lists
//! and watches Pods (and Namespaces for `namespace_selector`) with
//! kube-rs's watcher (resource versions, bookmarks, a new list after
//! `410 Gone`, back-off on errors), keeps the last good set while the API
//! server is away, and hands the whole set over [`DEBOUNCE`] after the
//! first change of a burst.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use serde::Deserialize;

use super::dns::{agent_url, Scheme, DEFAULT_PATH, DISCOVERED_BY_LABEL};
use crate::agent_settings::{AgentSettings, NoOtherKeys, TargetConfig};

/// The port used when a Pod declares none named `port_name` but opts in
/// with `jmxgate.io/scrape: "true"`: Jolokia's default.
pub const DEFAULT_PORT: u16 = 8778;
/// Changes within this of the first of a burst are installed together.
pub const DEBOUNCE: Duration = Duration::from_millis(200);
/// A failing watch that has reported no failure for this long works again
/// (kube-rs's watcher retries at least every 30 s while it fails).
pub const RECOVERED_AFTER: Duration = Duration::from_secs(75);

/// `"false"` opts a Pod out; `"true"` opts it in on port 8778 when it
/// declares no port named `port_name`.
pub const ANNOTATION_SCRAPE: &str = "jmxgate.io/scrape";
/// The agent's path (`/actuator/jolokia`); before `hawt.io/jolokiaPath`.
pub const ANNOTATION_PATH: &str = "jmxgate.io/path";
/// `http` or `https`; before `hawt.io/protocol`.
pub const ANNOTATION_SCHEME: &str = "jmxgate.io/scheme";
/// A port the Pod declares, by name or number, instead of `port_name`.
pub const ANNOTATION_PORT: &str = "jmxgate.io/port";
/// hawtio-online's annotations.
pub const HAWTIO_PATH: &str = "hawt.io/jolokiaPath";
pub const HAWTIO_PROTOCOL: &str = "hawt.io/protocol";

/// Longest annotation value read (longer: the Pod is skipped).
pub const MAX_ANNOTATION_BYTES: usize = 256;
/// Pod labels copied onto a target, at most.
pub const MAX_LABELS: usize = 64;
/// Longest label key (a 253-byte prefix, `/`, 63 bytes) and value.
pub const MAX_LABEL_KEY_BYTES: usize = 317;
pub const MAX_LABEL_VALUE_BYTES: usize = 63;

/// The labels discovery sets itself (over any Pod label of that name).
pub const OWN_LABELS: [&str; 6] = [
    DISCOVERED_BY_LABEL,
    "namespace",
    "pod",
    "node",
    "controller_kind",
    "controller",
];

/// One `[[discovery.kubernetes]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KubernetesDiscovery {
    /// A kubeconfig file; absent: the in-cluster service-account token and
    /// CA (`/var/run/secrets/kubernetes.io/serviceaccount`).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Only these namespaces. With neither this nor `namespace_selector`:
    /// every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Only namespaces whose labels match (`tenant=shop`); watched too.
    #[serde(default)]
    pub namespace_selector: Option<String>,
    /// Only Pods whose labels match (`app in (orders,billing)`), sent to
    /// the API server.
    #[serde(default)]
    pub pod_selector: Option<String>,
    /// The container port so named is the agent's. Default `jolokia`.
    #[serde(default = "default_port_name")]
    pub port_name: String,
    /// Default scheme, `http`; a Pod's annotations may say otherwise.
    #[serde(default)]
    pub scheme: Scheme,
    /// Default path, `/jolokia`; a Pod's annotations may say otherwise.
    #[serde(default = "default_path")]
    pub path: String,
    /// Only Running and Ready Pods (default). `false`: every Pod with an
    /// IP, labelled `pod_ready = "false"` when not ready (health probes
    /// show it down).
    #[serde(default = "default_true")]
    pub ready_only: bool,
    /// Put before every target name: `<prefix><namespace>.<pod>`.
    #[serde(default)]
    pub name_prefix: String,
    /// Labels of every discovered target (over the Pod's own).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,

    /// Shared by every discovered target; same keys as `[[targets]]`.
    #[serde(flatten)]
    pub agent: AgentSettings,
    #[serde(flatten, default)]
    pub no_other_keys: NoOtherKeys,
}

fn default_port_name() -> String {
    "jolokia".into()
}
fn default_path() -> String {
    DEFAULT_PATH.into()
}
fn default_true() -> bool {
    true
}

impl KubernetesDiscovery {
    /// An entry with every key at its default.
    pub fn new() -> KubernetesDiscovery {
        KubernetesDiscovery {
            kubeconfig: None,
            namespaces: Vec::new(),
            namespace_selector: None,
            pod_selector: None,
            port_name: default_port_name(),
            scheme: Scheme::Http,
            path: default_path(),
            ready_only: true,
            name_prefix: String::new(),
            labels: BTreeMap::new(),
            agent: AgentSettings::default(),
            no_other_keys: NoOtherKeys,
        }
    }

    /// Every problem, each as `key: why` (relative to the entry). Reads
    /// the kubeconfig file, when one is named.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if let Some(path) = &self.kubeconfig {
            if let Err(e) = kube::config::Kubeconfig::read_from(path) {
                p.push(format!(
                    "kubeconfig: cannot read {} as a kubeconfig: {e}",
                    path.display()
                ));
            }
        }
        if !self.namespaces.is_empty() && self.namespace_selector.is_some() {
            p.push("namespace_selector: give namespaces or namespace_selector, not both".into());
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            if !is_dns_label(ns) {
                p.push(format!(
                    "namespaces[{i}]: \"{ns}\" is not a namespace name (lower-case letters, digits, '-'; at most 63)"
                ));
            }
        }
        for (key, sel) in [
            ("namespace_selector", &self.namespace_selector),
            ("pod_selector", &self.pod_selector),
        ] {
            if let Some(sel) = sel {
                if let Err(why) = check_label_selector(sel) {
                    p.push(format!("{key}: \"{sel}\": {why}"));
                }
            }
        }
        if !is_port_name(&self.port_name) {
            p.push(format!(
                "port_name: \"{}\" is not a container port name (1-15 lower-case letters, digits, '-', a letter among them)",
                self.port_name
            ));
        }
        if let Err(why) = check_path(&self.path) {
            p.push(format!("path: \"{}\" {why}", self.path));
        }
        if let Some(c) = self
            .name_prefix
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            p.push(format!(
                "name_prefix: \"{}\" contains '{c}'; use letters, digits, '-', '_' and '.'",
                self.name_prefix
            ));
        }
        for own in OWN_LABELS {
            if self.labels.contains_key(own) {
                p.push(format!("labels.{own}: set by Kubernetes discovery itself"));
            }
        }
        p.extend(self.agent.problems());
        p
    }

    /// The target of one Pod, or why it has none (for a log line). Pure:
    /// everything comes from `pod` and the entry.
    pub fn pod_target(&self, pod: &Pod) -> Result<TargetConfig, String> {
        let meta = &pod.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        if !is_dns_label(namespace) {
            return Err(format!(
                "namespace \"{}\" is not a namespace name",
                printable(namespace)
            ));
        }
        if !is_dns_subdomain(name) {
            return Err(format!("name \"{}\" is not a pod name", printable(name)));
        }
        let empty = BTreeMap::new();
        let annotations = meta.annotations.as_ref().unwrap_or(&empty);
        let annotation = |key: &str| -> Result<Option<&str>, String> {
            match annotations.get(key) {
                None => Ok(None),
                Some(v) if v.len() > MAX_ANNOTATION_BYTES => Err(format!(
                    "annotation {key} is {} bytes long (at most {MAX_ANNOTATION_BYTES} are read)",
                    v.len()
                )),
                Some(v) if v.chars().any(|c| c.is_control()) => Err(format!(
                    "annotation {key} \"{}\" contains control characters",
                    printable(v)
                )),
                Some(v) => Ok(Some(v.trim())),
            }
        };
        let scrape = annotation(ANNOTATION_SCRAPE)?;
        let opted_in = match scrape.map(str::to_ascii_lowercase).as_deref() {
            None => false,
            Some("false") => return Err(format!("{ANNOTATION_SCRAPE} is \"false\"")),
            Some("true") => true,
            Some(other) => {
                return Err(format!(
                    "annotation {ANNOTATION_SCRAPE} is \"{}\", not \"true\" or \"false\"",
                    printable(other)
                ))
            }
        };
        if meta.deletion_timestamp.is_some() && self.ready_only {
            return Err("it is being deleted".into());
        }
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Unknown");
        let ready = phase == "Running"
            && meta.deletion_timestamp.is_none()
            && status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if self.ready_only && !ready {
            return Err(format!(
                "not Running and Ready (phase {})",
                printable(phase)
            ));
        }
        let ip = match status.and_then(|s| s.pod_ip.as_deref()) {
            None | Some("") => return Err("no IP address yet (status.podIP)".into()),
            Some(text) => text.parse::<IpAddr>().map_err(|_| {
                format!("status.podIP \"{}\" is not an IP address", printable(text))
            })?,
        };
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(format!("status.podIP {ip} is not a unicast address"));
        }
        let port = self.port(pod, annotation(ANNOTATION_PORT)?, opted_in)?;
        let scheme = match annotation(ANNOTATION_SCHEME)?
            .map(|v| (ANNOTATION_SCHEME, v))
            .or(annotation(HAWTIO_PROTOCOL)?.map(|v| (HAWTIO_PROTOCOL, v)))
        {
            None => self.scheme,
            Some((key, v)) => match v.to_ascii_lowercase().as_str() {
                "http" => Scheme::Http,
                "https" => Scheme::Https,
                _ => {
                    return Err(format!(
                        "annotation {key} is \"{}\", not \"http\" or \"https\"",
                        printable(v)
                    ))
                }
            },
        };
        let path = match annotation(ANNOTATION_PATH)?
            .map(|v| (ANNOTATION_PATH, v))
            .or(annotation(HAWTIO_PATH)?.map(|v| (HAWTIO_PATH, v)))
        {
            None => self.path.clone(),
            Some((key, v)) => {
                check_path(v)
                    .map_err(|why| format!("annotation {key} \"{}\" {why}", printable(v)))?;
                v.to_string()
            }
        };
        let url = agent_url(scheme, &ip.to_string(), port, &path);
        // The URL must still be at the Pod's address and port, whatever
        // the path held.
        let parsed = crate::agent_settings::parse_agent_url(&url)?;
        let host_ok = match (parsed.host(), ip) {
            (Some(url::Host::Ipv4(a)), IpAddr::V4(b)) => a == b,
            (Some(url::Host::Ipv6(a)), IpAddr::V6(b)) => a == b,
            _ => false,
        };
        if !host_ok || parsed.port_or_known_default() != Some(port) {
            return Err(format!(
                "the agent URL {url} would not be at the pod's own address"
            ));
        }

        let labels = self.target_labels(pod, namespace, name, ready);
        Ok(TargetConfig {
            name: format!("{}{namespace}.{name}", self.name_prefix),
            url,
            labels: labels.into(),
            agent: self.agent.clone(),
            // The gateway names the source when it takes the target in.
            origin: Default::default(),
            no_other_keys: NoOtherKeys,
        })
    }

    /// A Pod's target labels: its own (at most `MAX_LABELS`, plain and
    /// short ones only), the entry's, then discovery's own, which no Pod
    /// label can take: `discovered_by`, `namespace`, `pod`, `node`,
    /// `controller_kind`, `controller`, and `pod_ready` when not ready.
    fn target_labels(
        &self,
        pod: &Pod,
        namespace: &str,
        name: &str,
        ready: bool,
    ) -> BTreeMap<String, String> {
        let meta = &pod.metadata;
        let mut labels = BTreeMap::new();
        let mut dropped = 0usize;
        if let Some(pod_labels) = &meta.labels {
            for (k, v) in pod_labels {
                if labels.len() >= MAX_LABELS
                    || k.len() > MAX_LABEL_KEY_BYTES
                    || v.len() > MAX_LABEL_VALUE_BYTES
                    || !k.chars().all(is_label_char)
                    || !v.chars().all(is_label_char)
                    || k.is_empty()
                {
                    dropped += 1;
                    continue;
                }
                labels.insert(k.clone(), v.clone());
            }
        }
        if dropped > 0 {
            tracing::debug!(
                pod = %format!("{namespace}/{name}"),
                dropped,
                "pod labels too many, too long or with odd characters were left out"
            );
        }
        for (k, v) in &self.labels {
            labels.insert(k.clone(), v.clone());
        }
        labels.insert(DISCOVERED_BY_LABEL.into(), "kubernetes".into());
        labels.insert("namespace".into(), namespace.into());
        labels.insert("pod".into(), name.into());
        for own in ["node", "controller_kind", "controller", "pod_ready"] {
            labels.remove(own);
        }
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if is_dns_subdomain(node) {
                labels.insert("node".into(), node.into());
            }
        }
        if let Some(owner) = meta
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
        {
            if owner.kind.len() <= 63 && owner.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
                labels.insert("controller_kind".into(), owner.kind.clone());
            }
            if is_dns_subdomain(&owner.name) {
                labels.insert("controller".into(), owner.name.clone());
            }
        }
        if !ready {
            labels.insert("pod_ready".into(), "false".into());
        }
        labels
    }

    /// The agent's port: the one `jmxgate.io/port` names (by name or
    /// number) among the Pod's declared TCP ports, else the port named
    /// `port_name`, else 8778 with `jmxgate.io/scrape: "true"`.
    fn port(&self, pod: &Pod, chosen: Option<&str>, opted_in: bool) -> Result<u16, String> {
        let declared: Vec<(Option<&str>, i32)> = pod
            .spec
            .as_ref()
            .map(|s| {
                s.containers
                    .iter()
                    .flat_map(|c| c.ports.iter().flatten())
                    .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
                    .map(|p| (p.name.as_deref(), p.container_port))
                    .collect()
            })
            .unwrap_or_default();
        let valid = |n: i32| u16::try_from(n).ok().filter(|n| *n > 0);
        if let Some(chosen) = chosen {
            let found = match chosen.parse::<i32>() {
                Ok(n) => declared.iter().find(|(_, p)| *p == n),
                Err(_) => declared.iter().find(|(name, _)| *name == Some(chosen)),
            };
            return match found.and_then(|(_, p)| valid(*p)) {
                Some(p) => Ok(p),
                None => Err(format!(
                    "annotation {ANNOTATION_PORT} \"{}\" is not a TCP port the pod declares",
                    printable(chosen)
                )),
            };
        }
        if let Some((_, p)) = declared
            .iter()
            .find(|(name, _)| *name == Some(self.port_name.as_str()))
        {
            return valid(*p).ok_or_else(|| format!("port {} is not a port number", p));
        }
        if opted_in {
            return Ok(DEFAULT_PORT);
        }
        Err(format!(
            "no container port named \"{}\" (and no {ANNOTATION_SCRAPE}: \"true\" for port {DEFAULT_PORT})",
            self.port_name
        ))
    }
}

impl Default for KubernetesDiscovery {
    fn default() -> Self {
        KubernetesDiscovery::new()
    }
}

/// At most 80 characters of `text`, control characters escaped: safe in
/// one log line.
fn printable(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(80)
        .flat_map(char::escape_default)
        .collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

/// RFC 1123 label: a namespace name.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: a pod or node name.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// IANA service name: a container port name.
fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.chars().any(|c| c.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// A path an agent may be at: absolute, plain URL path characters, no
/// `..` or `.` segment, no `//`, no query, no fragment.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with '/'".into());
    }
    if path.len() > 200 {
        return Err("is longer than 200 bytes".into());
    }
    if path.contains("//") {
        return Err("contains '//'".into());
    }
    if let Some(c) = path.chars().find(|c| {
        !(c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.' | '~' | '+' | '=' | ','))
    }) {
        return Err(format!(
            "contains '{}' (letters, digits, '/', '-', '_', '.', '~', '+', '=', ',' only)",
            c.escape_default()
        ));
    }
    if path.split('/').any(|seg| seg == ".." || seg == ".") {
        return Err("contains a '.' or '..' segment".into());
    }
    Ok(())
}

/// Checks a Kubernetes label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
pub fn check_label_selector(sel: &str) -> Result<(), String> {
    let sel = sel.trim();
    if sel.is_empty() {
        return Err("empty".into());
    }
    // Split on commas outside parentheses.
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in sel.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&sel[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    parts.push(&sel[start..]);
    for part in parts {
        let part = part.trim();
        let key_ok = |k: &str| check_label_key(k.trim());
        let value_ok = |v: &str| {
            let v = v.trim();
            if v.len() <= 63
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
                && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
            {
                Ok(())
            } else {
                Err(format!("\"{v}\" is not a label value"))
            }
        };
        if let Some(open) = part.find('(') {
            let head = part[..open].trim();
            let Some(list) = part[open + 1..].trim().strip_suffix(')') else {
                return Err(format!("\"{part}\": text after ')'"));
            };
            let (key, op) = head
                .rsplit_once(char::is_whitespace)
                .ok_or_else(|| format!("\"{part}\": expected `key in (…)` or `key notin (…)`"))?;
            if !matches!(op, "in" | "notin") {
                return Err(format!("\"{part}\": unknown operator \"{op}\""));
            }
            key_ok(key)?;
            if list.trim().is_empty() {
                return Err(format!("\"{part}\": an empty set of values"));
            }
            for v in list.split(',') {
                value_ok(v)?;
            }
        } else if let Some((k, v)) = part.split_once("!=") {
            key_ok(k)?;
            value_ok(v)?;
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            key_ok(k)?;
            value_ok(v)?;
        } else if let Some(k) = part.strip_prefix('!') {
            key_ok(k)?;
        } else {
            key_ok(part)?;
        }
    }
    Ok(())
}

fn check_label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !name_ok || prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return Err(format!("\"{k}\" is not a label key"));
    }
    Ok(())
}

/// A Kubernetes client for the entry: its kubeconfig (current context),
/// else the in-cluster service account.
pub async fn client(config: &KubernetesDiscovery) -> Result<kube::Client, String> {
    client_from(config.kubeconfig.as_deref()).await
}

/// A Kubernetes client from a kubeconfig file (current context), else the
/// in-cluster service account.
pub async fn client_from(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let kube_config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("in-cluster configuration (service account): {e}"))?,
    };
    kube::Client::try_from(kube_config).map_err(|e| format!("Kubernetes client: {e}"))
}

/// What the watch of one entry saw: Pod events (with the namespace of
/// the watch, `None` for all), Namespace events, or a failure.
enum Seen {
    Pods(Option<String>, Box<watcher::Event<Pod>>),
    Namespaces(Box<watcher::Event<Namespace>>),
    Failed(String),
}

type Judged = HashMap<String, Result<TargetConfig, String>>;

/// Watches one entry's Pods and calls `on_change` with the targets that
/// changed (the first time: all of them), [`DEBOUNCE`] after the first
/// change of a burst (the rest of the burst goes with it). A watch that
/// keeps failing (a namespace the gateway may not read) holds back no
/// other watch's Pods. While the API server can't be reached the last set
/// stays; each watch's failure is logged once (a warning) and so is its
/// recovery (info), and `on_state(false)` / `on_state(true)` is called
/// when some watch starts failing / when none fails any more.
///
/// Runs until the task is dropped or aborted.
pub async fn watch(
    config: KubernetesDiscovery,
    on_change: impl Fn(super::Discovered) + Send + 'static,
    on_state: impl Fn(bool) + Send + 'static,
) {
    let source = describe(&config);
    let mut up: Option<bool> = None;
    let mut failing: Option<String> = None;
    let client = loop {
        match client(&config).await {
            Ok(c) => break c,
            Err(why) => {
                if failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(source = %source, "Kubernetes discovery cannot start, retrying in 5s: {why}");
                }
                if up != Some(false) {
                    on_state(false);
                    up = Some(false);
                }
                failing = Some(why);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    };
    let mut pod_config = watcher::Config::default();
    if let Some(sel) = &config.pod_selector {
        pod_config = pod_config.labels(sel);
    }
    // Each watch's items come with its number, so each one's failure is
    // told apart (and `what` names it in log lines).
    let mut streams: Vec<futures::stream::BoxStream<'static, (usize, Seen)>> = Vec::new();
    let mut what: Vec<String> = Vec::new();
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    for scope in scopes {
        let api: kube::Api<Pod> = match &scope {
            None => kube::Api::all(client.clone()),
            Some(ns) => kube::Api::namespaced(client.clone(), ns),
        };
        let n = what.len();
        what.push(match &scope {
            None => "pods".into(),
            Some(ns) => format!("pods in {ns}"),
        });
        streams.push(
            watcher(api, pod_config.clone())
                .default_backoff()
                .map(move |r| match r {
                    Ok(e) => (n, Seen::Pods(scope.clone(), Box::new(e))),
                    Err(e) => (n, Seen::Failed(e.to_string())),
                })
                .boxed(),
        );
    }
    if let Some(sel) = &config.namespace_selector {
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        let n = what.len();
        what.push("namespaces".into());
        streams.push(
            watcher(api, watcher::Config::default().labels(sel))
                .default_backoff()
                .map(move |r| match r {
                    Ok(e) => (n, Seen::Namespaces(Box::new(e))),
                    Err(e) => (n, Seen::Failed(e.to_string())),
                })
                .boxed(),
        );
    }
    let mut events = futures::stream::select_all(streams);

    let mut state = PodSet::new(&config);
    // Since when a change waits to be handed over: every change within
    // DEBOUNCE of the first goes over with it (a steady stream of events
    // delays nothing by more than that).
    let mut dirty_since: Option<tokio::time::Instant> = None;
    // Each failing watch: the failure, and when it was last reported. The
    // watcher retries with a back-off of at most 30 s and reports each
    // failed try; a watch that resumes quietly (nothing changed while the
    // API server was away) sends no event, so one without a failure for
    // `RECOVERED_AFTER` counts as working again.
    let mut watch_failing: HashMap<usize, (String, tokio::time::Instant)> = HashMap::new();
    loop {
        if dirty_since.is_some_and(|t| t.elapsed() >= DEBOUNCE) {
            dirty_since = None;
            if let Some(change) = state.take_change() {
                if let super::Discovered::Changed { upserts, removed } = &change {
                    tracing::debug!(source = %source, changed = upserts.len(), removed = removed.len(), "Kubernetes discovery: targets changed");
                }
                on_change(change);
            }
        }
        let wait = if let Some(t) = dirty_since {
            Some(DEBOUNCE.saturating_sub(t.elapsed()))
        } else if !watch_failing.is_empty() {
            Some(Duration::from_secs(5))
        } else {
            None
        };
        let next = match wait {
            Some(wait) => tokio::time::timeout(wait, events.next()).await.ok(),
            None => Some(events.next().await),
        };
        let now = tokio::time::Instant::now();
        watch_failing.retain(|n, (_, last)| {
            let failing = now.duration_since(*last) < RECOVERED_AFTER;
            if !failing {
                tracing::info!(source = %source, "Kubernetes discovery: watching {} works again", what[*n]);
            }
            failing
        });
        let seen = match next {
            // Nothing for `wait`: the top of the loop hands a change over.
            None => None,
            Some(None) => return,
            Some(Some(item)) => Some(item),
        };
        if let Some((n, seen)) = &seen {
            match seen {
                Seen::Failed(why) => {
                    if watch_failing.get(n).map(|(w, _)| w) != Some(why) {
                        tracing::warn!(
                            source = %source,
                            "Kubernetes discovery: watching {} failed, keeping the last known targets: {why}",
                            what[*n]
                        );
                    }
                    watch_failing.insert(*n, (why.clone(), now));
                }
                _ => {
                    if watch_failing.remove(n).is_some() {
                        tracing::info!(source = %source, "Kubernetes discovery: watching {} works again", what[*n]);
                    }
                }
            }
        }
        // Up while no watch fails.
        let now_up = watch_failing.is_empty();
        if up != Some(now_up) {
            on_state(now_up);
            up = Some(now_up);
        }
        let Some((_, seen)) = seen else { continue };
        let changed = match seen {
            Seen::Failed(..) => false,
            Seen::Pods(scope, event) => state.pods_event(&config, scope, *event),
            Seen::Namespaces(event) => state.namespaces_event(*event),
        };
        if changed && dirty_since.is_none() {
            dirty_since = Some(now);
        }
    }
}

/// What the watches of one entry have seen, folded: each Pod's target or
/// why it has none, and the namespaces `namespace_selector` picks. Pure
/// (no I/O), so re-lists and deletes are unit-tested.
#[derive(Default)]
pub struct PodSet {
    /// By `namespace/name`.
    pods: Judged,
    /// The Pods of a list under way, per watch (its namespace, `None` for
    /// all): they replace that watch's Pods only when the list is complete.
    pending: HashMap<Option<String>, Judged>,
    /// With `namespace_selector`: the namespaces it picks.
    selected_ns: Option<BTreeSet<String>>,
    pending_ns: Option<BTreeSet<String>>,
    /// What [`take_change`](Self::take_change) handed over, by Pod.
    handed: HashMap<String, TargetConfig>,
    /// Pods whose target may differ from the one handed over.
    dirty: HashSet<String>,
    /// Every Pod may (a re-list, a namespace picked or dropped).
    all_dirty: bool,
}

impl PodSet {
    /// A set for an entry (with a namespace filter when it has a
    /// `namespace_selector`).
    pub fn new(config: &KubernetesDiscovery) -> PodSet {
        PodSet {
            selected_ns: config.namespace_selector.as_ref().map(|_| BTreeSet::new()),
            ..PodSet::default()
        }
    }

    /// Folds in a Pod event of the watch of `scope` (a namespace, `None`
    /// for all); true when the targets may have changed.
    pub fn pods_event(
        &mut self,
        config: &KubernetesDiscovery,
        scope: Option<String>,
        event: watcher::Event<Pod>,
    ) -> bool {
        match event {
            watcher::Event::Init => {
                self.pending.insert(scope, HashMap::new());
                false
            }
            watcher::Event::InitApply(pod) => {
                let (key, result) = judge(config, &pod, &self.pods);
                self.pending.entry(scope).or_default().insert(key, result);
                false
            }
            watcher::Event::InitDone => {
                let fresh = self.pending.remove(&scope).unwrap_or_default();
                self.all_dirty = true;
                match &scope {
                    None => self.pods = fresh,
                    Some(ns) => {
                        let prefix = format!("{ns}/");
                        self.pods.retain(|k, _| !k.starts_with(&prefix));
                        self.pods.extend(fresh);
                    }
                }
                true
            }
            watcher::Event::Apply(pod) => {
                let (key, result) = judge(config, &pod, &self.pods);
                self.dirty.insert(key.clone());
                self.pods.insert(key, result);
                true
            }
            watcher::Event::Delete(pod) => {
                let key = pod_key(&pod);
                tracing::info!(pod = %key, "Kubernetes discovery: pod deleted");
                let known = self.pods.remove(&key).is_some();
                if known {
                    self.dirty.insert(key);
                }
                known
            }
        }
    }

    /// Folds in a Namespace event (of the `namespace_selector` watch).
    pub fn namespaces_event(&mut self, event: watcher::Event<Namespace>) -> bool {
        let selected = self.selected_ns.get_or_insert_with(BTreeSet::new);
        match event {
            watcher::Event::Init => {
                self.pending_ns = Some(BTreeSet::new());
                false
            }
            watcher::Event::InitApply(ns) => {
                if let Some(name) = ns.metadata.name {
                    self.pending_ns
                        .get_or_insert_with(BTreeSet::new)
                        .insert(name);
                }
                false
            }
            watcher::Event::InitDone => {
                *selected = self.pending_ns.take().unwrap_or_default();
                self.all_dirty = true;
                true
            }
            watcher::Event::Apply(ns) => {
                let changed = ns.metadata.name.is_some_and(|n| selected.insert(n));
                self.all_dirty |= changed;
                changed
            }
            watcher::Event::Delete(ns) => {
                let changed = ns.metadata.name.is_some_and(|n| selected.remove(&n));
                self.all_dirty |= changed;
                changed
            }
        }
    }

    /// The targets added, changed or gone since the last call (the first
    /// time: all there are), or `None` when nothing changed. Only the
    /// Pods events named are looked at, unless a re-list or a namespace
    /// change may have changed any.
    pub fn take_change(&mut self) -> Option<super::Discovered> {
        let keys: Vec<String> = if std::mem::take(&mut self.all_dirty) {
            self.dirty.clear();
            self.pods
                .keys()
                .chain(self.handed.keys())
                .cloned()
                .collect()
        } else {
            self.dirty.drain().collect()
        };
        let mut upserts = Vec::new();
        let mut removed = Vec::new();
        let mut keys = keys;
        keys.sort();
        keys.dedup();
        for key in keys {
            let now = self
                .pods
                .get(&key)
                .and_then(|r| r.as_ref().ok())
                .filter(|_| self.namespace_selected(&key))
                .cloned();
            match (now, self.handed.get(&key)) {
                (Some(now), Some(before)) if now == *before => {}
                (Some(now), _) => {
                    upserts.push(now.clone());
                    self.handed.insert(key, now);
                }
                (None, Some(_)) => {
                    let before = self.handed.remove(&key).expect("handed over");
                    removed.push(before.name);
                }
                (None, None) => {}
            }
        }
        (!upserts.is_empty() || !removed.is_empty())
            .then_some(super::Discovered::Changed { upserts, removed })
    }

    /// Whether `namespace/name` is in a namespace the entry picks.
    fn namespace_selected(&self, key: &str) -> bool {
        self.selected_ns
            .as_ref()
            .is_none_or(|set| key.split_once('/').is_some_and(|(ns, _)| set.contains(ns)))
    }

    /// The targets of the Pods with one (in the selected namespaces), by
    /// name, each name once.
    pub fn targets(&self) -> Vec<TargetConfig> {
        current(&self.pods, self.selected_ns.as_ref())
    }
}

/// `namespace/name` of a Pod, printable.
fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        printable(pod.metadata.namespace.as_deref().unwrap_or_default()),
        printable(pod.metadata.name.as_deref().unwrap_or_default())
    )
}

/// `namespace/name` of a Pod and its target or why not. A skipped Pod is
/// logged when its reason is new (not at every list): at warn when the Pod
/// says something odd (an annotation, its IP, its name), else at debug
/// (most Pods of a cluster are no agents, or not ready yet).
fn judge(
    config: &KubernetesDiscovery,
    pod: &Pod,
    known: &Judged,
) -> (String, Result<TargetConfig, String>) {
    let key = pod_key(pod);
    let result = config.pod_target(pod);
    if let Err(why) = &result {
        let before = known.get(&key).and_then(|r| r.as_ref().err());
        if before != Some(why) {
            if is_suspicious(why) {
                tracing::warn!(pod = %key, "Kubernetes discovery: pod skipped: {why}");
            } else {
                tracing::debug!(pod = %key, "Kubernetes discovery: pod skipped: {why}");
            }
        }
    }
    (key, result)
}

/// A reason that points at odd input rather than an ordinary state.
fn is_suspicious(why: &str) -> bool {
    why.starts_with("annotation ")
        || why.starts_with("status.podIP")
        || why.starts_with("name ")
        || why.starts_with("namespace ")
        || why.starts_with("the agent URL")
}

/// The targets of the Pods with one, in selected namespaces, by name.
fn current(
    pods: &HashMap<String, Result<TargetConfig, String>>,
    namespaces: Option<&BTreeSet<String>>,
) -> Vec<TargetConfig> {
    let mut targets: Vec<TargetConfig> = pods
        .iter()
        .filter(|(k, _)| {
            namespaces.is_none_or(|set| k.split_once('/').is_some_and(|(ns, _)| set.contains(ns)))
        })
        .filter_map(|(_, r)| r.as_ref().ok().cloned())
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    targets.dedup_by(|a, b| a.name == b.name);
    targets
}

/// The entry in a few words, for log lines.
pub fn describe(config: &KubernetesDiscovery) -> String {
    let cluster = config
        .kubeconfig
        .as_ref()
        .map_or("in-cluster".to_string(), |p| p.display().to_string());
    let scope = if !config.namespaces.is_empty() {
        format!("namespaces {}", config.namespaces.join(","))
    } else if let Some(sel) = &config.namespace_selector {
        format!("namespaces {sel}")
    } else {
        "all namespaces".into()
    };
    match &config.pod_selector {
        Some(sel) => format!("{cluster}, {scope}, pods {sel}"),
        None => format!("{cluster}, {scope}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Running, Ready pod `shop/orders-1` at 10.1.2.3 with a container
    /// port `jolokia` 8778, owned by ReplicaSet `orders-7d9`.
    fn pod_json() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "orders-1", "namespace": "shop",
                "labels": {"app": "orders", "tier": "backend"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "orders-7d9", "uid": "u1", "controller": true}
                ]
            },
            "spec": {
                "nodeName": "node-a",
                "containers": [
                    {"name": "app", "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "jolokia", "containerPort": 8778}
                    ]},
                    {"name": "sidecar", "ports": [{"containerPort": 9000}]}
                ]
            },
            "status": {
                "phase": "Running", "podIP": "10.1.2.3",
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        })
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn annotated(annotations: serde_json::Value) -> Pod {
        let mut v = pod_json();
        v["metadata"]["annotations"] = annotations;
        pod(v)
    }

    fn entry() -> KubernetesDiscovery {
        KubernetesDiscovery::new()
    }

    #[test]
    fn a_ready_pod_becomes_a_target_at_its_own_address() {
        let t = entry().pod_target(&pod(pod_json())).unwrap();
        assert_eq!(t.name, "shop.orders-1");
        assert_eq!(t.url, "http://10.1.2.3:8778/jolokia");
        let labels: Vec<(&str, &str)> = t
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("app", "orders"),
                ("controller", "orders-7d9"),
                ("controller_kind", "ReplicaSet"),
                ("discovered_by", "kubernetes"),
                ("namespace", "shop"),
                ("node", "node-a"),
                ("pod", "orders-1"),
                ("tier", "backend"),
            ]
        );
        crate::agent_settings::check_name(&t.name).unwrap();
        // Every existing selector works on them.
        let sel = crate::access::TargetSelector::parse("namespace=shop,app=orders").unwrap();
        assert!(matches!(sel, crate::access::TargetSelector::Labels(_)));
    }

    #[test]
    fn pods_of_the_same_name_in_two_namespaces_stay_apart() {
        let a = entry().pod_target(&pod(pod_json())).unwrap();
        let mut v = pod_json();
        v["metadata"]["namespace"] = json!("pay");
        let b = entry().pod_target(&pod(v)).unwrap();
        assert_ne!(a.name, b.name);
        assert_eq!(b.name, "pay.orders-1");
        let mut e = entry();
        e.name_prefix = "prod-".into();
        assert_eq!(
            e.pod_target(&pod(pod_json())).unwrap().name,
            "prod-shop.orders-1"
        );
    }

    #[test]
    fn the_port_is_one_the_pod_declares() {
        let mut e = entry();
        e.port_name = "http".into();
        assert_eq!(
            e.pod_target(&pod(pod_json())).unwrap().url,
            "http://10.1.2.3:8080/jolokia"
        );
        e.port_name = "jmx".into();
        let why = e.pod_target(&pod(pod_json())).unwrap_err();
        assert!(why.contains("no container port named \"jmx\""), "{why}");
        // Opted in without a named port: Jolokia's 8778.
        let p = annotated(json!({"jmxgate.io/scrape": "true"}));
        assert_eq!(
            e.pod_target(&p).unwrap().url,
            "http://10.1.2.3:8778/jolokia"
        );
        // The port annotation chooses among declared ports, by name or number.
        for (v, url) in [
            ("http", "http://10.1.2.3:8080/jolokia"),
            ("9000", "http://10.1.2.3:9000/jolokia"),
        ] {
            let p = annotated(json!({"jmxgate.io/port": v}));
            assert_eq!(entry().pod_target(&p).unwrap().url, url);
        }
        for v in ["22", "65536", "admin", "8778 ", "-1", "0"] {
            let mut p = annotated(json!({ "jmxgate.io/port": v }));
            if v == "8778 " {
                // Trimmed: that one is declared.
                assert!(entry().pod_target(&p).is_ok());
                continue;
            }
            p.spec.as_mut().unwrap().containers[1]
                .ports
                .as_mut()
                .unwrap()[0]
                .container_port = 9000;
            let why = entry().pod_target(&p).unwrap_err();
            assert!(
                why.contains("not a TCP port the pod declares"),
                "{v}: {why}"
            );
        }
        // UDP ports don't count.
        let mut v = pod_json();
        v["spec"]["containers"][0]["ports"][1]["protocol"] = json!("UDP");
        assert!(entry().pod_target(&pod(v)).is_err());
    }

    #[test]
    fn hawtio_and_own_annotations_set_scheme_and_path() {
        let p = annotated(
            json!({"hawt.io/protocol": "https", "hawt.io/jolokiaPath": "/actuator/jolokia"}),
        );
        assert_eq!(
            entry().pod_target(&p).unwrap().url,
            "https://10.1.2.3:8778/actuator/jolokia"
        );
        // Ours come first.
        let p = annotated(json!({
            "hawt.io/protocol": "https", "hawt.io/jolokiaPath": "/actuator/jolokia",
            "jmxgate.io/scheme": "HTTP", "jmxgate.io/path": "/jmx"
        }));
        assert_eq!(
            entry().pod_target(&p).unwrap().url,
            "http://10.1.2.3:8778/jmx"
        );
        // The entry's defaults otherwise.
        let mut e = entry();
        e.scheme = Scheme::Https;
        e.path = "/j".into();
        assert_eq!(
            e.pod_target(&pod(pod_json())).unwrap().url,
            "https://10.1.2.3:8778/j"
        );
    }

    #[test]
    fn opting_out_skips_the_pod() {
        for v in ["false", "False"] {
            let why = entry()
                .pod_target(&annotated(json!({ "jmxgate.io/scrape": v })))
                .unwrap_err();
            assert!(why.contains("jmxgate.io/scrape is \"false\""), "{why}");
        }
        let why = entry()
            .pod_target(&annotated(json!({"jmxgate.io/scrape": "maybe"})))
            .unwrap_err();
        assert!(why.contains("not \"true\" or \"false\""), "{why}");
    }

    #[test]
    fn hostile_annotations_give_no_target_elsewhere() {
        let long = "a".repeat(10 * 1024);
        let long_path = format!("/{long}");
        let cases: Vec<(&str, String, &str)> = vec![
            (
                "hawt.io/jolokiaPath",
                "http://evil.example/".into(),
                "must start with '/'",
            ),
            (
                "hawt.io/jolokiaPath",
                "//evil.example/jolokia".into(),
                "contains '//'",
            ),
            ("jmxgate.io/path", "/../../admin".into(), "'..' segment"),
            ("jmxgate.io/path", "/a/./b".into(), "'..' segment"),
            (
                "jmxgate.io/path",
                "/jolokia?host=evil".into(),
                "contains '?'",
            ),
            ("jmxgate.io/path", "/jolokia#x".into(), "contains '#'"),
            ("jmxgate.io/path", "/@evil.example".into(), "contains '@'"),
            ("jmxgate.io/path", "/a%2F..%2F".into(), "contains '%'"),
            ("jmxgate.io/path", "/a\\b".into(), "contains '\\\\'"),
            (
                "jmxgate.io/path",
                "/jolokia\nHost: evil".into(),
                "control characters",
            ),
            ("jmxgate.io/path", "/a b".into(), "contains ' '"),
            ("hawt.io/jolokiaPath", long_path, "bytes long"),
            (
                "hawt.io/protocol",
                "ftp".into(),
                "not \"http\" or \"https\"",
            ),
            (
                "jmxgate.io/scheme",
                "https://evil.example".into(),
                "not \"http\" or \"https\"",
            ),
            ("jmxgate.io/scheme", "http\r\n".into(), "control characters"),
            (
                "jmxgate.io/port",
                "evil.example:80".into(),
                "not a TCP port",
            ),
            ("jmxgate.io/port", long.clone(), "bytes long"),
            ("jmxgate.io/scrape", long, "bytes long"),
        ];
        for (key, value, expected) in cases {
            let p = annotated(json!({ key: value }));
            let why = entry()
                .pod_target(&p)
                .expect_err(&format!("{key}: {value:.40} gave a target"));
            assert!(why.contains(expected), "{key}: {value:.40}: {why}");
            // Logged at warn: input to look at.
            assert!(is_suspicious(&why), "{why}");
            assert!(why.len() < 400, "a long value is not logged whole: {why}");
            assert!(!why.contains('\n') && !why.contains('\r'), "{why}");
        }
        // Annotations that aren't ours may be anything.
        let p = annotated(json!({"other.example/x": "a".repeat(10 * 1024), "note": "a\nb"}));
        assert!(entry().pod_target(&p).is_ok());
    }

    #[test]
    fn only_running_and_ready_pods_by_default() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (
                json!({"phase": "Pending"}),
                "not Running and Ready (phase Pending)",
            ),
            (
                json!({"phase": "Running", "podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "False"}]}),
                "not Running and Ready",
            ),
            (
                json!({"phase": "Running", "podIP": "10.1.2.3"}),
                "not Running and Ready",
            ),
            (
                json!({"phase": "Succeeded", "podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]}),
                "phase Succeeded",
            ),
        ];
        for (status, expected) in cases {
            let mut v = pod_json();
            v["status"] = status.clone();
            let why = entry().pod_target(&pod(v)).unwrap_err();
            assert!(why.contains(expected), "{status}: {why}");
            // The cluster's ordinary state: logged at debug.
            assert!(!is_suspicious(&why), "{why}");
        }
        let mut v = pod_json();
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(entry()
            .pod_target(&pod(v.clone()))
            .unwrap_err()
            .contains("being deleted"));

        // ready_only = false: a pod with an IP is in, marked not ready.
        let mut e = entry();
        e.ready_only = false;
        let t = e.pod_target(&pod(v)).unwrap();
        assert_eq!(t.labels["pod_ready"], "false");
        let mut v = pod_json();
        v["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(e.pod_target(&pod(v)).unwrap().labels["pod_ready"], "false");
        assert!(!e
            .pod_target(&pod(pod_json()))
            .unwrap()
            .labels
            .contains_key("pod_ready"));
        // Without an IP, never.
        let mut v = pod_json();
        v["status"] = json!({"phase": "Pending"});
        assert!(e.pod_target(&pod(v)).unwrap_err().contains("no IP address"));
    }

    #[test]
    fn the_address_is_a_real_unicast_ip() {
        for (ip, expected) in [
            ("", "no IP address"),
            ("evil.example", "not an IP address"),
            ("10.0.0.1:80", "not an IP address"),
            ("10.0.0.1/evil", "not an IP address"),
            ("0.0.0.0", "not a unicast address"),
            ("224.0.0.1", "not a unicast address"),
            ("::", "not a unicast address"),
        ] {
            let mut v = pod_json();
            v["status"]["podIP"] = json!(ip);
            let why = entry().pod_target(&pod(v)).unwrap_err();
            assert!(why.contains(expected), "{ip}: {why}");
            assert_eq!(is_suspicious(&why), !ip.is_empty(), "{why}");
        }
        let mut v = pod_json();
        v["status"]["podIP"] = json!("fd00::7");
        let t = entry().pod_target(&pod(v)).unwrap();
        assert_eq!(t.url, "http://[fd00::7]:8778/jolokia");
    }

    #[test]
    fn labels_are_bounded_and_own_labels_win() {
        let mut v = pod_json();
        let mut labels = serde_json::Map::new();
        for i in 0..200 {
            labels.insert(format!("l{i:03}"), json!("v"));
        }
        labels.insert("namespace".into(), json!("kube-system"));
        labels.insert("pod".into(), json!("other"));
        labels.insert("discovered_by".into(), json!("dns"));
        labels.insert("pod_ready".into(), json!("true"));
        labels.insert("long".into(), json!("x".repeat(100)));
        v["metadata"]["labels"] = serde_json::Value::Object(labels);
        let t = entry().pod_target(&pod(v)).unwrap();
        assert!(
            t.labels.len() <= MAX_LABELS + OWN_LABELS.len(),
            "{}",
            t.labels.len()
        );
        assert_eq!(t.labels["namespace"], "shop");
        assert_eq!(t.labels["pod"], "orders-1");
        assert_eq!(t.labels["discovered_by"], "kubernetes");
        assert!(!t.labels.contains_key("long"));
        assert!(!t.labels.contains_key("pod_ready"));
        // The entry's labels over the pod's.
        let mut e = entry();
        e.labels.insert("app".into(), "from-config".into());
        assert_eq!(
            e.pod_target(&pod(pod_json())).unwrap().labels["app"],
            "from-config"
        );
    }

    #[test]
    fn odd_names_are_skipped_not_panicked_on() {
        for (key, value) in [
            ("name", json!("Orders_1")),
            ("name", json!("")),
            ("namespace", json!("a.b")),
            ("namespace", json!(null)),
        ] {
            let mut v = pod_json();
            v["metadata"][key] = value.clone();
            assert!(entry().pod_target(&pod(v)).is_err(), "{key}: {value}");
        }
        let empty: Pod = serde_json::from_value(json!({})).unwrap();
        assert!(entry().pod_target(&empty).is_err());
    }

    #[test]
    fn label_selectors_are_checked() {
        for ok in [
            "app=orders",
            "app==orders,tier!=front",
            "app in (orders,billing)",
            "app in (orders, billing), env notin (dev)",
            "tenant",
            "!canary",
            "example.com/team=shop",
            "app=",
        ] {
            check_label_selector(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "",
            "app in (orders",
            "app in orders)",
            "app within (a)",
            "app in ()",
            "-app=x",
            "app=x y",
            "app=(x)",
            "a/b/c=x",
        ] {
            assert!(check_label_selector(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entries_parse_and_problems_name_their_key() {
        let e: KubernetesDiscovery = toml::from_str(
            r#"
            namespaces = ["shop", "pay"]
            pod_selector = "app in (orders,billing)"
            user = "monitor"
            password_env = "PW"
            "#,
        )
        .unwrap();
        assert_eq!(e.port_name, "jolokia");
        assert_eq!(e.path, "/jolokia");
        assert!(e.ready_only);
        assert_eq!(e.problems(), Vec::<String>::new());
        let err = toml::from_str::<KubernetesDiscovery>("namespace = \"shop\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("namespace"), "{err}");

        let mut e = entry();
        e.kubeconfig = Some("/nonexistent/kubeconfig".into());
        e.namespaces = vec!["Shop".into()];
        e.namespace_selector = Some("tenant in (".into());
        e.pod_selector = Some("app=a b".into());
        e.port_name = "Jolokia_port_long".into();
        e.path = "/a/../b".into();
        e.name_prefix = "a/b".into();
        e.labels.insert("namespace".into(), "x".into());
        let problems = e.problems();
        for key in [
            "kubeconfig:",
            "namespace_selector: give namespaces",
            "namespaces[0]:",
            "namespace_selector: \"tenant",
            "pod_selector:",
            "port_name:",
            "path:",
            "name_prefix:",
            "labels.namespace:",
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(key)),
                "{key} missing in {problems:?}"
            );
        }
    }

    #[test]
    fn configuration_check_reports_kubernetes_problems_by_key() {
        let problems = crate::Config::parse(
            r#"
            [server]
            listen = "127.0.0.1:8080"

            [[discovery.kubernetes]]
            namespaces = ["shop"]

            [[discovery.kubernetes]]
            pod_selector = "app in ("
            "#,
        )
        .unwrap()
        .validate()
        .unwrap_err();
        let all = problems.join("\n");
        assert!(
            all.contains("discovery.kubernetes[1].pod_selector:"),
            "{all}"
        );
        assert!(!all.contains("discovery.kubernetes[0]"), "{all}");
    }

    fn pod_in(ns: &str, name: &str) -> Pod {
        let mut v = pod_json();
        v["metadata"]["namespace"] = json!(ns);
        v["metadata"]["name"] = json!(name);
        pod(v)
    }

    fn names(set: &PodSet) -> Vec<String> {
        set.targets().into_iter().map(|t| t.name).collect()
    }

    fn list(set: &mut PodSet, e: &KubernetesDiscovery, scope: Option<&str>, pods: Vec<Pod>) {
        let scope = scope.map(str::to_string);
        assert!(!set.pods_event(e, scope.clone(), watcher::Event::Init));
        for p in pods {
            assert!(!set.pods_event(e, scope.clone(), watcher::Event::InitApply(p)));
        }
        assert!(set.pods_event(e, scope, watcher::Event::InitDone));
    }

    #[test]
    fn changes_name_only_the_pods_that_changed() {
        use crate::discovery::Discovered;
        let e = entry();
        let mut set = PodSet::new(&e);
        let change = |set: &mut PodSet| match set.take_change() {
            None => (vec![], vec![]),
            Some(Discovered::Changed { upserts, removed }) => {
                let mut up: Vec<String> = upserts.into_iter().map(|t| t.name).collect();
                up.sort();
                (up, removed)
            }
            Some(other) => panic!("{other:?}"),
        };
        list(
            &mut set,
            &e,
            None,
            vec![pod_in("shop", "a"), pod_in("shop", "b")],
        );
        // The first time: everything.
        assert_eq!(
            change(&mut set),
            (vec!["shop.a".into(), "shop.b".into()], vec![])
        );
        assert_eq!(change(&mut set), (vec![], vec![]));
        // One pod's IP changes, one is deleted, one arrives.
        let mut v = serde_json::to_value(pod_in("shop", "a")).unwrap();
        v["status"]["podIP"] = json!("10.1.2.4");
        set.pods_event(&e, None, watcher::Event::Apply(pod(v)));
        set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b")));
        set.pods_event(&e, None, watcher::Event::Apply(pod_in("pay", "c")));
        assert_eq!(
            change(&mut set),
            (
                vec!["pay.c".into(), "shop.a".into()],
                vec!["shop.b".to_string()]
            )
        );
        // An event that changes nothing the target shows, and a re-list
        // with the same pods: nothing to hand over.
        set.pods_event(&e, None, watcher::Event::Apply(pod_in("pay", "c")));
        assert_eq!(change(&mut set), (vec![], vec![]));
        let mut a = serde_json::to_value(pod_in("shop", "a")).unwrap();
        a["status"]["podIP"] = json!("10.1.2.4");
        list(&mut set, &e, None, vec![pod(a), pod_in("pay", "c")]);
        assert_eq!(change(&mut set), (vec![], vec![]));
        // A re-list that lacks a pod: only that one goes.
        list(&mut set, &e, None, vec![pod_in("pay", "c")]);
        assert_eq!(change(&mut set), (vec![], vec!["shop.a".to_string()]));
    }

    #[test]
    fn a_new_list_replaces_the_pods_once_complete() {
        let e = entry();
        let mut set = PodSet::new(&e);
        list(
            &mut set,
            &e,
            None,
            vec![pod_in("shop", "a"), pod_in("pay", "a")],
        );
        assert_eq!(names(&set), ["pay.a", "shop.a"]);
        // After 410 Gone the watcher lists again: while that list is under
        // way the old set stands; once complete, a pod it lacks is gone.
        set.pods_event(&e, None, watcher::Event::Init);
        set.pods_event(&e, None, watcher::Event::InitApply(pod_in("shop", "a")));
        assert_eq!(names(&set), ["pay.a", "shop.a"]);
        set.pods_event(&e, None, watcher::Event::InitApply(pod_in("shop", "b")));
        set.pods_event(&e, None, watcher::Event::InitDone);
        assert_eq!(names(&set), ["shop.a", "shop.b"]);
        // A pod that stops being ready leaves; a deleted one too.
        let mut v = serde_json::to_value(pod_in("shop", "a")).unwrap();
        v["status"]["conditions"][0]["status"] = json!("False");
        assert!(set.pods_event(&e, None, watcher::Event::Apply(pod(v))));
        assert_eq!(names(&set), ["shop.b"]);
        assert!(set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b"))));
        assert!(names(&set).is_empty());
        assert!(!set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b"))));
    }

    #[test]
    fn a_namespace_watch_relists_only_its_namespace() {
        let mut e = entry();
        e.namespaces = vec!["shop".into(), "pay".into()];
        let mut set = PodSet::new(&e);
        list(&mut set, &e, Some("shop"), vec![pod_in("shop", "a")]);
        list(
            &mut set,
            &e,
            Some("pay"),
            vec![pod_in("pay", "a"), pod_in("pay", "b")],
        );
        assert_eq!(names(&set), ["pay.a", "pay.b", "shop.a"]);
        // Two lists under way at once don't mix.
        set.pods_event(&e, Some("pay".into()), watcher::Event::Init);
        set.pods_event(&e, Some("shop".into()), watcher::Event::Init);
        set.pods_event(
            &e,
            Some("shop".into()),
            watcher::Event::InitApply(pod_in("shop", "c")),
        );
        set.pods_event(&e, Some("pay".into()), watcher::Event::InitDone);
        assert_eq!(names(&set), ["shop.a"]);
        set.pods_event(&e, Some("shop".into()), watcher::Event::InitDone);
        assert_eq!(names(&set), ["shop.c"]);
    }

    #[test]
    fn a_namespace_selector_filters_and_follows_namespaces() {
        let mut e = entry();
        e.namespace_selector = Some("tenant=shop".into());
        let mut set = PodSet::new(&e);
        list(
            &mut set,
            &e,
            None,
            vec![pod_in("shop", "a"), pod_in("pay", "a")],
        );
        // No namespace listed yet: none selected.
        assert!(names(&set).is_empty());
        let ns = |name: &str| -> Namespace {
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
        };
        set.namespaces_event(watcher::Event::Init);
        set.namespaces_event(watcher::Event::InitApply(ns("shop")));
        assert!(set.namespaces_event(watcher::Event::InitDone));
        assert_eq!(names(&set), ["shop.a"]);
        assert!(set.namespaces_event(watcher::Event::Apply(ns("pay"))));
        assert_eq!(names(&set), ["pay.a", "shop.a"]);
        assert!(set.namespaces_event(watcher::Event::Delete(ns("shop"))));
        assert_eq!(names(&set), ["pay.a"]);
        // Without a selector every namespace counts.
        let e = entry();
        let mut set = PodSet::new(&e);
        list(
            &mut set,
            &e,
            None,
            vec![pod_in("shop", "a"), pod_in("pay", "a")],
        );
        assert_eq!(names(&set).len(), 2);
    }
}
