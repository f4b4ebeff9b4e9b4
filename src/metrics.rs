//! Prometheus metrics, served as text at `/metrics` on the admin listener.
//! One registry per gateway; counters are shared handles, so a reload
//! keeps counting into the same series.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::health::TargetHealth;

/// Label values a fleet has one of per target are the target's own
/// shared name, the rest static: 100,000 targets' series would otherwise
/// hold a few hundred thousand small strings.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ItemLabels {
    pub r#type: &'static str,
    pub target: Arc<str>,
    pub status: u16,
    pub decision: &'static str,
}

/// An MCP tool call: the tool (`-` for a name no tool has) and how it
/// ended: `ok`, `error` (a tool error: denied, failed, bad arguments) or
/// `refused` (an unknown or not offered tool).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub tool: String,
    pub result: String,
}

/// One target's Prometheus scrape: the module (a configured name) and how
/// it ended (`ok`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScrapeLabels {
    pub module: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    pub target: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExchangeLabels {
    pub target: Arc<str>,
    /// One of [`EXCHANGE_OUTCOMES`].
    pub outcome: &'static str,
}

/// Every value of `jmxgate_agent_exchanges_total`'s `outcome` label, so
/// that a target's series can all be dropped when it leaves the fleet.
pub const EXCHANGE_OUTCOMES: [&str; 9] = [
    "ok",
    "timeout",
    "unreachable",
    "http_error",
    "refused",
    "too_large",
    "busy",
    "circuit_open",
    "bad_answer",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub cache: String,
    /// `hit` or `miss`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabel {
    /// The serving worker, from 1 (`server.workers`).
    pub worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric the gateway exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<StatusLabel, Counter>,
    pub items: Family<ItemLabels, Counter>,
    pub item_seconds: Family<TypeLabel, Histogram, fn() -> Histogram>,
    pub agent_exchanges: Family<ExchangeLabels, Counter>,
    /// All agents together: a histogram per target is about 20 series
    /// each, 2 million lines of `/metrics` for a fleet of 100,000.
    pub agent_seconds: Histogram,
    /// 1 when the last exchange with the agent succeeded, else 0.
    pub agent_up: Family<TargetLabel, Gauge>,
    pub auth_failures: Family<MethodLabel, Counter>,
    pub cache: Family<CacheLabels, Counter>,
    pub audit_records: Counter,
    pub audit_failures: Counter,
    pub audit_queue: Gauge,
    pub audit_fsync_seconds: Histogram,
    /// Unix time of the last signed audit checkpoint.
    pub audit_last_checkpoint: Gauge,
    pub audit_sinks: crate::audit::ship::metrics::SinkMetrics,
    pub reloads: Family<StatusLabel, Counter>,
    /// Health probes sent, and those skipped because real exchanges had
    /// answered within the interval or the target is stable and not due
    /// (`result`: `sent`, `skipped`, `stable_skipped`).
    pub health_probes: Family<ResultLabel, Counter>,
    /// `health_probes`' series, by `ProbeDecision`.
    probe_results: [Counter; 3],
    /// Bumped whenever targets' series are dropped (see `probed`).
    forgotten: AtomicU64,
    pub mcp_tool_calls: Family<ToolLabels, Counter>,
    /// Targets scraped through the Prometheus endpoint.
    pub prometheus_scrapes: Family<ScrapeLabels, Counter>,
    /// Open client connections, by the serving worker that holds them.
    pub client_connections: Family<WorkerLabel, Gauge>,
    /// Open agent connections (in use or kept for reuse), read when the
    /// metrics are encoded.
    agent_connections: Gauge,
    /// 1 while a discovery source's API answers, 0 while it fails (its
    /// last targets kept), by source (`kubernetes[0]`).
    pub discovery_up: Family<SourceLabel, Gauge>,
    /// Pods a discovery source refused for what they say (a hostile
    /// annotation, an address that isn't one, an odd name), by source;
    /// each Pod counted when its reason is new.
    pub discovery_refused: Family<SourceLabel, Counter>,
    /// Names a source lists that another source keeps (the collision
    /// rule), by the source left without them.
    pub discovery_shadowed: Family<SourceLabel, Gauge>,
    /// 1 while the access store answers (or none is needed), 0 while not.
    pub access_store_up: Gauge,
    /// Steps of access requests (`access_requested`, `access_granted`,
    /// `access_used`, …), by event.
    access_steps: Family<EventLabel, Counter>,
    /// Webhook notices: `sent`, `failed` (after every retry), `dropped`.
    notices: Family<OutcomeLabel, Counter>,
    /// Webhook destinations whose circuit is open.
    notice_circuits_open: Gauge,
    /// OTLP points by export: `sent`, `failed` (never delivered after every
    /// retry), `rejected` (points the receiver refused, found by halving
    /// the request, or dropped by its own count), `dropped` (the queue was
    /// full, or the export stopped).
    pub otlp_points: Family<ExportLabels, Counter>,
    /// OTLP pushes by export: `ok`, `skipped` (the last was still running),
    /// and targets that gave no points (`target_failed`).
    pub otlp_pushes: Family<ExportLabels, Counter>,
    /// Unix time of each export's last request the receiver took.
    pub otlp_last_success: Family<ExportLabel, Gauge>,
    /// `[cluster]`: live members as this replica sees them (1 alone).
    pub cluster_members: Gauge,
    /// Targets whose duties (probes, webhooks) are this replica's.
    pub cluster_owned_targets: Gauge,
    /// Targets this replica took over or gave up on membership changes.
    pub cluster_handoffs: Counter,
    /// 1 while the membership engine answers (or none is configured).
    pub cluster_engine_up: Gauge,
    /// Reads of the other members' health reports: `ok`, `failed`.
    pub cluster_health_reads: Family<OutcomeLabel, Counter>,
}

/// An OTLP export and what happened (`sent`, `failed`, `dropped`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabels {
    pub export: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabel {
    pub export: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabel {
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("jmxgate");
        let m = Metrics {
            http_requests: Family::default(),
            items: Family::default(),
            item_seconds: Family::new_with_constructor(latency_histogram),
            agent_exchanges: Family::default(),
            agent_seconds: latency_histogram(),
            agent_up: Family::default(),
            auth_failures: Family::default(),
            cache: Family::default(),
            audit_records: Counter::default(),
            audit_failures: Counter::default(),
            audit_queue: Gauge::default(),
            audit_fsync_seconds: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
            audit_last_checkpoint: Gauge::default(),
            audit_sinks: Default::default(),
            reloads: Family::default(),
            health_probes: Family::default(),
            probe_results: Default::default(),
            forgotten: AtomicU64::new(0),
            mcp_tool_calls: Family::default(),
            prometheus_scrapes: Family::default(),
            client_connections: Family::default(),
            agent_connections: Gauge::default(),
            discovery_up: Family::default(),
            discovery_refused: Family::default(),
            discovery_shadowed: Family::default(),
            access_store_up: Gauge::default(),
            access_steps: Family::default(),
            notices: Family::default(),
            notice_circuits_open: Gauge::default(),
            otlp_points: Family::default(),
            otlp_pushes: Family::default(),
            otlp_last_success: Family::default(),
            cluster_members: Gauge::default(),
            cluster_owned_targets: Gauge::default(),
            cluster_handoffs: Counter::default(),
            cluster_engine_up: Gauge::default(),
            cluster_health_reads: Family::default(),
            registry: Registry::default(),
        };
        m.register_in(&mut registry);
        let probe_results = [
            crate::health::ProbeDecision::Send,
            crate::health::ProbeDecision::Answered,
            crate::health::ProbeDecision::Stable,
        ]
        .map(|d| {
            m.health_probes
                .get_or_create(&ResultLabel {
                    result: d.label().into(),
                })
                .clone()
        });
        Metrics {
            registry,
            probe_results,
            ..m
        }
    }

    /// The discovery sources' series.
    fn register_cluster_in(&self, registry: &mut Registry) {
        registry.register(
            "cluster_members",
            "Live members of [cluster] as this replica sees them (1 without [cluster])",
            self.cluster_members.clone(),
        );
        registry.register(
            "cluster_owned_targets",
            "Targets whose background duties (health probes, fleet-event webhooks) this replica owns",
            self.cluster_owned_targets.clone(),
        );
        registry.register(
            "cluster_handoffs",
            "Targets this replica took over or gave up when the members changed",
            self.cluster_handoffs.clone(),
        );
        registry.register(
            "cluster_engine_up",
            "1 while the membership engine (Kubernetes Leases, PostgreSQL) answers or none is configured, 0 while this replica keeps the last membership it saw",
            self.cluster_engine_up.clone(),
        );
        registry.register(
            "cluster_health_reads",
            "Reads of the other members' health probe results (/cluster/health on their admin listeners), by outcome: ok, failed",
            self.cluster_health_reads.clone(),
        );
    }

    fn register_discovery_in(&self, registry: &mut Registry) {
        registry.register(
            "discovery_up",
            "1 while a source of targets works (the configuration and each inventory file as loaded, each DNS entry's last resolution, each Kubernetes entry's watches), 0 while it fails and its last targets are kept, by source",
            self.discovery_up.clone(),
        );
        registry.register(
            "discovery_refused_pods",
            "Pods a discovery source refused for what they say (a hostile annotation, an address that isn't one, an odd name), by source",
            self.discovery_refused.clone(),
        );
        registry.register(
            "discovery_shadowed_targets",
            "Targets a source lists whose names another source keeps (configured targets first, then inventory files, DNS entries and Kubernetes entries in configuration order), by source",
            self.discovery_shadowed.clone(),
        );
    }

    /// Every series under its name and help text.
    fn register_in(&self, registry: &mut Registry) {
        registry.register(
            "http_requests",
            "HTTP requests answered, by HTTP status",
            self.http_requests.clone(),
        );
        registry.register(
            "mcp_tool_calls",
            "MCP tool calls, by tool and result (ok, error, refused)",
            self.mcp_tool_calls.clone(),
        );
        registry.register(
            "prometheus_target_scrapes",
            "Targets scraped through the Prometheus endpoint, by module and result (ok, error)",
            self.prometheus_scrapes.clone(),
        );
        registry.register(
            "items",
            "Request items answered, by type, target, protocol status and policy decision",
            self.items.clone(),
        );
        registry.register(
            "item_duration_seconds",
            "Time to answer an item, by type",
            self.item_seconds.clone(),
        );
        registry.register(
            "agent_exchanges",
            "Bulk exchanges with agents, by target and outcome",
            self.agent_exchanges.clone(),
        );
        registry.register(
            "agent_exchange_duration_seconds",
            "Duration of exchanges with agents, all targets together",
            self.agent_seconds.clone(),
        );
        registry.register(
            "agent_up",
            "1 when the last exchange with the agent succeeded",
            self.agent_up.clone(),
        );
        registry.register(
            "auth_failures",
            "Refused authentications, by attempted method",
            self.auth_failures.clone(),
        );
        registry.register(
            "cache_requests",
            "Cache lookups, by cache and result",
            self.cache.clone(),
        );
        registry.register(
            "audit_records",
            "Audit records written",
            self.audit_records.clone(),
        );
        registry.register(
            "audit_write_failures",
            "Failed audit writes (each one refuses requests, or loses records with on_failure = open)",
            self.audit_failures.clone(),
        );
        registry.register(
            "audit_queue_depth",
            "Requests waiting for their audit records to be flushed to disk",
            self.audit_queue.clone(),
        );
        registry.register(
            "audit_fsync_duration_seconds",
            "Duration of audit fsyncs (one per group commit)",
            self.audit_fsync_seconds.clone(),
        );
        registry.register(
            "audit_last_checkpoint_timestamp_seconds",
            "Unix time of the last signed audit checkpoint (0: none since the start; alert on time() minus it)",
            self.audit_last_checkpoint.clone(),
        );
        registry.register(
            "audit_sink_lag_records",
            "Audit records written locally and not yet confirmed delivered, by sink",
            self.audit_sinks.lag_records.clone(),
        );
        registry.register(
            "audit_sink_lag_seconds",
            "Age of the oldest audit record not yet delivered, by sink (0 when none)",
            self.audit_sinks.lag_seconds.clone(),
        );
        registry.register(
            "audit_sink_send_failures",
            "Audit batches not delivered (connect, TLS, send or confirmation failed), by sink",
            self.audit_sinks.send_failures.clone(),
        );
        registry.register(
            "audit_sink_records_sent",
            "Audit records confirmed delivered, by sink",
            self.audit_sinks.records_sent.clone(),
        );
        registry.register(
            "agent_connections",
            "Open connections to agents, in use or kept for reuse (server.max_kept_agent_connections bounds those kept), health probes' own one-shot connections aside",
            self.agent_connections.clone(),
        );
        registry.register(
            "client_connections",
            "Open client connections, by serving worker",
            self.client_connections.clone(),
        );
        self.register_discovery_in(registry);
        self.register_cluster_in(registry);
        registry.register(
            "access_store_up",
            "1 while the access store (just-in-time access) answers, 0 while elevation fails closed",
            self.access_store_up.clone(),
        );
        registry.register(
            "access_steps",
            "Steps of access requests (access_requested, access_granted, access_used, access_refused, ...), by event",
            self.access_steps.clone(),
        );
        registry.register(
            "notifications",
            "Webhook notices, by outcome: sent, failed after every retry (or refused), dropped with no room in the queue, batched into a notice waiting to go, skipped while the destination's circuit was open",
            self.notices.clone(),
        );
        registry.register(
            "notification_circuits_open",
            "Webhook destinations whose circuit is open: they failed in a row, and are tried again once after a while",
            self.notice_circuits_open.clone(),
        );
        registry.register(
            "config_reloads",
            "Configuration reloads, by result",
            self.reloads.clone(),
        );
        registry.register(
            "health_probes",
            "Health probes sent, skipped because real exchanges answered within the interval, and stable_skipped: a stable target not due this round",
            self.health_probes.clone(),
        );
        self.register_otlp_in(registry);
    }

    /// The OTLP exports' series.
    fn register_otlp_in(&self, registry: &mut Registry) {
        registry.register(
            "otlp_points",
            "OTLP points by export and outcome: sent, failed (not delivered after every retry), rejected (refused by the receiver, point by point), dropped (queue full or export stopped)",
            self.otlp_points.clone(),
        );
        registry.register(
            "otlp_pushes",
            "OTLP pushes by export and outcome, once their last request is handled: delivered, partial (some points refused by the receiver), failed (some not delivered), refused (the receiver refused its requests as such), dropped (its last request lost from a full queue), empty (no target gave points), skipped (the previous push was still running); and target_failed, per target that gave no points",
            self.otlp_pushes.clone(),
        );
        registry.register(
            "otlp_last_success_timestamp_seconds",
            "Unix time of each export's last request the receiver accepted",
            self.otlp_last_success.clone(),
        );
    }

    /// Records whether a discovery source's API answers.
    pub fn discovery_up(&self, source: &str, up: bool) {
        self.discovery_up
            .get_or_create(&SourceLabel {
                source: source.to_string(),
            })
            .set(i64::from(up));
    }

    /// Records how many names `source` lists that another source keeps.
    pub fn discovery_shadowed(&self, source: &str, names: usize) {
        self.discovery_shadowed
            .get_or_create(&SourceLabel {
                source: source.to_string(),
            })
            .set(i64::try_from(names).unwrap_or(i64::MAX));
    }

    /// Drops a source's gauges: it left the configuration.
    pub fn forget_discovery_source(&self, source: &str) {
        let label = SourceLabel {
            source: source.to_string(),
        };
        self.discovery_up.remove(&label);
        self.discovery_shadowed.remove(&label);
    }

    /// Counts `pods` more Pods `source` refused for what they say.
    pub fn discovery_refused(&self, source: &str, pods: u64) {
        self.discovery_refused
            .get_or_create(&SourceLabel {
                source: source.to_string(),
            })
            .inc_by(pods);
    }

    /// Counts `n` OTLP points or pushes of `export` as `outcome`.
    pub fn otlp(&self, points: bool, export: &str, outcome: &'static str, n: u64) {
        let family = if points {
            &self.otlp_points
        } else {
            &self.otlp_pushes
        };
        family
            .get_or_create(&ExportLabels {
                export: export.to_string(),
                outcome,
            })
            .inc_by(n);
    }

    /// Counts one step of an access request.
    pub fn access_step(&self, event: &'static str) {
        self.access_steps.get_or_create(&EventLabel { event }).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        self.agent_connections
            .set(crate::client::open_agent_connections() as i64);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        out
    }

    /// The handles the audit writer feeds.
    pub fn audit_writer(&self) -> crate::audit::WriterMetrics {
        crate::audit::WriterMetrics {
            records: self.audit_records.clone(),
            failures: self.audit_failures.clone(),
            queue: self.audit_queue.clone(),
            fsync_seconds: Some(self.audit_fsync_seconds.clone()),
            last_checkpoint: self.audit_last_checkpoint.clone(),
            sinks: self.audit_sinks.clone(),
        }
    }

    /// Counts one exchange with an agent and sets its `agent_up`.
    pub fn exchange(&self, target: &TargetHealth, outcome: &'static str, seconds: f64) {
        debug_assert!(EXCHANGE_OUTCOMES.contains(&outcome), "{outcome}");
        self.agent_exchanges
            .get_or_create(&ExchangeLabels {
                target: target.shared_name().clone(),
                outcome,
            })
            .inc();
        let label = TargetLabel {
            target: target.shared_name().clone(),
        };
        self.agent_seconds.observe(seconds);
        self.agent_up
            .get_or_create(&label)
            .set(i64::from(outcome == "ok"));
        self.unless_retired(target);
    }

    /// Counts what a probe round did with one target.
    pub fn probe_decided(&self, decision: crate::health::ProbeDecision) {
        use crate::health::ProbeDecision::*;
        // Looked up once: a large fleet decides thousands a second.
        let [sent, answered, stable] = &self.probe_results;
        match decision {
            Send => sent,
            Answered => answered,
            Stable => stable,
        }
        .inc();
    }

    /// Sets `agent_up` from a health probe.
    pub fn probed(&self, target: &TargetHealth, up: bool) {
        // The target's series, looked up again only after some target's
        // series were dropped (one may have been its own).
        let generation = self.forgotten.load(Ordering::SeqCst);
        let mut cached = target.up_gauge.lock().expect("gauge lock");
        let gauge = match &*cached {
            Some((seen, gauge)) if *seen == generation => gauge,
            _ => {
                let gauge = self
                    .agent_up
                    .get_or_create(&TargetLabel {
                        target: target.shared_name().clone(),
                    })
                    .clone();
                &cached.insert((generation, gauge)).1
            }
        };
        gauge.set(i64::from(up));
        drop(cached);
        self.unless_retired(target);
    }

    /// An exchange or probe that ends after its target left the fleet
    /// takes back the gauges it just set. Checked after setting them, and
    /// the fleet marks a target retired before forgetting it, so either
    /// this or the fleet's [`forget_target`](Self::forget_target) comes
    /// last. (A target of the same name added again meanwhile loses its
    /// gauges until its next exchange or probe.)
    fn unless_retired(&self, target: &TargetHealth) {
        if target.is_retired() {
            self.forget_target(target.name());
        }
    }

    /// Drops the per-target series of targets that left the fleet
    /// (`agent_up` and `agent_exchanges_total`), so a gauge does not go on reporting a
    /// target that is no longer there and DNS churn doesn't pile series up.
    /// `items_total` stays: its `status` label has no fixed set of values.
    pub fn forget_target(&self, target: &str) {
        let target: Arc<str> = target.into();
        self.agent_up.remove(&TargetLabel {
            target: target.clone(),
        });
        for outcome in EXCHANGE_OUTCOMES {
            self.agent_exchanges.remove(&ExchangeLabels {
                target: target.clone(),
                outcome,
            });
        }
        // After the removal: a probe that looked its series up before
        // it sets a dropped gauge once, and the next looks again.
        self.forgotten.fetch_add(1, Ordering::SeqCst);
    }

    pub fn cache_lookup(&self, cache: &str, hit: bool) {
        self.cache
            .get_or_create(&CacheLabels {
                cache: cache.into(),
                result: if hit { "hit" } else { "miss" }.into(),
            })
            .inc();
    }
}

impl crate::notify::NoticeCounter for Metrics {
    fn count(&self, outcome: &'static str) {
        self.notices.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    fn circuits_open(&self, open: usize) {
        self.notice_circuits_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }
}
