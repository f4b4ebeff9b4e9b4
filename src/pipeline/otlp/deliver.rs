//! An export's sender: queued requests go out in order. 429, 5xx and
//! connection failures are retried with doubling waits (`Retry-After`
//! honoured); a request the receiver refuses as bad (400) or too large
//! (413) is halved and the halves sent, down to the single points it
//! refuses, which are dropped and counted: one bad point never costs the
//! rest of a push.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use prost::Message as _;

use super::{Export, ExportSettings, Pending};
use crate::exporter::otlp;
use crate::pipeline::Gateway;

/// Attempts per request, and the first wait between them (doubling, at
/// most the export's interval).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Requests one refused request may become while its bad points are
/// looked for; past it, what is left is dropped (counted).
const MAX_HALVED_REQUESTS: usize = 64;
/// Bytes of a refusal's body kept for the log, and of an answer read.
const REASON_BYTES: usize = 200;
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub(super) fn client(settings: &ExportSettings) -> Result<reqwest::Client, String> {
    let tls = crate::client::tls_config(
        settings.ca_file.as_deref(),
        settings.client_identity.as_ref(),
        false,
    )
    .map_err(|e| e.to_string())?;
    let mut headers = http::HeaderMap::new();
    for (name, value) in &settings.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
        let mut value = http::HeaderValue::from_str(value.resolve()?.expose())
            .map_err(|_| format!("header {name}: not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .default_headers(headers)
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}

/// How one request ended.
enum Outcome {
    /// Taken; `rejected` points of it the receiver said it dropped
    /// (OTLP partial success).
    Taken { rejected: u64 },
    /// Refused as it is (400, 413): halving may help.
    Refused { status: u16, why: String },
    /// Not delivered after every retry.
    Failed(String),
}

/// Sends an export's queued requests in order while the export runs.
pub(super) async fn send_loop(gateway: Weak<Gateway>, export: Arc<Export>, http: reqwest::Client) {
    loop {
        let next = export.queue.lock().expect("queue lock").pop_front();
        let Some(pending) = next else {
            export.queued.notified().await;
            continue;
        };
        send(&gateway, &export, &http, pending).await;
    }
}

async fn send(gateway: &Weak<Gateway>, export: &Export, http: &reqwest::Client, first: Pending) {
    let name = &export.settings.name;
    let mut parts = vec![first];
    let mut made = 1;
    while let Some(part) = parts.pop() {
        let outcome = post(http, &export.settings, &part.body).await;
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        match outcome {
            Outcome::Taken { rejected } => {
                let rejected = rejected.min(part.points);
                gateway
                    .metrics
                    .otlp(true, name, "sent", part.points - rejected);
                if rejected > 0 {
                    tracing::warn!(export = %name, rejected, "the OTLP receiver dropped points of a request it took");
                    gateway.metrics.otlp(true, name, "rejected", rejected);
                }
                gateway
                    .metrics
                    .otlp_last_success
                    .get_or_create(&crate::metrics::ExportLabel {
                        export: name.clone(),
                    })
                    .set((super::push::unix_nano(SystemTime::now()) / 1_000_000_000) as i64);
                export.set_trouble(None);
            }
            Outcome::Refused { status, why } => {
                let points = part.points;
                let halved = if made + 2 <= MAX_HALVED_REQUESTS {
                    let state = gateway.state.load_full();
                    state
                        .prometheus
                        .cpu
                        .run(move || {
                            otlp::halves(part.request).map(|(a, b)| [encoded(a), encoded(b)])
                        })
                        .await
                        .flatten()
                } else {
                    None
                };
                match halved {
                    Some([a, b]) => {
                        made += 2;
                        // `a` goes first.
                        parts.push(b);
                        parts.push(a);
                    }
                    None => {
                        let hint = if status == 413 {
                            " (lower max_request_bytes)"
                        } else {
                            ""
                        };
                        tracing::warn!(export = %name, points, "OTLP points dropped: the receiver answered {status}{hint}: {why}");
                        gateway.metrics.otlp(true, name, "rejected", points);
                        export.set_trouble(Some(format!(
                            "the receiver refused {points} points ({status}): {why}"
                        )));
                    }
                }
            }
            Outcome::Failed(why) => {
                tracing::warn!(export = %name, points = part.points, "OTLP request not delivered: {why}");
                gateway.metrics.otlp(true, name, "failed", part.points);
                export.set_trouble(Some(format!("the last request was not delivered: {why}")));
            }
        }
    }
}

fn encoded(
    request: opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest,
) -> Pending {
    Pending {
        body: otlp::gzip(&request.encode_to_vec()),
        points: otlp::points(&request),
        request,
    }
}

/// One request, retried on 429, 5xx and connection failures with
/// doubling waits (a `Retry-After` in seconds is honoured; both at most
/// the interval).
async fn post(http: &reqwest::Client, settings: &ExportSettings, body: &[u8]) -> Outcome {
    let mut wait = FIRST_BACKOFF;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let sent = http
            .post(&settings.url)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .header(http::header::CONTENT_ENCODING, "gzip")
            .body(body.to_vec())
            .send()
            .await;
        let retry_after = match sent {
            Ok(r) if r.status().is_success() => {
                let rejected = ExportMetricsServiceResponse::decode(
                    at_most(r, MAX_RESPONSE_BYTES).await.as_slice(),
                )
                .ok()
                .and_then(|r| r.partial_success)
                .map_or(0, |p| p.rejected_data_points.max(0) as u64);
                return Outcome::Taken { rejected };
            }
            Ok(r) => {
                let status = r.status();
                let retry_after = r
                    .headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let why = reason(r).await;
                if matches!(status.as_u16(), 400 | 413) {
                    return Outcome::Refused {
                        status: status.as_u16(),
                        why,
                    };
                }
                last = format!("the receiver answered {}: {why}", status.as_u16());
                if !(status.as_u16() == 429 || status.is_server_error()) {
                    return Outcome::Failed(last);
                }
                retry_after
            }
            // Without the URL: it may carry a token.
            Err(e) => {
                last = e.without_url().to_string();
                None
            }
        };
        if attempt < ATTEMPTS {
            tokio::time::sleep(retry_after.unwrap_or(wait).min(settings.interval)).await;
            wait *= 2;
        }
    }
    Outcome::Failed(format!("{last} ({ATTEMPTS} attempts)"))
}

/// The start of a refusal's body, as text on one line (an OTLP `Status`
/// in protobuf shows its message's printable bytes).
async fn reason(r: reqwest::Response) -> String {
    let bytes = at_most(r, REASON_BYTES).await;
    let text: String = String::from_utf8_lossy(&bytes[..bytes.len().min(REASON_BYTES)])
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        "no reason given".into()
    } else {
        text
    }
}

/// The first `n` bytes of an answer's body (the receiver decides its
/// size, so the rest is not read).
async fn at_most(mut r: reqwest::Response, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < n {
        match r.chunk().await {
            Ok(Some(chunk)) => out.extend_from_slice(&chunk[..chunk.len().min(n - out.len())]),
            _ => break,
        }
    }
    out
}
