//! The OTLP door, outbound: each `[[otlp.exports]]` pushes the samples of
//! the targets it selects, made by a Prometheus door module (jmx_exporter's
//! rules, read unchanged), to an OTLP/HTTP receiver every interval. The
//! export runs as its own principal holding its `role`: the targets are
//! chosen and read through the shared phases exactly as a scraper's
//! (`Gateway::scrape_targets`, `Gateway::scrape_one`), and each push leaves
//! one audit record per target (`"channel":"otlp"`).
//!
//! Delivery never blocks the request path: a push that is still running
//! when the next is due is skipped (counted); requests wait in a bounded
//! queue (the oldest dropped, counted) for a sender that retries 429 and
//! 5xx with backoff, honouring `Retry-After`.

pub mod config;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use http::HeaderMap;
use serde_json::json;

use super::prometheus::TargetScrape;
use super::{audit, authorize, Caller, Gateway, Refused};
use crate::exporter::otlp::{self, TargetPoints};
use crate::exporter::rules::MetricType;
use crate::principal::{AuthMethod, Principal};
use config::ExportConfig;

/// Attempts per request, and the first wait between them (doubling, at
/// most the export's interval).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// When one target's counters started: the JVM's start time when the
/// export may read it, else the first push that saw the target, reset
/// when a counter goes down (the JVM restarted).
#[derive(Debug, Clone, Default)]
struct Start {
    unix_nano: u64,
    counters: HashMap<String, f64>,
}

/// One export's state between pushes.
struct Export {
    name: String,
    config: ExportConfig,
    running: AtomicBool,
    starts: Mutex<HashMap<String, Start>>,
    queue: Mutex<VecDeque<(Vec<u8>, u64)>>,
    queued: tokio::sync::Notify,
}

fn unix_nano(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A series' identity within a target, for restart detection.
fn series_key(s: &crate::exporter::rules::Sample) -> String {
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
    /// went down since the last push.
    fn update(
        &mut self,
        jvm_start_ms: Option<u64>,
        samples: &[crate::exporter::rules::Sample],
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

impl Gateway {
    /// Starts every configured export (none: nothing runs). Each runs while
    /// the gateway lives.
    pub fn spawn_otlp_exports(self: &Arc<Self>) -> Vec<tokio::task::JoinHandle<()>> {
        let exports = self
            .sources
            .lock()
            .expect("sources lock")
            .config
            .otlp
            .exports
            .clone();
        let mut tasks = Vec::new();
        for (i, config) in exports.into_iter().enumerate() {
            let http = match export_client(&config) {
                Ok(h) => h,
                Err(e) => {
                    tracing::error!(export = %config.name(i), "OTLP export not started: {e}");
                    continue;
                }
            };
            let export = Arc::new(Export {
                name: config.name(i),
                config,
                running: AtomicBool::new(false),
                starts: Mutex::new(HashMap::new()),
                queue: Mutex::new(VecDeque::new()),
                queued: tokio::sync::Notify::new(),
            });
            tasks.push(tokio::spawn(send_loop(
                Arc::downgrade(self),
                export.clone(),
                http,
            )));
            let weak = Arc::downgrade(self);
            tasks.push(tokio::spawn(async move {
                let mut ticks = tokio::time::interval(export.config.interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    ticks.tick().await;
                    let Some(gateway) = weak.upgrade() else {
                        return;
                    };
                    if export.running.swap(true, Ordering::AcqRel) {
                        // Pushes never pile up: this one is skipped.
                        gateway.metrics.otlp(false, &export.name, "skipped", 1);
                        continue;
                    }
                    let export = export.clone();
                    tokio::spawn(async move {
                        gateway.push(&export).await;
                        export.running.store(false, Ordering::Release);
                    });
                }
            }));
        }
        tasks
    }

    /// One push: the export's targets read concurrently within its
    /// timeout, their points queued in requests under the size limit.
    async fn push(&self, export: &Export) {
        let state = self.state.load_full();
        let config = &export.config;
        let started = Instant::now();
        let principal = Principal {
            name: config
                .principal
                .clone()
                .unwrap_or_else(|| format!("otlp:{}", export.name)),
            method: AuthMethod::Configured,
            roles: config.role.iter().cloned().collect(),
            certificate_sha256: None,
            namespaced_roles: Vec::new(),
        };
        let held = state.access.roles_of(&principal);
        let facts = authorize::RequestFacts {
            method: "GET",
            chain: &[],
            origin: None,
            scheme: "http",
            denied_reads_in_place: false,
        };
        let caller = Caller {
            access: &state.access,
            principal: &principal,
            roles: &held,
            facts: &facts,
        };
        let Some(module) = state.prometheus.modules.get(&config.module).cloned() else {
            tracing::error!(export = %export.name, module = %config.module, "OTLP export: no such module");
            return;
        };
        let (targets, mut results) = match self.scrape_targets(&state, &caller, &config.targets) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(export = %export.name, "OTLP export: targets: {}", e.message);
                (Vec::new(), Vec::new())
            }
        };
        let deadline = started + config.timeout;
        let limits = state.prometheus.config.limits(deadline);
        let reads = futures::stream::iter(targets)
            .map(|t| {
                let (caller, module, limits, state) = (&caller, &module, &limits, &state);
                async move {
                    let budget = tokio::time::Instant::from_std(deadline);
                    let read = async {
                        let scraped = self.scrape_one(state, caller, &t, module, limits).await;
                        let jvm_start = self.jvm_start(state, caller, &t.name).await;
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
            .buffer_unordered(state.prometheus.config.max_concurrent_targets);
        let read: Vec<_> = reads.collect().await;
        let now = unix_nano(SystemTime::now());
        let version = crate::version::GATEWAY_VERSION.to_string();
        let mut resources = Vec::new();
        let mut points = 0u64;
        for (target, scraped, jvm_start) in &read {
            if scraped.error.is_some() || scraped.samples.is_empty() {
                continue;
            }
            let start = self.export_start(export, &target.name, *jvm_start, &scraped.samples, now);
            let resource = resource_attributes(target, config, &module.name, &version);
            points += scraped.samples.len() as u64;
            resources.push(otlp::resource_metrics(
                &TargetPoints {
                    resource,
                    samples: &scraped.samples,
                    start_unix_nano: start,
                    time_unix_nano: now,
                },
                &version,
            ));
        }
        let failed_targets = read.iter().filter(|(_, s, _)| s.error.is_some()).count()
            + results.iter().filter(|s| s.error.is_some()).count();
        if failed_targets > 0 {
            self.metrics
                .otlp(false, &export.name, "target_failed", failed_targets as u64);
        }
        results.extend(read.into_iter().map(|(_, s, _)| s));
        self.audit_push(export, &principal, &held, &module.name, &results, started)
            .await;
        let max = config.max_request_bytes;
        let encoded = state
            .prometheus
            .cpu
            .run(move || {
                otlp::batches(resources, max)
                    .into_iter()
                    .map(|b| otlp::gzip(&b))
                    .collect::<Vec<_>>()
            })
            .await;
        let Some(requests) = encoded else { return };
        let per_request = points / (requests.len().max(1) as u64);
        let mut queue = export.queue.lock().expect("queue lock");
        for (i, body) in requests.iter().enumerate() {
            let n = if i + 1 == requests.len() {
                points - per_request * (requests.len() as u64 - 1)
            } else {
                per_request
            };
            if queue.len() >= config.max_queued_requests {
                if let Some((_, lost)) = queue.pop_front() {
                    self.metrics.otlp(true, &export.name, "dropped", lost);
                }
            }
            queue.push_back((body.clone(), n));
        }
        drop(queue);
        export.queued.notify_one();
        self.metrics.otlp(false, &export.name, "ok", 1);
    }

    /// The JVM's start time (`java.lang:type=Runtime` `StartTime`, ms), read
    /// as the export's principal; `None` when its policy doesn't allow it
    /// or the agent can't say.
    async fn jvm_start(
        &self,
        state: &super::state::State,
        caller: &Caller<'_>,
        target: &str,
    ) -> Option<u64> {
        let item = json!({"type": "read", "mbean": "java.lang:type=Runtime",
                          "attribute": "StartTime", "target": {"url": target}});
        let answers = self.scrape_items(state, caller, &[item]).await.ok()?;
        let answer = answers.into_iter().next()?;
        if answer.status() != Some(200) {
            return None;
        }
        answer.get("value")?.get().parse::<u64>().ok()
    }

    fn export_start(
        &self,
        export: &Export,
        target: &str,
        jvm_start_ms: Option<u64>,
        samples: &[crate::exporter::rules::Sample],
        now: u64,
    ) -> u64 {
        let mut starts = export.starts.lock().expect("starts lock");
        starts
            .entry(target.to_string())
            .or_default()
            .update(jvm_start_ms, samples, now)
    }

    /// One record per target of a push.
    async fn audit_push(
        &self,
        export: &Export,
        principal: &Principal,
        held: &[Arc<crate::access::Role>],
        module: &str,
        results: &[TargetScrape],
        started: Instant,
    ) {
        let request_id = format!(
            "{:x}-{}",
            self.identity.boot_id,
            self.request_seq.fetch_add(1, Ordering::Relaxed)
        );
        let headers = HeaderMap::new();
        let refused = Refused {
            gateway: self,
            request_id: &request_id,
            principal,
            client: None,
            started,
            headers: &headers,
        };
        let roles: Vec<String> = held.iter().map(|r| r.name.clone()).collect();
        for r in results {
            let (decision, status, note) = match &r.error {
                None => (
                    "allowed",
                    200,
                    format!(
                        "export {}, module {module}: {} points",
                        export.name,
                        r.samples.len()
                    ),
                ),
                Some((status @ (403 | 404), why)) => (
                    "denied",
                    *status,
                    format!("export {}, module {module}: no points: {why}", export.name),
                ),
                Some((status, why)) => (
                    "allowed",
                    *status,
                    format!("export {}, module {module}: no points: {why}", export.name),
                ),
            };
            let recorded = refused
                .audit(
                    Some(audit::Channel::Otlp),
                    "push",
                    decision,
                    status,
                    None,
                    Some(&r.name),
                    &roles,
                    &note,
                )
                .await;
            if let Err(e) = recorded {
                tracing::warn!(export = %export.name, "OTLP push not audited: {}", e.message);
            }
        }
    }
}

/// A target's resource: `service.instance.id`, `service.name`, its labels,
/// the Kubernetes names for a discovered Pod, and what sent it.
fn resource_attributes(
    target: &crate::fleet::Target,
    config: &ExportConfig,
    module: &str,
    version: &str,
) -> Vec<(String, String)> {
    let service = config
        .service_name_label
        .as_ref()
        .and_then(|l| target.labels.get(l))
        .cloned()
        .unwrap_or_else(|| module.to_string());
    let mut attributes = vec![
        ("service.instance.id".to_string(), target.name.clone()),
        ("service.name".to_string(), service),
    ];
    let from_kubernetes = target
        .labels
        .get(crate::discovery::dns::DISCOVERED_BY_LABEL)
        .is_some_and(|v| v == "kubernetes");
    for (k, v) in target.labels.iter() {
        let key = match k.as_str() {
            "namespace" if from_kubernetes => "k8s.namespace.name".to_string(),
            "pod" if from_kubernetes => "k8s.pod.name".to_string(),
            _ => k.clone(),
        };
        attributes.push((key, v.clone()));
    }
    attributes.push(("telemetry.sdk.name".into(), "jmxgate".into()));
    attributes.push(("telemetry.sdk.language".into(), "rust".into()));
    attributes.push(("telemetry.sdk.version".into(), version.into()));
    attributes
}

fn export_client(config: &ExportConfig) -> Result<reqwest::Client, String> {
    let tls = crate::client::tls_config(config.ca_file.as_deref(), None, false)
        .map_err(|e| e.to_string())?;
    let mut headers = http::HeaderMap::new();
    for (name, value) in &config.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
        let mut value = http::HeaderValue::from_str(value.resolve()?.expose())
            .map_err(|_| format!("header {name}: not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .default_headers(headers)
        .timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}

/// Sends an export's queued requests in order, each retried on 429, 5xx
/// and connection failures with doubling waits (a `Retry-After` in
/// seconds is honoured, both at most the interval).
async fn send_loop(gateway: std::sync::Weak<Gateway>, export: Arc<Export>, http: reqwest::Client) {
    let url = export.config.url();
    loop {
        let next = export.queue.lock().expect("queue lock").pop_front();
        let Some((body, points)) = next else {
            export.queued.notified().await;
            if gateway.strong_count() == 0 {
                return;
            }
            continue;
        };
        let outcome = deliver(&http, &url, body, export.config.interval).await;
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        match outcome {
            Ok(()) => {
                gateway.metrics.otlp(true, &export.name, "sent", points);
                gateway
                    .metrics
                    .otlp_last_success
                    .get_or_create(&crate::metrics::ExportLabel {
                        export: export.name.clone(),
                    })
                    .set(unix_nano(SystemTime::now()) as i64 / 1_000_000_000);
            }
            Err(why) => {
                tracing::warn!(export = %export.name, points, "OTLP request not delivered: {why}");
                gateway.metrics.otlp(true, &export.name, "failed", points);
            }
        }
    }
}

async fn deliver(
    http: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    most_wait: Duration,
) -> Result<(), String> {
    let mut wait = FIRST_BACKOFF;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let sent = http
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .header(http::header::CONTENT_ENCODING, "gzip")
            .body(body.clone())
            .send()
            .await;
        let retry_after = match sent {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => {
                let status = r.status();
                last = format!("the receiver answered {}", status.as_u16());
                if !(status.as_u16() == 429 || status.is_server_error()) {
                    return Err(last);
                }
                r.headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs)
            }
            // Without the URL: it may carry a token.
            Err(e) => {
                last = e.without_url().to_string();
                None
            }
        };
        if attempt < ATTEMPTS {
            tokio::time::sleep(retry_after.unwrap_or(wait).min(most_wait)).await;
            wait *= 2;
        }
    }
    Err(format!("{last} ({ATTEMPTS} attempts)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exporter::rules::Sample;

    fn counter(value: f64) -> Sample {
        Sample {
            name: "requests".into(),
            match_name: String::new(),
            metric_type: MetricType::Counter,
            help: String::new(),
            labels: vec![("node".into(), "1".into())],
            value,
        }
    }

    #[test]
    fn a_counters_start_is_the_jvms_or_resets_when_it_goes_down() {
        let mut s = Start::default();
        assert_eq!(s.update(Some(7), &[counter(1.0)], 100), 7_000_000);
        assert_eq!(
            s.update(Some(9), &[counter(0.0)], 200),
            9_000_000,
            "a new JVM start"
        );
        let mut s = Start::default();
        assert_eq!(s.update(None, &[counter(5.0)], 100), 100);
        assert_eq!(
            s.update(None, &[counter(6.0)], 200),
            100,
            "kept while it grows"
        );
        assert_eq!(
            s.update(None, &[counter(1.0)], 300),
            300,
            "went down: restarted"
        );
    }
}
