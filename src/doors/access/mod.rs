//! Just-in-time access at run time, a door of its own: the access-requests
//! API (`/jmxgate/access/requests`), the grants folded into a caller's
//! roles on every door, four-eyes items settled against the store before
//! dispatch, and the task that opens the store and expires what is due.
//! The rules are `elevation`'s and the shared state is `store`'s; this room
//! connects them to the pipeline.

mod operations;
pub mod wire;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use axum::body::Body;
use http::{Method, Response as HttpResponse};

use crate::access::elevation::Refusal;
use crate::access::{Role, RoleConfig};
use crate::principal::{AuthMethod, Principal};
use crate::protocol::ProtocolError;
use crate::store::{
    NewRequest, RequestKind, RequestState, Store, StoreConfig, StoreError, StoredRequest, Verdict,
};

use crate::pipeline::audit::{self, AccessStep, Who};
use crate::pipeline::authorize::approval;
use crate::pipeline::respond::{self, HttpError};
use crate::pipeline::state::State;
use crate::pipeline::{EndedGrant, Gateway, Grants, Judged, RequestContext};

use wire::Operation;

/// How long a grant lookup may take before the store is taken as away
/// (the caller then holds its standing roles only).
const GRANT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a caller's grants are kept between lookups: a grant revoked or
/// ended on another replica ends here within this.
const GRANT_CACHE_TTL: Duration = Duration::from_secs(1);
/// How often the store is checked and due requests are expired.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How long a grant that ended is remembered: a refusal it would have
/// allowed says that it ended, and how to ask again.
const ENDED_GRANTS_NAMED_FOR: Duration = Duration::from_secs(24 * 3600);

/// A role held through an approved request, until a moment of this
/// replica's monotonic clock (the store's remaining time, taken when read;
/// already past for one that ended).
#[derive(Debug, Clone)]
struct ActiveGrant {
    id: String,
    role: String,
    targets: Option<String>,
    until: Instant,
    revoked: bool,
}

/// What just-in-time access keeps at run time.
pub struct Elevation {
    /// `[access.store]` as at start (a change takes a restart).
    config: StoreConfig,
    /// Open once the task has opened it; until then, and while `trouble`
    /// says why, elevation fails closed.
    store: ArcSwapOption<Store>,
    trouble: Mutex<Option<String>>,
    /// Each requester's grants, for [`GRANT_CACHE_TTL`].
    grants: moka::sync::Cache<String, Arc<Vec<ActiveGrant>>>,
}

impl Elevation {
    pub fn new(config: &StoreConfig) -> Elevation {
        Elevation {
            config: config.clone(),
            store: ArcSwapOption::empty(),
            trouble: Mutex::new(Some("the access store has not been opened yet".into())),
            grants: moka::sync::Cache::builder()
                .time_to_live(GRANT_CACHE_TTL)
                .max_capacity(100_000)
                .build(),
        }
    }

    /// The store, or the 503 that says why there is none or why it is
    /// away (at once: the task that watches it says when it is back).
    fn store(&self) -> Result<Arc<Store>, HttpError> {
        if let Some(why) = self.status() {
            return Err(unavailable(&why));
        }
        self.store
            .load_full()
            .ok_or_else(|| unavailable("the access store is not open"))
    }

    fn healthy(&self) -> bool {
        self.trouble.lock().expect("trouble lock").is_none()
    }

    fn set_trouble(&self, why: Option<String>) {
        *self.trouble.lock().expect("trouble lock") = why;
    }

    /// Why elevation is unavailable now, for `/readyz` detail.
    pub fn status(&self) -> Option<String> {
        self.trouble.lock().expect("trouble lock").clone()
    }

    /// Forgets a requester's grants here at once (a revoke, a review).
    fn forget(&self, requester: &str) {
        self.grants.invalidate(requester);
    }
}

/// What just-in-time access keeps for the gateway's life, which the
/// gateway holds without knowing it (the composition root puts it in).
pub(crate) fn elevation(gateway: &Gateway) -> &Elevation {
    gateway.rooms.get()
}

/// [`settle_approvals`] as the phases call it
/// ([`Settle`](crate::pipeline::authorize::approval::Settle)).
pub(crate) fn settle<'a, 'b>(
    gateway: &'a Gateway,
    state: &'a State,
    principal: &'a Principal,
    judged: &'a mut [Judged<'b>],
) -> futures::future::BoxFuture<'a, ()> {
    Box::pin(settle_approvals(gateway, state, principal, judged))
}

/// The 503 of elevation while the store is away. The store's own error
/// (which might name a host) stays in the log.
const UNAVAILABLE: &str = "jmxgate.AccessStoreUnavailable";

fn unavailable(why: &str) -> HttpError {
    HttpError::new(
        503,
        UNAVAILABLE,
        format!("access requests are unavailable: {why}; everything not needing them works"),
    )
}

fn store_error(e: StoreError, id: &str) -> HttpError {
    match e {
        StoreError::Unavailable(why) => {
            tracing::warn!("access store: {why}");
            unavailable("the access store did not answer")
        }
        StoreError::NotFound => wire::not_found(id),
        StoreError::NotPending(state) => HttpError::new(
            409,
            "jmxgate.Conflict",
            format!("access request {id} is {}, not pending", state.as_str()),
        ),
        StoreError::AlreadyReviewed => HttpError::new(
            409,
            "jmxgate.Conflict",
            format!("you have already reviewed access request {id}"),
        ),
        StoreError::TooManyPending(most) => HttpError::new(
            429,
            "jmxgate.TooManyRequests",
            format!("you have {most} pending access requests, as many as access.max_pending_requests allows: wait for their reviews or revoke one"),
        ),
    }
}

fn anonymous() -> HttpError {
    HttpError::new(
        403,
        "jmxgate.Forbidden",
        "access requests are made and reviewed by name: sign in first",
    )
}

fn refusal(r: Refusal) -> HttpError {
    let status = match r {
        Refusal::Duration(_) | Refusal::ReasonRequired => 400,
        Refusal::NotRequestable(_) | Refusal::OwnRequest | Refusal::NotApprover => 403,
    };
    let kind = if status == 400 {
        "java.lang.IllegalArgumentException"
    } else {
        "jmxgate.Forbidden"
    };
    HttpError::new(status, kind, r.to_string())
}

/// The names of roles held, for the rules.
fn names(held: &[Arc<Role>]) -> Vec<String> {
    held.iter().map(|r| r.name.clone()).collect()
}

/// The role whose approvers review `request`: its own role's (for an item,
/// the role whose `approval_required` it met).
fn reviewed_under<'a>(
    configs: &'a [RoleConfig],
    request: &StoredRequest,
) -> Option<&'a RoleConfig> {
    configs.iter().find(|r| r.name == request.request.role)
}

/// The roles whose requests a holder of `standing` may review.
fn reviewable(configs: &[RoleConfig], standing: &[String]) -> Vec<String> {
    configs
        .iter()
        .filter(|r| r.approvers.iter().any(|a| standing.contains(a)))
        .map(|r| r.name.clone())
        .collect()
}

/// Who asks the API (the request's context: its standing roles count,
/// never those a grant gives, which neither ask for more nor review), and
/// the MCP tool when a tool call asks.
pub(crate) struct AccessCall<'a> {
    pub ctx: &'a RequestContext,
    pub tool: Option<&'a str>,
}

impl<'a> AccessCall<'a> {
    /// The HTTP API, or a console page, asks.
    pub fn of(ctx: &'a RequestContext) -> AccessCall<'a> {
        AccessCall { ctx, tool: None }
    }

    fn who(&self) -> Who<'_> {
        let mut who = self.ctx.who_standing();
        who.tool = self.tool;
        who
    }
}

/// One operation on access requests, its input read and checked.
#[derive(Debug, Clone)]
pub(crate) enum Ask {
    List(wire::ListQuery),
    Show(String),
    Create(wire::Create),
    Review(String, Verdict, wire::Review),
    Revoke(String),
}

/// Why just-in-time access is unavailable now (`None`: it works, or no
/// role uses it), for `/readyz`: the gateway stays ready, elevation
/// fails closed.
pub fn access_store_trouble(gateway: &Gateway) -> Option<String> {
    if !gateway.state.load().access.uses_elevation() {
        return None;
    }
    elevation(gateway).status()
}

/// The roles `principal` holds through grants now, narrowed to their
/// requests' targets, and those it held until lately. None for a caller
/// that may request nothing (no lookup at all), nor while the store is
/// away (standing roles keep working: elevation fails closed).
pub(crate) async fn granted_roles(
    gateway: &Gateway,
    state: &State,
    principal: &Principal,
    standing: &[Arc<Role>],
) -> Grants {
    let access = &state.access;
    if !access.may_request(standing) {
        return Grants::default();
    }
    let Some(identity) = access.identity_of(principal) else {
        return Grants::default();
    };
    let elevation = elevation(gateway);
    let grants = match elevation.grants.get(&identity) {
        Some(g) => g,
        None => {
            // Not open, or away: standing roles only.
            let Ok(store) = elevation.store() else {
                return Grants::default();
            };
            let remembered = ENDED_GRANTS_NAMED_FOR.as_millis() as i64;
            let looked_up =
                tokio::time::timeout(GRANT_LOOKUP_TIMEOUT, store.grants(&identity, remembered))
                    .await;
            let found = match looked_up {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => {
                    tracing::warn!(principal = %principal.name, "access grants not read: {e}");
                    elevation.set_trouble(Some("the access store did not answer".into()));
                    return Grants::default();
                }
                Err(_) => {
                    tracing::warn!(principal = %principal.name, "access grants not read within {GRANT_LOOKUP_TIMEOUT:?}");
                    elevation.set_trouble(Some("the access store did not answer in time".into()));
                    return Grants::default();
                }
            };
            let now = Instant::now();
            let grants = Arc::new(
                found
                    .into_iter()
                    .map(|(r, left_ms)| ActiveGrant {
                        id: r.request.id,
                        role: r.request.role,
                        targets: r.request.targets,
                        until: now + Duration::from_millis(left_ms.max(0) as u64),
                        revoked: r.state == RequestState::Revoked,
                    })
                    .collect::<Vec<_>>(),
            );
            elevation.grants.insert(identity.clone(), grants.clone());
            grants
        }
    };
    let now = Instant::now();
    let standing_names = names(standing);
    let mut granted = Grants::default();
    // Still the caller's to hold (or ask again): the role is still
    // requestable by a role it holds now.
    let requestable = |g: &&ActiveGrant| {
        access.role_configs().iter().any(|r| {
            r.name == g.role && r.requestable_by.iter().any(|b| standing_names.contains(b))
        })
    };
    for g in grants.iter().filter(requestable) {
        let Some(role) = access.granted_role(&g.role, g.targets.as_deref(), &g.id) else {
            continue;
        };
        if g.until > now && !g.revoked {
            granted.held.push(role);
        } else {
            granted.ended.push(EndedGrant {
                role,
                revoked: g.revoked,
            });
        }
    }
    granted
}

/// Four-eyes, before dispatch: each item that waits for approval either
/// runs on its approval (used once, now) or is answered with the
/// request that asks for it, made here the first time.
pub(crate) async fn settle_approvals(
    gateway: &Gateway,
    state: &State,
    principal: &Principal,
    judged: &mut [Judged<'_>],
) {
    for j in judged.iter_mut() {
        let Judged::Agent {
            target,
            request,
            allowed,
            ..
        } = j
        else {
            continue;
        };
        let Some(role) = allowed.approval.clone() else {
            continue;
        };
        let why = approval::rule_text(&role, request);
        let failed = |error: ProtocolError, rule: String| Judged::Failed {
            target: Some(target.name.clone()),
            error,
            rule: Some(rule),
            hidden: false,
        };
        let Some(key) = approval::item_key(&target.name, request) else {
            continue;
        };
        let store = match elevation(gateway).store() {
            Ok(s) => s,
            Err(e) => {
                let error = ProtocolError::new(503, &e.error_type, e.message);
                *j = failed(error, format!("{why}; the access store is unavailable"));
                continue;
            }
        };
        match approval_for(gateway, state, &store, principal, &role, &target.name, &key).await {
            Ok(Settled::Run(id)) => {
                allowed.approval = None;
                allowed.rule = format!(
                    "{}; approved by access request {id}, used now",
                    allowed.rule
                )
                .into();
            }
            Ok(Settled::Waiting { id, pending }) => {
                let rule = if pending {
                    format!("{why}; waits for access request {id}")
                } else {
                    format!("{why}; access request {id} made for it")
                };
                *j = failed(approval::waiting(&id, &why, pending), rule);
            }
            Err(e) => {
                let error = ProtocolError::new(e.status, &e.error_type, e.message);
                *j = failed(
                    error,
                    format!("{why}; {}", "no access request could be made"),
                );
            }
        }
    }
}

async fn approval_for(
    gateway: &Gateway,
    state: &State,
    store: &Store,
    principal: &Principal,
    role: &Role,
    target: &str,
    key: &str,
) -> Result<Settled, HttpError> {
    let Some(identity) = state.access.identity_of(principal) else {
        return Err(anonymous());
    };
    let me = identity.as_str();
    let open = store
        .open_item_request(me, key)
        .await
        .map_err(|e| store_error(e, "-"))?;
    if let Some(found) = open {
        let id = found.request.id.clone();
        if found.state == RequestState::Pending {
            return Ok(Settled::Waiting { id, pending: true });
        }
        // Approved and unused: this run uses it, once, whichever
        // replica gets there first.
        if store
            .use_item(&id, me, key)
            .await
            .map_err(|e| store_error(e, &id))?
            .is_some()
        {
            gateway.metrics.access_step("access_used");
            return Ok(Settled::Run(id));
        }
    }
    let new = NewRequest {
        id: wire::new_id(),
        kind: RequestKind::Item,
        requester: me.to_string(),
        requester_name: Some(principal.name.clone()),
        role: role.name.clone(),
        targets: Some(target.to_string()),
        reason: None,
        item: Some(key.to_string()),
        duration_ms: role.approval.use_within.as_millis() as i64,
        approvals_needed: i64::from(role.approval.approvals),
    };
    let made = store
        .create_request(&new, state.max_pending_requests)
        .await
        .map_err(|e| store_error(e, &new.id))?;
    gateway.metrics.access_step("access_requested");
    tracing::info!(target: "jmxgate::audit", principal = %principal.name, access_request = %made.request.id, target_name = target, "access_requested: an item waits for approval");
    announce_access_step(gateway, state, "access_requested", &made);
    Ok(Settled::Waiting {
        id: made.request.id,
        pending: false,
    })
}

/// The access-requests API, after authentication: the operation and
/// its body read from HTTP, then [`access_operation`].
pub(crate) async fn access_http(
    gateway: &Gateway,
    state: &State,
    parts: &http::request::Parts,
    body: Body,
    caller: AccessCall<'_>,
    headers: &http::HeaderMap,
) -> HttpResponse<Body> {
    let answer = match access_ask(gateway, state, parts, body, &caller, headers).await {
        Ok(ask) => access_operation(gateway, state, ask, &caller).await,
        Err(e) => Err((e, StepNames::default())),
    };
    match answer {
        Ok((status, value)) => {
            let mut resp = HttpResponse::new(Body::from(value.to_string()));
            *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
            let h = resp.headers_mut();
            h.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json; charset=utf-8"),
            );
            respond::no_store(h);
            resp
        }
        Err((e, step)) => {
            let recorded = audit_access_refused(gateway, &caller, &step, &e).await;
            respond::http_error(recorded.as_ref().unwrap_or(&e), headers, false)
        }
    }
}

/// The operation an HTTP request asks for, with its body read.
async fn access_ask(
    gateway: &Gateway,
    state: &State,
    parts: &http::request::Parts,
    body: Body,
    caller: &AccessCall<'_>,
    headers: &http::HeaderMap,
) -> Result<Ask, HttpError> {
    let operation = wire::operation(&parts.method, parts.uri.path())?;
    if caller.ctx.principal.method == AuthMethod::Anonymous {
        return Err(anonymous());
    }
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if parts.method == Method::POST {
        // A change of who may do what: only from the gateway's own
        // page or no page, and as JSON, which no other site's page can
        // send without a preflight (an empty body too: no form, no
        // `text/plain` beacon approves).
        crate::pipeline::same_origin::from_own_page(headers, caller.ctx.tls).map_err(|why| {
            HttpError::new(
                403,
                "jmxgate.CrossSiteRefused",
                format!("access requests are changed only from the gateway's own pages: {why}"),
            )
        })?;
        wire::json_content_type(content_type)?;
    }
    Ok(match operation {
        Operation::List => Ask::List(wire::list_query(parts.uri.query())?),
        Operation::Show(id) => Ask::Show(id),
        Operation::Create => {
            let bytes = gateway.read_body(state, body).await?;
            Ask::Create(wire::body(content_type, &bytes, None)?)
        }
        Operation::Review(id, verdict) => {
            let bytes = gateway.read_body(state, body).await?;
            let review = wire::body(content_type, &bytes, Some(wire::Review::default()))?;
            Ask::Review(id, verdict, review)
        }
        Operation::Revoke(id) => {
            let bytes = gateway.read_body(state, body).await?;
            let _: wire::Review = wire::body(content_type, &bytes, Some(wire::Review::default()))?;
            Ask::Revoke(id)
        }
    })
}

/// One operation on access requests for `caller`, from any door: the
/// status and the answer, or the refusal and what its record names.
pub(crate) async fn access_operation(
    gateway: &Gateway,
    state: &State,
    ask: Ask,
    caller: &AccessCall<'_>,
) -> Answer {
    let Some(identity) = state.access.identity_of(&caller.ctx.principal) else {
        return Err(bare(anonymous()));
    };
    let standing = caller.ctx.standing_names().to_vec();
    let asking = operations::Asking {
        gateway,
        state,
        store: elevation(gateway).store().map_err(bare)?,
        caller,
        may_review: reviewable(state.access.role_configs(), &standing),
        standing,
        reach: Default::default(),
        identity,
    };
    let answer = match ask {
        Ask::List(q) => asking.list(&q).await,
        Ask::Show(id) => asking.show(&id).await,
        Ask::Create(asked) => asking.create(asked).await,
        Ask::Review(id, verdict, review) => asking.review(&id, verdict, &review).await,
        Ask::Revoke(id) => asking.revoke(&id).await,
    };
    note_store_trouble(gateway, answer.as_ref().err().map(|(e, _)| e));
    answer
}

/// A store that failed a caller's operation is away for the next ones
/// too, until the watching task finds it back.
fn note_store_trouble(gateway: &Gateway, e: Option<&HttpError>) {
    if e.is_some_and(|e| e.error_type == UNAVAILABLE) {
        elevation(gateway).set_trouble(Some("the access store did not answer".into()));
        gateway.metrics.access_store_up.set(0);
    }
}

/// `targets` of a request for `role`, checked: a selector that parses
/// (or none: every target of the role), and every target the request
/// would name (those the role reaches within it) reached by the
/// caller's own roles that may request it, as held (a role held in a
/// namespace reaches that namespace only). Targets the caller can't
/// see are counted by nothing: a name that exists beyond its reach
/// and one that doesn't exist get the same answer.
fn within_reach(
    _gateway: &Gateway,
    state: &State,
    role: &RoleConfig,
    targets: Option<&str>,
    standing: &[Arc<Role>],
) -> Result<Option<String>, HttpError> {
    let Some(granted) = state.access.granted_role(&role.name, targets, "-") else {
        return Err(HttpError::bad_request(format!(
            "targets: \"{}\" is not a target name, glob or label selector",
            targets.unwrap_or("").chars().take(100).collect::<String>()
        )));
    };
    let named: Vec<&Arc<crate::fleet::Target>> =
        state.fleet.iter().filter(|t| granted.reaches(t)).collect();
    let within = crate::access::keeps_within(standing, &role.requestable_by, targets)
        && crate::access::cover(standing, &role.requestable_by, named.iter().map(|t| &***t));
    match targets {
        // Not the selector echoed: the answer is the same for every
        // selector refused, whichever targets exist.
        Some(_) if named.is_empty() || !within => Err(HttpError::new(
            403,
            "jmxgate.Forbidden",
            format!(
                "targets: names no target of role \"{}\" within your reach, or some outside it; \
                 ask for targets of the role that your own roles reach",
                role.name
            ),
        )),
        None if !within => Err(HttpError::new(
            403,
            "jmxgate.Forbidden",
            format!(
                "without targets this asks for every target of role \"{}\", beyond what your own roles reach; \
                 name the targets within your reach (targets, e.g. \"namespace=dev\")",
                role.name
            ),
        )),
        _ => Ok(targets.map(str::to_string)),
    }
}

/// Expires what is due (each request once, whichever replica gets it),
/// with an audit record each.
async fn expire_due(gateway: &Gateway, state: &State, store: &Store) {
    let pending_for = state.pending_timeout.as_millis() as i64;
    match store.expire_due(pending_for).await {
        Ok(expired) => {
            for r in &expired {
                elevation(gateway).forget(&r.request.requester);
                let step = AccessStep {
                    who: None,
                    event: "access_expired",
                    request_id: Some(&r.request.id),
                    requester: Some(r.request.shown_requester()),
                    role: Some(&r.request.role),
                    target: r.request.targets.as_deref(),
                    decision: "allowed",
                    status: 200,
                    note: if r.decided_ms.is_some() {
                        "the grant ended"
                    } else {
                        "no review within access.pending_timeout"
                    },
                };
                gateway.record(audit::Event::Access(step)).await.ok();
                announce_access_step(gateway, state, "access_expired", r);
            }
        }
        Err(e) => tracing::warn!("access store: expiring due requests: {e}"),
    }
}

async fn audit_access(
    gateway: &Gateway,
    caller: &AccessCall<'_>,
    event: &'static str,
    request: &StoredRequest,
    decision: &'static str,
    status: u16,
    note: &str,
) -> Result<(), HttpError> {
    let who = caller.who();
    let step = AccessStep {
        who: Some(&who),
        event,
        request_id: Some(&request.request.id),
        requester: Some(request.request.shown_requester()),
        role: Some(&request.request.role),
        target: request.request.targets.as_deref(),
        decision,
        status,
        note,
    };
    gateway.record(audit::Event::Access(step)).await
}

/// The record of a step refused; `Some` replaces the answer when the
/// audit log can't take it.
pub(crate) async fn audit_access_refused(
    gateway: &Gateway,
    caller: &AccessCall<'_>,
    step: &StepNames,
    e: &HttpError,
) -> Option<HttpError> {
    let who = caller.who();
    let decision = match e.status {
        403 | 404 | 409 | 429 | 503 => "denied",
        _ => "invalid",
    };
    let record = AccessStep {
        who: Some(&who),
        event: "access_refused",
        request_id: step.id.as_deref(),
        requester: None,
        role: step.role.as_deref(),
        target: step.target.as_deref(),
        decision,
        status: e.status,
        note: &e.message,
    };
    gateway.record(audit::Event::Access(record)).await.err()
}

/// Tells the journal of a request's step (as an event about the
/// targets its role reaches within its targets, so those who reach
/// them see it), and the reviewers of its role (`notify_url`), off
/// the request path.
fn announce_access_step(
    gateway: &Gateway,
    state: &State,
    event: &'static str,
    request: &StoredRequest,
) {
    if let Some(kind) = crate::events::Kind::of_access_step(event) {
        let q = &request.request;
        let granted = state
            .access
            .granted_role(&q.role, q.targets.as_deref(), &q.id);
        let mut reached = granted
            .iter()
            .flat_map(|role| {
                state
                    .fleet
                    .iter()
                    .filter(|t| role.reaches(t))
                    .map(|t| crate::events::Named {
                        name: t.name.clone(),
                        labels: Some(t.labels.clone()),
                    })
            })
            .peekable();
        // An event without targets would be everyone's (like a reload);
        // one whose targets are all gone is no one's.
        if reached.peek().is_some() {
            let detail =
                crate::notify::describe(event, &wire::view(request, false), str::to_string);
            gateway.health.journal().record(kind, reached, detail);
        }
    }
    let Some(config) = reviewed_under(state.access.role_configs(), request) else {
        return;
    };
    let Some(url) = &config.notify_url else {
        return;
    };
    let notice = crate::notify::Notice::access(
        url.clone(),
        config.notify_format,
        event,
        &wire::view(request, false),
    )
    .named(&format!("role {}'s notify_url", config.name));
    gateway.notifier.send(notice);
}

/// Opens the access store when a role needs it, then each second checks
/// it and expires what is due. Until the store opens, and while it is
/// away, elevation answers 503 and every other request is served.
pub fn spawn_access_store(gateway: &Arc<Gateway>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(gateway);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(SWEEP_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_open = Instant::now();
        let mut last_error: Option<String> = None;
        loop {
            ticks.tick().await;
            // The task ends with the gateway.
            let Some(gateway) = weak.upgrade() else {
                return;
            };
            let state = gateway.state.load_full();
            let elevation = elevation(&gateway);
            let Some(store) = elevation.store.load_full() else {
                if !state.access.uses_elevation() || Instant::now() < next_open {
                    continue;
                }
                match Store::open(&elevation.config).await {
                    Ok(store) => {
                        tracing::info!("access store open: {}", elevation.config.describe());
                        elevation.store.store(Some(Arc::new(store)));
                        elevation.set_trouble(None);
                        gateway.metrics.access_store_up.set(1);
                        last_error = None;
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if last_error.as_ref() != Some(&text) {
                            tracing::error!(
                                "access store ({}) not opened, access requests answer 503 until it is: {text}",
                                elevation.config.describe()
                            );
                        }
                        elevation.set_trouble(Some(format!(
                            "the access store ({}) could not be opened",
                            elevation.config.describe()
                        )));
                        last_error = Some(text);
                        next_open = Instant::now() + Duration::from_secs(5);
                    }
                }
                continue;
            };
            match tokio::time::timeout(GRANT_LOOKUP_TIMEOUT * 2, store.now_ms()).await {
                Ok(Ok(_)) => {
                    if !elevation.healthy() {
                        tracing::info!("access store answers again");
                    }
                    elevation.set_trouble(None);
                    gateway.metrics.access_store_up.set(1);
                    expire_due(&gateway, &state, &store).await;
                }
                failed => {
                    if elevation.healthy() {
                        let why = match failed {
                            Ok(Err(e)) => e.to_string(),
                            _ => "no answer in time".into(),
                        };
                        tracing::error!("access store away, elevation fails closed: {why}");
                    }
                    elevation.set_trouble(Some("the access store did not answer".into()));
                    gateway.metrics.access_store_up.set(0);
                }
            }
        }
    })
}

/// An operation's answer (its HTTP status and JSON), or its refusal and
/// what the refusal's record names.
pub(crate) type Answer = Result<(u16, serde_json::Value), (HttpError, StepNames)>;

/// A refusal that names no request.
fn bare(e: HttpError) -> (HttpError, StepNames) {
    (e, StepNames::default())
}

/// How a four-eyes item was settled.
enum Settled {
    /// Approved: run it now (the approval is used).
    Run(String),
    /// Not (yet) approved: request `id`, found pending or just made.
    Waiting { id: String, pending: bool },
}

/// What the record of a refused step names.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepNames {
    id: Option<String>,
    role: Option<String>,
    target: Option<String>,
}

impl StepNames {
    fn of(r: &StoredRequest) -> StepNames {
        StepNames {
            id: Some(r.request.id.clone()),
            role: Some(r.request.role.clone()),
            target: r.request.targets.clone(),
        }
    }
}
