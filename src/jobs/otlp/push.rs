//! One push of an export: its targets read concurrently within its
//! timeout as its own principal, their samples made into one Resource per
//! target, cut into requests under the size limit and queued; one audit
//! record per target.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;

use super::{Export, Pending};
use crate::doors::prometheus::TargetScrape;
use crate::doors::DoorSections;
use crate::exporter::exposition;
use crate::exporter::otlp::{self, TargetPoints};
use crate::exporter::rules::{MetricType, Sample};
use crate::pipeline::audit::{self, Channel};
use crate::pipeline::parse::{Parsed, ParsedItem};
use crate::pipeline::{Caller, Gateway, RequestContext};
use crate::principal::{AuthMethod, Principal};
use crate::protocol::Request;

/// When one target's counters started: the JVM's start time when the
/// export may read it, else the first push that saw the target, reset
/// when a counter goes down (the JVM restarted).
#[derive(Debug, Clone, Default)]
pub(crate) struct Start {
    unix_nano: u64,
    counters: HashMap<String, f64>,
}

pub(crate) fn unix_nano(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A series' identity within a target, for restart detection.
fn series_key(s: &Sample) -> String {
    let mut key = s.name.clone();
    for (k, v) in &s.labels {
        key.push('\u{1}');
        key.push_str(k);
        key.push('=');
        key.push_str(v);
    }
    key
}

impl Start {
    /// The start time for this push: `jvm_start_ms` when known (a new
    /// value is a restart), else the one kept, reset when any counter
    /// went down since the last push. Series that come and go between
    /// pushes are compared only while they are there.
    pub(crate) fn update(
        &mut self,
        jvm_start_ms: Option<u64>,
        samples: &[Sample],
        now: u64,
    ) -> u64 {
        let counters: HashMap<String, f64> = samples
            .iter()
            .filter(|s| s.metric_type == MetricType::Counter)
            .map(|s| (series_key(s), s.value))
            .collect();
        let went_down = counters
            .iter()
            .any(|(k, v)| self.counters.get(k).is_some_and(|before| v < before));
        self.unix_nano = match jvm_start_ms {
            Some(ms) => ms.saturating_mul(1_000_000),
            None if self.unix_nano == 0 || went_down => now,
            None => self.unix_nano,
        };
        self.counters = counters;
        self.unix_nano
    }
}

/// Starts a push every interval; one still running when the next is due
/// makes that one skipped (counted), so pushes never pile up.
pub(crate) async fn tick_loop(gateway: Weak<Gateway>, export: Arc<Export>) {
    let mut ticks = tokio::time::interval(export.settings.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        let name = &export.settings.name;
        if export.pushing.swap(true, Ordering::AcqRel) {
            tracing::debug!(export = %name, "OTLP push skipped: the last one is still running");
            gateway.metrics.otlp(false, name, "skipped", 1);
            continue;
        }
        let export = export.clone();
        tokio::spawn(async move {
            push(&gateway, &export).await;
            export.pushing.store(false, Ordering::Release);
        });
    }
}

/// One push: the export's targets read concurrently within its
/// timeout, their points queued in requests under the size limit.
async fn push(gateway: &Gateway, export: &Export) {
    let state = gateway.state.load_full();
    let settings = &export.settings;
    let principal = Principal {
        name: settings.principal.clone(),
        issuer: None,
        method: AuthMethod::Configured,
        roles: settings.role.iter().cloned().collect(),
        certificate_sha256: None,
        namespaced_roles: Vec::new(),
    };
    let held = state.access.roles_of(&principal);
    // A push has no request: its context is the export's principal's.
    let ctx = RequestContext::system(gateway.next_request_id(), principal, held, Channel::Otlp);
    let caller = ctx.caller("GET");
    let started = ctx.started;
    let Some(module) = state.prometheus().modules.get(&settings.module).cloned() else {
        let why = format!("no module is named \"{}\"", settings.module);
        tracing::error!(export = %settings.name, "OTLP push: {why}");
        export.set_trouble(Some(why));
        return;
    };
    let (targets, results) =
        match crate::doors::prometheus::scrape_targets(gateway, &state, &caller, &settings.targets)
        {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(export = %settings.name, "OTLP push: targets: {}", e.message);
                export.set_trouble(Some(format!("targets: {}", e.message)));
                return;
            }
        };
    // With [cluster], each (export, target) is pushed by one replica.
    let (targets, results) = {
        let view = gateway.cluster.view();
        let mut owned = export.owned.lock().expect("owned lock");
        owned.trim(targets.len() + results.len());
        let mut mine =
            |name: &str| owned.owns(&view, &crate::cluster::export_key(&settings.name, name));
        (
            targets
                .into_iter()
                .filter(|t| mine(&t.name))
                .collect::<Vec<_>>(),
            results
                .into_iter()
                .filter(|r| mine(&r.name))
                .collect::<Vec<_>>(),
        )
    };
    let deadline = started + settings.timeout;
    let limits = state.prometheus().config.limits(deadline);
    let reads = futures::stream::iter(targets)
        .map(|t| {
            let (caller, module, limits, state) = (&caller, &module, &limits, &state);
            async move {
                let budget = tokio::time::Instant::from_std(deadline);
                let read = async {
                    let scraped = crate::doors::prometheus::scrape_one(
                        gateway, state, caller, &t, module, limits,
                    )
                    .await;
                    let jvm_start = jvm_start(gateway, state, caller, &t.name).await;
                    (scraped, jvm_start)
                };
                match tokio::time::timeout_at(budget, read).await {
                    Ok((scraped, jvm_start)) => (t, scraped, jvm_start),
                    Err(_) => {
                        let failed = TargetScrape::failed(
                            &t.name,
                            504,
                            "did not answer within the export's timeout".into(),
                            started,
                        );
                        (t, failed, None)
                    }
                }
            }
        })
        .buffer_unordered(state.prometheus().config.max_concurrent_targets);
    let read: Vec<_> = reads.collect().await;
    let failed_targets = read.iter().filter(|(_, s, _)| s.error.is_some()).count()
        + results.iter().filter(|s| s.error.is_some()).count();
    if failed_targets > 0 {
        gateway.metrics.otlp(
            false,
            &settings.name,
            "target_failed",
            failed_targets as u64,
        );
    }
    audit_push(
        gateway,
        settings,
        &ctx,
        results.iter().chain(read.iter().map(|(_, s, _)| s)),
    )
    .await;
    // Targets gone from the fleet (or the export's reach) are
    // forgotten; the rest go, with their samples, to the CPU pool.
    // Pushes never overlap, so the starts are this push's meanwhile.
    let mut starts = std::mem::take(&mut *export.starts.lock().expect("starts lock"));
    starts.retain(|name, _| read.iter().any(|(t, _, _)| &t.name == name));
    let read: Vec<_> = read
        .into_iter()
        // A target that failed gives no points, not zeros.
        .filter(|(_, s, _)| s.error.is_none() && !s.samples.is_empty())
        .map(|(t, s, jvm_start)| (t, s.samples, jvm_start))
        .collect();
    let settings_now = settings.clone();
    let push = export.pushes.fetch_add(1, Ordering::Relaxed) + 1;
    let encoded = state
        .prometheus()
        .cpu
        .run(move || {
            let resources = resources(read, &mut starts, &settings_now);
            let mut requests = otlp::batches(resources, settings_now.max_request_bytes)
                .into_iter()
                .map(|request| Pending {
                    push,
                    body: otlp::gzip(&prost::Message::encode_to_vec(&request)),
                    points: otlp::points(&request),
                    request,
                    last: false,
                })
                .collect::<Vec<_>>();
            if let Some(last) = requests.last_mut() {
                last.last = true;
            }
            (requests, starts)
        })
        .await;
    let Some((requests, starts)) = encoded else {
        return;
    };
    *export.starts.lock().expect("starts lock") = starts;
    enqueue(gateway, export, requests);
}

/// A push's requests into the export's queue, for its sender; past
/// `max_queued_requests` the oldest go (counted). A push without
/// requests (no target gave points) is counted `empty` here: nothing of
/// it will reach the sender.
fn enqueue(gateway: &Gateway, export: &Export, requests: Vec<Pending>) {
    let settings = &export.settings;
    if requests.is_empty() {
        gateway.metrics.otlp(false, &settings.name, "empty", 1);
        return;
    }
    let mut queue = export.queue.lock().expect("queue lock");
    for pending in requests {
        if queue.len() >= settings.max_queued_requests {
            if let Some(lost) = queue.pop_front() {
                gateway
                    .metrics
                    .otlp(true, &settings.name, "dropped", lost.points);
                if lost.last {
                    gateway.metrics.otlp(false, &settings.name, "dropped", 1);
                }
            }
        }
        queue.push_back(pending);
    }
    drop(queue);
    export.queued.notify_one();
}

/// The JVM's start time (`java.lang:type=Runtime` `StartTime`, ms), read
/// as the export's principal; `None` when its policy doesn't allow it
/// or the agent can't say.
async fn jvm_start(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    caller: &Caller<'_>,
    target: &str,
) -> Option<u64> {
    let read = Request::read("java.lang:type=Runtime", Some("StartTime"))
        .map(|r| ParsedItem::to(target, r));
    let answers =
        crate::doors::prometheus::scrape_items(gateway, state, caller, Parsed::typed(vec![read]))
            .await
            .ok()?;
    let answer = answers.into_iter().next()?;
    if answer.status() != Some(200) {
        return None;
    }
    answer.get("value")?.get().parse::<u64>().ok()
}

/// One record per target of a push.
async fn audit_push(
    gateway: &Gateway,
    settings: &super::ExportSettings,
    ctx: &RequestContext,
    results: impl Iterator<Item = &TargetScrape>,
) {
    let (export, module) = (&settings.name, &settings.module);
    for r in results {
        let (decision, status, note) = match &r.error {
            None => (
                "allowed",
                200,
                format!(
                    "export {export}, module {module}: {} points",
                    r.samples.len()
                ),
            ),
            Some((status @ (403 | 404), why)) => (
                "denied",
                *status,
                format!("export {export}, module {module}: no points: {why}"),
            ),
            Some((status, why)) => (
                "allowed",
                *status,
                format!("export {export}, module {module}: no points: {why}"),
            ),
        };
        let record = audit::RequestRecord {
            who: &ctx.who(),
            event: "push",
            decision,
            status,
            error_type: None,
            target: Some(&r.name),
            note: &note,
        };
        let recorded = gateway.record(audit::Event::Request(record)).await;
        if let Err(e) = recorded {
            tracing::warn!(export = %export, "OTLP push not audited: {}", e.message);
        }
    }
}

/// Each target's samples as one Resource: the families `/prometheus`
/// writes (the same names and types), counters with the target's start.
fn resources(
    read: Vec<(Arc<crate::fleet::Target>, Vec<Sample>, Option<u64>)>,
    starts: &mut HashMap<String, Start>,
    settings: &super::ExportSettings,
) -> Vec<opentelemetry_proto::tonic::metrics::v1::ResourceMetrics> {
    let now = unix_nano(SystemTime::now());
    let version = crate::version::GATEWAY_VERSION;
    read.into_iter()
        .map(|(target, samples, jvm_start)| {
            let samples: Vec<Sample> = exposition::families_of(samples)
                .into_values()
                .flat_map(|(metric_type, group)| {
                    group.into_iter().map(move |s| Sample { metric_type, ..s })
                })
                .collect();
            let start = starts
                .entry(target.name.clone())
                .or_default()
                .update(jvm_start, &samples, now);
            otlp::resource_metrics(
                &TargetPoints {
                    resource: resource_attributes(&target.name, &target.labels, settings, version),
                    samples: &samples,
                    start_unix_nano: start,
                    time_unix_nano: now,
                },
                version,
            )
        })
        .collect()
}

/// A target's resource: `service.instance.id`, `service.name`, the
/// module's own attributes, the target's labels (the Kubernetes names for
/// a discovered Pod), and what sent it.
fn resource_attributes(
    target: &str,
    labels: &crate::labels::Labels,
    settings: &super::ExportSettings,
    version: &str,
) -> Vec<(String, String)> {
    let service = settings
        .service_name_label
        .as_ref()
        .and_then(|l| labels.get(l))
        .map(str::to_string)
        .unwrap_or_else(|| settings.service_name.clone());
    let mut attributes = vec![
        ("service.instance.id".to_string(), target.to_string()),
        ("service.name".to_string(), service),
    ];
    attributes.extend(settings.resource_attributes.iter().cloned());
    let from_kubernetes = labels
        .get(crate::discovery::dns::DISCOVERED_BY_LABEL)
        .is_some_and(|v| v == "kubernetes");
    for (k, v) in labels.iter() {
        // OpenTelemetry's semantic conventions for what Kubernetes
        // discovery labels a Pod with.
        let key = match k {
            "namespace" if from_kubernetes => "k8s.namespace.name".to_string(),
            "pod" if from_kubernetes => "k8s.pod.name".to_string(),
            "node" if from_kubernetes => "k8s.node.name".to_string(),
            _ => k.to_string(),
        };
        attributes.push((key, v.to_string()));
    }
    attributes.push(("telemetry.sdk.name".into(), "jmxgate".into()));
    attributes.push(("telemetry.sdk.language".into(), "rust".into()));
    attributes.push(("telemetry.sdk.version".into(), version.into()));
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(name: &str, value: f64) -> Sample {
        Sample {
            name: name.into(),
            match_name: String::new(),
            metric_type: MetricType::Counter,
            help: String::new(),
            labels: vec![("node".into(), "1".into())],
            value,
            otel: None,
        }
    }

    #[test]
    fn a_counters_start_is_the_jvms_or_resets_when_it_goes_down() {
        let mut s = Start::default();
        assert_eq!(s.update(Some(7), &[counter("r", 1.0)], 100), 7_000_000);
        assert_eq!(
            s.update(Some(9), &[counter("r", 0.0)], 200),
            9_000_000,
            "a new JVM start"
        );
        let mut s = Start::default();
        assert_eq!(s.update(None, &[counter("r", 5.0)], 100), 100);
        assert_eq!(
            s.update(None, &[counter("r", 6.0)], 200),
            100,
            "kept while it grows"
        );
        assert_eq!(
            s.update(None, &[counter("r", 1.0)], 300),
            300,
            "went down: restarted"
        );
    }

    #[test]
    fn a_pods_resource_has_the_kubernetes_names_and_the_blocks_attributes() {
        let export: crate::jobs::otlp::config::ExportConfig = toml::from_str(
            "targets = \"*\"\nendpoint = \"http://c:4318\"\nservice_name_label = \"app\"",
        )
        .unwrap();
        let block = crate::exporter::open_telemetry::OpenTelemetryBlock {
            service_namespace: Some("shop".into()),
            ..Default::default()
        };
        let settings = export.settings(0, Some(&block)).unwrap();
        let labels: std::collections::BTreeMap<String, String> = [
            ("app", "orders"),
            ("discovered_by", "kubernetes"),
            ("namespace", "shop-prod"),
            ("node", "node-a"),
            ("pod", "orders-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let attributes: std::collections::BTreeMap<String, String> = resource_attributes(
            "orders-1.shop-prod",
            &labels.clone().into(),
            &settings,
            "9.9.9",
        )
        .into_iter()
        .collect();
        for (k, v) in [
            ("service.instance.id", "orders-1.shop-prod"),
            ("service.name", "orders"),
            ("service.namespace", "shop"),
            ("k8s.namespace.name", "shop-prod"),
            ("k8s.pod.name", "orders-1"),
            ("k8s.node.name", "node-a"),
            ("telemetry.sdk.name", "jmxgate"),
            ("telemetry.sdk.version", "9.9.9"),
        ] {
            assert_eq!(
                attributes.get(k).map(String::as_str),
                Some(v),
                "{k}: {attributes:?}"
            );
        }
        assert!(!attributes.contains_key("namespace"));
        // Not from Kubernetes: labels stay as they are.
        let mut dns = labels.clone();
        dns.insert("discovered_by".into(), "dns".into());
        let plain: std::collections::BTreeMap<String, String> =
            resource_attributes("x", &dns.into(), &settings, "1")
                .into_iter()
                .collect();
        assert_eq!(plain["namespace"], "shop-prod");
        assert!(!plain.contains_key("k8s.namespace.name"));
    }

    #[test]
    fn series_that_come_and_go_are_not_a_restart() {
        let mut s = Start::default();
        assert_eq!(s.update(None, &[counter("a", 5.0)], 100), 100);
        // `a` gone, `b` new: label sets changed, nothing went down.
        assert_eq!(s.update(None, &[counter("b", 1.0)], 200), 100);
        // `a` back, but not in the last push: nothing to compare it with.
        assert_eq!(
            s.update(None, &[counter("a", 1.0), counter("b", 2.0)], 300),
            100
        );
        assert_eq!(
            s.update(None, &[counter("a", 0.0), counter("b", 3.0)], 400),
            400
        );
    }
}
