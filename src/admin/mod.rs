//! The admin listener: `/metrics` (Prometheus text), `/healthz` (the
//! process is up), `/readyz` (config loaded, audit log writable, and, when
//! configured, some target reachable) and `/actuator/jolokia` (the
//! gateway's version answer, as Spring Boot's management endpoint gives
//! an agent's). Kept off the Jolokia listeners so probes and scrapes need
//! no credentials and are never exposed with the data path.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

pub mod config;

pub use config::AdminConfig;

use crate::pipeline::Gateway;
use crate::protocol::{Command, Request, Version};

struct Admin {
    gateway: Arc<Gateway>,
    ready_requires_target: bool,
    /// The last target probe: when, and whether some target answered.
    probe: Mutex<Option<(Instant, Result<String, String>)>>,
}

/// How long a target probe result is reused.
const PROBE_TTL: Duration = Duration::from_secs(5);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub fn router(gateway: Arc<Gateway>, config: &AdminConfig) -> Router {
    let admin = Arc::new(Admin {
        gateway,
        ready_requires_target: config.ready_requires_target,
        probe: Mutex::new(None),
    });
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/actuator/jolokia", get(actuator))
        .route("/cluster", get(cluster))
        .route("/cluster/health", get(cluster_health))
        .with_state(admin)
        .layer(axum::middleware::map_response(
            |mut resp: axum::response::Response| async move {
                crate::pipeline::respond::no_sniffing(resp.headers_mut());
                resp
            },
        ))
}

async fn metrics(State(admin): State<Arc<Admin>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        admin.gateway.metrics().encode(),
    )
}

async fn actuator(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> impl IntoResponse {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let value = admin.gateway.version_value(host);
    let body = serde_json::json!({
        "request": {"type": "version"},
        "value": value,
        "timestamp": crate::clock::unix_seconds(),
        "status": 200,
    });
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
}

#[derive(serde::Deserialize)]
struct ClusterQuery {
    target: Option<String>,
}

/// The members as this replica sees them and how many of the fleet's
/// targets each owns; `?target=NAME`: that target's owner.
async fn cluster(
    State(admin): State<Arc<Admin>>,
    query: axum::extract::Query<ClusterQuery>,
) -> axum::response::Response {
    let view = admin.gateway.cluster().view();
    let fleet = admin.gateway.fleet();
    let json = |status, body: serde_json::Value| json_answer(status, body.to_string());
    if let Some(name) = &query.target {
        if fleet.by_name(name).is_none() {
            return json(
                StatusCode::NOT_FOUND,
                serde_json::json!({"error": format!("no target is named {name:?}")}),
            );
        }
        // As every member computes it; `this_replica` says whether this
        // one does the duty now (not while waiting or fenced).
        let owner = view.owner(name).map(str::to_string);
        return json(
            StatusCode::OK,
            serde_json::json!({
                "target": name,
                "owner": owner,
                "this_replica": view.owns(name),
            }),
        );
    }
    // Hashing every target against every member: off the serving loop.
    let counted = {
        let view = view.clone();
        tokio::task::spawn_blocking(move || {
            let mut owned = vec![0usize; view.members.len()];
            for t in fleet.iter() {
                if let Some(owner) = view.owner(&t.name) {
                    if let Some(i) = view.ids().iter().position(|id| id == owner) {
                        owned[i] += 1;
                    }
                }
            }
            (owned, fleet.len())
        })
        .await
    };
    let Ok((owned, targets)) = counted else {
        return json(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": "counting the targets failed"}),
        );
    };
    let now = std::time::SystemTime::now();
    let members: Vec<serde_json::Value> = view
        .members
        .iter()
        .zip(owned)
        .map(|(m, owned)| {
            let renewed = now.checked_sub(m.renewed_ago).unwrap_or(now);
            serde_json::json!({
                "id": m.id,
                "renewed": humantime::format_rfc3339_millis(renewed).to_string(),
                "owned": owned,
                "admin_url": m.admin_url.as_deref(),
            })
        })
        .collect();
    json(
        StatusCode::OK,
        serde_json::json!({
            "replica": &*view.me,
            "membership": view.engine,
            "epoch": view.epoch,
            "duties": view.duties,
            "trouble": view.trouble,
            "targets": targets,
            "members": members,
        }),
    )
}

/// A JSON answer of the admin listener's.
fn json_answer(status: StatusCode, body: String) -> axum::response::Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthQuery {
    #[serde(default)]
    since: u64,
    incarnation: Option<String>,
}

/// What the other replicas read (`jobs/health_view.rs`): the health of
/// the targets this replica owns, changed since `?since=` of book
/// `?incarnation=` (either missing or another book's: all of them).
/// Nothing while this replica does no duties (waiting or fenced).
async fn cluster_health(
    State(admin): State<Arc<Admin>>,
    query: Result<axum::extract::Query<HealthQuery>, axum::extract::rejection::QueryRejection>,
) -> axum::response::Response {
    let query = match query {
        Ok(q) => q.0,
        Err(e) => {
            return json_answer(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": format!("{} (ask ?since=<count>&incarnation=<id>, both from the last answer)", e.body_text())}).to_string(),
            )
        }
    };
    let gateway = admin.gateway.clone();
    // Every target hashed against the members: off the serving loop.
    let report = tokio::task::spawn_blocking(move || {
        let view = gateway.cluster().view();
        let report = gateway
            .health
            .report(query.since, query.incarnation.as_deref(), |name| {
                view.owns(name)
            });
        serde_json::to_string(&report)
    })
    .await;
    match report {
        Ok(Ok(body)) => json_answer(StatusCode::OK, body),
        _ => json_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": "the health report failed"}).to_string(),
        ),
    }
}

async fn readyz(State(admin): State<Arc<Admin>>) -> impl IntoResponse {
    if let Some(why) = admin.gateway.bearer_unready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        );
    }
    if let Some(audit) = admin.gateway.audit() {
        if let Err(reason) = audit.health().check() {
            audit.nudge();
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: audit log: {reason}\n"),
            );
        }
    }
    // Elevation fails closed while its store is away; the gateway serves
    // everything else, so it stays ready and says so.
    let mut detail = crate::doors::access::access_store_trouble(&admin.gateway)
        .map_or(String::new(), |why| {
            format!("; access requests unavailable: {why}")
        });
    // So do OTLP exports that can't push: the door serves on without them.
    for why in crate::jobs::otlp::otlp_trouble(&admin.gateway) {
        detail.push_str("; ");
        detail.push_str(&why);
    }
    // Background work with a cluster that can't be reached, or none at
    // all: the door serves on, and says so.
    let view = admin.gateway.cluster().view();
    if let Some(why) = &view.trouble {
        detail.push_str(&format!(
            "; cluster: {why}, keeping the last membership ({} members)",
            view.members.len()
        ));
    }
    match &view.duties {
        crate::cluster::Duties::Active => {}
        crate::cluster::Duties::Waiting { members, wanted } if members >= wanted => detail
            .push_str(&format!(
                "; cluster: no background work until the next renewal shows which of the {members} members renew"
            )),
        crate::cluster::Duties::Waiting { members, wanted } => detail.push_str(&format!(
            "; cluster: no background work until {wanted} members are seen ({members} so far)"
        )),
        crate::cluster::Duties::Fenced { why } => {
            detail.push_str(&format!("; cluster: fenced, no background work: {why}"))
        }
    }
    if admin.ready_requires_target {
        match admin.target_probe().await {
            Ok(name) => {
                return (
                    StatusCode::OK,
                    format!("ready (target {name} answers){detail}\n"),
                )
            }
            Err(why) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                )
            }
        }
    }
    (StatusCode::OK, format!("ready{detail}\n"))
}

impl Admin {
    /// Asks every target for its version, concurrently; the first to answer
    /// makes the gateway ready.
    async fn target_probe(&self) -> Result<String, String> {
        if let Some((at, result)) = self.probe.lock().ok().and_then(|p| p.clone()) {
            if at.elapsed() < PROBE_TTL {
                return result;
            }
        }
        let fleet = self.gateway.fleet();
        let version = [Request::new(Command::Version(Version))];
        let probes = fleet.iter().map(|t| {
            let version = &version;
            Box::pin(async move {
                match tokio::time::timeout(PROBE_TIMEOUT, t.client.bulk(version)).await {
                    Ok(Ok(answers)) if answers.first().is_some_and(|a| !a.is_error()) => {
                        Ok(t.name.clone())
                    }
                    _ => Err(()),
                }
            })
        });
        let result = if fleet.is_empty() {
            Err("no targets are configured".to_string())
        } else {
            futures::future::select_ok(probes)
                .await
                .map(|(name, _)| name)
                .map_err(|()| format!("none of the {} targets answers", fleet.len()))
        };
        if let Ok(mut p) = self.probe.lock() {
            *p = Some((Instant::now(), result.clone()));
        }
        result
    }
}

/// Serves the admin router until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
