//! Webhooks: telling people that something happened (an access request
//! waits for review, was granted, ended), off the request path. Each notice
//! is posted as JSON (or as a Slack-compatible `{"text": …}`), retried with
//! backoff on failure, and dropped with a count when the queue is full:
//! a webhook that is down never slows a request. The URL is a secret (a
//! Slack webhook URL is a credential) and never logged.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::secret::Secret;

/// How a role's `notify_url` wants its notices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyFormat {
    /// `{"event": …, "request": {…}}`.
    #[default]
    Json,
    /// `{"text": "…"}`, what Slack's (and Mattermost's) incoming webhooks take.
    Slack,
}

/// Notices waiting to be sent; past this, new ones are dropped (counted).
const QUEUE: usize = 1000;
/// Notices being sent at once.
const IN_FLIGHT: usize = 16;
/// Attempts per notice, and the first wait between them (doubling).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// One notice to send.
#[derive(Debug, Clone)]
pub struct Notice {
    url: Secret,
    body: Value,
}

impl Notice {
    /// An event of the fleet's journal (`kind`, its `seq` and time, the
    /// targets the hook may hear of).
    #[allow(clippy::too_many_arguments)]
    pub fn event(
        url: Secret,
        format: NotifyFormat,
        kind: &str,
        seq: u64,
        at: &str,
        targets: &[&str],
        more: usize,
        detail: &str,
    ) -> Notice {
        let body = match format {
            NotifyFormat::Json => json!({
                "event": kind, "seq": seq, "at": at, "targets": targets,
                "more": more, "detail": detail,
            }),
            NotifyFormat::Slack => {
                let mut text = format!(
                    "{}: {}",
                    kind.replace('_', " "),
                    escape(&targets.join(", "))
                );
                if more > 0 {
                    text.push_str(&format!(" (and {more} more)"));
                }
                if !detail.is_empty() {
                    text.push_str(&format!(" — {}", escape(detail)));
                }
                json!({ "text": text })
            }
        };
        Notice { url, body }
    }

    /// What is posted.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// A step of an access request (`event`) and the request as callers
    /// read it.
    pub fn access(url: Secret, format: NotifyFormat, event: &str, request: &Value) -> Notice {
        let body = match format {
            NotifyFormat::Json => json!({ "event": event, "request": request }),
            NotifyFormat::Slack => json!({ "text": slack_text(event, request) }),
        };
        Notice { url, body }
    }
}

/// One line a person reads in a chat.
fn slack_text(event: &str, r: &Value) -> String {
    let mut text = describe(event, r, escape);
    if let Some(reason) = r.get("reason").and_then(Value::as_str) {
        text.push_str(&format!(": \"{}\"", escape(reason)));
    }
    text
}

/// What an access request's step is, in words, each caller-made part
/// passed through `shown` (no reason: the journal leaves it out).
pub fn describe(event: &str, r: &Value, shown: fn(&str) -> String) -> String {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let what = match event {
        "access_requested" => "asks for",
        "access_granted" => "was granted",
        "access_denied" => "was denied",
        "access_revoked" => "lost (revoked)",
        "access_expired" => "no longer has (expired)",
        _ => "changed",
    };
    let on = match r.get("item") {
        Some(item) => format!("to run {item}"),
        None => format!(
            "on {}",
            r.get("targets")
                .and_then(Value::as_str)
                .unwrap_or("all its targets")
        ),
    };
    format!(
        "{} {what} role {} {} for {} (access request {})",
        shown(s("requester")),
        shown(s("role")),
        shown(&on),
        shown(s("duration")),
        shown(s("id"))
    )
}

/// Slack's three control characters, so a reason can't ping or link.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What happened to notices, for the admin `/metrics`.
pub trait NoticeCounter: Send + Sync {
    /// `sent`, `failed` (after every attempt) or `dropped` (queue full).
    fn count(&self, outcome: &'static str);
}

/// Sends notices from a queue, each in a task of its own (at most
/// [`IN_FLIGHT`] at once).
#[derive(Clone)]
pub struct Notifier {
    queue: Option<tokio::sync::mpsc::Sender<Notice>>,
    counter: Arc<dyn NoticeCounter>,
}

impl Notifier {
    /// A notifier whose sender runs on the current runtime; without one
    /// (a gateway built outside a runtime), notices are dropped and counted.
    pub fn start(counter: Arc<dyn NoticeCounter>) -> Notifier {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Notifier {
                queue: None,
                counter,
            };
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Notice>(QUEUE);
        let http = crate::client::tls_config(None, None, false)
            .map_err(|e| e.to_string())
            .and_then(|tls| {
                reqwest::Client::builder()
                    .tls_backend_preconfigured(tls)
                    .timeout(POST_TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .build()
                    .map_err(|e| e.to_string())
            });
        let sender_counter = counter.clone();
        runtime.spawn(async move {
            let http = match http {
                Ok(http) => http,
                Err(e) => {
                    tracing::error!("webhook client could not be built, notices are dropped: {e}");
                    while rx.recv().await.is_some() {
                        sender_counter.count("failed");
                    }
                    return;
                }
            };
            let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            while let Some(notice) = rx.recv().await {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (http, counter) = (http.clone(), sender_counter.clone());
                tokio::spawn(async move {
                    let outcome = deliver(&http, &notice).await;
                    counter.count(outcome);
                    drop(slot);
                });
            }
        });
        Notifier {
            queue: Some(tx),
            counter,
        }
    }

    /// Queues a notice; never waits.
    pub fn send(&self, notice: Notice) {
        let queued = self
            .queue
            .as_ref()
            .is_some_and(|q| q.try_send(notice).is_ok());
        if !queued {
            tracing::warn!("webhook notice dropped: the queue is full");
            self.counter.count("dropped");
        }
    }
}

/// Posts one notice, retrying on failure (a connection error, 429 or 5xx)
/// with doubling waits. 4xx other than 429: the hook refuses it, no retry.
async fn deliver(http: &reqwest::Client, notice: &Notice) -> &'static str {
    let mut wait = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let sent = http
            .post(notice.url.expose())
            .header("content-type", "application/json")
            .body(notice.body.to_string())
            .send()
            .await;
        let retry = match sent {
            Ok(r) if r.status().is_success() => return "sent",
            Ok(r) => {
                let status = r.status();
                tracing::warn!(attempt, status = status.as_u16(), "webhook notice refused");
                status.as_u16() == 429 || status.is_server_error()
            }
            // The error may hold the URL: only its kind is logged.
            Err(e) => {
                let kind = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "could not connect"
                } else {
                    "failed"
                };
                tracing::warn!(attempt, "webhook notice {kind}");
                true
            }
        };
        if !retry {
            return "failed";
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
    "failed"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slack_notice_is_one_line_a_person_reads_and_text_cannot_ping() {
        let request = json!({
            "id": "ar-01", "requester": "dev", "role": "ops", "duration": "30m",
            "targets": "orders-*", "reason": "INC-1234 <!channel>",
        });
        let n = Notice::access(
            Secret::new("https://hooks.example/x"),
            NotifyFormat::Slack,
            "access_requested",
            &request,
        );
        assert_eq!(
            n.body["text"],
            "dev asks for role ops on orders-* for 30m (access request ar-01): \"INC-1234 &lt;!channel&gt;\""
        );
        let n = Notice::access(
            Secret::new("https://hooks.example/x"),
            NotifyFormat::Json,
            "access_granted",
            &request,
        );
        assert_eq!(n.body["event"], "access_granted");
        assert_eq!(n.body["request"]["id"], "ar-01");
    }
}
