//! An export's sender: queued requests go out in order, over OTLP/HTTP or
//! OTLP/gRPC. 429, 5xx, gRPC's retryable codes and connection failures
//! are retried with doubling waits (`Retry-After` and `RetryInfo`
//! honoured); a request the receiver refuses as bad (400,
//! `INVALID_ARGUMENT`) or too large (413, `RESOURCE_EXHAUSTED` without a
//! retry delay) is halved and the halves sent, down to the single points
//! it refuses, which are dropped and counted: one bad point never costs
//! the rest of a push.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use prost::Message as _;

use super::config::Protocol;
use super::{Export, ExportSettings, Pending};
use crate::exporter::{otlp, otlp_grpc};
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
    let mut tls = crate::client::tls_config(
        settings.ca_file.as_deref(),
        settings.client_identity.as_ref(),
        false,
    )
    .map_err(|e| e.to_string())?;
    if settings.protocol == Protocol::Grpc {
        tls.alpn_protocols = vec![b"h2".to_vec()];
    }
    let mut headers = http::HeaderMap::new();
    for (name, value) in &settings.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
        let mut value = http::HeaderValue::from_str(value.resolve()?.expose())
            .map_err(|_| format!("header {name}: not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let builder = match settings.protocol {
        Protocol::HttpProtobuf => reqwest::Client::builder(),
        Protocol::Grpc => reqwest::Client::builder().http2_prior_knowledge(),
    };
    builder
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
    /// Refused as it is (400, 413, their gRPC codes): halving may help.
    Refused {
        answer: String,
        too_large: bool,
        why: String,
    },
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
            Outcome::Refused {
                answer,
                too_large,
                why,
            } => {
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
                        let hint = if too_large {
                            " (lower max_request_bytes)"
                        } else {
                            ""
                        };
                        tracing::warn!(export = %name, points, "OTLP points dropped: the receiver answered {answer}{hint}: {why}");
                        gateway.metrics.otlp(true, name, "rejected", points);
                        export.set_trouble(Some(format!(
                            "the receiver refused {points} points ({answer}): {why}"
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

/// How one attempt at a request ended.
enum Attempt {
    Done(Outcome),
    /// Worth another try, after the receiver's delay if it gave one.
    Retry {
        why: String,
        after: Option<Duration>,
    },
}

/// One request, retried on what the protocol calls passing trouble with
/// doubling waits (the receiver's own delay honoured; both at most the
/// interval).
async fn post(http: &reqwest::Client, settings: &ExportSettings, body: &[u8]) -> Outcome {
    let mut wait = FIRST_BACKOFF;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let tried = match settings.protocol {
            Protocol::HttpProtobuf => post_http(http, settings, body).await,
            Protocol::Grpc => call_grpc(http, settings, body).await,
        };
        let after = match tried {
            Attempt::Done(outcome) => return outcome,
            Attempt::Retry { why, after } => {
                last = why;
                after
            }
        };
        if attempt < ATTEMPTS {
            tokio::time::sleep(after.unwrap_or(wait).min(settings.interval)).await;
            wait *= 2;
        }
    }
    Outcome::Failed(format!("{last} ({ATTEMPTS} attempts)"))
}

/// A request that got no answer: worth another try. Said without the URL:
/// it may carry a token.
fn unsent(e: reqwest::Error) -> Attempt {
    Attempt::Retry {
        why: e.without_url().to_string(),
        after: None,
    }
}

/// One OTLP/HTTP attempt.
async fn post_http(http: &reqwest::Client, settings: &ExportSettings, body: &[u8]) -> Attempt {
    let sent = http
        .post(&settings.url)
        .header(http::header::CONTENT_TYPE, "application/x-protobuf")
        .header(http::header::CONTENT_ENCODING, "gzip")
        .body(body.to_vec())
        .send()
        .await;
    let r = match sent {
        Ok(r) => r,
        Err(e) => return unsent(e),
    };
    let status = r.status();
    if status.is_success() {
        let rejected = rejected_of(&at_most(r, MAX_RESPONSE_BYTES).await);
        return Attempt::Done(Outcome::Taken { rejected });
    }
    let after = r
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let why = reason(r).await;
    let code = status.as_u16();
    if matches!(code, 400 | 413) {
        return Attempt::Done(Outcome::Refused {
            answer: code.to_string(),
            too_large: code == 413,
            why,
        });
    }
    let why = format!("the receiver answered {code}: {why}");
    if code == 429 || status.is_server_error() {
        Attempt::Retry { why, after }
    } else {
        Attempt::Done(Outcome::Failed(why))
    }
}

/// One OTLP/gRPC attempt: a unary `Export` call over HTTP/2, its status
/// from the trailers (or the headers of a trailers-only answer).
async fn call_grpc(http: &reqwest::Client, settings: &ExportSettings, body: &[u8]) -> Attempt {
    use http_body_util::BodyExt as _;

    let sent = http
        .post(&settings.url)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .header("grpc-encoding", "gzip")
        .header("grpc-accept-encoding", "gzip")
        .header("grpc-timeout", format!("{}m", settings.timeout.as_millis()))
        .body(otlp_grpc::frame(body))
        .send()
        .await;
    let r = match sent {
        Ok(r) => r,
        Err(e) => return unsent(e),
    };
    let http_status = r.status().as_u16();
    let (head, mut answer) = http::Response::<reqwest::Body>::from(r).into_parts();
    let mut status = head.headers;
    let mut message = Vec::new();
    if http_status == 200 && !status.contains_key("grpc-status") {
        // The message, then the trailers; what a receiver sends past the
        // bound is read and let go.
        while let Some(frame) = answer.frame().await {
            let Ok(frame) = frame else { break };
            match frame.into_data() {
                Ok(data) => {
                    let room = MAX_RESPONSE_BYTES.saturating_sub(message.len());
                    message.extend_from_slice(&data[..data.len().min(room)]);
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        status.extend(trailers);
                    }
                }
            }
        }
    }
    let text = |name: &str| status.get(name).and_then(|v| v.to_str().ok());
    let code = match (http_status, text("grpc-status")) {
        (200, Some(code)) => code.trim().parse().unwrap_or(2),
        (200, None) => 2,
        (other, _) => otlp_grpc::code_of_http(other),
    };
    let name = otlp_grpc::code_name(code);
    let why = match text("grpc-message").map(otlp_grpc::message) {
        Some(m) if !m.trim().is_empty() => one_line(&m),
        _ if http_status != 200 => format!("HTTP {http_status}"),
        _ if code == 2 => "no grpc-status in the answer".into(),
        _ => "no reason given".into(),
    };
    match otlp_grpc::verdict(code, text("grpc-status-details-bin")) {
        otlp_grpc::Verdict::Taken => {
            let gzip = text("grpc-encoding") == Some("gzip");
            let rejected = otlp_grpc::first_message(&message, gzip, MAX_RESPONSE_BYTES)
                .map_or(0, |m| rejected_of(&m));
            Attempt::Done(Outcome::Taken { rejected })
        }
        otlp_grpc::Verdict::Retry(after) => Attempt::Retry {
            why: format!("the receiver answered {name}: {why}"),
            after,
        },
        otlp_grpc::Verdict::Refused { too_large } => Attempt::Done(Outcome::Refused {
            answer: name.to_string(),
            too_large,
            why,
        }),
        otlp_grpc::Verdict::Failed => Attempt::Done(Outcome::Failed(format!(
            "the receiver answered {name}: {why}"
        ))),
    }
}

/// Points a taken request's answer says were dropped (OTLP partial
/// success).
fn rejected_of(answer: &[u8]) -> u64 {
    ExportMetricsServiceResponse::decode(answer)
        .ok()
        .and_then(|r| r.partial_success)
        .map_or(0, |p| p.rejected_data_points.max(0) as u64)
}

/// The start of a refusal's body, as text on one line (an OTLP `Status`
/// in protobuf shows its message's printable bytes).
async fn reason(r: reqwest::Response) -> String {
    let bytes = at_most(r, REASON_BYTES).await;
    let text = one_line(&String::from_utf8_lossy(
        &bytes[..bytes.len().min(REASON_BYTES)],
    ));
    if text.is_empty() {
        "no reason given".into()
    } else {
        text
    }
}

/// A receiver's words on one line, at most `REASON_BYTES` characters.
fn one_line(text: &str) -> String {
    let text: String = text
        .chars()
        .take(REASON_BYTES)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
