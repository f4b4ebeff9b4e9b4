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

pub mod access_requests;
pub mod audit;
pub mod authenticate;
pub mod authorize;
pub mod console;
pub mod dispatch;
pub mod event_hooks;
pub mod hosts;
pub mod items;
mod lifecycle;
pub mod listen;
pub mod mcp;
pub mod merge;
pub mod otlp;
pub mod parse;
pub mod prometheus;
pub mod respond;
pub mod route;
pub mod same_origin;
pub mod state;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::clock::unix_seconds;

use axum::body::Body;
use futures::StreamExt as _;
use http::{HeaderMap, Method, Request as HttpRequest, Response as HttpResponse};

use arc_swap::ArcSwap;

use crate::access::AccessControl;
use crate::config::Config;
use crate::fleet::Target;
use crate::protocol::{Command, Request, Response};
use crate::version::GatewayIdentity;
use authenticate::{AuthMethod, Connection};

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
    pub config: Config,
    pub book: crate::fleet::SourceBook,
}

/// The gateway: configuration turned into ready clients, plus counters.
pub struct Gateway {
    /// Everything a reload replaces; read once per request, so a request
    /// sees one consistent set.
    state: ArcSwap<State>,
    audit: Option<crate::audit::AuditLog>,
    /// Where the Jolokia endpoint is mounted (`/jolokia` by default).
    prefix: String,
    metrics: Arc<crate::metrics::Metrics>,
    identity: GatewayIdentity,
    request_seq: AtomicU64,
    /// Client requests being worked on (`server.max_concurrent_requests`).
    working: tokio::sync::Semaphore,
    max_concurrent: usize,
    /// Of those, the ones anonymous callers hold, and callers not yet
    /// known while their password is checked
    /// (`server.max_anonymous_requests`).
    anonymous: tokio::sync::Semaphore,
    max_anonymous: usize,
    /// Requests shed since the last audit record of shedding, and when
    /// that was.
    shed: AtomicU64,
    shed_recorded: std::sync::Mutex<Option<Instant>>,
    /// Agent answers being received (`server.max_buffered_bytes`) and
    /// exchanges in flight (`server.max_agent_exchanges`), all targets.
    bounds: crate::fleet::GatewayBounds,
    /// Every target's health, kept across reloads.
    health: Arc<crate::health::HealthBook>,
    /// What the fleet is made of; rebuilt whole on a reload, changed
    /// target by target when discovery's sets change.
    sources: std::sync::Mutex<Sources>,
    /// `[health]`: the probe interval and the rounds between probes of a stable target
    /// (`health::HealthConfig::stable_rounds`, by the fleet's size).
    health_config: crate::health::HealthConfig,
    max_probes_in_flight: usize,
    /// `server.max_agent_exchanges`: also the most exchanges one request
    /// has under way at once.
    max_agent_exchanges: usize,
    /// Header timeout and connection cap of every listener.
    limits: listen::ClientLimits,
    /// Just-in-time access: the store, the grants seen lately.
    elevation: access_requests::Elevation,
    /// The OTLP exports running now (`[[otlp.exports]]`).
    otlp: otlp::Exports,
    /// Webhooks (access-request notices), sent off the request path.
    notifier: crate::notify::Notifier,
}

/// Who asks, the same for every item of a request.
struct Caller<'a> {
    access: &'a AccessControl,
    principal: &'a authenticate::Principal,
    /// The principal's roles, looked up once per request.
    roles: &'a [Arc<crate::access::Role>],
    facts: &'a authorize::RequestFacts<'a>,
}

/// One item after route and authorize.
enum Judged<'a> {
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

/// Which URL shape the client used. A virtual URL's name is looked up
/// only once the caller is known, so that nothing tells an unauthenticated
/// client which names exist.
enum Addressed {
    Proxy,
    Virtual(String),
    /// `GET /jolokia/targets`: the targets the caller may reach.
    TargetList,
    /// The MCP endpoint (`[mcp] path`).
    Mcp,
    /// `/jmxgate/explain`.
    Explain,
    /// The Prometheus scrape endpoint (`[prometheus] path`).
    Prometheus,
    /// `/jmxgate/access/requests…`: just-in-time access.
    AccessRequests,
    /// A page of the console (`[console] path`).
    Console,
    /// `/jmxgate/events`: the fleet's journal.
    Events,
}

/// A request the pre-phase let in: how its URL addresses the fleet, the
/// Jolokia path after that, and its `server.max_concurrent_requests` slot,
/// held until the answer.
struct Admission<'g> {
    addressed: Addressed,
    rest: String,
    _working: tokio::sync::SemaphorePermit<'g>,
}

/// A request refused after authentication, or one that made no item
/// records: what its audit record needs, and the answer.
struct Refused<'a> {
    gateway: &'a Gateway,
    request_id: &'a str,
    principal: &'a authenticate::Principal,
    client: Option<std::net::SocketAddr>,
    started: Instant,
    headers: &'a HeaderMap,
}

impl Refused<'_> {
    /// The HTTP error `e`, recorded in the audit log first (`denied` for
    /// refusals of the caller, `invalid` for requests that could not be
    /// read). `target` is the one the URL named.
    async fn answer(
        &self,
        access: &AccessControl,
        e: &HttpError,
        target: Option<&str>,
        cors: bool,
    ) -> HttpResponse<Body> {
        let decision = match e.status {
            403 | 404 | 429 | 503 => "denied",
            _ => "invalid",
        };
        let roles: Vec<String> = access
            .roles_of(self.principal)
            .iter()
            .map(|r| r.name.clone())
            .collect();
        let recorded = self
            .audit(
                None,
                "request",
                decision,
                e.status,
                Some(&e.error_type),
                target,
                &roles,
                &e.message,
            )
            .await;
        match recorded {
            Ok(()) => respond::http_error(e, self.headers, cors),
            Err(unavailable) => respond::http_error(&unavailable, self.headers, cors),
        }
    }

    /// One [`audit::RequestRecord`] for this request.
    #[allow(clippy::too_many_arguments)]
    async fn audit(
        &self,
        channel: Option<audit::Channel>,
        event: &'static str,
        decision: &'static str,
        status: u16,
        error_type: Option<&str>,
        target: Option<&str>,
        roles: &[String],
        note: &str,
    ) -> Result<(), HttpError> {
        let who = audit::Who {
            request_id: self.request_id,
            principal: self.principal,
            roles,
            client: self.client,
            latency: self.started.elapsed(),
            channel,
            tool: None,
            mcp_client: None,
        };
        let record = audit::RequestRecord {
            who: &who,
            event,
            decision,
            status,
            error_type,
            target,
            note,
        };
        self.gateway.audit_request(&record).await
    }
}

/// The request and the authenticated caller, as the Jolokia door and
/// `/jmxgate/explain` judge them.
struct Asked<'a> {
    parts: &'a http::request::Parts,
    principal: &'a authenticate::Principal,
    held: &'a [Arc<crate::access::Role>],
    chain: &'a [String],
    origin: Option<&'a str>,
    cors: bool,
}

/// A Jolokia request to run: who asked, and where it was addressed.
struct JolokiaDoor<'a> {
    asked: Asked<'a>,
    /// The virtual URL's target (`/jolokia/targets/<name>`).
    virtual_target: Option<&'a Arc<Target>>,
    tls: bool,
    /// The path after the door's prefix (GET's path grammar).
    rest: &'a str,
}

/// Who asked for the target list, for its audit record.
struct TargetListing<'a> {
    principal: &'a authenticate::Principal,
    /// Its roles, standing and granted.
    held: &'a [Arc<crate::access::Role>],
    request_id: &'a str,
    client: Option<std::net::SocketAddr>,
    started: Instant,
    /// The client chain for policies' `<remote>`, and the listener's
    /// scheme (the console's reads run as this caller).
    chain: &'a [String],
    scheme: &'static str,
    /// Its standing roles only (the console's access requests: a grant
    /// neither asks for more nor reviews).
    standing: &'a [Arc<crate::access::Role>],
}

impl Gateway {
    /// Runs one HTTP request through the pipeline. What every request and
    /// every answer gets, whichever phase gave it, is done here in one
    /// place: a request id (logged, audited, sent as `X-Request-Id`),
    /// `Connection: close` when the body was not read, `nosniff`, and the
    /// `http_requests_total` count.
    pub async fn handle(
        self: &Arc<Self>,
        req: HttpRequest<Body>,
        conn: Connection,
    ) -> HttpResponse<Body> {
        let request_id = format!(
            "{:x}-{}",
            self.identity.boot_id,
            self.request_seq.fetch_add(1, Ordering::Relaxed)
        );
        let (parts, body) = req.into_parts();
        let (body, read) = listen::track_body(body);
        let req = HttpRequest::from_parts(parts, body);
        let mut resp = self.run(req, conn, &request_id).await;
        read.close_unless_read(&mut resp);
        respond::no_sniffing(resp.headers_mut());
        if let Ok(v) = http::HeaderValue::from_str(&request_id) {
            resp.headers_mut().insert(respond::REQUEST_ID, v);
        }
        self.metrics
            .http_requests
            .get_or_create(&crate::metrics::StatusLabel {
                status: resp.status().as_u16().to_string(),
            })
            .inc();
        resp
    }

    /// The phases, in order: the pre-phase (`admit`), authenticate,
    /// `scope` (what the caller may see), the target list, MCP or
    /// explain, else parse, route and authorize, the origin check, dispatch,
    /// merge, audit, respond. Each phase that refuses answers at once, and
    /// from authentication on every request leaves an audit record.
    async fn run(
        self: &Arc<Self>,
        req: HttpRequest<Body>,
        conn: Connection,
        request_id: &str,
    ) -> HttpResponse<Body> {
        let state = self.state.load_full();
        let client = conn.remote;
        let started = Instant::now();
        let (mut parts, body) = req.into_parts();
        let mut headers = std::mem::take(&mut parts.headers);
        let access = state.access.clone();
        let chain = access.client_chain(client.map(|c| c.ip()), &headers);
        let origin = request_origin(&headers);
        // Before authentication (preflights, refusals that carry no data):
        // an origin some role admits. After it: the caller's own roles.
        let cors = cors_allowed(&access, access.roles(), origin.as_deref());
        let Admission {
            addressed,
            rest,
            _working,
        } = match self.admit(&state, &parts, &headers, cors, &conn, request_id) {
            Ok(admitted) => admitted,
            Err(refusal) => return *refusal,
        };
        let principal = match self
            .authenticate_caller(&state, &parts, &mut headers, &conn, request_id, cors)
            .await
        {
            Ok(p) => p,
            Err(answer) => return answer,
        };
        let refused = Refused {
            gateway: self,
            request_id,
            principal: &principal,
            client,
            started,
            headers: &headers,
        };
        let _anonymous = match self.anonymous_share(&principal) {
            Ok(slot) => slot,
            Err(e) => return refused.answer(&access, &e, None, cors).await,
        };
        // Standing roles, then those the caller's approved access requests
        // grant now (looked up only for callers that may request any).
        let standing = access.roles_of(&principal);
        let mut held = standing.clone();
        held.extend(self.granted_roles(&state, &principal, &standing).await);
        let Scope {
            held,
            virtual_target,
            cors,
        } = match scope(&state, held, &addressed, origin.as_deref()) {
            Ok(scope) => scope,
            Err((e, cors)) => {
                let named = match &addressed {
                    Addressed::Virtual(name) => Some(name.as_str()),
                    _ => None,
                };
                return refused.answer(&access, &e, named, cors).await;
            }
        };
        match addressed {
            Addressed::Mcp => {
                let caller = mcp::McpCaller {
                    state: state.clone(),
                    principal,
                    standing,
                    held,
                    client,
                    chain,
                    origin,
                    page: None,
                    mcp_client: None,
                    request_id: request_id.to_string(),
                    scheme: if conn.tls { "https" } else { "http" },
                    started,
                };
                parts.headers = headers;
                return self.mcp_http(parts, body, caller).await;
            }
            Addressed::TargetList | Addressed::Console | Addressed::Events => {
                let listing = TargetListing {
                    principal: &principal,
                    held: &held,
                    request_id,
                    client,
                    started,
                    chain: &chain,
                    scheme: if conn.tls { "https" } else { "http" },
                    standing: &standing,
                };
                if matches!(addressed, Addressed::TargetList) {
                    return self
                        .target_list(&state, listing, &parts, &headers, cors)
                        .await;
                }
                return self
                    .console_door(&state, &parts, &headers, body, listing)
                    .await;
            }
            Addressed::Explain => {}
            Addressed::Prometheus => {
                let scraper = prometheus::Scraper {
                    principal: &principal,
                    held: &held,
                    chain: &chain,
                    origin: origin.as_deref(),
                    scheme: if conn.tls { "https" } else { "http" },
                };
                return self
                    .prometheus_http(&state, &parts, scraper, &refused)
                    .await;
            }
            Addressed::AccessRequests => {
                let caller = access_requests::AccessCaller::http(
                    (&principal, &standing),
                    request_id,
                    (client, started),
                    conn.tls,
                );
                return self
                    .access_http(&state, &parts, body, caller, &headers)
                    .await;
            }
            Addressed::Proxy | Addressed::Virtual(_) => {}
        }
        let asked = Asked {
            parts: &parts,
            principal: &principal,
            held: &held,
            chain: &chain,
            origin: origin.as_deref(),
            cors,
        };
        if matches!(addressed, Addressed::Explain) {
            return self.explain(&state, asked, body, &refused, conn.tls).await;
        }
        let door = JolokiaDoor {
            asked,
            virtual_target: virtual_target.as_ref(),
            tls: conn.tls,
            rest: &rest,
        };
        self.jolokia_http(&state, door, body, &refused).await
    }

    /// The Jolokia door, after authentication: parse, then steps 4 to 7
    /// (`run_items`) with the browser checks of CORS and JSONP per item,
    /// audit and respond.
    async fn jolokia_http(
        &self,
        state: &State,
        door: JolokiaDoor<'_>,
        body: Body,
        refused: &Refused<'_>,
    ) -> HttpResponse<Body> {
        let JolokiaDoor {
            asked:
                Asked {
                    parts,
                    principal,
                    held,
                    chain,
                    origin,
                    cors,
                },
            virtual_target,
            tls,
            rest,
        } = door;
        let access = &state.access;
        let headers = refused.headers;
        let parsed = self
            .read_request(state, &parts.method, rest, parts.uri.query(), body)
            .await;
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => return refused.answer(access, &e, None, cors).await,
        };

        let addressing = match virtual_target {
            Some(t) => Addressing::Virtual(t),
            None => Addressing::Proxy {
                default_target: state.default_target.as_ref(),
            },
        };
        let facts = authorize::RequestFacts {
            method: parts.method.as_str(),
            chain,
            origin,
            scheme: if tls { "https" } else { "http" },
            denied_reads_in_place: false,
        };
        let caller = Caller {
            access,
            principal,
            roles: held,
            facts: &facts,
        };
        let local = |command: &Command| self.answer_locally(state, held, command, headers, tls);
        // Another site's page changing state (CSRF), then CORS and JSONP,
        // per item: the roles that reach each item's target must admit
        // the page's origin.
        let browser_check = |items: &Items| {
            let cors = cors && origin.is_none_or(|o| targets_admit(access, held, items, o));
            cross_site_refused(held, items, &parsed, &parts.method, headers)
                .map_err(|e| (e, cors))?;
            if parsed.query.get("callback").is_some() {
                jsonp_admitted(access, held, items, headers).map_err(|e| (e, cors))?;
            }
            Ok(cors)
        };
        let ran = self
            .run_items(state, &caller, addressing, &parsed, local, browser_check)
            .await;
        let (cors, merged) = match ran {
            Ok(ran) => ran,
            Err((e, cors)) => return refused.answer(access, &e, None, cors).await,
        };
        let who = audit::Who {
            request_id: refused.request_id,
            principal,
            roles: &held.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
            client: refused.client,
            latency: refused.started.elapsed(),
            channel: None,
            tool: None,
            mcp_client: None,
        };
        if let Err(e) = self.audit_items(state, &who, &parsed, &merged).await {
            return respond::http_error(&e, headers, cors);
        }
        let answers: Vec<Response> = merged.into_iter().map(|(answer, _)| answer).collect();
        let body = respond::body_of(answers, parsed.bulk);
        respond::http_response(body, &parsed.query, headers, cors)
    }

    /// `POST /jmxgate/explain`: the route and authorize decisions for each
    /// item of a request, for the caller's own roles, without contacting
    /// any agent. `?target=<name>` judges it as sent to that target's
    /// virtual URL, `?method=GET` as if it came by GET. It passes the
    /// same admission and authentication as any request, and is audited:
    /// it tells what the policy would allow.
    async fn explain(
        &self,
        state: &State,
        asked: Asked<'_>,
        body: Body,
        refused: &Refused<'_>,
        tls: bool,
    ) -> HttpResponse<Body> {
        let Asked {
            parts,
            principal,
            held,
            chain,
            origin,
            cors,
        } = asked;
        let headers = refused.headers;
        let access = &state.access;
        if parts.method != Method::POST {
            let e = HttpError::new(
                405,
                "jmxgate.MethodNotAllowed",
                "POST the request (or bulk) to explain",
            );
            return refused.answer(access, &e, None, cors).await;
        }
        let query: Vec<(String, String)> =
            url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        let param = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
        // `?target=` is judged as that target's virtual URL.
        let virtual_target = match param("target") {
            None => None,
            Some(name) => match visible_target(state, held, name) {
                Ok(t) => Some(t),
                Err(e) => return refused.answer(access, &e, Some(name), cors).await,
            },
        };
        let method = match param("method").map(str::to_ascii_uppercase).as_deref() {
            None | Some("POST") => "POST",
            Some("GET") => "GET",
            Some(other) => {
                let e = HttpError::bad_request(format!("method={other}: use GET or POST"));
                return refused.answer(access, &e, None, cors).await;
            }
        };
        let parsed = match self
            .read_request(state, &Method::POST, "", parts.uri.query(), body)
            .await
        {
            Ok(p) => p,
            Err(e) => return refused.answer(access, &e, None, cors).await,
        };
        let facts = authorize::RequestFacts {
            method,
            chain,
            origin,
            scheme: if tls { "https" } else { "http" },
            denied_reads_in_place: false,
        };
        let addressing = match &virtual_target {
            Some(t) => Addressing::Virtual(t),
            None => Addressing::Proxy {
                default_target: state.default_target.as_ref(),
            },
        };
        let caller = Caller {
            access,
            principal,
            roles: held,
            facts: &facts,
        };
        let report: Vec<serde_json::Value> = parsed
            .items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                let kind = item
                    .parsed
                    .as_ref()
                    .ok()
                    .map(|p| p.request.command.type_name());
                explained(index, kind, self.judge(state, &caller, addressing, item))
            })
            .collect();
        let decisions: Vec<&str> = report
            .iter()
            .map(|r| r["decision"].as_str().unwrap_or("-"))
            .collect();
        let note = format!(
            "explained {} item(s): {}",
            report.len(),
            decisions.join(", ")
        );
        let roles: Vec<String> = held.iter().map(|r| r.name.clone()).collect();
        let recorded = refused
            .audit(
                None,
                "explain",
                "allowed",
                200,
                None,
                param("target"),
                &roles,
                &note,
            )
            .await;
        if let Err(e) = recorded {
            return respond::http_error(&e, headers, cors);
        }
        let body = if parsed.bulk {
            serde_json::to_vec(&report)
        } else {
            serde_json::to_vec(&report[0])
        }
        .expect("JSON values serialise");
        respond::http_response(body, &crate::protocol::Params::default(), headers, cors)
    }

    /// Step 3 for any method: the GET path or the POST body, parsed.
    async fn read_request(
        &self,
        state: &State,
        method: &Method,
        rest: &str,
        query: Option<&str>,
        body: Body,
    ) -> Result<parse::Parsed, HttpError> {
        match *method {
            Method::GET => parse::parse_get(rest, query),
            Method::POST => {
                let bytes = self.read_body(state, body).await?;
                parse::parse_post(&bytes, query, state.max_bulk_items)
            }
            _ => Err(HttpError::new(
                405,
                "jmxgate.MethodNotAllowed",
                format!("HTTP method {method} is not supported; use GET or POST"),
            )),
        }
    }

    /// A request body, whole: at most `server.max_body_bytes`, within
    /// `server.body_read_timeout` (a slow client holds a request slot only
    /// this long).
    async fn read_body(&self, state: &State, body: Body) -> Result<bytes::Bytes, HttpError> {
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
    async fn run_items<T, E>(
        &self,
        state: &State,
        caller: &Caller<'_>,
        addressing: Addressing<'_>,
        parsed: &parse::Parsed,
        answer_locally: impl Fn(&Command) -> Response,
        gate: impl FnOnce(&Items) -> Result<T, E>,
    ) -> Result<(T, Vec<(Response, Vec<items::AuditRow>)>), E> {
        let mut judged = self.judge_all(state, caller, addressing, parsed);
        self.settle_approvals(state, caller.principal, &mut judged)
            .await;
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
    fn judge<'a>(
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
        if caller.roles.is_empty() && !caller.access.is_open() {
            // Refused before routing: the same whatever target it names.
            let denied = authorize::no_role(caller.principal);
            return Judged::failed(None, denied.error, Some(denied.rule));
        }
        let reaches = |t: &Target| caller.access.reaches(caller.roles, t);
        let reach = route::Reach {
            reaches: &reaches,
            max_targets: route::targets_per_item_limit(
                caller.roles.iter().map(|r| r.max_targets_per_item),
                state.max_targets_per_item,
            ),
        };
        let request = &parsed.request;
        let authorize = |destination: &Destination| {
            authorize::authorize(
                caller.access,
                caller.principal,
                caller.roles,
                caller.facts,
                request,
                destination,
            )
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
                    caller.principal.name, target.name
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
                Err(d) => Judged::failed(Some("gateway".into()), d.error, Some(d.rule)),
            },
            Ok(Route::Agent {
                target,
                credentials,
            }) => match authorize(&Destination::Agent(target.clone())) {
                Ok(allowed) => Judged::Agent {
                    target,
                    request,
                    credentials,
                    allowed,
                },
                Err(d) => Judged::failed(Some(target.name.clone()), d.error, Some(d.rule)),
            },
            Ok(Route::Group { selector, targets }) => Judged::Group {
                selector,
                request,
                reduce: parsed.reduce.as_ref(),
                outcomes: authorize::authorize_each(
                    caller.access,
                    caller.principal,
                    caller.roles,
                    caller.facts,
                    request,
                    targets,
                ),
            },
        }
    }

    /// `GET /jolokia/targets`: the targets the caller's roles reach, with
    /// labels, health, latency, agent version and protocol. Recorded in
    /// the audit log like an item.
    async fn target_list(
        &self,
        state: &State,
        listing: TargetListing<'_>,
        request: &http::request::Parts,
        headers: &HeaderMap,
        cors: bool,
    ) -> HttpResponse<Body> {
        let access = &state.access;
        let held = listing.held;
        let page = crate::fleet::PageRequest::from_query(request.uri.query())
            .and_then(|p| p.select(state.fleet.iter().filter(|t| access.reaches(held, t))));
        let (status, listed, next, refusal) = match (&request.method, page) {
            (&Method::GET, Ok((page, next))) => {
                let listed: Vec<_> = page.iter().map(|t| t.view()).collect();
                (200, Some(listed), next, None)
            }
            (&Method::GET, Err(e)) => (400, None, None, Some(HttpError::bad_request(e))),
            _ => (
                405,
                None,
                None,
                Some(HttpError::new(
                    405,
                    "jmxgate.MethodNotAllowed",
                    "GET the target list",
                )),
            ),
        };
        let record = audit::TargetListRecord {
            what: "target_list",
            request_id: listing.request_id,
            principal: listing.principal,
            roles: held.iter().map(|r| r.name.clone()).collect(),
            client: listing.client,
            status,
            listed: listed.as_ref().map_or(0, Vec::len),
            latency: listing.started.elapsed(),
            channel: None,
            tool: None,
            mcp_client: None,
        };
        if let Err(e) = self.audit_listing(&record).await {
            return respond::http_error(&e, headers, cors);
        }
        let (Some(listed), None) = (listed, refusal.as_ref()) else {
            let e = refusal.expect("a list or a refusal");
            return respond::http_error(&e, headers, cors);
        };
        let mut answer = Response::value(&listed, unix_seconds());
        if let Some(after) = next {
            // Where the next page starts: `?after=<this>`.
            answer.set("next", &after);
        }
        let body = respond::body(&[answer], false);
        respond::http_response(body, &crate::protocol::Params::default(), headers, cors)
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

    /// The pre-phase: what is checked before anything else, needing no
    /// caller and costing nothing: the `Host` header (`server.allowed_hosts`,
    /// for every door: DNS rebinding), the URL's shape, the audit gate (fail
    /// closed: nothing runs while the log can't be written), load shedding
    /// (`server.max_concurrent_requests`), and CORS preflights (answered
    /// here: they carry no credentials). `cors` is the answer before
    /// authentication.
    fn admit(
        &self,
        state: &State,
        parts: &http::request::Parts,
        headers: &HeaderMap,
        cors: bool,
        conn: &Connection,
        request_id: &str,
    ) -> Result<Admission<'_>, Box<HttpResponse<Body>>> {
        let client = conn.remote;
        let host = headers
            .get(http::header::HOST)
            .map(|h| h.to_str().unwrap_or("\u{fffd}"));
        if !state.allowed_hosts.admits(host, conn.bound) {
            let host = host.unwrap_or_default();
            tracing::info!(client = ?client, host, "request refused: Host not in server.allowed_hosts");
            let e = HttpError::new(421, "jmxgate.HostNotAllowed", hosts::refusal_message(host));
            // No CORS headers: the page that sent it is not one of ours.
            return Err(Box::new(respond::http_error(&e, headers, false)));
        }
        let (addressed, rest) = self
            .addressing(
                &state.mcp,
                &state.prometheus.config,
                &state.console,
                parts.uri.path(),
            )
            .map_err(|e| Box::new(respond::http_error(&e, headers, true)))?;
        if let Some(log) = &self.audit {
            if let Err(reason) = log.health().check() {
                log.nudge();
                if log.config.on_failure == crate::audit::OnFailure::Closed {
                    let e = audit_unavailable(&reason);
                    return Err(Box::new(respond::http_error(&e, headers, cors)));
                }
            }
        }
        let Ok(working) = self.working.try_acquire() else {
            tracing::warn!(
                limit = self.max_concurrent,
                "request refused: server.max_concurrent_requests reached"
            );
            self.audit_shed(request_id, client);
            return Err(Box::new(respond::busy(headers, cors, self.max_concurrent)));
        };
        if parts.method == Method::OPTIONS {
            return Err(Box::new(respond::preflight(headers, cors)));
        }
        Ok(Admission {
            addressed,
            rest,
            _working: working,
        })
    }

    /// Requests shed unread are recorded at most once a second, with how
    /// many there were since the last record: a flood of them must not
    /// become a flood of audit records.
    fn audit_shed(&self, request_id: &str, client: Option<std::net::SocketAddr>) {
        let Some(log) = &self.audit else { return };
        let shed = self.shed.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.shed_recorded.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < std::time::Duration::from_secs(1)) {
            return;
        }
        *last = Some(Instant::now());
        self.shed.fetch_sub(shed, Ordering::Relaxed);
        log.write_later(vec![audit::shed_entry(
            request_id,
            client,
            self.max_concurrent,
            shed,
        )]);
    }

    /// Anonymous callers hold at most `server.max_anonymous_requests` of
    /// the request slots at once, so callers with credentials always find
    /// some: taken right after authentication, held until the answer.
    fn anonymous_share(
        &self,
        principal: &authenticate::Principal,
    ) -> Result<Option<tokio::sync::SemaphorePermit<'_>>, HttpError> {
        if principal.method != AuthMethod::Anonymous {
            return Ok(None);
        }
        self.anonymous.try_acquire().map(Some).map_err(|_| {
            HttpError::new(
                503,
                "jmxgate.GatewayBusy",
                format!(
                    "Anonymous callers already hold {} of the gateway's request slots \
                     (server.max_anonymous_requests); retry in a moment, or send credentials",
                    self.max_anonymous
                ),
            )
        })
    }

    /// Writes the record of a request that made no item records. `Err` is
    /// the answer to give instead (the log failed, `on_failure = "closed"`).
    async fn audit_request(&self, record: &audit::RequestRecord<'_>) -> Result<(), HttpError> {
        audit::record_request(record);
        if self.audit.is_none() {
            return Ok(());
        }
        let entry = audit::request_entry(record);
        self.write_audit(
            &crate::audit::Encoded::new(vec![entry]),
            false,
            record.who.request_id,
        )
        .await
    }

    /// Splits the URL into addressing and the Jolokia path after it.
    fn addressing(
        &self,
        mcp: &mcp::McpConfig,
        prometheus: &prometheus::PrometheusConfig,
        console: &console::config::ConsoleConfig,
        path: &str,
    ) -> Result<(Addressed, String), HttpError> {
        if mcp.enabled && path == mcp.path {
            return Ok((Addressed::Mcp, String::new()));
        }
        if path == EXPLAIN_PATH {
            return Ok((Addressed::Explain, String::new()));
        }
        if path == access_requests::wire::PATH
            || path.starts_with(&format!("{}/", access_requests::wire::PATH))
        {
            return Ok((Addressed::AccessRequests, String::new()));
        }
        if prometheus.enabled && path == prometheus.path {
            return Ok((Addressed::Prometheus, String::new()));
        }
        if let Some((target, tail)) = console.hawtio_jolokia(path) {
            return Ok((Addressed::Virtual(target), tail));
        }
        if console.serves(path) {
            return Ok((Addressed::Console, String::new()));
        }
        if path == console::EVENTS_PATH {
            return Ok((Addressed::Events, String::new()));
        }
        let not_found = || {
            HttpError::new(
                404,
                "jmxgate.NotFound",
                format!(
                    "No Jolokia endpoint at {path}; use {p}/ or {p}/{VIRTUAL_SEGMENT}/<name>/",
                    p = self.prefix
                ),
            )
        };
        let rest = path
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(not_found)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(not_found());
        }
        let Some(after) = rest
            .strip_prefix('/')
            .and_then(|r| r.strip_prefix(VIRTUAL_SEGMENT))
        else {
            return Ok((Addressed::Proxy, rest.to_string()));
        };
        if after.is_empty() || after == "/" {
            return Ok((Addressed::TargetList, String::new()));
        }
        let Some(after) = after.strip_prefix('/') else {
            // `/jolokia/targetsX…` is an ordinary Jolokia path.
            return Ok((Addressed::Proxy, rest.to_string()));
        };
        let (raw_name, tail) = after.split_once('/').map_or((after, ""), |(n, t)| (n, t));
        let name = percent_encoding::percent_decode_str(raw_name).decode_utf8_lossy();
        Ok((Addressed::Virtual(name.into_owned()), format!("/{tail}")))
    }

    /// Items the gateway answers itself: `version` and `config` without a
    /// target, for the listener the request came through. The host, the
    /// process id and the fleet's size only for callers whose roles reach
    /// some target.
    fn answer_locally(
        &self,
        state: &State,
        held: &[Arc<crate::access::Role>],
        command: &Command,
        headers: &HeaderMap,
        tls: bool,
    ) -> Response {
        let methods = self.methods(state, tls);
        let reaches_fleet =
            state.access.is_open() || state.fleet.iter().any(|t| state.access.reaches(held, t));
        let fleet = reaches_fleet.then(|| state.fleet.len());
        let value = if let Command::Config(_) = command {
            self.identity
                .config_value(state.authenticator.advertised(methods), fleet)
        } else {
            let host = headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok());
            let secured = authenticate::is_secured(methods);
            self.identity
                .version_value(host, &self.prefix, tls, secured, fleet, state.limits())
        };
        Response::value(&value, unix_seconds())
    }

    /// The authentication methods of the listener a request came through.
    fn methods<'s>(&self, state: &'s State, tls: bool) -> &'s [AuthMethod] {
        if tls {
            &state.tls_methods
        } else {
            &state.http_methods
        }
    }

    /// Step 2, or the refusal to send instead: 401 with challenges and no
    /// body (429 while throttled, or when a password check finds no room:
    /// it is work before the caller is known, so it holds a slot of the
    /// anonymous share, `server.max_anonymous_requests`, while it runs).
    async fn authenticate(
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

/// One item's entry in an explain report: its decision and rule, the plan
/// or the error, per target for a group.
fn explained(index: usize, kind: Option<&str>, judged: Judged<'_>) -> serde_json::Value {
    let mut entry = serde_json::json!({ "index": index, "type": kind });
    let allow = |entry: &mut serde_json::Value, target: &str, allowed: authorize::Allowed| {
        entry["target"] = target.into();
        entry["decision"] = "allow".into();
        entry["rule"] = (*allowed.rule).into();
        entry["plan"] = allowed.plan.name().into();
        entry["roles"] = allowed.grant.roles().into();
    };
    match judged {
        Judged::Failed {
            target,
            error,
            rule,
            hidden,
        } => {
            let (target, rule) = if hidden { (None, None) } else { (target, rule) };
            entry["target"] = target.into();
            entry["decision"] = "deny".into();
            entry["status"] = error.status.into();
            entry["error"] = error.message.into();
            entry["rule"] = rule
                .unwrap_or_else(|| "the request could not be routed".into())
                .into();
        }
        Judged::Local { allowed, .. } => allow(&mut entry, "gateway", allowed),
        Judged::Agent {
            target,
            allowed,
            request,
            ..
        } => {
            // Allowed, but it runs only once a reviewer approves this item.
            let waits = allowed
                .approval
                .as_ref()
                .map(|role| authorize::approval::rule_text(role, request));
            allow(&mut entry, &target.name, allowed);
            if let Some(why) = waits {
                entry["approval_required"] = why.into();
            }
        }
        Judged::Group {
            selector, outcomes, ..
        } => {
            let targets: Vec<serde_json::Value> = outcomes
                .into_iter()
                .map(|(target, outcome)| match outcome {
                    Ok(allowed) => serde_json::json!({
                        "target": target.name, "decision": "allow",
                        "rule": allowed.rule, "plan": allowed.plan.name(),
                    }),
                    Err(denied) => serde_json::json!({
                        "target": target.name, "decision": "deny",
                        "status": denied.error.status, "error": denied.error.message,
                        "rule": denied.rule,
                    }),
                })
                .collect();
            let any_allowed = targets.iter().any(|t| t["decision"] == "allow");
            entry["target"] = selector.into();
            entry["decision"] = if any_allowed { "allow" } else { "deny" }.into();
            entry["targets"] = targets.into();
        }
    }
    entry
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

fn reduce_needs_selector(name: &str) -> crate::protocol::ProtocolError {
    crate::protocol::ProtocolError::bad_request(format!(
        "\"reduce\" answers for a group of targets: address the item to a selector \
         (a glob such as \"orders-*\" or labels such as \"env=prod\"), not to \"{name}\""
    ))
}

fn audit_unavailable(reason: &str) -> HttpError {
    HttpError::new(
        503,
        "jmxgate.AuditUnavailable",
        format!(
            "The audit log cannot be written ({reason}); requests are refused until it can (audit.on_failure = \"closed\")"
        ),
    )
}

/// `Origin`, or `Referer` when there is none (as Jolokia reads it), with
/// line breaks removed.
fn request_origin(headers: &HeaderMap) -> Option<String> {
    headers
        .get(http::header::ORIGIN)
        .or_else(|| headers.get(http::header::REFERER))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.replace(['\r', '\n'], ""))
}

/// Whether to send CORS headers for this origin: one of `roles` admits it
/// in its `<cors>` (every origin when the gateway is open). `roles` are the
/// caller's own once it is known; before that, every configured role.
fn cors_allowed<'a>(
    access: &AccessControl,
    roles: impl IntoIterator<Item = &'a Arc<crate::access::Role>>,
    origin: Option<&str>,
) -> bool {
    access.is_open()
        || roles
            .into_iter()
            .any(|r| r.policy.origin_allowed(origin, false))
}

/// Whether, for every target the items go to, one of the caller's roles
/// that reaches it admits `origin` in its `<cors>`: a role the caller also
/// holds for other targets never widens a tenant's own `<cors>`.
fn targets_admit(
    access: &AccessControl,
    held: &[Arc<crate::access::Role>],
    items: &Items,
    origin: &str,
) -> bool {
    access.is_open()
        || items
            .targets()
            .all(|t| cors_allowed(access, reaching(held, Some(t)), Some(origin)))
}

/// JSONP (`callback=`) is read by a `<script>` tag, past CORS: answered
/// only to a page whose origin (`Origin`, else the `Referer`'s) the roles
/// reaching every item's target admit in their `<cors>` (every origin for
/// a role without `<cors>`, as for CORS itself). Without a page origin,
/// refused; on a gateway without roles, always answered.
fn jsonp_admitted(
    access: &AccessControl,
    held: &[Arc<crate::access::Role>],
    items: &Items,
    headers: &HeaderMap,
) -> Result<(), HttpError> {
    if access.is_open() {
        return Ok(());
    }
    let admitted = page_origin(headers).is_some_and(|o| {
        cors_allowed(access, held, Some(&o)) && targets_admit(access, held, items, &o)
    });
    if admitted {
        return Ok(());
    }
    Err(HttpError::new(
        403,
        "jmxgate.JsonpRefused",
        "JSONP (callback=) is answered only to a page whose origin (Origin or Referer header) \
         the <cors> of your roles admits",
    ))
}

/// `Sec-Fetch-Site: cross-site`: a browser says the request comes from a
/// page of another site (not a subdomain or another port of this one).
/// Clients other than browsers (curl, Java, Python) send no such header.
fn fetched_cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("cross-site"))
}

/// Whether a request may change state: any POST to the Jolokia door (a
/// form can post `text/plain` without a preflight), and a GET of `write`
/// or `exec`.
fn changes_state(method: &Method, parsed: &parse::Parsed) -> bool {
    *method == Method::POST
        || parsed.items.iter().any(|item| {
            item.parsed
                .as_ref()
                .is_ok_and(|p| matches!(p.request.command, Command::Write(_) | Command::Exec(_)))
        })
}

/// Cross-site request forgery, refused as Jolokia 2.6.1 does: a request
/// that may change state, which the browser marks `Sec-Fetch-Site:
/// cross-site`, runs only when the page's origin is named by an
/// `<allow-origin>` of the caller's roles, and for every target the items
/// go to by one of the roles reaching it. A policy without `<cors>`
/// (which admits every origin to CORS) admits none here. The refusal is
/// HTTP 403 for the whole request, like a refused JSONP callback:
/// nothing is sent to any agent.
fn cross_site_refused(
    held: &[Arc<crate::access::Role>],
    items: &Items,
    parsed: &parse::Parsed,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), HttpError> {
    if !fetched_cross_site(headers) || !changes_state(method, parsed) {
        return Ok(());
    }
    let listed = |o: &str| {
        held.iter().any(|r| r.policy.origin_listed(o))
            && items
                .targets()
                .all(|t| reaching(held, Some(t)).any(|r| r.policy.origin_listed(o)))
    };
    if page_origin(headers).is_some_and(|o| listed(&o)) {
        return Ok(());
    }
    Err(HttpError::new(
        403,
        "jmxgate.CrossSiteRefused",
        "A request that may change state (any POST, a write or exec) from another site's page \
         (Sec-Fetch-Site: cross-site) runs only when an <allow-origin> of the <cors> of your \
         roles names that page's origin",
    ))
}

/// The origin of the page a browser request comes from: `Origin`, else
/// the scheme, host and port of `Referer`; none for `null` or without
/// either.
fn page_origin(headers: &HeaderMap) -> Option<String> {
    let text = |h| headers.get(h).and_then(|v| v.to_str().ok());
    let origin = match text(http::header::ORIGIN) {
        Some(o) => o.to_string(),
        None => url::Url::parse(text(http::header::REFERER)?)
            .ok()?
            .origin()
            .ascii_serialization(),
    };
    (origin != "null").then_some(origin)
}

/// The caller's roles that reach the addressed target (all of them when
/// the URL addresses none): those decide CORS.
fn reaching<'a>(
    held: &'a [Arc<crate::access::Role>],
    target: Option<&'a Target>,
) -> impl Iterator<Item = &'a Arc<crate::access::Role>> {
    held.iter()
        .filter(move |r| target.is_none_or(|t| r.reaches(t)))
}

/// What an authenticated caller may see: its roles, the target a virtual
/// URL names, and whether its origin gets CORS headers.
struct Scope {
    held: Vec<Arc<crate::access::Role>>,
    virtual_target: Option<Arc<Target>>,
    cors: bool,
}

/// Right after authentication: the caller's roles, the virtual URL's
/// target if they reach it, and CORS from the roles that reach the
/// addressed target. `Err` is the 404 for a target the caller doesn't
/// reach (with its CORS answer). A caller without a role is refused item
/// by item, whatever the name.
fn scope(
    state: &State,
    held: Vec<Arc<crate::access::Role>>,
    addressed: &Addressed,
    origin: Option<&str>,
) -> Result<Scope, (HttpError, bool)> {
    let access = &state.access;
    let without_role = held.is_empty() && !access.is_open();
    let virtual_target = match addressed {
        Addressed::Virtual(name) if !without_role => Some(
            visible_target(state, &held, name)
                .map_err(|e| (e, cors_allowed(access, &held, origin)))?,
        ),
        _ => None,
    };
    let cors = cors_allowed(access, reaching(&held, virtual_target.as_deref()), origin);
    Ok(Scope {
        held,
        virtual_target,
        cors,
    })
}

/// The target a virtual URL names, if the caller's roles reach it; else
/// an HTTP 404, the same as for a name that doesn't exist.
fn visible_target(
    state: &State,
    roles: &[Arc<crate::access::Role>],
    name: &str,
) -> Result<Arc<Target>, HttpError> {
    route::virtual_target(&state.fleet, name, &|t| state.access.reaches(roles, t))
        .map_err(|e| HttpError::new(e.status, &e.error_type, e.message))
}

#[cfg(test)]
mod tests {
    use super::lifecycle::tests::config;
    use super::*;

    #[test]
    fn state_changes_from_another_site_are_told_apart() {
        let mut h = HeaderMap::new();
        assert!(!fetched_cross_site(&h), "curl, Java: no Fetch Metadata");
        for (value, cross) in [
            ("same-origin", false),
            ("same-site", false),
            ("none", false),
            ("cross-site", true),
            ("Cross-Site", true),
        ] {
            h.insert("sec-fetch-site", value.parse().unwrap());
            assert_eq!(fetched_cross_site(&h), cross, "{value}");
        }
        let read = parse::parse_get("/read/java.lang:type=Memory/Verbose", None).unwrap();
        let exec = parse::parse_get("/exec/java.lang:type=Memory/gc", None).unwrap();
        let write = parse::parse_get("/write/java.lang:type=Memory/Verbose/true", None).unwrap();
        assert!(!changes_state(&Method::GET, &read));
        assert!(changes_state(&Method::GET, &exec));
        assert!(changes_state(&Method::GET, &write));
        assert!(changes_state(&Method::POST, &read), "any POST");
    }

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
