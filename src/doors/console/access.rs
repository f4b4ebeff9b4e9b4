//! Access requests for people: ask for a role, see your requests and
//! those you may review, approve or deny with a comment, revoke your own.
//! Every change is the access-requests API's own operation
//! (`access_operation`) for the viewer's standing roles, so the rules,
//! the store, the notices and the audit records are the API's; this
//! module reads the forms and draws the page.

use crate::doors::DoorSections;
use crate::pipeline::RequestContext;
use std::time::Duration;

use axum::body::Body;
use http::Response;
use maud::{html, Markup};
use serde_json::Value;

use crate::access::RoleConfig;
use crate::doors::access::{wire, AccessCall, Ask, StepNames};
use crate::pipeline::{state::State, Gateway};
use crate::store::Verdict;

use super::{forms, page};

/// `GET <console>/access`: the form to ask, the requests to see.
pub(crate) async fn access_page(
    gateway: &Gateway,
    state: &State,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let me = &page::Viewer::of(viewer, state);
    if !state.access.uses_elevation() {
        return page::error(
            404,
            "Access requests are not set up here: no role is requestable_by another.",
            base,
            me,
        );
    }
    let caller = AccessCall::of(viewer);
    let list = Ask::List(wire::ListQuery {
        state: None,
        limit: wire::DEFAULT_LIST,
    });
    let listed = match crate::doors::access::access_operation(gateway, state, list, &caller).await {
        Ok((_, listed)) => listed,
        Err((e, step)) => return access_refused(gateway, state, &caller, &step, &e, base).await,
    };
    let standing: Vec<String> = viewer.standing.iter().map(|r| r.name.clone()).collect();
    let roles = requestable(state.access.role_configs(), &standing);
    let token = forms::token(headers, base, viewer.tls);
    let body = render(base, me.name, &roles, &listed, &token.value);
    let mut r = page::respond(
        200,
        "text/html; charset=utf-8",
        page::layout("Access requests", base, me, body).into_string(),
    );
    if let Some(cookie) = token.set_cookie {
        r.headers_mut().append(http::header::SET_COOKIE, cookie);
    }
    r
}

/// A posted access form (`form`: the path after `/access`), checked
/// to come from a console page, run as the API's operation; then back
/// to the page (303), or an error page that says why.
pub(crate) async fn access_post(
    gateway: &Gateway,
    state: &State,
    headers: &http::HeaderMap,
    body: Body,
    viewer: &RequestContext,
    form: &str,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let caller = AccessCall::of(viewer);
    let refused = |status: u16, why: String| {
        crate::pipeline::HttpError::new(status, "jmxgate.ConsoleFormRefused", why)
    };
    let asked = async {
        forms::check_origin(headers, viewer.tls).map_err(|why| refused(403, why))?;
        let bytes = gateway.read_body(state, body).await?;
        if bytes.len() > wire::MAX_BODY_BYTES {
            return Err(refused(
                413,
                format!("a form is at most {} bytes", wire::MAX_BODY_BYTES),
            ));
        }
        let fields = forms::read(headers, &bytes).map_err(|why| refused(403, why))?;
        ask(form, &fields).map_err(|why| refused(400, why))
    };
    let ask = match asked.await {
        Ok(ask) => ask,
        Err(e) => {
            return access_refused(gateway, state, &caller, &StepNames::default(), &e, base).await
        }
    };
    match crate::doors::access::access_operation(gateway, state, ask, &caller).await {
        Ok(_) => {
            let mut r = page::respond(303, "text/plain; charset=utf-8", String::new());
            let to = format!("{base}/access");
            if let Ok(location) = http::HeaderValue::from_str(&to) {
                r.headers_mut().insert(http::header::LOCATION, location);
            }
            r
        }
        Err((e, step)) => access_refused(gateway, state, &caller, &step, &e, base).await,
    }
}

/// A refused access step: recorded as the API records it, shown as
/// a page.
async fn access_refused(
    gateway: &Gateway,
    state: &State,
    caller: &AccessCall<'_>,
    step: &StepNames,
    e: &crate::pipeline::HttpError,
    base: &str,
) -> Response<Body> {
    let recorded = crate::doors::access::audit_access_refused(gateway, caller, step, e).await;
    let e = recorded.as_ref().unwrap_or(e);
    page::error(
        e.status,
        &e.message,
        base,
        &page::Viewer::of(caller.ctx, state),
    )
}

/// A role the viewer may ask for, and for how long at most.
pub struct Requestable {
    pub role: String,
    pub max_duration: Duration,
    pub reason_required: bool,
}

/// The roles a caller holding `standing` may request.
pub fn requestable(configs: &[RoleConfig], standing: &[String]) -> Vec<Requestable> {
    configs
        .iter()
        .filter(|r| r.requestable_by.iter().any(|by| standing.contains(by)))
        .map(|r| Requestable {
            role: r.name.clone(),
            max_duration: r.max_duration,
            reason_required: r.reason == crate::access::ReasonRule::Required,
        })
        .collect()
}

/// What a post to `rest` (after `/access`) asks, from its form's fields.
pub fn ask(rest: &str, fields: &[(String, String)]) -> Result<Ask, String> {
    let text = |name: &str| {
        let v = forms::field(fields, name).trim();
        (!v.is_empty()).then(|| v.to_string())
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        [] => {
            let role = text("role").ok_or("role: pick the role to ask for")?;
            let duration = text("duration").unwrap_or_default();
            let duration = humantime::parse_duration(&duration)
                .map_err(|_| format!("duration \"{duration}\": say how long, e.g. 30m or 2h"))?;
            Ok(Ask::Create(wire::Create {
                role,
                duration,
                targets: text("targets"),
                reason: text("reason"),
            }))
        }
        [id, action] => {
            let review = wire::Review {
                comment: text("comment"),
            };
            let id = id.to_string();
            match *action {
                "approve" => Ok(Ask::Review(id, Verdict::Approve, review)),
                "deny" => Ok(Ask::Review(id, Verdict::Deny, review)),
                "revoke" => Ok(Ask::Revoke(id)),
                _ => Err("no such action: approve, deny or revoke".into()),
            }
        }
        _ => Err("no such form".into()),
    }
}

/// The page: the form to ask, then the requests the viewer may see
/// (`listed`: the API's list answer), each with the forms the viewer may
/// use on it. `token` goes into every form.
pub fn render(base: &str, me: &str, roles: &[Requestable], listed: &Value, token: &str) -> Markup {
    let requests = listed["requests"].as_array().cloned().unwrap_or_default();
    html! {
        h2 { "Ask for a role" }
        @if roles.is_empty() {
            p { "None of your roles may ask for another." }
        } @else {
            form.ask method="post" action={ (base) "/access" } {
                input type="hidden" name=(forms::FIELD) value=(token);
                label { "Role "
                    select name="role" required {
                        @for r in roles {
                            option value=(r.role) {
                                (r.role) " (at most " (humantime::format_duration(r.max_duration)) ")"
                                @if r.reason_required { ", reason required" }
                            }
                        }
                    }
                }
                label { "For " input type="text" name="duration" value="30m" size="6" required; }
                label { "Targets " input type="text" name="targets" placeholder="all the role reaches"
                    maxlength="512"; }
                label { "Reason " input type="text" name="reason" placeholder="INC-1234"
                    maxlength=(wire::MAX_TEXT_CHARS) size="30"; }
                button type="submit" { "Ask" }
            }
        }
        h2 { "Requests" }
        @if requests.is_empty() {
            p { "No requests of yours or for you to review." }
        } @else {
            table.requests {
                thead { tr {
                    th { "request" } th { "asked by" } th { "for" } th { "state" }
                    th { "approvals" } th { "reason" } th { "reviews" } th { "" }
                } }
                tbody {
                    @for r in &requests {
                        (row(base, me, r, token))
                    }
                }
            }
        }
    }
}

fn row(base: &str, me: &str, r: &Value, token: &str) -> Markup {
    let s = |key: &str| r[key].as_str().unwrap_or("").to_string();
    let id = s("id");
    let state = s("state");
    let mine = s("requester") == me;
    let action = |verb: &str| format!("{base}/access/{id}/{verb}");
    html! {
        tr class=(state) id=(id) {
            td { code { (id) } br; small { (s("created")) } }
            td { (s("requester")) }
            td {
                @if r["kind"] == "item" {
                    "one run of " code { (r["item"].to_string()) } " as " (s("role"))
                } @else {
                    "role " strong { (s("role")) } " for " (s("duration"))
                    @if let Some(t) = r["targets"].as_str() { " on " code { (t) } }
                }
            }
            td { (state) @if let Some(until) = r["expires"].as_str() { br; small { "until " (until) } } }
            td { (r["approvals"]) " of " (r["approvals_needed"]) }
            td.reason { (s("reason")) }
            td.reviews {
                @for v in r["reviews"].as_array().into_iter().flatten() {
                    div {
                        (v["reviewer"].as_str().unwrap_or("")) " " (v["verdict"].as_str().unwrap_or(""))
                        @if let Some(c) = v["comment"].as_str() { ": " q { (c) } }
                    }
                }
            }
            td.actions {
                @if r["may_review"] == true {
                    form.review method="post" action=(action("approve")) {
                        input type="hidden" name=(forms::FIELD) value=(token);
                        input type="text" name="comment" placeholder="comment"
                            maxlength=(wire::MAX_TEXT_CHARS);
                        button type="submit" { "Approve" }
                        button type="submit" formaction=(action("deny")) { "Deny" }
                    }
                }
                @if mine && matches!(state.as_str(), "pending" | "approved") {
                    form.revoke method="post" action=(action("revoke")) {
                        input type="hidden" name=(forms::FIELD) value=(token);
                        button type="submit" { "Revoke" }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn forms_become_the_apis_operations() {
        let Ask::Create(c) = ask(
            "",
            &fields(&[
                ("role", "ops"),
                ("duration", "30m"),
                ("targets", " "),
                ("reason", "INC-9"),
            ]),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (c.role.as_str(), c.duration, c.targets, c.reason.as_deref()),
            ("ops", Duration::from_secs(1800), None, Some("INC-9"))
        );
        let id = "ar-0123456789abcdef0123";
        assert!(matches!(
            ask(&format!("/{id}/deny"), &fields(&[("comment", "no")])).unwrap(),
            Ask::Review(i, Verdict::Deny, wire::Review { comment: Some(c) }) if i == id && c == "no"
        ));
        assert!(matches!(
            ask(&format!("/{id}/revoke"), &[]).unwrap(),
            Ask::Revoke(_)
        ));
        for (rest, f, says) in [
            ("", fields(&[("duration", "1h")]), "role"),
            (
                "",
                fields(&[("role", "ops"), ("duration", "soon")]),
                "duration",
            ),
            ("/ar-1/bless", vec![], "no such action"),
        ] {
            assert!(ask(rest, &f).unwrap_err().contains(says), "{rest}");
        }
    }

    #[test]
    fn each_request_offers_what_the_viewer_may_do_and_escapes_what_callers_wrote() {
        let listed = json!({"requests": [
            {"id": "ar-1", "kind": "role", "state": "pending", "requester": "dev", "role": "ops",
             "duration": "30m", "approvals": 0, "approvals_needed": 1, "reviews": [],
             "reason": "<script>alert(1)</script>", "may_review": true, "created": "t"},
            {"id": "ar-2", "kind": "role", "state": "approved", "requester": "lead", "role": "ops",
             "duration": "1h", "approvals": 1, "approvals_needed": 1, "may_review": false,
             "reviews": [{"reviewer": "x", "verdict": "approve", "comment": "<b>ok</b>"}], "created": "t"}
        ]});
        let html = render("/console", "lead", &[], &listed, "TOKEN").into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<b>ok"),
            "{html}"
        );
        assert!(html.contains("/console/access/ar-1/approve"), "{html}");
        assert!(html.contains("/console/access/ar-1/deny"), "{html}");
        assert!(!html.contains("/console/access/ar-2/approve"), "{html}");
        // The viewer's own approved request may be revoked; the other not.
        assert!(html.contains("/console/access/ar-2/revoke"), "{html}");
        assert!(!html.contains("/console/access/ar-1/revoke"), "{html}");
        assert_eq!(html.matches("value=\"TOKEN\"").count(), 2, "{html}");
        assert!(html.contains("None of your roles may ask"), "{html}");
    }
}
