//! An export's sender: queued requests go out in order, over OTLP/HTTP or
//! OTLP/gRPC. 429, 5xx, gRPC's retryable codes and connection failures
//! are retried with doubling waits (`Retry-After` and `RetryInfo`
//! honoured); a request the receiver refuses as bad (400,
//! `INVALID_ARGUMENT`) or too large (413, `RESOURCE_EXHAUSTED` without a
//! retry delay) is halved and the halves sent, down to the single points
//! it refuses, which are dropped and counted: one bad point never costs
//! the rest of a push. The halves go a level at a time, so that a
//! receiver refusing a push's every request as bad, the first and two
//! levels of its halves, is seen to refuse the push as such: the rest of
//! it is dropped, counted, without more requests.
//!
//! A refusal of the request as a whole rather than of its points (401,
//! 403, 404, 405, 415, gRPC's UNAUTHENTICATED, PERMISSION_DENIED,
//! UNIMPLEMENTED; or a 400 that a request without points gets too, as
//! VictoriaMetrics answers a path it doesn't serve) is a configuration
//! error: said once per push, its other requests not sent, never halved.
//!
//! `/readyz` hears only how a request ended; the receiver's words go to
//! the log, masked of the export's own values (`reason`).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use prost::Message as _;

use super::config::Protocol;
use super::reason::{self, Masks};
use super::{Export, ExportSettings, Pending};
use crate::doors::DoorSections;
use crate::exporter::{otlp, otlp_grpc};
use crate::pipeline::Gateway;

/// Attempts per request, and the first wait between them (doubling, at
/// most the export's interval).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Requests one refused request may become while its bad points are
/// looked for; past it, what is left is dropped (counted).
const MAX_HALVED_REQUESTS: usize = 64;
/// Requests of one push a receiver may refuse as bad (400,
/// `INVALID_ARGUMENT`) before it took any of its points: the first and two
/// levels of its halves. Past it the receiver refuses the push as such.
/// (Two bad points may fall one in each half; among four parts, three bad
/// points leave one to take.) Refusals for size don't count: halving is
/// what makes those fit.
const MAX_REFUSED_UNTAKEN: usize = 7;
/// Bytes of an answer read (a taken one's, for partial success).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// What an export sends with: the client, and what its log masks.
pub(crate) struct Sender {
    http: reqwest::Client,
    masks: Masks,
}

/// The export's client (its TLS, headers, timeout) and its masks.
pub(crate) fn sender(settings: &ExportSettings) -> Result<Sender, String> {
    let mut values = Vec::new();
    for value in settings.headers.values() {
        values.push(value.resolve()?);
    }
    let url =
        url::Url::parse(&settings.url).map_err(|_| "the endpoint is not a URL".to_string())?;
    Ok(Sender {
        http: client(settings)?,
        masks: Masks::new(values.iter().map(|v| v.expose()), &url),
    })
}

fn client(settings: &ExportSettings) -> Result<reqwest::Client, String> {
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

/// How one request ended. `status` is what `/readyz` says (never the
/// receiver's words); `said` is for the log, masked.
enum Outcome {
    /// Taken; `rejected` points of it the receiver said it dropped
    /// (OTLP partial success).
    Taken { rejected: u64 },
    /// Refused as it is (400, 413, their gRPC codes): halving may help.
    /// `answer`: `HTTP 400`, `INVALID_ARGUMENT`.
    Refused {
        answer: String,
        too_large: bool,
        said: String,
    },
    /// Not delivered after every retry.
    Failed { status: String, said: String },
    /// Refused as a request, whatever it holds (the endpoint's path, the
    /// credentials, the content type): no point of the push can go.
    Unusable { answer: String, said: String },
}

/// How the receiver has answered the push being sent, so far.
#[derive(Debug, Default)]
struct PushSoFar {
    push: u64,
    /// Some of its points were taken: the receiver takes this push's
    /// points, so refusals are bad points to look for.
    taken: bool,
    /// Requests of it refused as bad.
    refused: usize,
    /// The receiver refuses it as such: its other requests are not sent.
    refused_whole: bool,
    /// A 400 of it was checked against a request without points.
    checked_empty: bool,
    /// Some of its points were refused one by one (or by partial
    /// success), or not delivered.
    rejected: bool,
    failed: bool,
}

impl PushSoFar {
    /// The state for `push`'s next request: the same, or a new push's.
    fn for_push(&mut self, push: u64) -> &mut Self {
        if self.push != push {
            *self = PushSoFar {
                push,
                ..PushSoFar::default()
            };
        }
        self
    }

    /// The push's outcome, for `jmxgate_otlp_pushes_total`, once its last
    /// request is handled.
    fn outcome(&self) -> &'static str {
        if self.refused_whole {
            "refused"
        } else if self.failed {
            "failed"
        } else if self.rejected {
            "partial"
        } else {
            "delivered"
        }
    }

    /// A request of the push was refused as bad: whether the receiver now
    /// refuses the push as such.
    fn refused_as_bad(&mut self) -> bool {
        self.refused += 1;
        self.refused_whole = !self.taken && self.refused >= MAX_REFUSED_UNTAKEN;
        self.refused_whole
    }
}

/// Sends an export's queued requests in order while the export runs.
pub(crate) async fn send_loop(gateway: Weak<Gateway>, export: Arc<Export>, sender: Sender) {
    let mut so_far = PushSoFar::default();
    loop {
        let next = export.queue.lock().expect("queue lock").pop_front();
        let Some(pending) = next else {
            export.queued.notified().await;
            continue;
        };
        let push = so_far.for_push(pending.push);
        let last = pending.last;
        if push.refused_whole {
            // Said once, when the receiver refused it.
            let Some(gateway) = gateway.upgrade() else {
                return;
            };
            let outcome = if push.taken { "rejected" } else { "failed" };
            gateway
                .metrics
                .otlp(true, &export.settings.name, outcome, pending.points);
        } else {
            send(&gateway, &export, &sender, pending, push).await;
        }
        if last {
            let Some(gateway) = gateway.upgrade() else {
                return;
            };
            gateway
                .metrics
                .otlp(false, &export.settings.name, push.outcome(), 1);
        }
    }
}

/// One queued request, and the halves it becomes while the receiver
/// refuses parts of it (sent a level at a time).
async fn send(
    gateway: &Weak<Gateway>,
    export: &Export,
    sender: &Sender,
    first: Pending,
    push: &mut PushSoFar,
) {
    let name = &export.settings.name;
    let mut parts = VecDeque::from([first]);
    let mut made = 1;
    // Points refused one by one (counted at once), said once at the end:
    // how many, and the last refusal.
    let mut dropped = 0;
    let mut last_refusal = None;
    while let Some(part) = parts.pop_front() {
        let outcome = post(sender, &export.settings, &part.body).await;
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        match outcome {
            Outcome::Taken { rejected } => {
                push.taken = true;
                let rejected = rejected.min(part.points);
                gateway
                    .metrics
                    .otlp(true, name, "sent", part.points - rejected);
                if rejected > 0 {
                    push.rejected = true;
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
            Outcome::Unusable { answer, said } => {
                unusable(&gateway, export, push, &part, &parts, &answer, &said);
                return;
            }
            Outcome::Refused {
                answer,
                too_large,
                said,
            } => {
                if !too_large && !push.taken && !push.checked_empty {
                    // Bad points, or a request this receiver never takes?
                    // A request without points tells, once per push.
                    push.checked_empty = true;
                    let empty = post(sender, &export.settings, &empty_request()).await;
                    if !matches!(empty, Outcome::Taken { .. }) {
                        unusable(&gateway, export, push, &part, &parts, &answer, &said);
                        return;
                    }
                }
                if !too_large && push.refused_as_bad() {
                    let points = part.points + parts.iter().map(|p| p.points).sum::<u64>();
                    tracing::warn!(
                        export = %name,
                        points = points + dropped,
                        "OTLP push refused: the receiver answered {answer} to its every request \
                         ({MAX_REFUSED_UNTAKEN}, none taken); its points are dropped, and its \
                         other requests not sent: {said}"
                    );
                    gateway.metrics.otlp(true, name, "rejected", points);
                    export.set_trouble(Some(format!(
                        "the receiver refused every request of a push ({answer})"
                    )));
                    return;
                }
                let points = part.points;
                let halved = if made + 2 <= MAX_HALVED_REQUESTS {
                    let state = gateway.state.load_full();
                    let of_push = part.push;
                    state
                        .prometheus()
                        .cpu
                        .run(move || {
                            otlp::halves(part.request)
                                .map(|(a, b)| [encoded(a, of_push), encoded(b, of_push)])
                        })
                        .await
                        .flatten()
                } else {
                    None
                };
                match halved {
                    Some([a, b]) => {
                        made += 2;
                        parts.push_back(a);
                        parts.push_back(b);
                    }
                    None => {
                        push.rejected = true;
                        gateway.metrics.otlp(true, name, "rejected", points);
                        dropped += points;
                        last_refusal = Some((answer, too_large, said));
                    }
                }
            }
            Outcome::Failed { status, said } => {
                push.failed = true;
                tracing::warn!(export = %name, points = part.points, "OTLP request not delivered: {status}: {said}");
                gateway.metrics.otlp(true, name, "failed", part.points);
                export.set_trouble(Some(format!(
                    "the last request was not delivered: {status}"
                )));
            }
        }
    }
    if let Some((answer, too_large, said)) = last_refusal {
        let hint = if too_large {
            " (lower max_request_bytes)"
        } else {
            ""
        };
        tracing::warn!(export = %name, points = dropped, "OTLP points dropped: the receiver answered {answer}{hint}: {said}");
        export.set_trouble(Some(format!(
            "the receiver refused {} ({answer})",
            reason::points(dropped)
        )));
    }
}

/// The push's requests are refused as requests: said once, in words an
/// operator can act on, its points counted as failed and its other
/// requests not sent.
fn unusable(
    gateway: &Gateway,
    export: &Export,
    push: &mut PushSoFar,
    part: &Pending,
    rest: &VecDeque<Pending>,
    answer: &str,
    said: &str,
) {
    let name = &export.settings.name;
    let points = part.points + rest.iter().map(|p| p.points).sum::<u64>();
    push.refused_whole = true;
    tracing::warn!(
        export = %name,
        points,
        "OTLP push not delivered: the receiver answered {answer} to the request itself, \
         whatever its points; check the export's endpoint (its path: VictoriaMetrics \
         takes OTLP at /opentelemetry/v1/metrics, a Collector at /v1/metrics), its \
         headers and credentials: {said}"
    );
    gateway.metrics.otlp(true, name, "failed", points);
    export.set_trouble(Some(format!(
        "the receiver refuses the export's requests ({answer}): check its endpoint and credentials"
    )));
}

/// A request without points, gzipped as every request: what a receiver
/// takes whenever it takes OTLP at all.
fn empty_request() -> Vec<u8> {
    otlp::gzip(
        &opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest::default()
            .encode_to_vec(),
    )
}

fn encoded(
    request: opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest,
    push: u64,
) -> Pending {
    Pending {
        push,
        body: otlp::gzip(&request.encode_to_vec()),
        points: otlp::points(&request),
        request,
        last: false,
    }
}

/// How one attempt at a request ended.
enum Attempt {
    Done(Outcome),
    /// Worth another try, after the receiver's delay if it gave one.
    Retry {
        status: String,
        said: String,
        after: Option<Duration>,
    },
}

/// One request, retried on what the protocol calls passing trouble with
/// doubling waits (the receiver's own delay honoured; both at most the
/// interval).
async fn post(sender: &Sender, settings: &ExportSettings, body: &[u8]) -> Outcome {
    let mut wait = FIRST_BACKOFF;
    let mut last = (String::new(), String::new());
    for attempt in 1..=ATTEMPTS {
        let tried = match settings.protocol {
            Protocol::HttpProtobuf => post_http(sender, settings, body).await,
            Protocol::Grpc => call_grpc(sender, settings, body).await,
        };
        let after = match tried {
            Attempt::Done(outcome) => return outcome,
            Attempt::Retry {
                status,
                said,
                after,
            } => {
                last = (status, said);
                after
            }
        };
        if attempt < ATTEMPTS {
            tokio::time::sleep(after.unwrap_or(wait).min(settings.interval)).await;
            wait *= 2;
        }
    }
    let (status, said) = last;
    Outcome::Failed {
        status: format!("{status} ({ATTEMPTS} attempts)"),
        said,
    }
}

/// A request that got no answer: worth another try. `/readyz` hears what
/// kind of failure; the log the error, said without the URL (it may carry
/// a token) and masked.
fn unsent(e: reqwest::Error, masks: &Masks) -> Attempt {
    let status = if e.is_timeout() {
        "no answer within the timeout".to_string()
    } else if e.is_connect() {
        match io_cause(&e) {
            Some(why) => format!("could not connect: {why}"),
            None => "could not connect".to_string(),
        }
    } else {
        "no answer".to_string()
    };
    let e = e.without_url();
    let mut said = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        said.push_str(": ");
        said.push_str(&cause.to_string());
        source = cause.source();
    }
    let said = reason::excerpt(said.as_bytes(), false, masks);
    Attempt::Retry {
        status,
        said,
        after: None,
    }
}

/// What the system said of a connection that failed, in its words
/// ("connection refused"), when an I/O error is among `e`'s causes; a
/// DNS failure says the name didn't resolve.
fn io_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                std::io::ErrorKind::TimedOut => "the connection timed out".into(),
                std::io::ErrorKind::HostUnreachable => "host unreachable".into(),
                std::io::ErrorKind::NetworkUnreachable => "network unreachable".into(),
                std::io::ErrorKind::ConnectionReset => "the connection was reset".into(),
                _ => {
                    let text = io.to_string();
                    if text.contains("failed to lookup") || text.contains("resolve") {
                        "the host name did not resolve".into()
                    } else {
                        text
                    }
                }
            });
        }
        source = cause.source();
    }
    None
}

/// One OTLP/HTTP attempt.
async fn post_http(sender: &Sender, settings: &ExportSettings, body: &[u8]) -> Attempt {
    let sent = sender
        .http
        .post(&settings.url)
        .header(http::header::CONTENT_TYPE, "application/x-protobuf")
        .header(http::header::CONTENT_ENCODING, "gzip")
        .body(body.to_vec())
        .send()
        .await;
    let r = match sent {
        Ok(r) => r,
        Err(e) => return unsent(e, &sender.masks),
    };
    let status = r.status();
    if status.is_success() {
        let (answer, _) = at_most(r, MAX_RESPONSE_BYTES).await;
        return Attempt::Done(Outcome::Taken {
            rejected: rejected_of(&answer),
        });
    }
    let after = r
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let (words, cut) = at_most(r, sender.masks.bytes_to_read()).await;
    let said = reason::excerpt(&words, cut, &sender.masks);
    let code = status.as_u16();
    if matches!(code, 401 | 403 | 404 | 405 | 415) {
        return Attempt::Done(Outcome::Unusable {
            answer: format!("HTTP {code}"),
            said,
        });
    }
    if matches!(code, 400 | 413) {
        return Attempt::Done(Outcome::Refused {
            answer: format!("HTTP {code}"),
            too_large: code == 413,
            said,
        });
    }
    let retried = code == 429 || status.is_server_error();
    let status = format!("the receiver answered HTTP {code}");
    if retried {
        Attempt::Retry {
            status,
            said,
            after,
        }
    } else {
        Attempt::Done(Outcome::Failed { status, said })
    }
}

/// One OTLP/gRPC attempt: a unary `Export` call over HTTP/2, its status
/// from the trailers (or the headers of a trailers-only answer).
async fn call_grpc(sender: &Sender, settings: &ExportSettings, body: &[u8]) -> Attempt {
    use http_body_util::BodyExt as _;

    let sent = sender
        .http
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
        Err(e) => return unsent(e, &sender.masks),
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
    let said = match text("grpc-message").map(otlp_grpc::message) {
        Some(m) if !m.trim().is_empty() => reason::excerpt(m.as_bytes(), false, &sender.masks),
        _ if http_status != 200 => format!("HTTP {http_status}"),
        _ if code == 2 => "no grpc-status in the answer".into(),
        _ => "no reason given".into(),
    };
    let status = if http_status == 200 {
        format!("the receiver answered {name}")
    } else {
        format!("the receiver answered HTTP {http_status} ({name})")
    };
    match otlp_grpc::verdict(code, text("grpc-status-details-bin")) {
        otlp_grpc::Verdict::Taken => {
            let gzip = text("grpc-encoding") == Some("gzip");
            let rejected = otlp_grpc::first_message(&message, gzip, MAX_RESPONSE_BYTES)
                .map_or(0, |m| rejected_of(&m));
            Attempt::Done(Outcome::Taken { rejected })
        }
        otlp_grpc::Verdict::Retry(after) => Attempt::Retry {
            status,
            said,
            after,
        },
        otlp_grpc::Verdict::Refused { too_large } => Attempt::Done(Outcome::Refused {
            answer: name.to_string(),
            too_large,
            said,
        }),
        // PERMISSION_DENIED, UNIMPLEMENTED, UNAUTHENTICATED: the call
        // itself, not its points.
        otlp_grpc::Verdict::Failed if matches!(code, 7 | 12 | 16) => {
            Attempt::Done(Outcome::Unusable {
                answer: name.to_string(),
                said,
            })
        }
        otlp_grpc::Verdict::Failed => Attempt::Done(Outcome::Failed { status, said }),
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

/// The first `n` bytes of an answer's body (the receiver decides its
/// size, so the rest is not read), and whether there was more.
async fn at_most(mut r: reqwest::Response, n: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    while out.len() <= n {
        match r.chunk().await {
            Ok(Some(chunk)) => out.extend_from_slice(&chunk[..chunk.len().min(n + 1 - out.len())]),
            _ => break,
        }
    }
    let cut = out.len() > n;
    out.truncate(n);
    (out, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_is_refused_as_such_only_when_none_of_it_was_taken() {
        // A receiver refusing everything: the request and two levels of
        // halves, then no more.
        let mut so_far = PushSoFar::default();
        let push = so_far.for_push(1);
        let verdicts: Vec<bool> = (0..MAX_REFUSED_UNTAKEN)
            .map(|_| push.refused_as_bad())
            .collect();
        assert_eq!(verdicts.iter().filter(|v| **v).count(), 1);
        assert_eq!(verdicts.last(), Some(&true));
        assert!(so_far.for_push(1).refused_whole);
        // The next push is judged on its own.
        assert!(!so_far.for_push(2).refused_whole);
        // One part taken: refusals are bad points to find, however many.
        let push = so_far.for_push(3);
        push.refused_as_bad();
        push.taken = true;
        assert!((0..100).all(|_| !push.refused_as_bad()));
    }
}
