//! Replicas sharing the fleet's background work: who is a member, and who
//! owns a duty. Membership comes from an engine users already run, never
//! from a home-made consensus or gossip: a Kubernetes Lease per replica
//! (`kubernetes.rs`) or a row per replica in PostgreSQL (`postgres.rs`).
//! Each replica renews its own record, reads everyone's, and judges who
//! is live by its own clock or the engine's (`view.rs`); every replica
//! then computes each duty's owner on its own (`rendezvous.rs`), so they
//! agree without asking each other.
//!
//! Without `[cluster]` the gateway is one replica that does everything.

pub mod kubernetes;
pub mod postgres;
pub mod rendezvous;
mod run;
pub mod view;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::secret::Secret;
pub use run::{start, Started};
pub use view::{Duties, Member, View};

/// What claiming this replica's record found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// It is this instance's now.
    Joined,
    /// Another instance holds it; `token` changes when that one renews
    /// (empty: written at this very moment, read it again).
    Held { token: String },
}

/// `[cluster]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Where the members are kept: `kubernetes` or `postgres`.
    pub membership: MembershipKind,
    /// `kubernetes`: the namespace of the Leases; unset, the
    /// service account's namespace in a pod, else the kubeconfig's.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `kubernetes`: a kubeconfig file; unset, the in-cluster service
    /// account.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// `postgres`: `postgres://user:password@host/db`, a secret (it may be
    /// the same database as `[access.store] url`).
    #[serde(default)]
    pub url: Option<Secret>,
    /// This replica's id among the members; unset, `audit.replica_id`
    /// (`JMXGATE_REPLICA_ID`, else the hostname).
    #[serde(default)]
    pub replica_id: Option<String>,
    /// A member is gone once its record has not been renewed for this long.
    #[serde(default = "default_lease_duration", with = "humantime_serde")]
    pub lease_duration: Duration,
    /// How often a replica renews its record and reads everyone's.
    #[serde(default = "default_renew_interval", with = "humantime_serde")]
    pub renew_interval: Duration,
    /// No background work until this many members (this one included) are
    /// seen, or `wait_timeout` has passed.
    #[serde(default = "default_wait_for_members")]
    pub wait_for_members: usize,
    #[serde(default = "default_wait_timeout", with = "humantime_serde")]
    pub wait_timeout: Duration,
    /// Where the other replicas reach this one's admin listener (they
    /// read its probe results at `/cluster/health`), `http://host:port`;
    /// unset, `[admin] listen` when that is one address (`config/`
    /// resolves it).
    #[serde(default)]
    pub advertise_url: Option<String>,
}

/// Why `text` can't be an `advertise_url`: an `http://host:port` the
/// other replicas connect to, nothing else in it.
pub fn advertise_url_problem(text: &str) -> Option<String> {
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(e) => return Some(format!("{text:?} is not a URL ({e})")),
    };
    if url.scheme() != "http" {
        return Some(format!(
            "{text:?}: the admin listener speaks http://, not {}://",
            url.scheme()
        ));
    }
    let bare = url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.path() == "/";
    if !bare {
        // Not echoed: it may hold a password.
        return Some(
            "only http://host:port, no credentials, path or query (the replicas add /cluster/health themselves)".into(),
        );
    }
    match (url.host_str(), url.port()) {
        (Some(_), Some(_)) => None,
        _ => Some(format!("{text:?}: name the admin listener's host and port")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MembershipKind {
    Kubernetes,
    Postgres,
}

impl MembershipKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MembershipKind::Kubernetes => "kubernetes",
            MembershipKind::Postgres => "postgres",
        }
    }

    /// Whether the engine tells a record's age by its own clock
    /// (PostgreSQL's `now()`); Kubernetes Leases are judged by when this
    /// replica sees them change (`view::Liveness`).
    pub fn knows_ages(self) -> bool {
        matches!(self, MembershipKind::Postgres)
    }
}

pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

fn default_lease_duration() -> Duration {
    DEFAULT_LEASE_DURATION
}
fn default_renew_interval() -> Duration {
    DEFAULT_RENEW_INTERVAL
}
fn default_wait_for_members() -> usize {
    1
}
fn default_wait_timeout() -> Duration {
    DEFAULT_WAIT_TIMEOUT
}

/// The most members `wait_for_members` may ask for.
pub const MAX_WAIT_FOR_MEMBERS: usize = 1000;

impl ClusterConfig {
    /// What is wrong with `[cluster]`, each named by its key. The replica
    /// id is checked once resolved (`config/` gives it `audit`'s).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let engine = self.membership.as_str();
        match self.membership {
            MembershipKind::Kubernetes => {
                if self.url.is_some() {
                    problems.push(
                        "cluster.url: only for membership = \"postgres\" (Kubernetes Leases need namespace and, outside a pod, kubeconfig)".into(),
                    );
                }
                if let Some(ns) = &self.namespace {
                    if !crate::discovery::kubernetes::is_dns_label(ns) {
                        problems.push(format!(
                            "cluster.namespace: {ns:?} is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)"
                        ));
                    }
                }
                if let Some(path) = &self.kubeconfig {
                    if let Err(e) = kube::config::Kubeconfig::read_from(path) {
                        problems.push(format!(
                            "cluster.kubeconfig: cannot read {} as a kubeconfig: {e}",
                            path.display()
                        ));
                    }
                }
            }
            MembershipKind::Postgres => {
                match &self.url {
                    None => problems.push(
                        "cluster.url: membership = \"postgres\" needs the database's postgres:// URL".into(),
                    ),
                    Some(url) => {
                        let url = url.expose();
                        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                            // Not echoed: it may hold a password.
                            problems.push(
                                "cluster.url: not a postgres:// or postgresql:// URL".into(),
                            );
                        }
                    }
                }
                for (key, set) in [
                    ("namespace", self.namespace.is_some()),
                    ("kubeconfig", self.kubeconfig.is_some()),
                ] {
                    if set {
                        problems.push(format!(
                            "cluster.{key}: only for membership = \"kubernetes\" (this one is {engine})"
                        ));
                    }
                }
            }
        }
        if self.renew_interval.is_zero() {
            problems.push("cluster.renew_interval: must be longer than 0s".into());
        }
        if self.lease_duration < self.renew_interval * 2 {
            problems.push(format!(
                "cluster.lease_duration: {} is less than twice renew_interval ({}): one late renewal would drop a live member",
                humantime::format_duration(self.lease_duration),
                humantime::format_duration(self.renew_interval),
            ));
        }
        if self.lease_duration.as_secs() < 1 {
            problems.push("cluster.lease_duration: must be 1s or longer".into());
        }
        if let Some(p) = self
            .advertise_url
            .as_deref()
            .and_then(advertise_url_problem)
        {
            problems.push(format!("cluster.advertise_url: {p}"));
        }
        if !(1..=MAX_WAIT_FOR_MEMBERS).contains(&self.wait_for_members) {
            problems.push(format!(
                "cluster.wait_for_members: must be between 1 and {MAX_WAIT_FOR_MEMBERS} (this replica counts)"
            ));
        }
        problems
    }

    /// Why `id` can't be this engine's replica id (`replica_id` is
    /// resolved by then).
    pub fn replica_id_problem(&self, id: &str) -> Option<String> {
        if let Some(p) = crate::audit::replica_id_problem(id) {
            return Some(p);
        }
        (self.membership == MembershipKind::Kubernetes && !kubernetes::is_lease_name_part(id))
            .then(|| {
                format!(
                    "{id:?} can't name a Kubernetes Lease: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (a pod's name is one)"
                )
            })
    }

    /// The replica id, once `config/` has resolved it.
    pub fn replica(&self) -> &str {
        self.replica_id.as_deref().unwrap_or("unknown")
    }

    /// For logs and errors: the engine and where, never the URL.
    pub fn describe(&self) -> String {
        match self.membership {
            MembershipKind::Kubernetes => format!(
                "Kubernetes Leases in namespace {}",
                self.namespace
                    .as_deref()
                    .unwrap_or("(the client's default)")
            ),
            MembershipKind::Postgres => "PostgreSQL".into(),
        }
    }
}

/// The cluster as this replica sees it, for whoever reads it (jobs,
/// the admin listener, the Prometheus door): the latest [`View`], and a
/// way to wait for the next one.
#[derive(Debug, Clone)]
pub struct Cluster {
    views: Arc<tokio::sync::watch::Sender<Arc<View>>>,
}

impl Cluster {
    /// One replica alone (no `[cluster]`, or until it joins).
    pub fn solo(me: &str) -> Cluster {
        Cluster {
            views: Arc::new(tokio::sync::watch::Sender::new(Arc::new(View::solo(me)))),
        }
    }

    /// The latest view.
    pub fn view(&self) -> Arc<View> {
        self.views.borrow().clone()
    }

    /// Changes to the view.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<View>> {
        self.views.subscribe()
    }

    pub(crate) fn publish(&self, view: View) {
        self.views.send_replace(Arc::new(view));
    }
}

/// Which keys this replica owns, remembered until who owns what may have
/// changed (the view's generation): a probe round or a push asks about
/// every target, and hashing each against every member each time would
/// cost more than the probes themselves at 100,000 targets.
#[derive(Debug, Default)]
pub struct Owned {
    generation: Option<u64>,
    owns: std::collections::HashMap<Arc<str>, bool>,
}

impl Owned {
    /// Whether `view`'s replica owns `key`.
    pub fn owns(&mut self, view: &View, key: &Arc<str>) -> bool {
        if self.generation != Some(view.generation) {
            self.generation = Some(view.generation);
            self.owns.clear();
        }
        if let Some(owned) = self.owns.get(key) {
            return *owned;
        }
        let owned = view.owns(key);
        self.owns.insert(key.clone(), owned);
        owned
    }

    /// Forgets everything when far more keys are remembered than are
    /// asked about (`asked`, e.g. the fleet's size): keys of targets gone.
    pub fn trim(&mut self, asked: usize) {
        if self.owns.len() > asked.saturating_mul(2) + 64 {
            self.owns.clear();
        }
    }
}

/// The key of an export's duty for one target: `export` and the target's
/// name, apart, so no two pairs share a key.
pub fn export_key(export: &str, target: &str) -> Arc<str> {
    format!("{}:{export}\u{0}{target}", export.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_ownership_is_forgotten_when_the_members_change() {
        let mut owned = Owned::default();
        let alone = View::solo("gw-0");
        let others = View::of_members("gw-0", &["gw-0", "gw-1", "gw-2", "gw-3", "gw-4"]);
        // A target the first of five does not own.
        let key: Arc<str> = (0..)
            .map(|i| format!("orders-{i}"))
            .find(|k| !others.owns(k))
            .unwrap()
            .into();
        assert!(owned.owns(&alone, &key));
        assert!(!owned.owns(&others, &key));
        assert_ne!(export_key("a", "b:c"), export_key("a:b", "c"));
    }

    fn config(text: &str) -> ClusterConfig {
        toml::from_str(text).expect("parses")
    }

    #[test]
    fn defaults_are_the_issues_and_each_engine_needs_its_own_keys() {
        let c = config("membership = \"kubernetes\"");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_interval, Duration::from_secs(5));
        assert_eq!(c.wait_for_members, 1);
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let p = config("membership = \"postgres\"").problems();
        assert_eq!(p.len(), 1);
        assert!(p[0].starts_with("cluster.url: "), "{p:?}");
        let p = config(
            "membership = \"postgres\"\nurl = \"mysql://u:hunter2@h/db\"\nnamespace = \"x\"",
        )
        .problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p.iter().all(|p| !p.contains("hunter2")), "{p:?}");
        let p = config(
            "membership = \"kubernetes\"\nurl = \"postgres://h/db\"\nnamespace = \"Not_A_Name\"",
        )
        .problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(toml::from_str::<ClusterConfig>("membership = \"gossip\"").is_err());
    }

    #[test]
    fn times_and_counts_that_cannot_work_are_named() {
        let p = config(
            "membership = \"kubernetes\"\nlease_duration = \"6s\"\nrenew_interval = \"5s\"\nwait_for_members = 0",
        )
        .problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].starts_with("cluster.lease_duration: 6s is less than twice"),
            "{p:?}"
        );
        assert!(p[1].starts_with("cluster.wait_for_members: "), "{p:?}");
    }

    #[test]
    fn a_kubernetes_replica_id_must_name_a_lease() {
        let c = config("membership = \"kubernetes\"");
        assert!(c.replica_id_problem("jmxgate-7d9f-abcde").is_none());
        assert!(c.replica_id_problem("GW_1").is_some());
        let c = config("membership = \"postgres\"\nurl = \"postgres://h/db\"");
        assert!(c.replica_id_problem("GW_1").is_none());
    }

    #[test]
    fn an_advertised_url_is_a_bare_http_host_and_port() {
        assert_eq!(advertise_url_problem("http://10.1.2.3:9090"), None);
        assert_eq!(advertise_url_problem("http://gw-0.gw:9090/"), None);
        for bad in [
            "10.1.2.3:9090",
            "https://10.1.2.3:9090",
            "http://10.1.2.3",
            "http://u:p@10.1.2.3:9090",
            "http://10.1.2.3:9090/cluster/health",
        ] {
            assert!(advertise_url_problem(bad).is_some(), "{bad}");
        }
        let p = config("membership = \"kubernetes\"\nadvertise_url = \"gw:9090\"").problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("cluster.advertise_url: "), "{p:?}");
    }
}
