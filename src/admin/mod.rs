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
