//! The gateway's life outside any one request: construction from the
//! configuration's [`Setup`] (the composition root, `app`, makes one of
//! the whole file), reloads and discovered targets (each builds a new
//! [`State`](super::state::State) and swaps it in whole), health probes,
//! and what the admin listener reads. The request path is in `mod.rs`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::server::ServerConfig;
use super::state::Setup;
use super::{authenticate, listen, Gateway, PREFIX};
use crate::access::AccessControl;
use crate::agent_settings::TargetConfig;
use crate::fleet::Fleet;
use crate::principal::AuthMethod;
use crate::version::GatewayIdentity;

/// The settings fixed at start (a change takes a restart), beside the
/// [`Setup`] that reloads replace.
pub(crate) struct Fixed<'a> {
    pub server: &'a ServerConfig,
    pub health: &'a crate::health::HealthConfig,
    pub audit: Option<&'a crate::audit::AuditConfig>,
    /// This replica's id among its cluster's members.
    pub replica_id: String,
}

impl Gateway {
    /// The gateway of `setup` and its `configured` sources' listings
    /// (`[[targets]]` as `config`, each `[[inventory]]` file by its
    /// place), with the settings `fixed` at start, what the doors and
    /// jobs keep for its life (`rooms`) and the access door's four-eyes.
    pub(crate) fn assemble(
        setup: Arc<dyn Setup>,
        configured: crate::fleet::Listings,
        fixed: Fixed<'_>,
        rooms: super::sections::Sections,
        four_eyes: super::authorize::approval::Settle,
    ) -> Result<Gateway, String> {
        let Fixed {
            server,
            health: health_config,
            audit,
            replica_id,
        } = fixed;
        let metrics = Arc::new(crate::metrics::Metrics::new());
        // Alone until `cluster::start` joins it to its members.
        let cluster = crate::cluster::Cluster::solo(&replica_id);
        metrics.cluster_members.set(1);
        metrics.cluster_engine_up.set(1);
        let bounds = crate::fleet::GatewayBounds {
            budget: Some(crate::client::BufferBudget::new(server.max_buffered_bytes)),
            exchanges: Some(Arc::new(tokio::sync::Semaphore::new(
                server.max_agent_exchanges,
            ))),
            max_kept_connections: Some(server.max_kept_agent_connections),
        };
        let health = Arc::new(crate::health::HealthBook::from_config(health_config));
        let mut book = crate::fleet::SourceBook::default();
        let (collisions, _) = book.replace_configured(configured);
        let state = setup.state(book.fleet_targets(), &metrics, &bounds, &health, None)?;
        if state.access.is_open() {
            tracing::warn!("no roles configured: every caller may do everything on every target");
        }
        let audit = audit
            .map(|a| crate::audit::AuditLog::start(a, metrics.audit_writer()))
            .transpose()?;
        let notifier = crate::notify::Notifier::start(metrics.clone());
        let gateway = Gateway {
            state: ArcSwap::from_pointee(state),
            audit,
            prefix: PREFIX.to_string(),
            metrics,
            identity: GatewayIdentity::new(server.public_url.clone()),
            request_seq: AtomicU64::new(0),
            working: tokio::sync::Semaphore::new(server.max_concurrent_requests),
            max_concurrent: server.max_concurrent_requests,
            anonymous: tokio::sync::Semaphore::new(server.max_anonymous_requests()),
            max_anonymous: server.max_anonymous_requests(),
            shed: AtomicU64::new(0),
            shed_recorded: std::sync::Mutex::new(None),
            bounds,
            health,
            health_config: health_config.clone(),
            max_probes_in_flight: health_config.max_probes_in_flight.max(1),
            max_agent_exchanges: server.max_agent_exchanges.max(1),
            sources: std::sync::Mutex::new(super::Sources { setup, book }),
            limits: listen::ClientLimits::from_config(server),
            rooms,
            four_eyes,
            reloaded: tokio::sync::watch::Sender::new(0),
            notifier,
            cluster,
        };
        gateway.tell_sources(
            &gateway.sources.lock().expect("sources lock").book,
            &collisions,
            &[],
        );
        Ok(gateway)
    }

    /// Serves the Jolokia endpoint at another path than `/jolokia` (`""` or
    /// `/` for the root), as an agent servlet can be registered anywhere.
    pub fn with_prefix(mut self, prefix: &str) -> Gateway {
        self.prefix = prefix.trim_end_matches('/').to_string();
        if !self.prefix.is_empty() && !self.prefix.starts_with('/') {
            self.prefix.insert(0, '/');
        }
        self
    }

    /// The targets in force.
    /// Why bearer tokens can't be verified yet, when bearer is the only
    /// way in on some listener and the OpenID provider's keys have never
    /// been fetched; `None` when they can (or other methods are there).
    pub fn bearer_unready(&self) -> Option<String> {
        let state = self.state.load();
        if state.authenticator.bearer_keys_ready() {
            return None;
        }
        let only_bearer = |methods: &[AuthMethod]| {
            !methods.is_empty() && methods.iter().all(|m| *m == AuthMethod::Bearer)
        };
        (only_bearer(&state.http_methods) || only_bearer(&state.tls_methods)).then(|| {
            "the OpenID provider's keys have not been fetched yet (bearer is the only method)"
                .into()
        })
    }

    pub fn fleet(&self) -> Arc<Fleet> {
        self.state.load().fleet.clone()
    }

    /// The audit log, when one is configured.
    /// This replica among its cluster's members.
    pub fn cluster(&self) -> &crate::cluster::Cluster {
        &self.cluster
    }

    pub fn audit(&self) -> Option<&crate::audit::AuditLog> {
        self.audit.as_ref()
    }

    /// The roles and policies in force.
    pub fn access(&self) -> Arc<AccessControl> {
        self.state.load().access.clone()
    }

    /// Replaces targets, roles, policies and credential stores at once
    /// with `setup`'s and the `configured` sources'. In-flight requests
    /// finish under the set they started with. Listeners and the audit
    /// log keep their settings until a restart.
    pub(crate) fn reconfigure(
        &self,
        setup: Arc<dyn Setup>,
        configured: crate::fleet::Listings,
    ) -> Result<(), String> {
        let mut sources = self.sources.lock().expect("sources lock");
        let mut book = sources.book.clone();
        let (collisions, gone) = book.replace_configured(configured);
        let result = self.install(&*setup, &book);
        if result.is_ok() {
            sources.setup = setup;
            sources.book = book;
            self.tell_sources(&sources.book, &collisions, &gone);
            self.reloaded.send_modify(|generation| *generation += 1);
        }
        let journal = self.health.journal();
        match &result {
            Ok(_) => journal.record(
                crate::events::Kind::ConfigReloaded,
                [],
                "the configuration was reloaded".into(),
            ),
            // What is wrong stays in the gateway's log: it names files.
            Err(_) => journal.record(
                crate::events::Kind::ConfigReloadFailed,
                [],
                "a new configuration was refused; the previous one is in force (see the gateway's log)"
                    .into(),
            ),
        }
        self.count_reload(result.is_ok());
        result
    }

    /// Replaces the targets of the first DNS entry's source (`dns[0]`);
    /// see [`Gateway::set_discovered_by`].
    pub fn set_discovered(&self, targets: Vec<TargetConfig>) -> Result<(), String> {
        self.set_discovered_by("dns[0]", targets)
    }

    /// Replaces the targets one source found (`dns[0]`, `kubernetes[0]`,
    /// a name of its own); the configured ones and other sources' stay.
    /// See [`Gateway::discovered_by`].
    pub fn set_discovered_by(
        &self,
        source: &str,
        targets: Vec<TargetConfig>,
    ) -> Result<(), String> {
        self.discovered_by(source, crate::fleet::Change::Restart(targets))
    }

    /// Takes in what one source found under its name (`dns[0]`,
    /// `kubernetes[0]`, or a name of its own; `config` and `inventory:…`
    /// are the configuration's): see [`Gateway::take_source_event`].
    pub fn discovered_by(&self, source: &str, found: crate::fleet::Change) -> Result<(), String> {
        let source = crate::fleet::SourceName::named(source)?;
        self.take_source_event(crate::fleet::SourceEvent {
            source,
            change: found,
        })
    }

    /// The one way into the fleet for a source's event: its listing is
    /// folded with every other source's ([`SourceBook`]: a name two
    /// sources give is kept by the first in [`SourceName`]'s order), and
    /// only the targets whose keeper's target is new or differs are built
    /// and only names no source lists any more are dropped; every other
    /// target keeps its client, connections, health and cached answers,
    /// and roles, credential caches and Prometheus plans stay as they
    /// are. A target that can't be built is left out with an error and
    /// the rest go in. A change that would drop `server.default_target`
    /// is refused whole.
    ///
    /// [`SourceBook`]: crate::fleet::SourceBook
    /// [`SourceName`]: crate::fleet::SourceName
    pub fn take_source_event(&self, event: crate::fleet::SourceEvent) -> Result<(), String> {
        use crate::fleet::Change;
        let mut sources = self.sources.lock().expect("sources lock");
        let sources = &mut *sources;
        let crate::fleet::SourceEvent { source, change } = event;
        let name = source.to_string();
        let full_listing = match &change {
            Change::Up(up) => {
                if sources.book.set_up(&source, *up) {
                    self.metrics.discovery_up(&name, *up);
                }
                return Ok(());
            }
            Change::Restart(_) => true,
            Change::Apply { .. } => false,
        };
        let plan = sources.book.plan(&source, change);
        // A whole listing is one that worked; a change says so only for a
        // source not heard of yet (Kubernetes says Up itself).
        if full_listing || !sources.book.up().any(|(s, _)| *s == source) {
            sources.book.set_up(&source, true);
        }
        if plan.is_empty() {
            self.tell_sources(&sources.book, &[], &[]);
            return Ok(());
        }
        if plan.fleet.upserts.is_empty() && plan.fleet.removed.is_empty() {
            // Only names another source keeps: the fleet stays as it is.
            let collisions = sources.book.commit(plan, &[]);
            self.tell_sources(&sources.book, &collisions, &[]);
            return Ok(());
        }
        let refuse = |e: String| {
            tracing::error!(
                source = %name,
                "discovered targets not installed, keeping the previous fleet: {e}"
            );
            Err(e)
        };
        if let Some(default) = sources.setup.default_target() {
            if plan.fleet.removed.iter().any(|gone| gone == default) {
                return refuse(format!(
                    "server.default_target: target \"{default}\" would leave the fleet"
                ));
            }
        }
        let state = self.state.load_full();
        let (fleet, failed) = state.fleet.changed(
            &plan.fleet,
            sources.setup.target_defaults(),
            &self.bounds,
            &self.health,
        );
        for (target, why) in &failed {
            tracing::error!(source = %name, target_name = %target, "a discovered target can't be reached, left out: {why}");
        }
        let next = match state.with_fleet(sources.setup.default_target(), Arc::new(fleet)) {
            Ok(next) => next,
            Err(e) => return refuse(e),
        };
        let upserted: Vec<&str> = plan.fleet.upserts.iter().map(|t| t.name.as_str()).collect();
        self.tell_discovery(
            &name,
            &state.fleet,
            &next.fleet,
            &upserted,
            &plan.fleet.removed,
        );
        self.state.store(Arc::new(next));
        let left = plan
            .fleet
            .removed
            .iter()
            .chain(failed.iter().map(|(target, _)| target));
        for gone in self.health.forget(left.map(String::as_str)) {
            self.metrics.forget_target(&gone);
        }
        let (changed, removed) = (
            plan.fleet.upserts.len() - failed.len(),
            plan.fleet.removed.len(),
        );
        let collisions = sources.book.commit(plan, &failed);
        self.tell_sources(&sources.book, &collisions, &[]);
        tracing::info!(
            source = %name,
            changed,
            removed,
            targets = sources.book.listing(&source).len(),
            "discovered targets changed"
        );
        Ok(())
    }

    /// What the sources' listings came to, for the log and the metrics:
    /// each newly shadowed name once (a warning), every source's
    /// `jmxgate_discovery_up` and `jmxgate_discovery_shadowed_targets`,
    /// and no gauges for sources `gone` from the configuration.
    fn tell_sources(
        &self,
        book: &crate::fleet::SourceBook,
        collisions: &[crate::fleet::sources::Collision],
        gone: &[crate::fleet::SourceName],
    ) {
        for c in collisions {
            tracing::warn!(
                source = %c.shadowed,
                target_name = %c.name,
                kept_by = %c.kept_by,
                "a source lists a target whose name another source keeps; that one is kept"
            );
        }
        for source in gone {
            self.metrics.forget_discovery_source(&source.to_string());
        }
        let shadowed: std::collections::BTreeMap<_, _> = book.shadowed().collect();
        for (source, up) in book.up() {
            let label = source.to_string();
            self.metrics.discovery_up(&label, up);
            self.metrics
                .discovery_shadowed(&label, shadowed.get(source).copied().unwrap_or(0));
        }
    }

    /// Targets a discovery source brought (new names) and took away, told
    /// to the journal with their labels (the console shows each event to
    /// callers who reach its targets, also once they are gone).
    fn tell_discovery(
        &self,
        source: &str,
        before: &crate::fleet::Fleet,
        after: &crate::fleet::Fleet,
        upserted: &[&str],
        removed: &[String],
    ) {
        use crate::events::{Kind, Named};
        let named = |t: &Arc<crate::fleet::Target>| Named {
            name: t.name.clone(),
            labels: Some(t.labels.clone()),
        };
        let came: Vec<Named> = upserted
            .iter()
            .filter(|n| before.by_name(n).is_none())
            .filter_map(|n| after.by_name(n))
            .map(named)
            .collect();
        let went: Vec<Named> = removed
            .iter()
            .filter_map(|n| before.by_name(n))
            .map(named)
            .collect();
        let journal = self.health.journal();
        if !came.is_empty() {
            journal.record(Kind::TargetsDiscovered, came, format!("by {source}"));
        }
        if !went.is_empty() {
            journal.record(Kind::TargetsRemoved, went, format!("by {source}"));
        }
    }

    /// Builds the whole fleet from every source's listing in `book`
    /// (`setup`'s own among them), and the rest of the state from
    /// `setup`.
    fn install(&self, setup: &dyn Setup, book: &crate::fleet::SourceBook) -> Result<(), String> {
        let state = Arc::new(setup.state(
            book.fleet_targets(),
            &self.metrics,
            &self.bounds,
            &self.health,
            Some(&self.state.load()),
        )?);
        self.state.store(state.clone());
        // Targets that left the fleet (an inventory edit, DNS churn): their
        // health and per-target gauges go, so they don't pile up and a name
        // added again later doesn't inherit an open breaker.
        for gone in self
            .health
            .retain(|name| state.fleet.by_name(name).is_some())
        {
            self.metrics.forget_target(&gone);
        }
        Ok(())
    }

    /// Counts a reload attempt in `jmxgate_config_reloads_total`.
    pub fn count_reload(&self, ok: bool) {
        self.metrics
            .reloads
            .get_or_create(&crate::metrics::StatusLabel {
                status: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
    }

    /// Bytes of `server.max_buffered_bytes` not held by answers being
    /// received right now.
    pub fn buffer_budget_available(&self) -> u64 {
        self.bounds.budget.as_ref().map_or(0, |b| b.available())
    }

    /// Starts discovery (`[[discovery.dns]]` and `[[discovery.kubernetes]]`
    /// of the configuration the gateway started with; changing them needs
    /// a restart): each source's changed set replaces that source's
    /// discovered targets (`dns`, `kubernetes[0]`, …). `None` without
    /// entries. Aborting the task stops every source.
    pub fn spawn_discovery(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        let (discovery, listeners) = {
            let sources = self.sources.lock().expect("sources lock");
            (
                sources.setup.discovery().clone(),
                sources.setup.listen_addresses(),
            )
        };
        if discovery.is_empty() {
            return None;
        }
        for warning in discovery.warnings() {
            tracing::warn!("{warning}");
        }
        // Pods are refused at the gateway's own addresses by default; a
        // listener on every address makes them the machine's.
        let own_addresses = if discovery.kubernetes.is_empty() {
            Vec::new()
        } else {
            use crate::discovery::kubernetes::address;
            address::gateway_addresses(&listeners, || {
                address::interface_addresses().unwrap_or_else(|why| {
                    tracing::warn!(
                        "Kubernetes discovery cannot list this machine's addresses, so pods \
                         at them are not refused unless allowed_networks leaves them out: {why}"
                    );
                    Vec::new()
                })
            })
        };
        use crate::fleet::{Change, SourceEvent, SourceName};
        // Each entry is a source of its own, a stream of changes; one task
        // folds them all into the fleet, in the order they come.
        fn events_of(
            source: SourceName,
            changes: tokio::sync::mpsc::Receiver<Change>,
        ) -> futures::stream::BoxStream<'static, SourceEvent> {
            Box::pin(futures::stream::unfold(changes, move |mut changes| {
                let source = source.clone();
                async move {
                    let change = changes.recv().await?;
                    Some((SourceEvent { source, change }, changes))
                }
            }))
        }
        let mut tasks: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
        let mut streams = Vec::new();
        for (i, entry) in discovery.dns.into_iter().enumerate() {
            let (changes, heard) = tokio::sync::mpsc::channel(1);
            tasks.push(Box::pin(crate::discovery::dns::watch_entry(entry, changes)));
            streams.push(events_of(SourceName::Dns(i), heard));
        }
        for (i, mut entry) in discovery.kubernetes.into_iter().enumerate() {
            entry.gateway_addresses = own_addresses.clone();
            let source = SourceName::Kubernetes(i);
            entry.origin = source.origin();
            let (changes, heard) = tokio::sync::mpsc::channel(1);
            let gateway = Arc::downgrade(self);
            let label = source.to_string();
            tasks.push(Box::pin(crate::discovery::kubernetes::watch(
                entry,
                changes,
                move |pods| {
                    if let Some(gateway) = gateway.upgrade() {
                        gateway.metrics.discovery_refused(&label, pods);
                    }
                },
            )));
            streams.push(events_of(source, heard));
        }
        let gateway = Arc::downgrade(self);
        tasks.push(Box::pin(async move {
            let mut events = futures::stream::select_all(streams);
            while let Some(event) = futures::StreamExt::next(&mut events).await {
                let Some(gateway) = gateway.upgrade() else {
                    return;
                };
                // Errors are logged there; the previous fleet stays.
                let _ = gateway.take_source_event(event);
            }
        }));
        Some(tokio::spawn(async move {
            futures::future::join_all(tasks).await;
        }))
    }

    /// The gateway's metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The gateway's own `version` answer value (for the admin listener's
    /// actuator endpoint).
    pub fn version_value(&self, host: Option<&str>) -> serde_json::Value {
        let state = self.state.load();
        let secured = authenticate::is_secured(&state.http_methods);
        self.identity.version_value(
            host,
            &self.prefix,
            false,
            secured,
            Some(state.fleet.len()),
            state.limits(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::test_config as config;

    fn discovered(name: &str) -> TargetConfig {
        config(&[name]).targets.remove(0)
    }

    #[test]
    fn targets_that_leave_the_fleet_lose_their_health_and_gauges() {
        let gw = Gateway::new(&config(&["a", "b"])).unwrap();
        let a_target = gw.fleet().by_name("a").unwrap().clone();
        let b_target = gw.fleet().by_name("b").unwrap().clone();
        let a = a_target.health.clone();
        let b = b_target.health.clone();
        for _ in 0..3 {
            a.record_exchange(Err("refused".into()));
        }
        assert!(a.refusal().is_some(), "a's breaker is open");
        b.record_exchange(Err("refused".into()));
        gw.metrics().exchange(&a_target.health, "unreachable", 0.1);
        gw.metrics().exchange(&b_target.health, "ok", 0.1);
        assert!(gw
            .metrics()
            .encode()
            .contains("jmxgate_agent_up{target=\"a\"} 0"));

        // An inventory edit drops "a": its health and agent_up go.
        gw.reload(&config(&["b"])).unwrap();
        assert_eq!(gw.health.len(), 1);
        let text = gw.metrics().encode();
        assert!(!text.contains("jmxgate_agent_up{target=\"a\"}"), "{text}");
        assert!(text.contains("jmxgate_agent_up{target=\"b\"} 1"), "{text}");
        // An exchange and a probe with "a" that were under way when it left
        // end now: they don't bring its gauges back.
        gw.metrics().exchange(&a_target.health, "ok", 0.1);
        gw.metrics().probed(&a_target.health, true);
        let text = gw.metrics().encode();
        assert!(!text.contains("jmxgate_agent_up{target=\"a\"}"), "{text}");
        assert!(!text.contains("target=\"a\",outcome"), "{text}");
        assert!(text.contains("target=\"b\",outcome=\"ok\""), "{text}");
        // "b" stayed: the same health, its failure remembered.
        let b_now = gw.fleet().by_name("b").unwrap().health.clone();
        assert!(Arc::ptr_eq(&b_now, &b));
        assert_eq!(b_now.snapshot().consecutive_failures, 1);

        // "a" comes back: unknown, breaker closed.
        gw.reload(&config(&["a", "b"])).unwrap();
        let a_again = gw.fleet().by_name("a").unwrap().health.clone();
        assert!(a_again.refusal().is_none());
        assert_eq!(a_again.snapshot(), crate::health::HealthState::default());

        // The same through discovery: a discovered name that goes away.
        gw.set_discovered(vec![discovered("dns-1")]).unwrap();
        gw.fleet()
            .by_name("dns-1")
            .unwrap()
            .health
            .record_exchange(Err("refused".into()));
        assert_eq!(gw.health.len(), 3);
        gw.set_discovered(Vec::new()).unwrap();
        assert_eq!(gw.health.len(), 2);
        gw.set_discovered(vec![discovered("dns-1")]).unwrap();
        let back = gw.fleet().by_name("dns-1").unwrap().health.snapshot();
        assert_eq!(back.consecutive_failures, 0);
    }

    #[test]
    fn a_discovery_change_builds_only_what_it_changes() {
        use crate::fleet::Change;
        let gw = Gateway::new(&config(&["a"])).unwrap();
        let k8s = "kubernetes[0]";
        let changed = |upserts: Vec<TargetConfig>, removed: &[&str]| Change::Apply {
            upserts: upserts.into_iter().map(Arc::new).collect(),
            removed: removed.iter().map(|n| n.to_string()).collect(),
        };
        gw.discovered_by(
            k8s,
            changed(
                vec![discovered("p1"), discovered("p2"), discovered("p3")],
                &[],
            ),
        )
        .unwrap();
        let before = gw.fleet();
        let authenticator = gw.state.load().authenticator.clone();
        let mut p2 = discovered("p2");
        p2.url = "http://127.0.0.1:2/p2".into();
        gw.discovered_by(
            k8s,
            changed(vec![p2, discovered("p4")], &["p3", "never-there"]),
        )
        .unwrap();
        let after = gw.fleet();
        let names: Vec<&str> = after.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "p1", "p2", "p4"]);
        // Untouched targets are the same values: client, connections and all.
        for same in ["a", "p1"] {
            assert!(
                Arc::ptr_eq(before.by_name(same).unwrap(), after.by_name(same).unwrap()),
                "{same}"
            );
        }
        assert!(!Arc::ptr_eq(
            before.by_name("p2").unwrap(),
            after.by_name("p2").unwrap()
        ));
        assert_eq!(after.by_name("p2").unwrap().url().port(), Some(2));
        // The credential stores (and their caches) stay.
        assert!(Arc::ptr_eq(&authenticator, &gw.state.load().authenticator));
        assert_eq!(
            after.by_name("p1").unwrap().origin.to_string(),
            "discovery.kubernetes[0]"
        );
        assert_eq!(
            after.by_name("a").unwrap().origin.to_string(),
            "configuration"
        );
        // What changes nothing makes no new state.
        let state = gw.state.load_full();
        gw.discovered_by(k8s, changed(vec![discovered("p1")], &["p3"]))
            .unwrap();
        assert!(Arc::ptr_eq(&state, &gw.state.load_full()));
        // A whole set from the same source: compared, not rebuilt.
        gw.set_discovered_by(k8s, vec![discovered("p1"), discovered("p4")])
            .unwrap();
        let now = gw.fleet();
        assert!(Arc::ptr_eq(
            after.by_name("p1").unwrap(),
            now.by_name("p1").unwrap()
        ));
        assert!(now.by_name("p2").is_none());
        // A name a configured target has is left out; when that source
        // drops it, the configured one stays.
        gw.discovered_by(k8s, changed(vec![discovered("a"), discovered("p5")], &[]))
            .unwrap();
        let now = gw.fleet();
        assert_eq!(
            now.by_name("a").unwrap().origin.to_string(),
            "configuration"
        );
        assert!(now.by_name("p5").is_some());
        gw.discovered_by(k8s, changed(vec![], &["a"])).unwrap();
        assert_eq!(
            gw.fleet().by_name("a").unwrap().origin.to_string(),
            "configuration"
        );
        // A reload rebuilds from the configuration and every source's set.
        gw.reload(&config(&["a", "b"])).unwrap();
        let names: Vec<String> = gw.fleet().iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, ["a", "b", "p1", "p4", "p5"]);
    }

    #[test]
    fn a_discovered_target_that_cannot_be_built_is_left_out_alone() {
        use crate::fleet::Change;
        let gw = Gateway::new(&config(&["a"])).unwrap();
        let mut broken = discovered("p2");
        Arc::make_mut(&mut broken.agent).password_file =
            Some("/nonexistent/jmxgate-password".into());
        gw.discovered_by(
            "kubernetes[0]",
            Change::Apply {
                upserts: vec![discovered("p1").into(), broken.into()],
                removed: vec![],
            },
        )
        .unwrap();
        let names: Vec<String> = gw.fleet().iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, ["a", "p1"]);
    }

    #[test]
    fn each_discovery_source_keeps_its_own_set() {
        let gw = Gateway::new(&config(&["a"])).unwrap();
        gw.set_discovered_by("dns[0]", vec![discovered("dns-1")])
            .unwrap();
        gw.set_discovered_by("kubernetes[0]", vec![discovered("shop.orders-1")])
            .unwrap();
        let names = |gw: &Gateway| {
            let mut n: Vec<String> = gw.fleet().iter().map(|t| t.name.clone()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&gw), ["a", "dns-1", "shop.orders-1"]);
        // DNS changes: Kubernetes' targets stay, and the other way round.
        gw.set_discovered(vec![discovered("dns-2")]).unwrap();
        assert_eq!(names(&gw), ["a", "dns-2", "shop.orders-1"]);
        gw.set_discovered_by("kubernetes[0]", Vec::new()).unwrap();
        assert_eq!(names(&gw), ["a", "dns-2"]);
        // A reload keeps every source's set.
        gw.set_discovered_by("kubernetes[0]", vec![discovered("shop.orders-1")])
            .unwrap();
        gw.reload(&config(&["b"])).unwrap();
        assert_eq!(names(&gw), ["b", "dns-2", "shop.orders-1"]);
        // A name two sources found: the first source in the rule keeps it
        // (DNS entries before Kubernetes entries).
        gw.set_discovered_by("kubernetes[0]", vec![discovered("dns-2")])
            .unwrap();
        assert_eq!(names(&gw), ["b", "dns-2"]);
        // A configured name wins over any source.
        gw.set_discovered_by("kubernetes[1]", vec![discovered("b")])
            .unwrap();
        assert_eq!(names(&gw), ["b", "dns-2"]);
    }
}
