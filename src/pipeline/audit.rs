//! Step 8, audit: one record per item (and one per failed
//! authentication). Each goes to the log through `tracing` (target
//! `jmxgate::audit`) and, when an audit directory is configured, into the
//! hash-chained audit files (`crate::audit`). Records carry names and
//! hashes, never credentials.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use http::HeaderMap;

use super::authenticate::{Connection, Failure, Principal};
use crate::audit::record::{now_rfc3339, Encoded, EntryRef, Names};
use crate::audit::{Entry, ValueMode};
use crate::protocol::{Attributes, Command, Request};

/// Audit records encoded and appended at a time (about 600 KB of text).
const AUDIT_CHUNK: usize = 1024;

/// Who asked and when, the same for every record of a request.
#[derive(Debug)]
pub struct Who<'a> {
    pub request_id: &'a str,
    pub principal: &'a Principal,
    pub roles: &'a [String],
    pub client: Option<SocketAddr>,
    /// From the request's arrival to its merged answers.
    pub latency: Duration,
    /// `None`: a Jolokia request.
    pub channel: Option<Channel>,
    /// The MCP tool whose call this is.
    pub tool: Option<&'a str>,
    /// The MCP client, as the request said who it is.
    pub mcp_client: Option<&'a McpClient>,
}

/// An MCP client's `clientInfo` (its `name` and `version`), as a request
/// carried it: text the client chose, so bounded and cleaned before it
/// goes into the audit log ([`McpClient::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpClient {
    pub name: String,
    pub version: Option<String>,
}

impl McpClient {
    /// The most characters of a client's name kept (then `…`).
    pub const MAX_NAME_CHARS: usize = 100;
    /// The most characters of its version kept (then `…`).
    pub const MAX_VERSION_CHARS: usize = 40;

    /// The client as recorded: each text cut to its bound (marked `…`),
    /// control characters and the invisible ones that reorder or hide text
    /// (bidirectional overrides, zero-width characters) replaced with
    /// U+FFFD, surrounding white space trimmed. `None` without a name.
    pub fn new(name: &str, version: Option<&str>) -> Option<McpClient> {
        let name = clean(name, Self::MAX_NAME_CHARS)?;
        let version = version.and_then(|v| clean(v, Self::MAX_VERSION_CHARS));
        Some(McpClient { name, version })
    }
}

/// `text` cut to `max` characters (with `…` when cut), each control or
/// invisible formatting character replaced; `None` when nothing is left.
fn clean(text: &str, max: usize) -> Option<String> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
    };
    let text = text.trim();
    let mut kept: String = text
        .chars()
        .take(max)
        .map(|c| if hidden(c) { '\u{FFFD}' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        kept.push('…');
    }
    (!kept.is_empty()).then_some(kept)
}

/// How a request reached the gateway, when not as a Jolokia request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// An MCP tool call (`[mcp]`).
    Mcp,
    /// A Prometheus scrape (`[prometheus]`).
    Prometheus,
    /// An OTLP push (`[[otlp.exports]]`).
    Otlp,
    /// A console page (`[console]`).
    Console,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Mcp => "mcp",
            Channel::Prometheus => "prometheus",
            Channel::Otlp => "otlp",
            Channel::Console => "console",
        }
    }
}

/// What one audit entry records (the recorder's one input: every door's
/// and job's records go through [`Gateway::record`](super::Gateway::record)).
/// Each carries who asked, as the request's context made it.
pub(crate) enum Event<'a> {
    /// A request's items: one record per item, per target of a fan-out.
    Items {
        who: &'a Who<'a>,
        state: &'a super::state::State,
        parsed: &'a super::parse::Parsed,
        merged: &'a [(crate::protocol::Response, Vec<super::items::AuditRow>)],
    },
    /// A request that made no item records: refused after authentication,
    /// an explain, an MCP method other than a tool call, a scrape's or a
    /// push's record of one target.
    Request(RequestRecord<'a>),
    /// A listing: the target list, the journal, the audit trail, Hawtio's
    /// connections, a console sign-in.
    Listing(TargetListRecord<'a>),
    /// A step of an access request.
    Access(AccessStep<'a>),
    /// An MCP tool call refused before it became an item.
    RefusedCall(RefusedCall<'a>),
}

use super::{audit_unavailable, HttpError};

impl super::Gateway {
    /// The one way into the audit log: `event` to the log (tracing), the
    /// metrics, and the audit files, before the answer goes out. `Err` is
    /// the answer to give instead: the log failed and
    /// `audit.on_failure = "closed"`. Written durably (on disk before the
    /// answer) when it changes something: a write or exec among the items,
    /// any access step.
    pub(crate) async fn record(&self, event: Event<'_>) -> Result<(), super::HttpError> {
        let (entry, durable, request_id) = match event {
            Event::Items {
                who,
                state,
                parsed,
                merged,
            } => return self.audit_items(state, who, parsed, merged).await,
            Event::Request(r) => {
                record_request(&r);
                (request_entry(&r), false, r.who.request_id)
            }
            Event::Listing(r) => {
                record_target_list(&r);
                (target_list_entry(&r), false, r.who.request_id)
            }
            Event::Access(s) => {
                record_access(&s);
                self.metrics.access_step(s.event);
                // A step with no caller is the gateway's own sweep.
                (
                    access_entry(&s),
                    true,
                    s.who.map_or("expiry", |w| w.request_id),
                )
            }
            Event::RefusedCall(r) => {
                record_refused_call(&r);
                (refused_call_entry(&r), false, r.who.request_id)
            }
        };
        self.write_audit(&Encoded::new(vec![entry]), durable, request_id)
            .await
    }

    /// Writes a request's audit records before its answer goes out. `Err`
    /// is the answer to give instead: the log failed and
    /// `audit.on_failure = "closed"`. Without an audit log, nothing to do.
    async fn write_audit(
        &self,
        records: &crate::audit::Encoded,
        durable: bool,
        request_id: &str,
    ) -> Result<(), HttpError> {
        let Some(log) = &self.audit else {
            return Ok(());
        };
        if let Err(reason) = log.write_encoded(records, durable).await {
            self.audit_failed(log, &reason, request_id)?;
        }
        Ok(())
    }

    /// Records could not be written: the answer is refused (`closed`), or
    /// goes out with the loss logged (`open`).
    fn audit_failed(
        &self,
        log: &crate::audit::AuditLog,
        reason: &str,
        request_id: &str,
    ) -> Result<(), HttpError> {
        if log.config.on_failure == crate::audit::OnFailure::Closed {
            return Err(audit_unavailable(reason));
        }
        tracing::error!(
            request_id,
            "AUDIT RECORDS LOST (audit.on_failure = \"open\"): {reason}"
        );
        Ok(())
    }

    /// Step 8, audit: one record per item (per target of a fan-out) to the
    /// log and the item metrics, and into the audit files, before the
    /// answer goes out: on disk too when a write or exec is among them.
    /// Records are encoded and appended [`AUDIT_CHUNK`] at a time, so a
    /// fan-out to 100,000 targets never holds all its records' text. An
    /// error is the refusal to send (`on_failure = "closed"`).
    async fn audit_items(
        &self,
        state: &super::state::State,
        who: &Who<'_>,
        parsed: &super::parse::Parsed,
        merged: &[(crate::protocol::Response, Vec<super::items::AuditRow>)],
    ) -> Result<(), super::HttpError> {
        let mut records = Encoded::default();
        let mut template = None;
        let mut durable = false;
        let mut counts = ItemCounts::default();
        // Every record made is counted, also when the log refuses a chunk.
        let appended = 'items: {
            for (index, ((_, rows), item)) in merged.iter().zip(&parsed.items).enumerate() {
                let request = item.parsed.as_ref().ok().map(|p| &p.request);
                for row in rows {
                    let item_record = Record {
                        who,
                        index,
                        target: row.verdict.target.as_ref().map(|t| t.as_str()),
                        request,
                        decision: row.verdict.decision,
                        status: row.status,
                        error_type: row.error_type.as_deref(),
                        rule: row.verdict.rule.as_deref(),
                    };
                    record(&item_record);
                    counts.add(&item_record);
                    if let Some(log) = &self.audit {
                        durable |= needs_durability(request);
                        // Full: append it and go on (the last chunk, never
                        // empty, is the one whose durability is awaited;
                        // the sync thread flushes in order, earlier chunks
                        // too).
                        if records.len() >= AUDIT_CHUNK {
                            if let Err(reason) = log.append(&records) {
                                if let Err(refused) =
                                    self.audit_failed(log, &reason, who.request_id)
                                {
                                    break 'items Err(refused);
                                }
                            }
                            records = Encoded::default();
                        }
                        let caller = template.get_or_insert_with(|| item_template(who));
                        push_item(&mut records, &item_record, log.config.values, caller);
                    }
                }
            }
            Ok(())
        };
        self.count_items(state, &counts, who.latency);
        appended?;
        self.write_audit(&records, durable, who.request_id).await
    }

    /// The item metrics: each series looked up once per request.
    fn count_items(&self, state: &super::state::State, counts: &ItemCounts<'_>, latency: Duration) {
        let seconds = latency.as_secs_f64();
        for (&(kind, target, status, decision), &n) in &counts.0 {
            self.metrics
                .items
                .get_or_create(&crate::metrics::ItemLabels {
                    r#type: kind,
                    target: super::metric_target(&state.fleet, target),
                    status,
                    decision,
                })
                .inc_by(n);
            // Every item of a request took the request's time.
            let item_seconds =
                self.metrics
                    .item_seconds
                    .get_or_create(&crate::metrics::TypeLabel {
                        r#type: kind.into(),
                    });
            for _ in 0..n {
                item_seconds.observe(seconds);
            }
        }
    }
}

/// A request's items by their metric labels (type, target, status,
/// decision): a bulk of many alike items touches each series once, not
/// once per item (label strings, hashing, a lock each time).
#[derive(Debug, Default)]
struct ItemCounts<'a>(HashMap<(&'static str, Option<&'a str>, u16, &'static str), u64>);

impl<'a> ItemCounts<'a> {
    fn add(&mut self, record: &Record<'a>) {
        let kind = record.request.map_or("-", |r| r.command.type_name());
        *self
            .0
            .entry((kind, record.target, record.status, record.decision))
            .or_default() += 1;
    }
}

/// What happened to one item (or one target of a fan-out).
#[derive(Debug)]
pub struct Record<'a> {
    pub who: &'a Who<'a>,
    pub index: usize,
    /// Target name, or `gateway` for items the gateway answered itself.
    pub target: Option<&'a str>,
    /// The parsed request (`None` when the item was malformed).
    pub request: Option<&'a Request>,
    /// `allowed`, `denied` (by policy) or `invalid` (malformed, unroutable).
    pub decision: &'static str,
    pub status: u16,
    pub error_type: Option<&'a str>,
    /// The policy rule that allowed or denied the item.
    pub rule: Option<&'a str>,
}

impl Record<'_> {
    fn command(&self) -> Option<&Command> {
        self.request.map(|r| &r.command)
    }
}

pub fn record(r: &Record<'_>) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id = r.who.request_id,
        principal = %r.who.principal.name,
        auth = r.who.principal.method.as_str(),
        certificate_sha256 = r.who.principal.certificate_sha256.as_deref().unwrap_or("-"),
        client = r.who.client.map(|c| c.to_string()).unwrap_or_default(),
        channel = r.who.channel.map_or("jolokia", Channel::as_str),
        tool = r.who.tool.unwrap_or("-"),
        index = r.index,
        target_name = r.target.unwrap_or("-"),
        kind = r.command().map(Command::type_name).unwrap_or("-"),
        mbean = r.command().and_then(Command::mbean).map(|m| m.as_str()).unwrap_or("-"),
        decision = r.decision,
        status = r.status,
        error_type = r.error_type.unwrap_or("-"),
        rule = r.rule.unwrap_or("-"),
        latency_ms = r.who.latency.as_secs_f64() * 1000.0,
        "item"
    );
}

/// Whether a request's records must be on disk before it is answered:
/// anything that changes an MBean.
pub fn needs_durability(request: Option<&Request>) -> bool {
    matches!(
        request.map(|r| &r.command),
        Some(Command::Write(_) | Command::Exec(_))
    )
}

/// What the item records of one request share: [`caller_entry`] for
/// event `item`, made once per request (a bulk has many items).
pub fn item_template(who: &Who<'_>) -> Entry {
    Entry {
        channel: who.channel.map(|c| c.as_str().into()),
        tool: who.tool.map(str::to_string),
        mcp_client: who.mcp_client.map(|c| c.name.clone()),
        mcp_client_version: who.mcp_client.and_then(|c| c.version.clone()),
        ..caller_entry(
            "item",
            who.request_id,
            who.principal,
            who.roles,
            who.client,
            who.latency,
        )
    }
}

/// Adds the audit file record of an item to `records`; `caller` is the
/// request's [`item_template`], borrowed rather than copied per item.
pub fn push_item(records: &mut Encoded, r: &Record<'_>, values: ValueMode, caller: &Entry) {
    let mut e = EntryRef {
        index: Some(r.index),
        target: r.target,
        decision: Some(r.decision),
        rule: r.rule,
        status: Some(r.status),
        error_type: r.error_type,
        ..EntryRef::from(caller)
    };
    let Some(command) = r.command() else {
        return records.push(&e);
    };
    e.kind = Some(command.type_name());
    e.mbean = command.mbean().map(|m| m.as_str());
    let rendered;
    match command {
        Command::Read(read) => {
            e.attribute = match &read.attribute {
                Attributes::All => None,
                Attributes::One(a) => Some(Names::One(a)),
                Attributes::Many(list) => Some(Names::Many(list)),
            }
        }
        Command::Write(w) => {
            e.attribute = Some(Names::One(&w.attribute));
            rendered = values.render(w.value.as_str());
            e.value = Some(&rendered);
        }
        Command::Exec(x) => {
            e.operation = Some(&x.operation);
            // The array the agent receives; `JsonText` serialises as its text.
            let text = serde_json::to_string(&x.arguments).unwrap_or_default();
            rendered = values.render(&text);
            e.arguments = Some(&rendered);
        }
        Command::Search(_) | Command::List(_) | Command::Version(_) | Command::Config(_) => {}
    }
    records.push(&e);
}

/// A caller that could not be authenticated. Never the credentials.
pub fn record_auth_failure(request_id: &str, client: Option<SocketAddr>, failure: &Failure) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id,
        client = client.map(|c| c.to_string()).unwrap_or_default(),
        failure = ?failure,
        "authentication failed"
    );
}

/// The audit file record of a failed authentication: which method was
/// attempted, from where; never what was presented.
pub fn auth_failure_entry(
    request_id: &str,
    conn: &Connection,
    headers: &HeaderMap,
    failure: &Failure,
) -> Entry {
    let attempted = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(' ').next())
        .map(|scheme| scheme.to_ascii_lowercase())
        .filter(|s| s == "basic" || s == "bearer")
        .unwrap_or_else(|| {
            if conn.peer_certificates.is_some() {
                "mtls".into()
            } else {
                "none".into()
            }
        });
    let note = match failure {
        Failure::Unauthorized { .. } => "unauthorized".to_string(),
        Failure::Throttled(d) => format!("throttled for {}s", d.as_secs()),
        Failure::Busy => "password checks busy (auth.basic.max_queued_checks or \
                          server.max_anonymous_requests)"
            .to_string(),
        Failure::Unavailable => "the Kubernetes API server did not answer".to_string(),
    };
    Entry {
        time: now_rfc3339(),
        event: "auth_failure".into(),
        request_id: Some(request_id.to_string()),
        auth: Some(attempted),
        certificate_sha256: conn
            .peer_certificates
            .as_ref()
            .and_then(|c| c.first())
            .map(crate::tls::fingerprint_sha256),
        client: conn.remote.map(|c| c.to_string()),
        decision: Some("denied".into()),
        status: Some(match failure {
            Failure::Unauthorized { .. } => 401,
            Failure::Throttled(_) | Failure::Busy => 429,
            Failure::Unavailable => 503,
        }),
        note: Some(note),
        ..Entry::default()
    }
}

/// A request for `GET /jolokia/targets`: who saw which part of the fleet.
#[derive(Debug)]
pub struct TargetListRecord<'a> {
    pub who: &'a Who<'a>,
    /// 200, or 405 for a method other than GET.
    pub status: u16,
    /// How many targets (or, for `events`, events) the answer listed.
    pub listed: usize,
    /// `target_list`, `events` (the fleet's journal) or `audit_trail`
    /// (the console's audit page).
    pub what: &'static str,
}

fn record_target_list(r: &TargetListRecord<'_>) {
    let who = r.who;
    tracing::info!(
        target: "jmxgate::audit",
        request_id = who.request_id,
        principal = %who.principal.name,
        auth = who.principal.method.as_str(),
        client = who.client.map(|c| c.to_string()).unwrap_or_default(),
        status = r.status,
        listed = r.listed,
        channel = who.channel.map_or("jolokia", Channel::as_str),
        "target list"
    );
}

/// The audit file record of a target list request.
pub fn target_list_entry(r: &TargetListRecord<'_>) -> Entry {
    let who = r.who;
    Entry {
        decision: Some(
            if r.status == 200 {
                "allowed"
            } else {
                "invalid"
            }
            .into(),
        ),
        status: Some(r.status),
        note: Some(match r.what {
            "events" => format!("{} event(s) listed", r.listed),
            "audit_trail" => format!("{} audit record(s) listed", r.listed),
            _ => format!("{} target(s) listed", r.listed),
        }),
        channel: who.channel.map(|c| c.as_str().into()),
        tool: who.tool.map(str::to_string),
        mcp_client: who.mcp_client.map(|c| c.name.clone()),
        mcp_client_version: who.mcp_client.and_then(|c| c.version.clone()),
        ..caller_entry(
            r.what,
            who.request_id,
            who.principal,
            who.roles,
            who.client,
            who.latency,
        )
    }
}

/// What every record of an authenticated request says about the caller
/// and the request as a whole.
fn caller_entry(
    event: &str,
    request_id: &str,
    principal: &Principal,
    roles: &[String],
    client: Option<SocketAddr>,
    latency: Duration,
) -> Entry {
    Entry {
        time: now_rfc3339(),
        event: event.into(),
        request_id: Some(request_id.to_string()),
        principal: Some(principal.name.clone()),
        auth: Some(principal.method.as_str().into()),
        issuer: principal.issuer.clone(),
        certificate_sha256: principal.certificate_sha256.clone(),
        client: client.map(|c| c.to_string()),
        roles: roles.to_vec(),
        // Microsecond precision, in milliseconds.
        latency_ms: Some((latency.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
        ..Entry::default()
    }
}

/// One step of an access request, for its audit record: what happened
/// (`event`: `access_requested`, `access_reviewed`, `access_granted`,
/// `access_denied`, `access_revoked`, `access_expired`, or `access_refused`
/// for a step refused), to which request, and how it ended.
#[derive(Debug)]
pub struct AccessStep<'a> {
    /// Who took the step; `None`: the gateway itself (expiry).
    pub who: Option<&'a Who<'a>>,
    pub event: &'static str,
    /// The request's id, when the step concerns one.
    pub request_id: Option<&'a str>,
    /// Who asked for it (shown as stored).
    pub requester: Option<&'a str>,
    /// The role asked for (and, for an item, the target).
    pub role: Option<&'a str>,
    pub target: Option<&'a str>,
    pub decision: &'static str,
    pub status: u16,
    pub note: &'a str,
}

fn record_access(s: &AccessStep<'_>) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id = s.who.map_or("-", |w| w.request_id),
        principal = s.who.map_or("-", |w| w.principal.name.as_str()),
        event = s.event,
        access_request = s.request_id.unwrap_or("-"),
        role = s.role.unwrap_or("-"),
        target_name = s.target.unwrap_or("-"),
        decision = s.decision,
        status = s.status,
        note = s.note,
        "access"
    );
}

/// The audit file record of an [`AccessStep`]. Texts callers wrote
/// (reasons, comments) are not in it: the store keeps them.
pub fn access_entry(s: &AccessStep<'_>) -> Entry {
    let base = match s.who {
        Some(w) => Entry {
            channel: w.channel.map(|c| c.as_str().into()),
            tool: w.tool.map(str::to_string),
            ..caller_entry(
                s.event,
                w.request_id,
                w.principal,
                w.roles,
                w.client,
                w.latency,
            )
        },
        None => Entry {
            time: now_rfc3339(),
            event: s.event.into(),
            ..Entry::default()
        },
    };
    Entry {
        target: s.target.map(|t| t.chars().take(256).collect()),
        decision: Some(s.decision.into()),
        status: Some(s.status),
        note: Some(match s.role {
            Some(role) => format!("role {role}: {}", s.note),
            None => s.note.to_string(),
        }),
        access_request: s.request_id.map(str::to_string),
        requester: s.requester.map(|r| r.chars().take(256).collect()),
        ..base
    }
}

/// An MCP tool call refused before it became an item: an unknown (or not
/// offered) tool, or arguments that could not be understood.
#[derive(Debug)]
pub struct RefusedCall<'a> {
    pub who: &'a Who<'a>,
    pub status: u16,
    pub error_type: &'a str,
    pub message: &'a str,
}

fn record_refused_call(r: &RefusedCall<'_>) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id = r.who.request_id,
        principal = %r.who.principal.name,
        auth = r.who.principal.method.as_str(),
        client = r.who.client.map(|c| c.to_string()).unwrap_or_default(),
        channel = r.who.channel.map_or("jolokia", Channel::as_str),
        tool = r.who.tool.unwrap_or("-"),
        status = r.status,
        error_type = r.error_type,
        "tool call refused: {}",
        r.message
    );
}

/// The audit file record of a refused tool call: an `item` that never
/// became one, with the reason as its note: `denied` when the caller was
/// refused (403: a tool its roles aren't offered, a page's origin),
/// `invalid` when the call could not be understood.
pub fn refused_call_entry(r: &RefusedCall<'_>) -> Entry {
    let decision = if r.status == 403 { "denied" } else { "invalid" };
    Entry {
        decision: Some(decision.into()),
        status: Some(r.status),
        error_type: Some(r.error_type.into()),
        note: Some(r.message.into()),
        ..item_template(r.who)
    }
}

/// A request that made no item records: refused at the HTTP level after
/// authentication (a target the caller doesn't reach by virtual URL, a
/// body too large or too slow, JSONP or an origin refused), an MCP request
/// other than a tool call, an explain. One record, so that every request
/// that reached authentication is in the log.
#[derive(Debug)]
pub struct RequestRecord<'a> {
    pub who: &'a Who<'a>,
    /// `request` (refused before its items), `mcp` (a JSON-RPC method
    /// other than a tool call), `explain`.
    pub event: &'static str,
    /// `allowed`, `denied` or `invalid`.
    pub decision: &'static str,
    /// The HTTP status the caller got.
    pub status: u16,
    pub error_type: Option<&'a str>,
    /// The target the URL named, when it named one.
    pub target: Option<&'a str>,
    /// What happened, in words; never a value or a credential.
    pub note: &'a str,
}

fn record_request(r: &RequestRecord<'_>) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id = r.who.request_id,
        principal = %r.who.principal.name,
        auth = r.who.principal.method.as_str(),
        client = r.who.client.map(|c| c.to_string()).unwrap_or_default(),
        channel = r.who.channel.map_or("jolokia", Channel::as_str),
        event = r.event,
        target_name = r.target.unwrap_or("-"),
        decision = r.decision,
        status = r.status,
        error_type = r.error_type.unwrap_or("-"),
        "{}",
        r.note
    );
}

/// The audit file record of a [`RequestRecord`].
pub fn request_entry(r: &RequestRecord<'_>) -> Entry {
    Entry {
        target: r.target.map(|t| t.chars().take(256).collect()),
        decision: Some(r.decision.into()),
        status: Some(r.status),
        error_type: r.error_type.map(str::to_string),
        note: Some(r.note.into()),
        channel: r.who.channel.map(|c| c.as_str().into()),
        tool: r.who.tool.map(str::to_string),
        mcp_client: r.who.mcp_client.map(|c| c.name.clone()),
        mcp_client_version: r.who.mcp_client.and_then(|c| c.version.clone()),
        ..caller_entry(
            r.event,
            r.who.request_id,
            r.who.principal,
            r.who.roles,
            r.who.client,
            r.who.latency,
        )
    }
}

/// The audit file record of requests refused before authentication
/// because the gateway was at `server.max_concurrent_requests` (at most
/// one a second, counting those since the last): no caller is known yet,
/// so only where this one came from.
pub fn shed_entry(request_id: &str, client: Option<SocketAddr>, limit: usize, shed: u64) -> Entry {
    Entry {
        time: now_rfc3339(),
        event: "request".into(),
        request_id: Some(request_id.to_string()),
        client: client.map(|c| c.to_string()),
        decision: Some("denied".into()),
        status: Some(503),
        error_type: Some("jmxgate.GatewayBusy".into()),
        note: Some(format!(
            "refused unread: server.max_concurrent_requests ({limit}) reached; \
             {shed} request(s) refused so since the last such record"
        )),
        ..Entry::default()
    }
}

#[cfg(test)]
mod tests {
    use super::McpClient;

    #[test]
    fn an_mcp_clients_text_is_cut_and_cleaned_for_the_log() {
        let c = McpClient::new(" claude-code ", Some("2.1.0")).unwrap();
        assert_eq!(
            (c.name.as_str(), c.version.as_deref()),
            ("claude-code", Some("2.1.0"))
        );
        let long = "x".repeat(5000);
        let c = McpClient::new(&long, Some(&long)).unwrap();
        assert_eq!(
            c.name,
            format!("{}…", "x".repeat(McpClient::MAX_NAME_CHARS))
        );
        assert_eq!(
            c.version.unwrap(),
            format!("{}…", "x".repeat(McpClient::MAX_VERSION_CHARS))
        );
        let c = McpClient::new(
            "evil\n{\"forged\":1}\u{1b}[2J\u{202e}txt\u{0}",
            Some("1\r\n"),
        )
        .unwrap();
        assert_eq!(
            c.name,
            "evil\u{fffd}{\"forged\":1}\u{fffd}[2J\u{fffd}txt\u{fffd}"
        );
        assert_eq!(c.version.as_deref(), Some("1"));
        assert!(c.name.chars().all(|ch| !ch.is_control()));
        assert_eq!(McpClient::new("  ", Some("1")), None);
        assert_eq!(McpClient::new("a", Some("")).unwrap().version, None);
    }
}
