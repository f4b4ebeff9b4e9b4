//! Webhooks: telling people that something happened (a target went down,
//! an access request waits for review, was granted, ended), off the
//! request path. Each notice is posted as JSON (or as a Slack-compatible
//! `{"text": …}`), retried with backoff on failure: a webhook that is down
//! never slows a request. The URL is a secret (a Slack webhook URL is a
//! credential) and never logged.
//!
//! Each destination (a URL) has queues of its own and sends one notice at
//! a time, so a hook that hangs or fails holds back only its own notices;
//! after failures in a row its circuit opens and its fleet events are
//! skipped (counted) until a probe is answered. Fleet events of one kind
//! to one destination within a second go out as one notice. Access
//! requests' steps have their own lane, sent first, which fleet events
//! cannot fill (`book.rs`, pure, decides all that).

mod book;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Digest;

use crate::events::Kind;
use crate::secret::Secret;
use book::{Book, Key, Next, Offered};

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

/// Attempts per notice, and the first wait between them (doubling).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Which of a destination's queues a notice waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// The fleet's events, batched.
    Fleet,
    /// Access requests' steps: sent first, never batched, with room of
    /// their own.
    Access,
}

/// One notice to send.
#[derive(Debug, Clone)]
pub struct Notice {
    url: Secret,
    /// How the configuration names where it goes (`events.webhooks[2]`,
    /// `role ops's notify_url`), for the log: never the URL.
    from: Arc<str>,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Events(Events),
    /// An access request's step to a role's `notify_url`, as posted.
    Access(Value),
}

/// One or more journal events of one kind, as one notice: the first
/// one's `seq`, time and detail, the targets of all of them (the first
/// [`crate::events::MAX_NAMED`] named, the rest counted).
#[derive(Debug, Clone)]
struct Events {
    format: NotifyFormat,
    kind: Kind,
    seq: u64,
    last_seq: u64,
    at: String,
    targets: Vec<String>,
    more: usize,
    detail: String,
    events: usize,
}

impl Notice {
    /// An event of the fleet's journal (`kind`, its `seq` and time, the
    /// targets the hook may hear of).
    #[allow(clippy::too_many_arguments)]
    pub fn event(
        url: Secret,
        format: NotifyFormat,
        kind: Kind,
        seq: u64,
        at: &str,
        targets: &[&str],
        more: usize,
        detail: &str,
    ) -> Notice {
        let named = targets.len().min(crate::events::MAX_NAMED);
        Notice {
            url,
            from: Arc::from("a webhook"),
            body: Body::Events(Events {
                format,
                kind,
                seq,
                last_seq: seq,
                at: at.to_string(),
                targets: targets[..named].iter().map(|t| t.to_string()).collect(),
                more: more + (targets.len() - named),
                detail: detail.to_string(),
                events: 1,
            }),
        }
    }

    /// A step of an access request (`event`) and the request as callers
    /// read it.
    pub fn access(url: Secret, format: NotifyFormat, event: &str, request: &Value) -> Notice {
        let body = match format {
            NotifyFormat::Json => json!({ "event": event, "request": request }),
            NotifyFormat::Slack => json!({ "text": slack_text(event, request) }),
        };
        Notice {
            url,
            from: Arc::from("a webhook"),
            body: Body::Access(body),
        }
    }

    /// Named, for the log, as the configuration names its destination.
    pub fn named(mut self, name: &str) -> Notice {
        self.from = Arc::from(name);
        self
    }

    /// What is posted.
    pub fn body(&self) -> Value {
        match &self.body {
            Body::Access(body) => body.clone(),
            Body::Events(e) => e.body(),
        }
    }

    /// Access requests' steps (to a role's hook, or a journal hook
    /// hearing of them) go apart from the fleet's events.
    fn lane(&self) -> Lane {
        match &self.body {
            Body::Events(e) if Kind::of_access_step(e.kind.as_str()).is_none() => Lane::Fleet,
            _ => Lane::Access,
        }
    }

    /// Whether `later` may be folded into this notice: both fleet events
    /// of one kind, in one format.
    fn joins(&self, later: &Notice) -> bool {
        self.lane() == Lane::Fleet
            && matches!((&self.body, &later.body),
                (Body::Events(a), Body::Events(b)) if a.kind == b.kind && a.format == b.format)
    }

    /// Folds `later` in (when it [`joins`](Self::joins) this one).
    fn join(&mut self, later: Notice) {
        if let (Body::Events(into), Body::Events(e)) = (&mut self.body, later.body) {
            into.join(e);
        }
    }
}

impl Events {
    fn join(&mut self, later: Events) {
        let room = crate::events::MAX_NAMED.saturating_sub(self.targets.len());
        let mut targets = later.targets.into_iter();
        self.targets.extend(targets.by_ref().take(room));
        self.more += targets.count() + later.more;
        self.last_seq = later.last_seq;
        self.events += later.events;
    }

    fn body(&self) -> Value {
        let kind = self.kind.as_str();
        match self.format {
            NotifyFormat::Json => json!({
                "event": kind, "seq": self.seq, "at": self.at, "targets": self.targets,
                "more": self.more, "detail": self.detail,
                "events": self.events, "last_seq": self.last_seq,
            }),
            NotifyFormat::Slack => {
                let mut text = format!(
                    "{}: {}",
                    kind.replace('_', " "),
                    escape(&self.targets.join(", "))
                );
                if self.more > 0 {
                    text.push_str(&format!(" (and {} more)", self.more));
                }
                if !self.detail.is_empty() {
                    text.push_str(&format!(" — {}", escape(&self.detail)));
                }
                json!({ "text": text })
            }
        }
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
    // An item by what it touches, never its values: the journal is read
    // by everyone who reaches the target, and the audit log hashes them.
    let on = match r.get("item") {
        Some(item) => {
            let field = |k: &str| item.get(k).and_then(Value::as_str);
            match (field("type"), field("operation"), field("attribute")) {
                (Some("exec"), Some(op), _) => format!(
                    "to run {op} on {} of {}",
                    field("mbean").unwrap_or("?"),
                    field("target").unwrap_or("?")
                ),
                (Some("write"), _, Some(attribute)) => format!(
                    "to write {attribute} of {} on {}",
                    field("mbean").unwrap_or("?"),
                    field("target").unwrap_or("?")
                ),
                _ => "to run an item".to_string(),
            }
        }
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
    /// `sent`, `failed` (after every attempt, or refused), `dropped` (no
    /// room), `batched` (joined a notice waiting to go) or `skipped` (its
    /// destination's circuit was open).
    fn count(&self, outcome: &'static str);
    /// How many destinations have their circuit open.
    fn circuits_open(&self, open: usize);
}

/// Sends notices, each destination's from its own queues by a task of its
/// own (see the module's words).
#[derive(Clone)]
pub struct Notifier {
    sending: Option<Arc<Sending>>,
    counter: Arc<dyn NoticeCounter>,
}

/// What every destination's sender shares.
struct Sending {
    book: Mutex<Book>,
    http: Result<reqwest::Client, String>,
    counter: Arc<dyn NoticeCounter>,
    runtime: tokio::runtime::Handle,
}

/// An attempt's outcome.
enum Attempt {
    Sent,
    /// Answered with a refusal (4xx other than 429): not retried.
    Refused,
    /// A connection error, a timeout, 429 or 5xx: retried.
    Failed,
}

impl Notifier {
    /// A notifier whose senders run on the current runtime; without one
    /// (a gateway built outside a runtime), notices are dropped and counted.
    pub fn start(counter: Arc<dyn NoticeCounter>) -> Notifier {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Notifier {
                sending: None,
                counter,
            };
        };
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
        if let Err(e) = &http {
            tracing::error!("webhook client could not be built, notices fail: {e}");
        }
        let sending = Sending {
            book: Mutex::default(),
            http,
            counter: counter.clone(),
            runtime,
        };
        Notifier {
            sending: Some(Arc::new(sending)),
            counter,
        }
    }

    /// Queues a notice; never waits.
    pub fn send(&self, notice: Notice) {
        let Some(sending) = &self.sending else {
            tracing::warn!("webhook notice dropped: no runtime to send it");
            self.counter.count("dropped");
            return;
        };
        let key: Key = sha2::Sha256::digest(notice.url.expose().as_bytes()).into();
        let from = notice.from.clone();
        let (offered, wake, open) = {
            let mut book = sending.book();
            let offered = book.offer(key, notice, Instant::now());
            // A new destination may have taken the room of one whose
            // circuit was open.
            let open =
                matches!(offered, Offered::Queued { start: true }).then(|| book.circuits_open());
            (offered, book.wake(&key), open)
        };
        if let Some(open) = open {
            self.counter.circuits_open(open);
        }
        match offered {
            Offered::Queued { start: true } => {
                sending
                    .runtime
                    .spawn(sending.clone().send_to(key, wake.unwrap_or_default()));
            }
            Offered::Queued { start: false } => {
                if let Some(wake) = wake {
                    wake.notify_one();
                }
            }
            Offered::Batched => self.counter.count("batched"),
            Offered::Skipped => self.counter.count("skipped"),
            Offered::Dropped(why) => {
                tracing::warn!(webhook = %from, "webhook notice dropped: {why}");
                self.counter.count("dropped");
            }
        }
    }
}

impl Sending {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().expect("webhook book lock")
    }

    /// `key`'s sender: one notice at a time, until nothing waits.
    async fn send_to(self: Arc<Self>, key: Key, wake: Arc<tokio::sync::Notify>) {
        loop {
            let next = self.book().next(&key, Instant::now());
            match next {
                Next::Done => return,
                Next::Wait(until) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until.into()) => {}
                        _ = wake.notified() => {}
                    }
                }
                Next::Send(waiting) => {
                    if let Some(outcome) = self.deliver(&key, waiting).await {
                        self.counter.count(outcome);
                    }
                }
            }
        }
    }

    /// Posts one notice, retrying with doubling waits while its
    /// destination's circuit lets it: its outcome, or nothing for an
    /// access step given back to wait for the circuit.
    async fn deliver(&self, key: &Key, mut waiting: book::Waiting) -> Option<&'static str> {
        let Ok(http) = &self.http else {
            return Some("failed");
        };
        let body = waiting.notice.body().to_string();
        let from = waiting.notice.from.clone();
        let mut wait = FIRST_BACKOFF;
        loop {
            let may_attempt = self.book().may_attempt(key, Instant::now());
            if !may_attempt {
                if waiting.notice.lane() == Lane::Access && waiting.attempts < ATTEMPTS {
                    self.book().give_back(key, waiting);
                    return None;
                }
                return Some(if waiting.attempts == 0 {
                    "skipped"
                } else {
                    "failed"
                });
            }
            waiting.attempts += 1;
            let attempt = post(http, &waiting.notice.url, &body, waiting.attempts, &from).await;
            let failed = matches!(attempt, Attempt::Failed);
            let (change, open) = {
                let mut book = self.book();
                let change = book.attempted(key, failed, Instant::now());
                (change, book.circuits_open())
            };
            if let Some(cooldown) = change.opened {
                tracing::warn!(
                    webhook = %from,
                    skipped = change.skipped,
                    "webhook failing: its circuit is open for {}s (fleet events skipped, access steps wait), then one attempt",
                    cooldown.as_secs()
                );
            }
            if change.closed {
                tracing::info!(webhook = %from, "webhook answers again: its circuit is closed");
            }
            if change.opened.is_some() || change.closed {
                self.counter.circuits_open(open);
            }
            for _ in 0..change.skipped {
                self.counter.count("skipped");
            }
            match attempt {
                Attempt::Sent => return Some("sent"),
                Attempt::Refused => return Some("failed"),
                Attempt::Failed if waiting.attempts >= ATTEMPTS => return Some("failed"),
                // Stopped at the loop's head, without waiting.
                Attempt::Failed if change.opened.is_some() => {}
                Attempt::Failed => {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
        }
    }
}

/// One attempt at posting `body`.
async fn post(
    http: &reqwest::Client,
    url: &Secret,
    body: &str,
    attempt: u32,
    from: &str,
) -> Attempt {
    let sent = http
        .post(url.expose())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => Attempt::Sent,
        Ok(r) => {
            let status = r.status();
            tracing::warn!(
                webhook = from,
                attempt,
                status = status.as_u16(),
                "webhook notice refused"
            );
            if status.as_u16() == 429 || status.is_server_error() {
                Attempt::Failed
            } else {
                Attempt::Refused
            }
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
            tracing::warn!(webhook = from, attempt, "webhook notice {kind}");
            Attempt::Failed
        }
    }
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
            n.body()["text"],
            "dev asks for role ops on orders-* for 30m (access request ar-01): \"INC-1234 &lt;!channel&gt;\""
        );
        let n = Notice::access(
            Secret::new("https://hooks.example/x"),
            NotifyFormat::Json,
            "access_granted",
            &request,
        );
        assert_eq!(n.body()["event"], "access_granted");
        assert_eq!(n.body()["request"]["id"], "ar-01");
    }

    fn down(format: NotifyFormat, seq: u64, targets: &[&str], more: usize) -> Notice {
        Notice::event(
            Secret::new("https://hooks.example/T0KEN"),
            format,
            Kind::TargetDown,
            seq,
            "2025-01-01T00:00:00Z",
            targets,
            more,
            "probe: connection refused",
        )
    }

    #[test]
    fn a_batch_names_the_first_targets_counts_the_rest_and_keeps_the_first_events_words() {
        let mut batch = down(NotifyFormat::Json, 7, &["a", "b"], 0);
        let names: Vec<String> = (0..crate::events::MAX_NAMED)
            .map(|i| format!("t{i}"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let second = down(NotifyFormat::Json, 8, &names, 5);
        assert!(batch.joins(&second));
        batch.join(second);
        let body = batch.body();
        assert_eq!(body["seq"], 7);
        assert_eq!(body["last_seq"], 8);
        assert_eq!(body["events"], 2);
        assert_eq!(body["at"], "2025-01-01T00:00:00Z");
        assert_eq!(body["detail"], "probe: connection refused");
        let named = body["targets"].as_array().unwrap();
        assert_eq!(named.len(), crate::events::MAX_NAMED);
        assert_eq!((&named[0], &named[2]), (&json!("a"), &json!("t0")));
        // Two of the second event's names had no room; its 5 more too.
        assert_eq!(body["more"], 7);

        // Slack: one line, "and N more".
        let mut slack = down(NotifyFormat::Slack, 1, &["a"], 0);
        let second = down(NotifyFormat::Slack, 2, &["b"], 3);
        assert!(slack.joins(&second));
        slack.join(second);
        assert_eq!(
            slack.body()["text"],
            "target down: a, b (and 3 more) — probe: connection refused"
        );

        // Not joined: another kind, another format, access steps.
        let up = Notice::event(
            Secret::new("https://hooks.example/T0KEN"),
            NotifyFormat::Json,
            Kind::TargetUp,
            9,
            "",
            &["a"],
            0,
            "",
        );
        assert!(!batch.joins(&up));
        assert!(!batch.joins(&down(NotifyFormat::Slack, 10, &["a"], 0)));
        let asked = || {
            Notice::event(
                Secret::new("https://hooks.example/T0KEN"),
                NotifyFormat::Json,
                Kind::AccessRequested,
                11,
                "",
                &["orders-1"],
                0,
                "dev asks for role ops",
            )
        };
        let first = asked();
        assert_eq!(first.lane(), Lane::Access);
        assert!(!first.joins(&asked()));
        assert!(!batch.joins(&Notice::access(
            Secret::new("https://hooks.example/T0KEN"),
            NotifyFormat::Json,
            "access_granted",
            &json!({}),
        )));
    }
}
