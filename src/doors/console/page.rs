//! What every console page shares: the layout, the headers that keep a
//! page from being framed, sniffed, cached or made to run anything but its
//! own assets, and those assets, compiled into the binary.

use axum::body::Body;
use http::{header, HeaderValue, Response};
use maud::{html, Markup, DOCTYPE};

use crate::pipeline::state::State;
use crate::pipeline::RequestContext;

/// Nothing but the console's own style sheet loads; no script runs; no
/// site may frame it; forms post only to it.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub const STYLE_SHEET: &str = include_str!("console.css");
/// Where the style sheet is, below the console's path.
pub const STYLE_SHEET_PATH: &str = "/assets/console.css";

/// Who is looking, as the header shows it: the name, whether signing
/// out means anything (a session or a password the browser holds; not a
/// caller nobody authenticated, nor a client certificate), and whether
/// the Access page exists (some role is requestable or four-eyes).
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    pub name: &'a str,
    pub may_sign_out: bool,
    pub access_page: bool,
}

impl<'a> Viewer<'a> {
    /// A page before anyone signed in.
    pub const NOBODY: Viewer<'static> = Viewer {
        name: "",
        may_sign_out: false,
        access_page: false,
    };

    pub fn of(ctx: &'a RequestContext, state: &State) -> Viewer<'a> {
        use crate::principal::AuthMethod;
        Viewer {
            name: &ctx.principal.name,
            may_sign_out: !matches!(
                ctx.principal.method,
                AuthMethod::Anonymous | AuthMethod::Mtls | AuthMethod::Configured
            ),
            access_page: state.access.uses_elevation(),
        }
    }
}

/// How often (seconds) a page that shows what changes by itself asks for
/// itself again: a `<meta http-equiv="refresh">`, which needs no script
/// (the policy allows none).
pub const REFRESH_SECONDS: u32 = 15;

/// A page with the console's header: where it is and who is looking.
pub fn layout(title: &str, base: &str, viewer: &Viewer<'_>, body: Markup) -> Markup {
    layout_refreshing(title, base, viewer, None, body)
}

/// [`layout`] of a page that asks for itself again every `refresh`
/// seconds (the fleet, the events).
pub fn layout_refreshing(
    title: &str,
    base: &str,
    viewer: &Viewer<'_>,
    refresh: Option<u32>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(seconds) = refresh {
                    meta http-equiv="refresh" content=(seconds);
                }
                title { (title) " · jmxgate" }
                link rel="stylesheet" href={ (base) (STYLE_SHEET_PATH) };
            }
            body {
                header {
                    strong { a href={ (base) "/" } { "jmxgate" } }
                    nav {
                        a href={ (base) "/" } { "Fleet" }
                        a href={ (base) "/answers" } { "Answers" }
                        a href={ (base) "/events" } { "Events" }
                        @if viewer.access_page {
                            a href={ (base) "/access" } { "Access" }
                        }
                        a href={ (base) "/audit" } { "Audit" }
                    }
                    span.title { (title) }
                    span.who { (viewer.name) }
                    @if viewer.may_sign_out {
                        form.sign-out method="post" action={ (base) "/sign-out" } {
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// An error page, its message escaped like everything else.
pub fn error(status: u16, message: &str, base: &str, viewer: &Viewer<'_>) -> Response<Body> {
    let body = layout(
        "Error",
        base,
        viewer,
        html! { p.error { (message) } p { a href={ (base) "/" } { "The fleet" } } },
    );
    respond(status, "text/html; charset=utf-8", body.into_string())
}

/// An answer with the console's headers.
pub fn respond(status: u16, content_type: &'static str, body: String) -> Response<Body> {
    respond_with(
        status,
        content_type,
        body.into(),
        CONTENT_SECURITY_POLICY,
        "no-store",
    )
}

/// An answer of a console page or file under `policy`: never framed,
/// sniffed or sent on as a referrer; cached as `cache_control` says.
pub fn respond_with(
    status: u16,
    content_type: &str,
    body: Body,
    policy: &'static str,
    cache_control: &'static str,
) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    guard(h, policy);
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    r
}

/// The headers that keep an answer on a console path from being framed,
/// sent on as a referrer or opened into another site's window, under
/// `policy`: every console answer's, the 401 of a page asked for without
/// credentials too.
pub fn guard(h: &mut http::HeaderMap, policy: &'static str) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
}
