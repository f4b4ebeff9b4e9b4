//! The Prometheus door: `GET [prometheus] path?target=<name or
//! selector>&module=<rules file>`, the multi-target exporter convention
//! (as blackbox_exporter's `/probe`). The caller passes the same admission
//! and authentication as a Jolokia request (`doors::router`); each target
//! it reaches is then scraped through the shared phases
//! (`Gateway::run_items`: route, authorize, dispatch, merge) in two
//! round trips, a `list` (through the shared list cache) and one bulk of
//! reads (`exporter::scrape`), and its samples made with the module's
//! jmx_exporter rules. One audit record per target and scrape, with
//! `"channel":"prometheus"`.
//!
//! A target that fails or refuses is a sample, `jmx_scrape_error 1`, not a
//! failed HTTP request, so the others' samples still arrive; a scrape
//! answers within the scraper's `X-Prometheus-Scrape-Timeout-Seconds`
//! with what it has.

pub mod config;
pub mod exporter;
pub(crate) mod sd;

/// Below `[prometheus] path`: its service discovery.
pub const SD_SUFFIX: &str = "/sd";

pub use config::PrometheusConfig;
pub use exporter::Exporter;

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use futures::StreamExt as _;
use http::{HeaderMap, HeaderValue, Method, Response as HttpResponse};
use serde_json::{json, Value};

use crate::doors::DoorSections;
use crate::exporter::exposition::{Exposition, Format};
use crate::exporter::limits::{Exceeded, Limits};
use crate::exporter::scrape::{PlannedRead, Read};
use crate::exporter::Rules;
use crate::fleet::Target;
use crate::pipeline::state::State;
use crate::pipeline::{
    audit, parse, respond, route, Caller, Gateway, HttpError, Judged, Refused, RequestContext,
};
use crate::protocol::Request;
use exporter::Planned;

/// How one target's scrape went.
pub(crate) struct TargetScrape {
    pub(crate) name: String,
    pub(crate) samples: Vec<crate::exporter::rules::Sample>,
    /// `None` when it went well; else the item status and why.
    pub(crate) error: Option<(u16, String)>,
    denied: usize,
    failed: usize,
    unsupported: usize,
    dropped: usize,
    /// Values left out for their length (`match_length_limit`).
    too_long: usize,
    mbeans: usize,
    seconds: f64,
    /// The bound or cause a failed scrape is reported under.
    reason: &'static str,
}

impl TargetScrape {
    pub(crate) fn failed(name: &str, status: u16, why: String, started: Instant) -> TargetScrape {
        TargetScrape {
            name: name.to_string(),
            samples: Vec::new(),
            error: Some((status, why)),
            denied: 0,
            failed: 0,
            unsupported: 0,
            dropped: 0,
            too_long: 0,
            mbeans: 0,
            seconds: started.elapsed().as_secs_f64(),
            reason: match status {
                403 | 404 => "denied",
                504 => "timeout",
                _ => "error",
            },
        }
    }
}

/// One scrape: the targets the caller reaches, scraped concurrently
/// within the deadline, their samples in one answer.
pub(crate) async fn prometheus_http(
    gateway: &Gateway,
    state: &Arc<State>,
    parts: &http::request::Parts,
    refused: &Refused<'_>,
) -> HttpResponse<Body> {
    let exporter = state.prometheus();
    let _access = &state.access;
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let e = HttpError::new(405, "jmxgate.MethodNotAllowed", "GET the metrics");
        return refused.answer(&e, None, false).await;
    }
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let param = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let Some(target) = param("target").filter(|t| !t.trim().is_empty()) else {
        let e = HttpError::bad_request(
            "Say which target to scrape: ?target=<name>, a glob (orders-*) or a label selector (env=prod)",
        );
        return refused.answer(&e, None, false).await;
    };
    let module_name = param("module").unwrap_or(config::DEFAULT_MODULE);
    let Some(module) = exporter.modules.get(module_name).cloned() else {
        // Neither the name nor the modules there are: a caller learns
        // no more of the configuration than that this one isn't in it.
        let e = HttpError::bad_request("Unknown module");
        return refused.answer(&e, Some(target), false).await;
    };
    let headers = refused.headers;
    let format = Format::negotiate(
        headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    );
    let deadline = Instant::now() + scrape_budget(headers, &exporter.config);
    let limits = exporter.config.limits(deadline);
    let caller = refused.ctx.caller("GET");
    let (targets, mut results) = match scrape_targets(gateway, state, &caller, target) {
        Ok(found) => found,
        Err(e) => return refused.answer(&e, Some(target), false).await,
    };
    let scrapes = futures::stream::iter(targets)
        .map(|t| {
            let (caller, module, limits) = (&caller, &module, &limits);
            async move {
                let started = Instant::now();
                let budget = tokio::time::Instant::from_std(deadline);
                match tokio::time::timeout_at(
                    budget,
                    scrape_one(gateway, state, caller, &t, module, limits),
                )
                .await
                {
                    Ok(scraped) => scraped,
                    Err(_) => TargetScrape::failed(
                        &t.name,
                        504,
                        "did not answer within the scrape timeout".into(),
                        started,
                    ),
                }
            }
        })
        .buffer_unordered(exporter.config.max_concurrent_targets);
    results.extend(scrapes.collect::<Vec<_>>().await);
    results.sort_by(|a, b| a.name.cmp(&b.name));
    if let Err(e) = audit_scrapes(gateway, refused.ctx, module_name, &results).await {
        return respond::http_error(&e, headers, false);
    }
    let target_label = exporter.config.target_label.clone();
    let written = exporter
        .cpu
        .run(move || exposition(results, &target_label, format))
        .await;
    let Some(body) = written else {
        let e = HttpError::new(503, "jmxgate.Unavailable", "The gateway is shutting down");
        return respond::http_error(&e, headers, false);
    };
    let mut resp = HttpResponse::new(Body::from(body));
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    respond::no_store(headers);
    resp
}

/// The targets a scrape's `target` names that the caller may list, and
/// a failed scrape for each one it reaches but may not list. A name
/// the caller doesn't reach is an HTTP 404, as anywhere else.
pub(crate) fn scrape_targets(
    gateway: &Gateway,
    state: &State,
    caller: &Caller<'_>,
    target: &str,
) -> Result<(Vec<Arc<Target>>, Vec<TargetScrape>), HttpError> {
    let parsed = parse::Parsed::typed(vec![Ok(parse::ParsedItem::to(target, Request::list(None)))]);
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let now = Instant::now();
    match gateway.judge(state, caller, addressing, &parsed.items[0]) {
        Judged::Agent { target, .. } => Ok((vec![target], Vec::new())),
        Judged::Group { outcomes, .. } => {
            let mut reached = Vec::new();
            let mut refused = Vec::new();
            for (t, outcome) in outcomes {
                match outcome {
                    Ok(_) => reached.push(t),
                    Err(denied) => {
                        let e = &denied.error;
                        refused.push(TargetScrape::failed(
                            &t.name,
                            e.status,
                            e.message.clone(),
                            now,
                        ))
                    }
                }
            }
            Ok((reached, refused))
        }
        // Denied by policy on a target the caller reaches: a failed
        // scrape of it, saying why.
        Judged::Failed {
            target: Some(name),
            error,
            rule: Some(_),
            hidden: false,
        } if name != "gateway" => Ok((
            Vec::new(),
            vec![TargetScrape::failed(
                &name,
                error.status,
                error.message,
                now,
            )],
        )),
        Judged::Failed { error, .. } => Err(HttpError::new(
            error.status,
            &error.error_type,
            error.message,
        )),
        Judged::Local { .. } => Err(HttpError::bad_request("Name a target to scrape")),
    }
}

/// One target: its `list` (with open types, names in registration
/// order), the plan for it, the reads, the samples. Plans and samples
/// are made in the door's CPU pool, within `limits`.
pub(crate) async fn scrape_one(
    gateway: &Gateway,
    state: &State,
    caller: &Caller<'_>,
    target: &Target,
    module: &Arc<Rules>,
    limits: &Limits,
) -> TargetScrape {
    let started = Instant::now();
    let failed = |status, why| TargetScrape::failed(&target.name, status, why, started);
    let list = Request::list(None)
        .with_param("canonicalNaming", "false")
        .and_then(|r| r.with_param("openTypes", "true"))
        .map(|r| parse::ParsedItem::to(&target.name, r));
    let answers = match scrape_items(gateway, state, caller, parse::Parsed::typed(vec![list])).await
    {
        Ok(a) => a,
        Err(e) => return failed(e.status, e.message),
    };
    let Some(listed) = answers.into_iter().next() else {
        return failed(502, "no answer".into());
    };
    if listed.status() != Some(200) {
        let status = listed.status().unwrap_or(502);
        return failed(status, listed.error_text());
    }
    let Some(raw) = listed.get("value") else {
        return failed(502, "a list answer without a value".into());
    };
    let key = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&target.name, module.name(), raw.get()).hash(&mut h);
        h.finish()
    };
    let exporter = state.prometheus();
    let plan = match exporter.plans.get(&key) {
        Some(plan) => plan,
        None => {
            let (text, for_plan) = (raw.get().to_string(), module.clone());
            let max_beans = limits.sample_limit;
            let made = exporter.cpu.run(move || {
                serde_json::from_str::<Value>(&text)
                    .map(|list| Arc::new(Planned::make(&for_plan, &list, max_beans)))
            });
            match made.await {
                Some(Ok(plan)) => {
                    exporter.plans.insert(key, plan.clone());
                    plan
                }
                Some(Err(e)) => {
                    return failed(
                        502,
                        format!("the agent's MBean list could not be read: {e}"),
                    )
                }
                None => return failed(503, "the gateway is shutting down".into()),
            }
        }
    };
    let reads = plan.reads().reads();
    let mut answered = match read_for(gateway, state, caller, target, reads).await {
        Ok(a) => a,
        Err(e) => return failed(e.status, e.message),
    };
    // A bean whose read failed whole is read again attribute by
    // attribute, now and in later scrapes: one attribute the agent
    // can't serialise costs only itself.
    let again = plan.reads().split_failed(&answered);
    if !again.is_empty() {
        match read_for(gateway, state, caller, target, again).await {
            Ok(more) => answered.extend(more),
            Err(e) => return failed(e.status, e.message),
        }
    }
    let before = plan.reads().estimated_bytes();
    let (for_samples, for_module, limits) = (plan.clone(), module.clone(), *limits);
    let made = exporter.cpu.run(move || {
        let answered = for_samples.reads().assemble(answered);
        for_samples.apply(&for_module, &answered, &limits)
    });
    let Some(scraped) = made.await else {
        return failed(503, "the gateway is shutting down".into());
    };
    // The mappings it remembered grew the plan: weighed again.
    if plan.reads().estimated_bytes() > before.saturating_add(before / 8) {
        exporter.plans.insert(key, plan.clone());
    }
    if let Some(exceeded) = scraped.exceeded {
        let status = if exceeded == Exceeded::Deadline {
            504
        } else {
            502
        };
        let mut failed = failed(status, exceeded.to_string());
        failed.reason = exceeded.key();
        failed.mbeans = plan.reads().beans.len();
        return failed;
    }
    TargetScrape {
        name: target.name.clone(),
        samples: scraped.samples,
        error: None,
        denied: scraped.denied,
        failed: scraped.failed,
        unsupported: scraped.unsupported,
        dropped: scraped.duplicate_labels + scraped.not_numeric,
        too_long: scraped.too_long,
        mbeans: plan.reads().beans.len(),
        seconds: started.elapsed().as_secs_f64(),
        reason: "",
    }
}

/// A plan's reads of one target, answered: each answer as an object
/// of its status and value (parsed in the door's CPU pool).
async fn read_for(
    gateway: &Gateway,
    state: &State,
    caller: &Caller<'_>,
    target: &Target,
    reads: Vec<(Read, PlannedRead)>,
) -> Result<Vec<(Read, Value)>, HttpError> {
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    let items = reads
        .iter()
        .map(|(_, r)| r.clone().map(|r| parse::ParsedItem::to(&target.name, r)))
        .collect();
    let answers = scrape_items(gateway, state, caller, parse::Parsed::typed(items)).await?;
    let parsed = state.prometheus().cpu.run(move || {
        reads
            .into_iter()
            .zip(&answers)
            .map(|((read, _), answer)| {
                let value = answer
                    .get("value")
                    .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                    .unwrap_or(Value::Null);
                let mut object = json!({"status": answer.status().unwrap_or(502), "value": value});
                if answer.status() != Some(200) {
                    object["error"] = json!(answer.error_text());
                    if let Some(t) = answer.get("error_type") {
                        object["error_type"] = serde_json::from_str(t.get()).unwrap_or(Value::Null);
                    }
                }
                (read, object)
            })
            .collect()
    });
    parsed
        .await
        .ok_or_else(|| HttpError::new(503, "jmxgate.Unavailable", "The gateway is shutting down"))
}

/// The scrape's own items through route, authorize, dispatch and
/// merge, for the caller; audited per scrape, not per item.
pub(crate) async fn scrape_items(
    gateway: &Gateway,
    state: &State,
    caller: &Caller<'_>,
    parsed: parse::Parsed,
) -> Result<Vec<crate::protocol::Response>, HttpError> {
    let local = |command: &crate::protocol::Command| {
        gateway.answer_locally(state, caller.ctx, command, None)
    };
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let ((), merged) = gateway
        .run_items(state, caller, addressing, &parsed, local, |_| {
            Ok::<_, HttpError>(())
        })
        .await?;
    Ok(merged.into_iter().map(|(answer, _)| answer).collect())
}

/// One record per target scraped, and the scrape metrics.
async fn audit_scrapes(
    gateway: &Gateway,
    ctx: &RequestContext,
    module: &str,
    results: &[TargetScrape],
) -> Result<(), HttpError> {
    for r in results {
        let (decision, status) = match &r.error {
            None => ("allowed", 200),
            Some((status @ (403 | 404), _)) => ("denied", *status),
            Some((status, _)) => ("allowed", *status),
        };
        let note = match &r.error {
            None => format!(
                "module {module}: {} samples from {} MBeans; {} attributes denied, {} failed, {} not supported, {} samples dropped, {} values too long to match",
                r.samples.len(),
                r.mbeans,
                r.denied,
                r.failed,
                r.unsupported,
                r.dropped,
                r.too_long
            ),
            Some((_, why)) => format!("module {module}: scrape failed: {why}"),
        };
        gateway
            .metrics
            .prometheus_scrapes
            .get_or_create(&crate::metrics::ScrapeLabels {
                module: module.to_string(),
                result: if r.error.is_none() { "ok" } else { "error" }.into(),
            })
            .inc();
        let record = audit::RequestRecord {
            who: &ctx.who(),
            event: "scrape",
            decision,
            status,
            error_type: None,
            target: Some(&r.name),
            note: &note,
        };
        gateway.record(audit::Event::Request(record)).await?;
    }
    Ok(())
}

/// How long a scrape may take: the scraper's own timeout less the offset,
/// else the default; at least a tenth of a second.
fn scrape_budget(headers: &HeaderMap, config: &PrometheusConfig) -> Duration {
    let told = headers
        .get("x-prometheus-scrape-timeout-seconds")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)));
    match told {
        Some(t) => t.saturating_sub(config.timeout_offset),
        None => config.default_timeout,
    }
    .max(Duration::from_millis(100))
}

/// The families the door writes itself for each target: an agent's
/// samples under these names are left out (and counted as dropped), so
/// no MBean can set or retype them.
const OWN_FAMILIES: [&str; 8] = [
    "jmx_scrape_error",
    "jmx_scrape_duration_seconds",
    "jmxgate_scrape_denied_attributes",
    "jmxgate_scrape_failed_attributes",
    "jmxgate_scrape_unsupported_attributes",
    "jmxgate_scrape_dropped_samples",
    "jmxgate_scrape_samples",
    "jmxgate_scrape_failure",
];

/// Every target's samples and the gateway's own per target: whether the
/// scrape failed (and why, by bound or cause), how long it took, what the
/// policy and the bounds left out.
fn exposition(results: Vec<TargetScrape>, target_label: &str, format: Format) -> String {
    let mut e = Exposition::default();
    for r in results {
        let labels = [(target_label.to_string(), r.name.clone())];
        let samples = r.samples.len();
        // OpenTelemetry rules' points under OpenTelemetry's Prometheus names.
        let samples_written = crate::exporter::otel::prometheus::to_prometheus(r.samples);
        let left_out = e.add_target(samples_written, &labels, &OWN_FAMILIES);
        let samples = samples - left_out;
        let mut gauge =
            |name: &str, help: &str, value: f64| e.add_gauge(name, help, &labels, value);
        gauge(
            "jmx_scrape_error",
            "Non-zero if this scrape failed.",
            if r.error.is_some() { 1.0 } else { 0.0 },
        );
        gauge(
            "jmx_scrape_duration_seconds",
            "Time this JMX scrape took, in seconds.",
            r.seconds,
        );
        gauge(
            "jmxgate_scrape_denied_attributes",
            "Attributes the caller's policy did not let this scrape read.",
            r.denied as f64,
        );
        gauge(
            "jmxgate_scrape_failed_attributes",
            "Attributes the agent could not read in this scrape.",
            r.failed as f64,
        );
        gauge(
            "jmxgate_scrape_unsupported_attributes",
            "Attributes the agent says the MBean does not support, or write-only ones: never readable, not a failure.",
            r.unsupported as f64,
        );
        gauge(
            "jmxgate_scrape_dropped_samples",
            "Samples left out: a label given twice, a value too long to match rules against (prometheus.match_length_limit), a name the gateway writes itself, a value an OpenTelemetry rule wants as a number that is none.",
            (r.dropped + r.too_long + left_out) as f64,
        );
        gauge(
            "jmxgate_scrape_samples",
            "Samples this scrape produced for the target.",
            samples as f64,
        );
        if r.error.is_some() {
            let mut why = labels.to_vec();
            why.push(("reason".into(), r.reason.into()));
            e.add_gauge(
                "jmxgate_scrape_failure",
                "Why this target's scrape failed: a bound (the prometheus.* key it went over), timeout, denied or error.",
                &why,
                1.0,
            );
        }
    }
    e.write(format)
}
