//! Signing in to the console at an OpenID provider (`[console.oidc]`):
//! the authorization-code flow with PKCE (RFC 7636).
//!
//! A console page asked for without credentials sends the browser to the
//! provider, with a `state` and a code challenge; what the callback needs
//! to check them (the state, the code verifier, the page to return to)
//! waits in a short-lived cookie, so any replica can take the callback.
//! The callback trades the code for an access token, which
//! `[auth.bearer]` verifies exactly as a bearer header (issuer, audience,
//! keys, roles): the gateway keeps no session of its own. The token is the
//! session cookie (`HttpOnly`, `SameSite=Lax`, scoped to the console's
//! path), honoured on console pages only, and on the Jolokia requests of
//! the Hawtio the console serves only from the console's own origin. When
//! it expires the next page goes through the provider again (silently
//! while the provider's own session lasts).

use std::time::Duration;

use axum::body::Body;
use http::{header, HeaderMap, HeaderValue, Method, Response};
use maud::html;

use super::config::ConsoleConfig;
use super::forms::cookie_value;
use super::page;
use super::sign_in::{
    check_callback, cookie, safe_return, session_credentials, SignIn, SESSION_COOKIE,
    SIGN_IN_COOKIE,
};
use crate::doors::DoorSections;
use crate::pipeline::{audit, Gateway};

/// Past this a token can't be a cookie (browsers keep about 4 KiB).
const MAX_TOKEN_BYTES: usize = 3800;
/// Where a signed-out browser lands, below the console's path.
pub const SIGNED_OUT: &str = "/signed-out";
/// The sign-out form's target, below the console's path.
pub const SIGN_OUT: &str = "/sign-out";

/// The gateway as browsers reach it: `[console] public_url`, else the
/// request's scheme and `Host`.
pub fn public_url(
    state: &crate::pipeline::state::State,
    headers: &HeaderMap,
    https: bool,
) -> url::Url {
    let configured = state
        .console()
        .public_url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok());
    configured.unwrap_or_else(|| {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        let scheme = if https { "https" } else { "http" };
        url::Url::parse(&format!("{scheme}://{host}/"))
            .unwrap_or_else(|_| url::Url::parse(&format!("{scheme}://localhost/")).expect("a URL"))
    })
}

/// A `303 See Other` to `to`, with cookies to set.
fn see_other(to: &str, cookies: &[String]) -> Response<Body> {
    let mut r = page::respond(303, "text/plain; charset=utf-8", String::new());
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    r
}

/// A page for someone not signed in (the layout names no one).
fn outside_page(status: u16, title: &str, base: &str, body: maud::Markup) -> Response<Body> {
    page::respond(
        status,
        "text/html; charset=utf-8",
        page::layout(title, base, &page::Viewer::NOBODY, body).into_string(),
    )
}

/// Step 2 on a gateway whose console may sign people in: the
/// sign-in's own requests are answered first ([`console_sign_in`]),
/// the session cookie is presented as the bearer credential it holds,
/// then authenticate; a console page whose session no longer passes
/// goes through the provider again. `Err`: the answer to send.
pub(crate) async fn authenticate_caller(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &mut HeaderMap,
    conn: &crate::pipeline::authenticate::Connection,
    request_id: &str,
    cors: bool,
) -> Result<crate::principal::Principal, Response<Body>> {
    if let Some(answer) = console_sign_in(gateway, state, parts, headers, conn, request_id).await {
        return Err(answer);
    }
    let session = session_credentials(state.console(), parts.uri.path(), headers, conn.tls);
    let had_session = session.is_some();
    if let Some(bearer) = session {
        headers.insert(header::AUTHORIZATION, bearer);
    }
    match gateway
        .authenticate(state, headers, conn, request_id, cors)
        .await
    {
        Ok(p) => Ok(p),
        Err(refusal) => {
            let again =
                console_sign_in_again(gateway, state, parts, headers, conn.tls, had_session).await;
            let mut answer = again.unwrap_or(refusal);
            // A console page's refusal is framed no more than the page.
            if state.console().serves(parts.uri.path())
                && state.console().hawtio_jolokia(parts.uri.path()).is_none()
            {
                super::page::guard(answer.headers_mut(), super::page::CONTENT_SECURITY_POLICY);
            }
            Err(answer)
        }
    }
}

/// The requests answered before authentication: the style sheet, the
/// signed-out page, signing out, and with `[console.oidc]` the
/// provider's callback and a console page asked for with no
/// credentials at all (sent to the provider). `None`: the request goes
/// on to authentication.
async fn console_sign_in(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &HeaderMap,
    conn: &crate::pipeline::authenticate::Connection,
    request_id: &str,
) -> Option<Response<Body>> {
    let base = state.console().path.as_str();
    let path = parts.uri.path();
    if !state.console().serves(path) || path == super::EVENTS_PATH {
        return None;
    }
    let rest = &path[base.len()..];
    // The style sheet says nothing about anyone: pages shown before
    // signing in (signed out, a failed sign-in) use it too.
    if rest == page::STYLE_SHEET_PATH {
        return Some(page::respond(
            200,
            "text/css; charset=utf-8",
            page::STYLE_SHEET.into(),
        ));
    }
    if rest == SIGNED_OUT {
        return Some(outside_page(
            200,
            "Signed out",
            base,
            html! {
                p { "You are signed out of the console." }
                p.note { "A browser keeps a Basic password or a client certificate until it is closed." }
                p { a href={ (base) "/" } { "Sign in again" } }
            },
        ));
    }
    if rest == SIGN_OUT && parts.method == Method::POST {
        if let Err(why) = super::forms::check_origin(headers, conn.tls) {
            return Some(page::error(403, &why, base, &page::Viewer::NOBODY));
        }
        let gone = cookie(SESSION_COOKIE, "", base, conn.tls, Some(0));
        return Some(see_other(&format!("{base}{SIGNED_OUT}"), &[gone]));
    }
    let sign_in = state.console_sign_in().as_ref()?;
    if path == sign_in.config.redirect_path(base) {
        return Some(
            sign_in_callback(gateway, state, sign_in, parts, headers, conn, request_id).await,
        );
    }
    let bare = !headers.contains_key(header::AUTHORIZATION)
        && conn.peer_certificates.is_none()
        && cookie_value(headers, SESSION_COOKIE).is_none();
    if bare && wants_page(state.console(), parts) {
        let public = public_url(state, headers, conn.tls);
        return Some(send_to_provider(gateway, sign_in, parts, &public, conn.tls).await);
    }
    None
}

/// After authentication failed: a console page whose session cookie
/// is no longer accepted (expired, or keys rotated) signs in again.
/// `had_session`: the credentials were the session cookie's.
async fn console_sign_in_again(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &HeaderMap,
    https: bool,
    had_session: bool,
) -> Option<Response<Body>> {
    let sign_in = state.console_sign_in().as_ref()?;
    if !(had_session && wants_page(state.console(), parts)) {
        return None;
    }
    let public = public_url(state, headers, https);
    Some(send_to_provider(gateway, sign_in, parts, &public, https).await)
}

async fn send_to_provider(
    _gateway: &Gateway,
    sign_in: &SignIn,
    parts: &http::request::Parts,
    public: &url::Url,
    https: bool,
) -> Response<Body> {
    let base = sign_in.base.as_str();
    let endpoints = match sign_in.endpoints().await {
        Ok(e) => e,
        Err(why) => {
            tracing::warn!(issuer = %sign_in.issuer, "console sign-in: the provider can't be reached: {why}");
            return outside_page(
                503,
                "Sign-in unavailable",
                base,
                html! { p.error { "The sign-in provider can't be reached now; try again shortly." } },
            );
        }
    };
    let wanted = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or(base);
    let (url, cookie) = sign_in.start(
        &endpoints,
        &sign_in.redirect_uri(public),
        &safe_return(base, wanted),
        https,
    );
    let gone = self::cookie(SESSION_COOKIE, "", base, https, Some(0));
    let mut r = see_other(&url, &[cookie, gone]);
    *r.status_mut() = http::StatusCode::FOUND;
    r
}

async fn sign_in_callback(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    sign_in: &SignIn,
    parts: &http::request::Parts,
    headers: &HeaderMap,
    conn: &crate::pipeline::authenticate::Connection,
    request_id: &str,
) -> Response<Body> {
    let base = sign_in.base.as_str();
    let failed = |status: u16, why: &str| {
        outside_page(
            status,
            "Sign-in failed",
            base,
            html! {
                p.error { (why) }
                p { a href={ (base) "/" } { "Sign in again" } }
            },
        )
    };
    let callback = match check_callback(base, parts.uri.query().unwrap_or(""), headers) {
        Ok(c) => c,
        Err(why) => {
            tracing::info!(request_id, "console sign-in refused: {why}");
            return failed(400, &why);
        }
    };
    let redirect_uri = sign_in.redirect_uri(&public_url(state, headers, conn.tls));
    let token = match sign_in.endpoints().await {
        Ok(endpoints) => {
            sign_in
                .exchange(
                    &endpoints,
                    &callback.code,
                    &callback.verifier,
                    &redirect_uri,
                )
                .await
        }
        Err(why) => Err(why),
    };
    let token = match token {
        Ok(t) if t.len() <= MAX_TOKEN_BYTES && HeaderValue::from_str(&t).is_ok() => t,
        Ok(_) => {
            return failed(
                502,
                "The provider's access token is too large to keep in a cookie.",
            )
        }
        Err(why) => {
            tracing::warn!(
                request_id,
                "console sign-in: the code was not traded for a token: {why}"
            );
            return failed(502, &format!("The provider did not give a token: {why}"));
        }
    };
    // Verified as any bearer token is, on this listener's terms; a
    // refusal is audited there.
    let mut with_token = HeaderMap::new();
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {token}")) {
        v.set_sensitive(true);
        with_token.insert(header::AUTHORIZATION, v);
    }
    let principal = match gateway
        .authenticate(state, &with_token, conn, request_id, false)
        .await
    {
        Ok(p) => p,
        Err(_) => {
            return failed(
                403,
                "The gateway does not accept the provider's token for you (its issuer, audience or roles are not what [auth.bearer] asks).",
            )
        }
    };
    // The sign-in's answer is its own record: it comes before the
    // request's context (authentication is what makes one).
    let roles: Vec<String> = state
        .access
        .roles_of(&principal)
        .iter()
        .map(|r| r.name.clone())
        .collect();
    let who = audit::Who {
        request_id,
        principal: &principal,
        roles: &roles,
        client: conn.remote,
        latency: Duration::ZERO,
        channel: Some(audit::Channel::Console),
        tool: None,
        mcp_client: None,
    };
    let record = audit::TargetListRecord {
        who: &who,
        what: "console_sign_in",
        status: 303,
        listed: 0,
    };
    if let Err(e) = gateway.record(audit::Event::Listing(record)).await {
        return failed(e.status, &e.message);
    }
    let session = cookie(SESSION_COOKIE, &token, base, conn.tls, None);
    let done = cookie(SIGN_IN_COOKIE, "", base, conn.tls, Some(0));
    see_other(&callback.return_to, &[session, done])
}

/// A console page a person's browser would show: a `GET` of a page, not
/// the events API, a Hawtio file or Hawtio's Jolokia requests (those
/// answer 401 as before).
fn wants_page(console: &ConsoleConfig, parts: &http::request::Parts) -> bool {
    let path = parts.uri.path();
    parts.method == Method::GET
        && console.serves(path)
        && !path[console.path.len()..].starts_with(super::config::HAWTIO)
}
