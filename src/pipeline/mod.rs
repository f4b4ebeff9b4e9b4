//! The request pipeline. Every HTTP request passes these steps in order;
//! each is a module whose core is small pure functions, with I/O only in
//! `listen` and `dispatch`:
//!
//! 1. [`listen`]: accept HTTP connections (HTTPS in `crate::tls`).
//! 2. [`authenticate`]: produce a [`Principal`](authenticate::Principal)
//!    with the listener's methods (Basic, bearer JWT, client certificate).
//!    Default without `[auth]`: every caller is anonymous.
//! 3. [`parse`]: GET path or POST body into typed items; a malformed item
//!    is an error at its index, not a failed request.
//! 4. [`route`]: resolve each item's target against the configured fleet.
//!    Default: `version` without a target is answered by the gateway, other
//!    types go to `server.default_target`.
//! 5. [`authorize`]: roles and policy. Default without roles: allow.
//! 6. [`dispatch`]: one bulk POST per agent, agents called concurrently.
//! 7. [`merge`]: answers back at their indices, requests echoed as sent.
//! 8. [`audit`]: one record per item, written (and for write/exec made
//!    durable) before the answer goes out.
//! 9. [`respond`]: one HTTP answer, JSON (or text/plain, or JSONP).

pub mod audit;
pub mod authenticate;
pub mod authorize;
pub(crate) mod context;
pub mod dispatch;
pub mod hosts;
pub mod items;
pub(crate) mod lifecycle;
pub mod listen;
pub mod merge;
pub mod parse;
pub mod respond;
pub mod route;
pub mod same_origin;
pub mod sections;
pub mod server;
pub mod state;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use crate::clock::unix_seconds;

use axum::body::Body;
use futures::StreamExt as _;
use http::{HeaderMap, Response as HttpResponse};

use arc_swap::ArcSwap;

use crate::fleet::Target;
use crate::protocol::{Command, Request, Response};
use crate::version::GatewayIdentity;
use authenticate::Connection;
pub(crate) use authorize::EndedGrant;
pub(crate) use context::{Grants, RequestContext};

use items::Items;
use route::{Addressing, Destination, NoRoute, Route};
use state::State;

/// The path prefix agents use and the gateway mirrors.
pub const PREFIX: &str = "/jolokia";
/// Where a caller asks what the gateway would decide for its request.
pub const EXPLAIN_PATH: &str = "/jmxgate/explain";
/// Below [`PREFIX`]: `/targets/<name>/…` is the virtual URL of one agent.
pub const VIRTUAL_SEGMENT: &str = "targets";

pub use respond::HttpError;

/// What the fleet is made of: the configuration in force, and every
/// source's listing (the configuration's targets, each inventory file,
/// each discovery source), folded by one rule
/// ([`SourceBook`](crate::fleet::SourceBook)).
pub(crate) struct Sources {
    pub setup: Arc<dyn state::Setup>,
    pub book: crate::fleet::SourceBook,
}

/// The gateway: configuration turned into ready clients, plus counters.
pub struct Gateway {
    /// Everything a reload replaces; read once per request, so a request
    /// sees one consistent set.
    pub(crate) state: ArcSwap<State>,
    pub(crate) audit: Option<crate::audit::AuditLog>,
    /// Where the Jolokia endpoint is mounted (`/jolokia` by default).
    pub(crate) prefix: String,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    pub(crate) identity: GatewayIdentity,
    pub(crate) request_seq: AtomicU64,
    /// Client requests being worked on (`server.max_concurrent_requests`).
    pub(crate) working: tokio::sync::Semaphore,
    pub(crate) max_concurrent: usize,
    /// Of those, the ones anonymous callers hold, and callers not yet
    /// known while their password is checked
    /// (`server.max_anonymous_requests`).
    pub(crate) anonymous: tokio::sync::Semaphore,
    pub(crate) max_anonymous: usize,
    /// Requests shed since the last audit record of shedding, and when
    /// that was.
    pub(crate) shed: AtomicU64,
    pub(crate) shed_recorded: std::sync::Mutex<Option<Instant>>,
    /// Agent answers being received (`server.max_buffered_bytes`) and
    /// exchanges in flight (`server.max_agent_exchanges`), all targets.
    pub(crate) bounds: crate::fleet::GatewayBounds,
    /// Every target's health, kept across reloads.
    pub(crate) health: Arc<crate::health::HealthBook>,
    /// What the fleet is made of; rebuilt whole on a reload, changed
    /// target by target when discovery's sets change.
    pub(crate) sources: std::sync::Mutex<Sources>,
    /// `[health]`: the probe interval and the rounds between probes of a stable target
    /// (`health::HealthConfig::stable_rounds`, by the fleet's size).
    pub(crate) health_config: crate::health::HealthConfig,
    pub(crate) max_probes_in_flight: usize,
    /// `server.max_agent_exchanges`: also the most exchanges one request
    /// has under way at once.
    pub(crate) max_agent_exchanges: usize,
    /// Header timeout and connection cap of every listener.
    pub(crate) limits: listen::ClientLimits,
    /// What the doors and jobs keep for the gateway's life (just-in-time
    /// access's store and grants, the OTLP exports running now).
    pub(crate) rooms: sections::Sections,
    /// Four-eyes before dispatch, against the shared store (the access
    /// door's; the composition root hands it in).
    pub(crate) four_eyes: authorize::approval::Settle,
    /// Counts the reloads that were installed: jobs match themselves to
    /// the configuration after each.
    pub(crate) reloaded: tokio::sync::watch::Sender<u64>,
    /// Webhooks (access-request notices), sent off the request path.
    pub(crate) notifier: crate::notify::Notifier,
    /// This replica among its cluster's members: which background duties
    /// are its own.
    pub(crate) cluster: crate::cluster::Cluster,
}

/// Who asks, the same for every item of a request: its context, and
/// the facts authorize weighs besides the item (the door's method, and
/// how it wants denied reads answered).
pub(crate) struct Caller<'a> {
    pub(crate) ctx: &'a RequestContext,
    pub(crate) facts: authorize::RequestFacts<'a>,
}

impl RequestContext {
    /// The caller of a request of `method` to the phases.
    pub(crate) fn caller<'a>(&'a self, method: &'a str) -> Caller<'a> {
        Caller {
            ctx: self,
            facts: self.facts(method),
        }
    }
}

impl Caller<'_> {
    /// A read of named attributes with `ignoreErrors` answers each denied
    /// one in its place (doors whose answers have one shape however many
    /// were denied: MCP, the console).
    pub(crate) fn reads_denied_in_place(mut self) -> Self {
        self.facts.denied_reads_in_place = true;
        self
    }

    /// Judged with no page origin: the gateway's own pages run no script,
    /// so what their requests carry as `Origin` is not a page to judge.
    pub(crate) fn without_origin(mut self) -> Self {
        self.facts.origin = None;
        self
    }
}

/// One item after route and authorize.
pub(crate) enum Judged<'a> {
    /// Refused: malformed, unroutable or denied. `target` and `rule` (none:
    /// malformed or unroutable) are for the audit record; a `hidden`
    /// target (one the caller's roles don't reach) is shown to the caller
    /// as an unknown one, without them.
    Failed {
        target: Option<String>,
        error: crate::protocol::ProtocolError,
        rule: Option<String>,
        hidden: bool,
    },
    /// The gateway answers it itself (`version`, `config`).
    Local {
        allowed: authorize::Allowed,
        command: &'a Command,
    },
    /// One agent.
    Agent {
        target: Arc<Target>,
        request: &'a Request,
        credentials: Option<(String, crate::secret::Secret)>,
        allowed: authorize::Allowed,
    },
    /// Every target a selector reaches, each judged on its own.
    Group {
        selector: String,
        request: &'a Request,
        outcomes: Vec<items::TargetOutcome>,
        /// Answered as one reduced answer instead of one per target.
        reduce: Option<&'a crate::protocol::reduce::Reduce>,
    },
}

impl Judged<'_> {
    fn failed(
        target: Option<String>,
        error: crate::protocol::ProtocolError,
        rule: Option<String>,
    ) -> Self {
        Judged::Failed {
            target,
            error,
            rule,
            hidden: false,
        }
    }
}

/// An item's `target` label in the metrics: a configured target's name,
/// `gateway`, or `-`. Never a client's text (the selector of a fan-out
/// that failed), with which clients could grow the series without bound.
/// A configured target's label is its health's shared name (no copy per
/// series); the two others are shared too.
fn metric_target(fleet: &crate::fleet::Fleet, target: Option<&str>) -> Arc<str> {
    static GATEWAY: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "gateway".into());
    static NONE: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "-".into());
    match target {
        Some("gateway") => GATEWAY.clone(),
        Some(name) => match fleet.by_name(name) {
            Some(known) => known.health.shared_name().clone(),
            None => NONE.clone(),
        },
        None => NONE.clone(),
    }
}

/// A request refused after authentication, or one that made no item
/// records: what its audit record needs, and the answer.
pub(crate) struct Refused<'a> {
    pub(crate) gateway: &'a Gateway,
    pub(crate) ctx: &'a RequestContext,
    pub(crate) headers: &'a HeaderMap,
}

impl Refused<'_> {
    /// The HTTP error `e`, recorded in the audit log first (`denied` for
    /// refusals of the caller, `invalid` for requests that could not be
    /// read). `target` is the one the URL named.
    pub(crate) async fn answer(
        &self,
        e: &HttpError,
        target: Option<&str>,
        cors: bool,
    ) -> HttpResponse<Body> {
        let decision = match e.status {
            403 | 404 | 429 | 503 => "denied",
            _ => "invalid",
        };
        // A refusal names the caller's standing roles and no channel,
        // whichever door refused (as its records always have).
        let mut who = self.ctx.who_standing();
        who.channel = None;
        let record = audit::RequestRecord {
            who: &who,
            event: "request",
            decision,
            status: e.status,
            error_type: Some(&e.error_type),
            target,
            note: &e.message,
        };
        match self.gateway.record(audit::Event::Request(record)).await {
            Ok(()) => respond::http_error(e, self.headers, cors),
            Err(unavailable) => respond::http_error(&unavailable, self.headers, cors),
        }
    }
}

impl Gateway {
    /// A request body, whole: at most `server.max_body_bytes`, within
    /// `server.body_read_timeout` (a slow client holds a request slot only
    /// this long).
    pub(crate) async fn read_body(
        &self,
        state: &State,
        body: Body,
    ) -> Result<bytes::Bytes, HttpError> {
        let read = axum::body::to_bytes(body, state.max_body_bytes);
        match tokio::time::timeout(state.body_read_timeout, read).await {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) if listen::is_too_large(&e) => Err(HttpError::new(
                413,
                "jmxgate.RequestTooLarge",
                format!(
                    "Request body exceeds {} bytes (server.max_body_bytes)",
                    state.max_body_bytes
                ),
            )),
            Ok(Err(e)) => Err(HttpError::bad_request(format!(
                "The request body could not be read: {e}"
            ))),
            Err(_) => Err(HttpError::new(
                408,
                "jmxgate.RequestTimeout",
                format!(
                    "The request body did not arrive within {} (server.body_read_timeout)",
                    humantime::format_duration(state.body_read_timeout)
                ),
            )),
        }
    }

    /// Steps 4 to 7 for parsed items, the one place every door runs them:
    /// route and authorize for the caller, the door's own check of what
    /// was decided (`gate`: CORS and JSONP at `/jolokia`, the page's
    /// origin at `/mcp`; nothing is sent when it refuses), dispatch and
    /// merge. The door then audits and answers.
    pub(crate) async fn run_items<T, E>(
        &self,
        state: &State,
        caller: &Caller<'_>,
        addressing: Addressing<'_>,
        parsed: &parse::Parsed,
        answer_locally: impl Fn(&Command) -> Response,
        gate: impl FnOnce(&Items) -> Result<T, E>,
    ) -> Result<(T, Vec<(Response, Vec<items::AuditRow>)>), E> {
        let mut judged = self.judge_all(state, caller, addressing, parsed);
        (self.four_eyes)(self, state, &caller.ctx.principal, &mut judged).await;
        let mut items = items_of(judged, answer_locally);
        let passed = gate(&items)?;
        let mut dispatched = dispatch::dispatch(
            items.take_jobs(),
            &self.metrics,
            state.list_cache.as_deref(),
            self.max_agent_exchanges,
        );
        // Answers are taken as they arrive: a reduced fan-out folds them.
        while let Some((index, answer)) = dispatched.next().await {
            items.accept(index, answer);
        }
        Ok((passed, items.merge(parsed)))
    }

    /// Steps 4 and 5, route and authorize, for every item.
    fn judge_all<'a>(
        &self,
        state: &State,
        caller: &Caller<'_>,
        addressing: Addressing<'_>,
        parsed: &'a parse::Parsed,
    ) -> Vec<Judged<'a>> {
        parsed
            .items
            .iter()
            .map(|item| self.judge(state, caller, addressing, item))
            .collect()
    }

    /// Steps 4 and 5 for one item: where it goes for this caller (the
    /// routing is `route::route_item`'s) and whether its roles' policies
    /// allow it there. The same for requests and for explain.
    pub(crate) fn judge<'a>(
        &self,
        state: &State,
        caller: &Caller<'_>,
        addressing: Addressing<'_>,
        item: &'a parse::Item,
    ) -> Judged<'a> {
        let parsed = match &item.parsed {
            Ok(p) => p,
            Err(e) => return Judged::failed(None, e.clone(), None),
        };
        if caller.ctx.held.is_empty() && !state.access.is_open() {
            // Refused before routing: the same whatever target it names.
            let denied = authorize::no_role(&caller.ctx.principal);
            return Judged::failed(None, denied.error, Some(denied.rule));
        }
        let reaches = |t: &Target| state.access.reaches(&caller.ctx.held, t);
        let reach = route::Reach {
            reaches: &reaches,
            max_targets: route::targets_per_item_limit(
                caller.ctx.held.iter().map(|r| r.max_targets_per_item),
                state.max_targets_per_item,
            ),
        };
        let request = &parsed.request;
        let authorize = |destination: &Destination| {
            authorize::authorize(
                &state.access,
                &caller.ctx.principal,
                &caller.ctx.held,
                &caller.facts,
                request,
                destination,
            )
        };
        // A policy's refusal (not a hidden target's) tells a caller who
        // may ask for access which request would let it through.
        let with_how_to_ask = |mut error: crate::protocol::ProtocolError, to: &Destination| {
            if error.status == 403 && !caller.ctx.standing.is_empty() {
                if let Some(hint) = authorize::how_to_ask(
                    &state.access,
                    &caller.ctx.principal,
                    caller.ctx.standing_names(),
                    &caller.ctx.ended,
                    &caller.facts,
                    request,
                    to,
                ) {
                    error.message = format!("{} ({hint})", error.message);
                }
            }
            error
        };
        let route = route::route_item(&state.fleet, addressing, parsed, &reach);
        if parsed.reduce.is_some() {
            // A reduction is of a group: one target's name is refused
            // before anything is sent.
            match &route {
                Ok(Route::Agent { target, .. }) => {
                    return Judged::failed(
                        Some(target.name.clone()),
                        reduce_needs_selector(&target.name),
                        None,
                    )
                }
                Ok(Route::Gateway) => {
                    return Judged::failed(
                        Some("gateway".into()),
                        reduce_needs_selector("gateway"),
                        None,
                    )
                }
                _ => {}
            }
        }
        match route {
            Err(NoRoute::Invalid(error)) => Judged::failed(None, error, None),
            Err(NoRoute::Selector { text, error }) => Judged::failed(Some(text), error, None),
            Err(NoRoute::Hidden { target, error }) => Judged::Failed {
                rule: Some(format!(
                    "no role of {} reaches target {}",
                    caller.ctx.principal.name, target.name
                )),
                target: Some(target.name.clone()),
                error,
                hidden: true,
            },
            Ok(Route::Gateway) => match authorize(&Destination::Gateway) {
                Ok(allowed) => Judged::Local {
                    allowed,
                    command: &request.command,
                },
                Err(d) => {
                    let error = with_how_to_ask(d.error, &Destination::Gateway);
                    Judged::failed(Some("gateway".into()), error, Some(d.rule))
                }
            },
            Ok(Route::Agent {
                target,
                credentials,
            }) => {
                let destination = Destination::Agent(target.clone());
                match authorize(&destination) {
                    Ok(allowed) => Judged::Agent {
                        target,
                        request,
                        credentials,
                        allowed,
                    },
                    Err(d) => {
                        let error = with_how_to_ask(d.error, &destination);
                        Judged::failed(Some(target.name.clone()), error, Some(d.rule))
                    }
                }
            }
            Ok(Route::Group { selector, targets }) => Judged::Group {
                selector,
                request,
                reduce: parsed.reduce.as_ref(),
                outcomes: authorize::authorize_each(
                    &state.access,
                    &caller.ctx.principal,
                    &caller.ctx.held,
                    &caller.facts,
                    request,
                    targets,
                ),
            },
        }
    }

    /// Items the gateway answers itself: `version` and `config` without a
    /// target, for the listener the request came through. The host, the
    /// process id and the fleet's size only for callers whose roles reach
    /// some target.
    pub(crate) fn answer_locally(
        &self,
        state: &State,
        ctx: &RequestContext,
        command: &Command,
        host: Option<&str>,
    ) -> Response {
        let methods = self.methods(state, ctx.tls);
        let reaches_fleet = state.access.is_open()
            || state
                .fleet
                .iter()
                .any(|t| state.access.reaches(&ctx.held, t));
        let fleet = reaches_fleet.then(|| state.fleet.len());
        let value = if let Command::Config(_) = command {
            self.identity
                .config_value(state.authenticator.advertised(methods), fleet)
        } else {
            let secured = authenticate::is_secured(methods);
            self.identity
                .version_value(host, &self.prefix, ctx.tls, secured, fleet, state.limits())
        };
        Response::value(&value, unix_seconds())
    }

    /// Step 2, or the refusal to send instead: 401 with challenges and no
    /// body (429 while throttled, or when a password check finds no room:
    /// it is work before the caller is known, so it holds a slot of the
    /// anonymous share, `server.max_anonymous_requests`, while it runs).
    pub(crate) async fn authenticate(
        &self,
        state: &State,
        headers: &HeaderMap,
        conn: &Connection,
        request_id: &str,
        cors: bool,
    ) -> Result<authenticate::Principal, HttpResponse<Body>> {
        let methods = self.methods(state, conn.tls);
        let client = state
            .access
            .client_address(conn.remote.map(|r| r.ip()), headers);
        match state
            .authenticator
            .authenticate(methods, headers, conn, client, &self.anonymous, &|| {
                state.fleet.namespaces().to_vec()
            })
            .await
        {
            Ok(p) => Ok(p),
            Err(failure) => {
                audit::record_auth_failure(request_id, conn.remote, &failure);
                let attempted = authenticate::attempted_method(headers, conn).to_string();
                self.metrics
                    .auth_failures
                    .get_or_create(&crate::metrics::MethodLabel { method: attempted })
                    .inc();
                if let Some(log) = &self.audit {
                    log.write_later(vec![audit::auth_failure_entry(
                        request_id, conn, headers, &failure,
                    )]);
                }
                let mut resp = state.authenticator.refusal(methods, &failure, headers);
                if cors {
                    respond::cors_headers(headers, resp.headers_mut());
                }
                Err(resp)
            }
        }
    }
}

fn reduce_needs_selector(name: &str) -> crate::protocol::ProtocolError {
    crate::protocol::ProtocolError::bad_request(format!(
        "\"reduce\" answers for a group of targets: address the item to a selector \
         (a glob such as \"orders-*\" or labels such as \"env=prod\"), not to \"{name}\""
    ))
}

pub(crate) fn audit_unavailable(reason: &str) -> HttpError {
    HttpError::new(
        503,
        "jmxgate.AuditUnavailable",
        format!(
            "The audit log cannot be written ({reason}); requests are refused until it can (audit.on_failure = \"closed\")"
        ),
    )
}

/// The caller's roles that reach the addressed target (all of them when
/// the URL addresses none): those decide CORS.
pub(crate) fn reaching<'a>(
    held: &'a [Arc<crate::access::Role>],
    target: Option<&'a Target>,
) -> impl Iterator<Item = &'a Arc<crate::access::Role>> {
    held.iter()
        .filter(move |r| target.is_none_or(|t| r.reaches(t)))
}

/// The target a virtual URL names, if the caller's roles reach it; else
/// an HTTP 404, the same as for a name that doesn't exist.
pub(crate) fn visible_target(
    state: &State,
    roles: &[Arc<crate::access::Role>],
    name: &str,
) -> Result<Arc<Target>, HttpError> {
    route::virtual_target(&state.fleet, name, &|t| state.access.reaches(roles, t))
        .map_err(|e| HttpError::new(e.status, &e.error_type, e.message))
}

/// A `reduce` on an item addressed to one target (or the gateway).
/// The items after route and authorize (and four-eyes): each gets its
/// verdict and either an answer (an error, the gateway's own) or agent
/// jobs (one, or one per target of a selector in proxy mode).
fn items_of(judged: Vec<Judged<'_>>, answer_locally: impl Fn(&Command) -> Response) -> Items {
    let mut items = Items::new(judged.len());
    for (index, j) in judged.into_iter().enumerate() {
        match j {
            Judged::Failed {
                target,
                error,
                rule,
                ..
            } => items.fail(index, target, &error, rule),
            Judged::Local { allowed, command } => items.answer(
                index,
                Some("gateway".into()),
                answer_locally(command),
                allowed.rule,
            ),
            Judged::Agent {
                target,
                request,
                credentials,
                allowed,
            } => items.forward(index, target, request, credentials, allowed),
            Judged::Group {
                selector,
                request,
                outcomes,
                reduce,
            } => items.fan_out(index, Some(selector), request, outcomes, reduce),
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::test_config as config;

    #[test]
    fn item_metrics_name_configured_targets_only() {
        let gw = Gateway::new(&config(&["a"])).unwrap();
        let fleet = gw.fleet();
        assert_eq!(metric_target(&fleet, Some("a")).as_ref(), "a");
        assert_eq!(metric_target(&fleet, Some("gateway")).as_ref(), "gateway");
        assert_eq!(
            metric_target(&fleet, Some("group:no-such-group")).as_ref(),
            "-"
        );
        assert_eq!(metric_target(&fleet, Some("b")).as_ref(), "-");
        assert_eq!(metric_target(&fleet, None).as_ref(), "-");
    }
}
