//! The console door: HTML pages for people at `[console] path` on the
//! Jolokia listeners. A page request has been authenticated and scoped by
//! the shared phases like any other (the caller's standing and granted
//! roles), shows only what those roles reach, and is audited like a
//! target list (`"channel":"console"`).
//!
//! - `config`: the section;
//! - `page`: layout, security headers, the style sheet;
//! - `overview`: the fleet, grouped, filtered and paged;
//! - `target`: one target's header and MBeans, read as the viewer;
//! - `actions`: its forms' operations and writes, typed by the MBean;
//! - `values`: values for people (units, composites as tables);
//! - `trend`: heap, threads and CPU over the last minutes, per target;
//! - `answers`: a reduction over a selector, as a table and a chart;
//! - `access`: access requests asked, reviewed and revoked in forms;
//! - `forms`: what keeps another site from posting a console form;
//! - `events`: the fleet's journal, also as `GET /jmxgate/events`;
//! - `trail`: the audit records, own or (auditors) everyone's;
//! - `hawtio`: Hawtio's build served connected to one target;
//! - `login`: signing in at an OpenID provider (`[console.oidc]`), the
//!   session cookie, signing out; `sign_in`: its workings, pure of any
//!   request's state.
//!
//! Pages are made with maud (checked at compile time, every value
//! escaped); no script runs in them. The posts are `access` forms and a
//! target page's `actions` (run an operation, write an attribute).

mod access;
mod actions;
mod answers;
pub mod config;
mod events;
mod forms;
mod hawtio;
pub(crate) mod login;
mod overview;
mod page;
pub(crate) mod sign_in;
mod target;
mod trail;
pub mod trend;
mod values;

use axum::body::Body;
use http::{Method, Response};

use crate::doors::DoorSections;
use crate::pipeline::{audit, parse, Gateway, RequestContext};

/// One record of a listing the viewer read: `what` (`target_list`,
/// `events`, `audit_trail`, `hawtio_connections`), its status and how many
/// entries it held.
async fn audit_listing(
    gateway: &Gateway,
    viewer: &RequestContext,
    what: &'static str,
    status: u16,
    listed: usize,
) -> Result<(), crate::pipeline::HttpError> {
    let record = audit::TargetListRecord {
        who: &viewer.who(),
        what,
        status,
        listed,
    };
    gateway.record(audit::Event::Listing(record)).await
}

/// The "no such target" page when the viewer's roles don't reach
/// `name`: the same answer as for a target that doesn't exist.
fn unseen_target(
    viewer: &RequestContext,
    state: &crate::pipeline::state::State,
    name: &str,
) -> Option<Response<Body>> {
    let visible = state
        .fleet
        .by_name(name)
        .is_some_and(|t| state.access.reaches(&viewer.held, t));
    (!visible).then(|| {
        page::error(
            404,
            &format!("No target \"{name}\" in your fleet."),
            &state.console().path,
            &page::Viewer::of(viewer, state),
        )
    })
}

/// Where the journal is read as JSON.
pub const EVENTS_PATH: &str = "/jmxgate/events";

/// The door: a console page, or `/jmxgate/events`.
pub(crate) async fn console_door(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &http::HeaderMap,
    body: Body,
    viewer: &RequestContext,
) -> Response<Body> {
    if parts.uri.path() == EVENTS_PATH {
        events_http(gateway, state, parts, viewer).await
    } else {
        console_http(gateway, state, parts, headers, body, viewer).await
    }
}

/// Answers a console request.
async fn console_http(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &http::HeaderMap,
    body: Body,
    viewer: &RequestContext,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    let rest = &parts.uri.path()[base.len()..];
    let access_form = rest == "/access" || rest.starts_with("/access/");
    if parts.method == Method::POST && access_form {
        let form = &rest["/access".len()..];
        return access::access_post(gateway, state, headers, body, viewer, form).await;
    }
    if parts.method == Method::POST {
        if let Some(name) = rest.strip_prefix("/targets/") {
            let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
            return target_post(gateway, state, headers, body, viewer, &name).await;
        }
    }
    if !matches!(parts.method, Method::GET | Method::HEAD) {
        return page::error(405, "The console's pages are read with GET.", base, who);
    }
    match rest {
        "/access" => access::access_page(gateway, state, headers, viewer).await,
        "/audit" => trail::audit_page(gateway, state, parts, viewer).await,
        "" | "/" => overview(gateway, state, parts, viewer).await,
        "/answers" => answers::answers_page(gateway, state, parts, viewer).await,
        config::HAWTIO_CONNECTIONS => {
            hawtio::hawtio_connections(gateway, state, parts, headers, viewer).await
        }
        "/events" => match events::events_for(gateway, state, parts, viewer).await {
            Ok((events, next)) => page::respond(
                200,
                "text/html; charset=utf-8",
                page::layout_refreshing(
                    "Events",
                    base,
                    who,
                    Some(page::REFRESH_SECONDS),
                    events::render(base, &events, next),
                )
                .into_string(),
            ),
            Err((status, why)) => page::error(status, &why, base, who),
        },
        _ if rest.starts_with(config::HAWTIO) => {
            hawtio::hawtio_http(gateway, state, viewer, &rest[config::HAWTIO.len()..]).await
        }
        _ => match rest.strip_prefix("/targets/") {
            Some(name) => {
                let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
                target_page(gateway, state, parts, headers, viewer, &name).await
            }
            None => page::error(404, "No such page.", base, who),
        },
    }
}

/// `GET /jmxgate/events`: the journal as JSON.
async fn events_http(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    viewer: &RequestContext,
) -> Response<Body> {
    let (status, body) = if parts.method != Method::GET {
        (405, serde_json::json!({"error": "GET the events"}))
    } else {
        match events::events_for(gateway, state, parts, viewer).await {
            Ok((events, next)) => {
                let mut v = serde_json::json!({"events": events});
                if let Some(after) = next {
                    v["next"] = serde_json::json!(after);
                }
                (200, v)
            }
            Err((status, why)) => (status, serde_json::json!({"error": why})),
        }
    };
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    r
}

/// One target's page; a target the viewer's roles don't reach is
/// "no such target", the same as one that doesn't exist.
async fn target_page(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
    name: &str,
) -> Response<Body> {
    let mbean: Option<String> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .find(|(k, _)| k == "mbean")
            .map(|(_, v)| v.into_owned());
    show_target(gateway, state, headers, viewer, name, mbean, None).await
}

/// A target page's form posted (an operation to run, an attribute to
/// write): checked to come from a console page with its token, typed by
/// the MBean's own list, run as the viewer, then the page again with
/// what it did.
async fn target_post(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    headers: &http::HeaderMap,
    body: Body,
    viewer: &RequestContext,
    name: &str,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    if let Some(hidden) = unseen_target(viewer, state, name) {
        return hidden;
    }
    let fields = async {
        forms::check_origin(headers, viewer.tls)?;
        let bytes = gateway
            .read_body(state, body)
            .await
            .map_err(|e| e.message)?;
        forms::read(headers, &bytes)
    };
    let fields = match fields.await {
        Ok(fields) => fields,
        Err(why) => return page::error(403, &why, base, who),
    };
    let mbean = forms::field(&fields, "mbean").to_string();
    let list = match target::console_item(gateway, state, viewer, target::list_item(name)).await {
        Ok(v) => v,
        Err(e) => return page::error(e.status, &e.message, base, who),
    };
    let (domain, key) = mbean.split_once(':').unwrap_or((&mbean, ""));
    let (form, kept) = actions::kept(&fields);
    let asked = actions::asked(&fields, &list["value"][domain][key]);
    let done = match asked {
        Err(why) => target::Done {
            asked: "Not sent".into(),
            wrote: false,
            form,
            kept,
            answer: Err(why),
        },
        Ok(asked) => {
            let item = asked
                .request()
                .map(|r| parse::Parsed::typed(vec![Ok(parse::ParsedItem::to(name, r))]));
            let answer = match item {
                Err(why) => Err(why),
                Ok(item) => target::console_item_as(gateway, state, viewer, "POST", item)
                    .await
                    .map_err(|e| e.message),
            };
            target::Done {
                wrote: matches!(asked, actions::Asked::Write { .. }),
                asked: asked.describe(),
                form,
                kept,
                answer,
            }
        }
    };
    let mbean = (!mbean.is_empty()).then_some(mbean);
    show_target(
        gateway,
        state,
        headers,
        viewer,
        name,
        mbean,
        Some((list, done)),
    )
    .await
}

/// The target's page, with `mbean` shown (read as the viewer) and what a
/// form just did (with the list it was typed by).
async fn show_target(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
    name: &str,
    mbean: Option<String>,
    done: Option<(serde_json::Value, target::Done)>,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    if let Some(hidden) = unseen_target(viewer, state, name) {
        return hidden;
    }
    let Some(shown) = state.fleet.by_name(name) else {
        return page::error(404, "No such target.", base, who);
    };
    let (list, done) = match done {
        Some((list, done)) => (list, Some(done)),
        None => match target::console_item(gateway, state, viewer, target::list_item(name)).await {
            Ok(v) => (v, None),
            Err(e) => return page::error(e.status, &e.message, base, who),
        },
    };
    let read = match &mbean {
        Some(m) => {
            match target::console_item(gateway, state, viewer, target::read_item(name, m)).await {
                Ok(v) => Some(v),
                Err(e) => return page::error(e.status, &e.message, base, who),
            }
        }
        None => None,
    };
    let may_run = |operation: &str| match &mbean {
        Some(m) => target::console_may_run(gateway, state, viewer, name, m, operation),
        None => false,
    };
    let may_write = |attribute: &str| match &mbean {
        Some(m) => target::console_may_write(gateway, state, viewer, name, m, attribute),
        None => false,
    };
    let trend = trend_of(gateway, state, viewer, name).await;
    let token = forms::token(headers, base, viewer.tls);
    let hawtio = match state.console().hawtio_elsewhere() {
        Some(url) => Some(hawtio::elsewhere_link(url, name)),
        None => state
            .console()
            .hawtio_served()
            .map(|_| format!("{base}{}{}/", config::HAWTIO, target::encode(name))),
    };
    // Without an MBean (no form to lose what is typed), the page asks for
    // itself again, and so draws its trend.
    let refresh = (mbean.is_none() && done.is_none()).then_some(page::REFRESH_SECONDS);
    let body = target::render(
        base,
        &shown.view(),
        trend,
        &list,
        mbean.as_deref().zip(read.as_ref()),
        &target::Changes {
            may_run: &may_run,
            may_write: &may_write,
            token: &token.value,
            done: done.as_ref(),
        },
        hawtio.as_deref().map(|href| target::Hawtio {
            href,
            elsewhere: state.console().hawtio_elsewhere().is_some(),
        }),
    );
    let mut r = page::respond(
        200,
        "text/html; charset=utf-8",
        page::layout_refreshing(name, base, who, refresh, body).into_string(),
    );
    if let Some(cookie) = token.set_cookie {
        r.headers_mut().append(http::header::SET_COOKIE, cookie);
    }
    r
}

/// The target's trend, with this showing's reads (as the viewer) added,
/// drawn with the lines the viewer may read.
async fn trend_of(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    name: &str,
) -> maud::Markup {
    // One bulk of three reads, audited in its order.
    let items = trend::READS.map(|(mbean, attribute, path)| {
        crate::protocol::Request::read(mbean, Some(attribute))
            .map(|r| match path {
                Some(p) => r.at_path(p),
                None => r,
            })
            .map(|r| parse::ParsedItem::to(name, r))
    });
    let answers = target::console_items(
        gateway,
        state,
        viewer,
        "GET",
        parse::Parsed::typed(items.to_vec()),
    )
    .await
    .unwrap_or_default();
    let point = trend::Point::of(crate::clock::unix_seconds(), &answers);
    let trends: &trend::Trends = gateway.rooms.get();
    let points = if point.values.iter().any(Option::is_some) {
        trends.add(name, point)
    } else {
        trends.of(name)
    };
    let shown = trend::READS.map(|(mbean, attribute, _)| {
        target::console_may_read(gateway, state, viewer, name, mbean, attribute)
    });
    trend::render(&points, shown)
}

async fn overview(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    viewer: &RequestContext,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    let access = &state.access;
    let visible = state
        .fleet
        .iter()
        .filter(|t| access.reaches(&viewer.held, t));
    let selected = overview::Query::parse(parts.uri.query())
        .and_then(|q| overview::select(visible, &q).map(|o| (q, o)));
    let (status, listed) = match &selected {
        Ok((_, o)) => (200, o.rows.len()),
        Err(_) => (400, 0),
    };
    if let Err(e) = audit_listing(gateway, viewer, "target_list", status, listed).await {
        return page::error(e.status, &e.message, base, who);
    }
    match selected {
        Ok((q, o)) => page::respond(
            200,
            "text/html; charset=utf-8",
            overview::render(&o, &q, base, who).into_string(),
        ),
        Err(why) => page::error(400, &why, base, who),
    }
}
