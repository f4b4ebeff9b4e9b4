//! `[[discovery.kubernetes]]`: targets found among a cluster's Pods.
//!
//! Two halves. The pure core, [`KubernetesDiscovery::pod_target`] (`pod.rs`), turns
//! one Pod into a [`TargetConfig`] or says why it is skipped; it trusts
//! nothing a Pod says: the address is always the Pod's own `status.podIP`,
//! the port one the Pod declares, and annotations may only choose the
//! scheme and path (`jmxgate.io/scheme`, `jmxgate.io/path`, else
//! hawtio-online's `hawt.io/protocol`, `hawt.io/jolokiaPath`), or opt a
//! Pod out (`jmxgate.io/scrape: "false"`). The I/O edge, [`watch()`] (`watch.rs`), lists
//! and watches Pods (and Namespaces for `namespace_selector`) with
//! kube-rs's watcher (resource versions, bookmarks, a new list after
//! `410 Gone`, back-off on errors), keeps the last good set while the API
//! server is away, and hands over what changed [`DEBOUNCE`] after the
//! first change of a burst. `address.rs` decides which Pod addresses an
//! entry may reach (`allowed_networks`; by default neither this machine,
//! link-local nor the gateway itself). Agent credentials go only where the
//! entry says, by namespace (`[[discovery.kubernetes.credentials]]`),
//! which a Pod cannot choose, never by anything a Pod sets. This file:
//! the entry's keys and their checks.

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
use crate::secret::Secret;

/// The port used when a Pod declares none named `port_name` but opts in
/// with `jmxgate.io/scrape: "true"`: Jolokia's default.
pub const DEFAULT_PORT: u16 = 8778;
/// Changes within this of the first of a burst are installed together.
pub const DEBOUNCE: Duration = Duration::from_millis(200);
/// A failing watch that has reported no failure for this long works again
/// (it is retried at least every 30 s while it fails; a refused one
/// works again only once a list succeeds).
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
    /// The networks Pod addresses must be in (`10.0.0.0/8`, or one
    /// address). Unset: every address but loopback, link-local and the
    /// gateway's own ([`address::admit`]).
    #[serde(default)]
    pub allowed_networks: Option<Vec<String>>,
    /// Agent credentials per namespace; a Pod in a namespace without any
    /// gets the entry's own `user` (when set), never `[target_defaults]`'.
    #[serde(default)]
    pub credentials: Vec<NamespaceCredentials>,

    /// Shared by every discovered target; same keys as `[[targets]]`.
    /// Its `user` and password go to every Pod the entry takes.
    #[serde(flatten)]
    pub agent: AgentSettings,
    /// The gateway's own listening addresses, refused by default like
    /// loopback. Set by the composition root
    /// ([`Gateway::spawn_discovery`](crate::Gateway::spawn_discovery)),
    /// never read from a file.
    #[serde(skip)]
    pub gateway_addresses: Vec<IpAddr>,
    /// What the entry's targets say of where they came from
    /// (`kubernetes[0]`), set by the composition root as the above: the
    /// source book then holds the very targets the Pod set does.
    #[serde(skip)]
    pub origin: crate::agent_settings::Origin,
    #[serde(flatten, default)]
    pub no_other_keys: NoOtherKeys,
}

/// `[[discovery.kubernetes.credentials]]`: the agent credentials of the
/// Pods of one namespace. Whoever may run Pods in that namespace can have
/// them sent to a Pod of theirs, and no one else.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceCredentials {
    pub namespace: String,
    /// HTTP Basic user towards the namespace's agents.
    pub user: String,
    /// At most one of the three password keys.
    #[serde(default)]
    pub password: Option<Secret>,
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
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
            allowed_networks: None,
            credentials: Vec::new(),
            agent: AgentSettings::default(),
            gateway_addresses: Vec::new(),
            origin: Default::default(),
            no_other_keys: NoOtherKeys,
        }
    }

    /// The parsed `allowed_networks`, when set (a text that isn't a
    /// network allows nothing: the configuration check refuses it).
    fn allowed_networks(&self) -> Option<Vec<ipnet::IpNet>> {
        self.allowed_networks.as_ref().map(|texts| {
            texts
                .iter()
                .filter_map(|t| address::parse_network(t).ok())
                .collect()
        })
    }

    /// What is worth a warning though it works, each as `key: why`: the
    /// entry's own credentials go to every Pod it takes in a namespace
    /// without credentials of its own.
    pub fn warnings(&self) -> Vec<String> {
        if !self.agent.has_credentials() {
            return Vec::new();
        }
        let own = |ns: &String| self.credentials.iter().any(|c| c.namespace == *ns);
        let reached: Vec<&str> = self
            .namespaces
            .iter()
            .filter(|ns| !own(ns))
            .map(String::as_str)
            .collect();
        let scope = if self.namespaces.is_empty() {
            "in every namespace it watches but those of [[discovery.kubernetes.credentials]]"
                .to_string()
        } else if reached.is_empty() {
            // Every listed namespace has its own: they reach no Pod.
            return Vec::new();
        } else {
            format!("in namespaces {}", reached.join(", "))
        };
        vec![format!(
            "user: the entry's user and password go to every pod it takes {scope}; \
             whoever may run a pod there receives them. Give them per namespace \
             ([[discovery.kubernetes.credentials]]) instead"
        )]
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
        match &self.allowed_networks {
            Some(list) if list.is_empty() => p.push(
                "allowed_networks: an empty list allows no pod at all; leave it out for the default"
                    .into(),
            ),
            Some(list) => {
                for (i, text) in list.iter().enumerate() {
                    if let Err(why) = address::parse_network(text) {
                        p.push(format!("allowed_networks[{i}]: {why}"));
                    }
                }
            }
            None => {}
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, c) in self.credentials.iter().enumerate() {
            let key = format!("credentials[{i}]");
            if !is_dns_label(&c.namespace) {
                p.push(format!(
                    "{key}.namespace: \"{}\" is not a namespace name (lower-case letters, digits, '-'; at most 63)",
                    printable(&c.namespace)
                ));
            } else if let Some(first) = seen.insert(&c.namespace, i) {
                p.push(format!(
                    "{key}.namespace: \"{}\" already has credentials[{first}]",
                    c.namespace
                ));
            } else if !self.namespaces.is_empty() && !self.namespaces.contains(&c.namespace) {
                p.push(format!(
                    "{key}.namespace: \"{}\" is not among namespaces, so no pod of it is taken",
                    c.namespace
                ));
            }
            if c.user.is_empty() {
                p.push(format!("{key}.user: must not be empty"));
            }
            let sources = [
                c.password.is_some(),
                c.password_env.is_some(),
                c.password_file.is_some(),
            ];
            if sources.iter().filter(|s| **s).count() > 1 {
                p.push(format!(
                    "{key}.password: give only one of password, password_env, password_file"
                ));
            }
        }
        p.extend(self.agent.problems());
        p
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

pub mod address;
mod pod;
mod retry;
mod watch;

pub use watch::{watch, PodSet};

#[cfg(test)]
mod tests;
