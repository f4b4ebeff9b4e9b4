//! What browsers bring: the page's origin, `<cors>` per caller, JSONP,
//! and state changes asked from another site.

use std::sync::Arc;

use http::{HeaderMap, Method};

use crate::access::AccessControl;
use crate::pipeline::items::Items;
use crate::pipeline::{parse, reaching, HttpError};
use crate::protocol::Command;

/// `Origin`, or `Referer` when there is none (as Jolokia reads it), with
/// line breaks removed.
pub(crate) fn request_origin(headers: &HeaderMap) -> Option<String> {
    headers
        .get(http::header::ORIGIN)
        .or_else(|| headers.get(http::header::REFERER))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.replace(['\r', '\n'], ""))
}

/// Whether to send CORS headers for this origin: one of `roles` admits it
/// in its `<cors>` (every origin when the gateway is open). `roles` are the
/// caller's own once it is known; before that, every configured role.
pub(crate) fn cors_allowed<'a>(
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
pub(crate) fn targets_admit(
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
pub(crate) fn jsonp_admitted(
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
pub(crate) fn cross_site_refused(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::parse;

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
}
