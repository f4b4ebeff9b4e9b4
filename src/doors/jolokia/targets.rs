//! `GET /jolokia/targets`: the targets the caller may reach.

use std::sync::Arc;

use axum::body::Body;
use http::{HeaderMap, Method, Response as HttpResponse};

use crate::clock::unix_seconds;
use crate::pipeline::state::State;
use crate::pipeline::{audit, authenticate, respond, Gateway, HttpError};
use crate::protocol::Response;
use std::time::Instant;

/// Who asked for the target list, for its audit record.
pub(crate) struct TargetListing<'a> {
    pub(crate) principal: &'a authenticate::Principal,
    /// Its roles, standing and granted.
    pub(crate) held: &'a [Arc<crate::access::Role>],
    pub(crate) request_id: &'a str,
    pub(crate) client: Option<std::net::SocketAddr>,
    pub(crate) started: Instant,
    /// The client chain for policies' `<remote>`, and the listener's
    /// scheme (the console's reads run as this caller).
    pub(crate) chain: &'a [String],
    pub(crate) scheme: &'static str,
    /// Its standing roles only (the console's access requests: a grant
    /// neither asks for more nor reviews).
    pub(crate) standing: &'a [Arc<crate::access::Role>],
}

/// `GET /jolokia/targets`: the targets the caller's roles reach, with
/// labels, health, latency, agent version and protocol. Recorded in
/// the audit log like an item.
pub(crate) async fn target_list(
    gateway: &Gateway,
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
    if let Err(e) = gateway.audit_listing(&record).await {
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
