//! The Jolokia door: `/jolokia` (GET's path grammar and POST bodies, the
//! virtual URL `/jolokia/targets/<name>/…`), with the browser checks a
//! Jolokia agent makes itself (`<cors>`, JSONP, requests from other
//! sites), judged per item; `/jmxgate/explain` and the target list beside
//! it.

pub(crate) mod browser;
pub(crate) mod explain;
pub(crate) mod targets;

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Response as HttpResponse};

use crate::fleet::Target;
use crate::pipeline::items::Items;
use crate::pipeline::route::Addressing;
use crate::pipeline::state::State;
use crate::pipeline::{parse, respond, Gateway, HttpError, Refused};
use crate::protocol::{Command, Response};
use browser::{cross_site_refused, jsonp_admitted, targets_admit};

/// A Jolokia request to run (who asks is the request's context): the
/// request, where it was addressed, and the CORS answer `scope` gave.
pub(crate) struct JolokiaDoor<'a> {
    pub(crate) parts: &'a http::request::Parts,
    /// The virtual URL's target (`/jolokia/targets/<name>`).
    pub(crate) virtual_target: Option<&'a Arc<Target>>,
    pub(crate) cors: bool,
    /// The path after the door's prefix (GET's path grammar).
    pub(crate) rest: &'a str,
}

/// The Jolokia door, after authentication: parse, then steps 4 to 7
/// (`run_items`) with the browser checks of CORS and JSONP per item,
/// audit and respond.
pub(crate) async fn jolokia_http(
    gateway: &Gateway,
    state: &State,
    door: JolokiaDoor<'_>,
    body: Body,
    refused: &Refused<'_>,
) -> HttpResponse<Body> {
    let JolokiaDoor {
        parts,
        virtual_target,
        cors,
        rest,
    } = door;
    let ctx = refused.ctx;
    let (held, origin) = (&ctx.held[..], ctx.origin.as_deref());
    let access = &state.access;
    let headers = refused.headers;
    let parsed = read_request(gateway, state, &parts.method, rest, parts.uri.query(), body).await;
    let parsed = match parsed {
        Ok(p) => p,
        Err(e) => return refused.answer(&e, None, cors).await,
    };

    let addressing = match virtual_target {
        Some(t) => Addressing::Virtual(t),
        None => Addressing::Proxy {
            default_target: state.default_target.as_ref(),
        },
    };
    let caller = ctx.caller(parts.method.as_str());
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok());
    let local = |command: &Command| gateway.answer_locally(state, ctx, command, host);
    // Another site's page changing state (CSRF), then CORS and JSONP,
    // per item: the roles that reach each item's target must admit
    // the page's origin.
    let browser_check = |items: &Items| {
        let cors = cors && origin.is_none_or(|o| targets_admit(access, held, items, o));
        cross_site_refused(held, items, &parsed, &parts.method, headers).map_err(|e| (e, cors))?;
        if parsed.query.get("callback").is_some() {
            jsonp_admitted(access, held, items, headers).map_err(|e| (e, cors))?;
        }
        Ok(cors)
    };
    let ran = gateway
        .run_items(state, &caller, addressing, &parsed, local, browser_check)
        .await;
    let (cors, merged) = match ran {
        Ok(ran) => ran,
        Err((e, cors)) => return refused.answer(&e, None, cors).await,
    };
    if let Err(e) = gateway
        .record(crate::pipeline::audit::Event::Items {
            who: &ctx.who(),
            state,
            parsed: &parsed,
            merged: &merged,
        })
        .await
    {
        return respond::http_error(&e, headers, cors);
    }
    let answers: Vec<Response> = merged.into_iter().map(|(answer, _)| answer).collect();
    let body = respond::body_of(answers, parsed.bulk);
    respond::http_response(body, &parsed.query, headers, cors)
}

/// Step 3 for any method: the GET path or the POST body, parsed.
async fn read_request(
    gateway: &Gateway,
    state: &State,
    method: &Method,
    rest: &str,
    query: Option<&str>,
    body: Body,
) -> Result<parse::Parsed, HttpError> {
    match *method {
        Method::GET => parse::parse_get(rest, query),
        Method::POST => {
            let bytes = gateway.read_body(state, body).await?;
            parse::parse_post(&bytes, query, state.max_bulk_items)
        }
        _ => Err(HttpError::new(
            405,
            "jmxgate.MethodNotAllowed",
            format!("HTTP method {method} is not supported; use GET or POST"),
        )),
    }
}
