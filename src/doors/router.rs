//! The one way in: every HTTP request gets its id, passes the pre-phase
//! (`admit`: host, path, concurrency), authentication and scope, and is
//! handed to the door its URL names. What every answer gets, whichever
//! door gave it, is added here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use http::{HeaderMap, Method, Request as HttpRequest, Response as HttpResponse};

use crate::doors::DoorSections;
use crate::doors::{access, console, jolokia, mcp, prometheus};
use crate::fleet::Target;
use crate::pipeline::authenticate::{AuthMethod, Connection};
use crate::pipeline::context::{Arrival, RequestContext};
use crate::pipeline::state::State;
use crate::pipeline::{
    audit, audit_unavailable, authenticate, hosts, listen, reaching, respond, visible_target,
    Gateway, HttpError, Refused, EXPLAIN_PATH, VIRTUAL_SEGMENT,
};
use jolokia::browser::{cors_allowed, request_origin};
use jolokia::JolokiaDoor;

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
    /// Its service discovery (`[prometheus] path` + `/sd`).
    PrometheusSd,
    /// `/jmxgate/access/requests…`: just-in-time access.
    AccessRequests,
    /// A page of the console (`[console] path`).
    Console,
    /// `/jmxgate/events`: the fleet's journal.
    Events,
}

impl Addressed {
    /// The channel the door's audit records name.
    fn channel(&self) -> Option<audit::Channel> {
        match self {
            Addressed::Mcp => Some(audit::Channel::Mcp),
            Addressed::Prometheus | Addressed::PrometheusSd => Some(audit::Channel::Prometheus),
            Addressed::Console => Some(audit::Channel::Console),
            _ => None,
        }
    }
}

/// A request the pre-phase let in: how its URL addresses the fleet, the
/// Jolokia path after that, and its `server.max_concurrent_requests` slot,
/// held until the answer.
struct Admission<'g> {
    addressed: Addressed,
    rest: String,
    _working: tokio::sync::SemaphorePermit<'g>,
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
        let request_id = self.next_request_id();
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

    /// A new request id: the boot id and a sequence number (work with no
    /// request, an OTLP push, takes one too).
    pub(crate) fn next_request_id(&self) -> String {
        format!(
            "{:x}-{}",
            self.identity.boot_id,
            self.request_seq.fetch_add(1, Ordering::Relaxed)
        )
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
        let principal = match console::login::authenticate_caller(
            self,
            &state,
            &parts,
            &mut headers,
            &conn,
            request_id,
            cors,
        )
        .await
        {
            Ok(p) => p,
            Err(answer) => return answer,
        };
        let arrival = Arrival {
            id: request_id.to_string(),
            started,
            client,
            tls: conn.tls,
            chain,
            origin,
        };
        let standing = access.roles_of(&principal);
        let mut ctx = RequestContext::new(arrival, principal, standing);
        let _anonymous = match self.anonymous_share(&ctx.principal) {
            Ok(slot) => slot,
            Err(e) => return self.refused(&ctx, &headers).answer(&e, None, cors).await,
        };
        // Standing roles, then those the caller's approved access requests
        // grant now (looked up only for callers that may request any).
        ctx.grant(access::granted_roles(self, &state, &ctx.principal, &ctx.standing).await);
        let Scope {
            virtual_target,
            cors,
        } = match scope(&state, &ctx.held, &addressed, ctx.origin.as_deref()) {
            Ok(scope) => scope,
            Err((e, cors)) => {
                let named = match &addressed {
                    Addressed::Virtual(name) => Some(name.as_str()),
                    _ => None,
                };
                return self.refused(&ctx, &headers).answer(&e, named, cors).await;
            }
        };
        ctx.channel = addressed.channel();
        match addressed {
            Addressed::Mcp => {
                parts.headers = headers;
                return mcp::service::mcp_http(self, state, parts, body, ctx).await;
            }
            Addressed::TargetList => {
                return jolokia::targets::target_list(self, &state, &ctx, &parts, &headers, cors)
                    .await;
            }
            Addressed::Console | Addressed::Events => {
                return console::console_door(self, &state, &parts, &headers, body, &ctx).await;
            }
            Addressed::Prometheus => {
                let refused = self.refused(&ctx, &headers);
                return prometheus::prometheus_http(self, &state, &parts, &refused).await;
            }
            Addressed::PrometheusSd => {
                let refused = self.refused(&ctx, &headers);
                return prometheus::sd::service_discovery(self, &state, &parts, &refused).await;
            }
            Addressed::AccessRequests => {
                let on = access::AccessCall::of(&ctx);
                return access::access_http(self, &state, &parts, body, on, &headers).await;
            }
            Addressed::Explain | Addressed::Proxy | Addressed::Virtual(_) => {}
        }
        let door = JolokiaDoor {
            parts: &parts,
            virtual_target: virtual_target.as_ref(),
            cors,
            rest: &rest,
        };
        let refused = self.refused(&ctx, &headers);
        if matches!(addressed, Addressed::Explain) {
            return jolokia::explain::explain(self, &state, door, body, &refused).await;
        }
        jolokia::jolokia_http(self, &state, door, body, &refused).await
    }

    /// What a refusal after authentication needs: the request's context
    /// and headers.
    fn refused<'r>(&'r self, ctx: &'r RequestContext, headers: &'r HeaderMap) -> Refused<'r> {
        Refused {
            gateway: self,
            ctx,
            headers,
        }
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
                state.mcp(),
                &state.prometheus().config,
                state.console(),
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
        if path == access::wire::PATH || path.starts_with(&format!("{}/", access::wire::PATH)) {
            return Ok((Addressed::AccessRequests, String::new()));
        }
        if prometheus.enabled && path == prometheus.path {
            return Ok((Addressed::Prometheus, String::new()));
        }
        if prometheus.enabled
            && path.strip_prefix(prometheus.path.as_str()) == Some(prometheus::SD_SUFFIX)
        {
            return Ok((Addressed::PrometheusSd, String::new()));
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

    /// The authentication methods of the listener a request came through.
    pub(crate) fn methods<'s>(&self, state: &'s State, tls: bool) -> &'s [AuthMethod] {
        if tls {
            &state.tls_methods
        } else {
            &state.http_methods
        }
    }
}

/// What an authenticated caller may see: the target a virtual URL names,
/// and whether its origin gets CORS headers.
struct Scope {
    virtual_target: Option<Arc<Target>>,
    cors: bool,
}

/// Right after authentication: the virtual URL's target if the caller's
/// roles reach it, and CORS from the roles that reach the
/// addressed target. `Err` is the 404 for a target the caller doesn't
/// reach (with its CORS answer). A caller without a role is refused item
/// by item, whatever the name.
fn scope(
    state: &State,
    held: &[Arc<crate::access::Role>],
    addressed: &Addressed,
    origin: Option<&str>,
) -> Result<Scope, (HttpError, bool)> {
    let access = &state.access;
    let without_role = held.is_empty() && !access.is_open();
    let virtual_target = match addressed {
        Addressed::Virtual(name) if !without_role => Some(
            visible_target(state, held, name)
                .map_err(|e| (e, cors_allowed(access, held, origin)))?,
        ),
        _ => None,
    };
    let cors = cors_allowed(access, reaching(held, virtual_target.as_deref()), origin);
    Ok(Scope {
        virtual_target,
        cors,
    })
}
