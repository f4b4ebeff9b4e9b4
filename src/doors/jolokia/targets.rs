//! `GET /jolokia/targets`: the targets the caller may reach.

use axum::body::Body;
use http::{HeaderMap, Method, Response as HttpResponse};

use crate::clock::unix_seconds;
use crate::pipeline::state::State;
use crate::pipeline::{audit, respond, Gateway, HttpError, RequestContext};
use crate::protocol::Response;

/// `GET /jolokia/targets`: the targets the caller's roles reach, with
/// labels, health, latency, agent version and protocol. Recorded in
/// the audit log like an item.
pub(crate) async fn target_list(
    gateway: &Gateway,
    state: &State,
    ctx: &RequestContext,
    request: &http::request::Parts,
    headers: &HeaderMap,
    cors: bool,
) -> HttpResponse<Body> {
    let access = &state.access;
    let held = &ctx.held[..];
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
        who: &ctx.who(),
        what: "target_list",
        status,
        listed: listed.as_ref().map_or(0, Vec::len),
    };
    if let Err(e) = gateway.record(audit::Event::Listing(record)).await {
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
