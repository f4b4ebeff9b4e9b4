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
    access_page_with(gateway, state, headers, viewer, None).await
}

/// A form that could not be done: why, with its status, and what the
/// person typed, to fill the form with again.
pub struct Kept {
    pub status: u16,
    pub error: String,
    pub fields: Vec<(String, String)>,
}

/// The access page, after a form that failed (`kept`) or not.
async fn access_page_with(
    gateway: &Gateway,
    state: &State,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
    kept: Option<Kept>,
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
    let body = render(base, me.name, &roles, &listed, &token.value, kept.as_ref());
    let mut r = page::respond(
        kept.as_ref().map_or(200, |k| k.status),
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
        Ok(fields)
    };
    // A form that is not the page's own: an error page, nothing kept.
    let fields = match asked.await {
        Ok(fields) => fields,
        Err(e) => {
            return access_refused(gateway, state, &caller, &StepNames::default(), &e, base).await
        }
    };
    let ask = match ask(form, &fields) {
        Ok(ask) => ask,
        Err(why) => {
            let e = refused(400, why);
            let step = StepNames::default();
            return form_again(gateway, state, headers, viewer, &step, e, fields).await;
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
        Err((e, step)) => form_again(gateway, state, headers, viewer, &step, e, fields).await,
    }
}

/// The page's own form that can't be done: recorded as the API records a
/// refused step, then the page again, saying why, with what was typed
/// (an error page when the record could not be written).
async fn form_again(
    gateway: &Gateway,
    state: &State,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
    step: &StepNames,
    e: crate::pipeline::HttpError,
    fields: Vec<(String, String)>,
) -> Response<Body> {
    let caller = AccessCall::of(viewer);
    if let Some(lost) = crate::doors::access::audit_access_refused(gateway, &caller, step, &e).await
    {
        let base = state.console().path.as_str();
        return page::error(
            lost.status,
            &lost.message,
            base,
            &page::Viewer::of(viewer, state),
        );
    }
    let kept = Kept {
        status: e.status,
        error: e.message,
        fields,
    };
    access_page_with(gateway, state, headers, viewer, Some(kept)).await
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
pub fn render(
    base: &str,
    me: &str,
    roles: &[Requestable],
    listed: &Value,
    token: &str,
    kept: Option<&Kept>,
) -> Markup {
    let requests = listed["requests"].as_array().cloned().unwrap_or_default();
    let typed = |name: &str| kept.map(|k| forms::field(&k.fields, name)).unwrap_or("");
    let duration = match typed("duration") {
        "" => "30m",
        given => given,
    };
    html! {
        @if let Some(k) = kept {
            p.error { (k.error) }
        }
        h2 { "Ask for a role" }
        @if roles.is_empty() {
            p { "None of your roles may ask for another." }
        } @else {
            form.ask method="post" action={ (base) "/access" } {
                input type="hidden" name=(forms::FIELD) value=(token);
                label { "Role "
                    select name="role" required {
                        @for r in roles {
                            option value=(r.role) selected[typed("role") == r.role] {
                                (r.role) " (at most " (humantime::format_duration(r.max_duration)) ")"
                                @if r.reason_required { ", reason required" }
                            }
                        }
                    }
                }
                label { "For " input type="text" name="duration" value=(duration) size="6" required; }
                label { "Targets " input type="text" name="targets" placeholder="all the role reaches"
                    value=(typed("targets")) maxlength="512"; }
                label { "Reason " input type="text" name="reason" placeholder="INC-1234"
                    value=(typed("reason")) maxlength=(wire::MAX_TEXT_CHARS) size="30"; }
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
            td.item {
                @if r["kind"] == "item" {
                    "one run of " code { (wire::item_words(&r["item"])) }
                    @if let Some(args) = r["item"].get("arguments") { " with " code { (args.to_string()) } }
                    @if let Some(value) = r["item"].get("value") { " = " code { (value.to_string()) } }
                    " on " strong.target { (s("targets")) } " as " (s("role"))
                } @else {
                    "role " strong { (s("role")) } " for " (s("duration"))
                    " on " @match r["targets"].as_str() {
                        Some(t) => code.target { (t) },
                        None => "all it reaches",
                    }
                }
            }
            @let (shown, when) = shown_state(r);
            td { (shown) @if let Some(when) = when { br; small { (when) } } }
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
                @if mine && (state == "pending" || state == "approved" && r.get("used").is_none()) {
                    form.revoke method="post" action=(action("revoke")) {
                        input type="hidden" name=(forms::FIELD) value=(token);
                        button type="submit" { "Revoke" }
                    }
                }
            }
        }
    }
}

/// A request's state as people read it, and when: an approved item that
/// ran is `used`; a grant runs until its end, an item waits for its one
/// use until then; an expired one ended then; a revoked one names who.
fn shown_state(r: &Value) -> (String, Option<String>) {
    let at = |key: &str| r[key].as_str().map(str::to_string);
    let state = r["state"].as_str().unwrap_or("").to_string();
    match state.as_str() {
        "approved" if r.get("used").is_some() => {
            ("used".into(), at("used").map(|t| format!("at {t}")))
        }
        "approved" if r["kind"] == "item" => {
            (state, at("expires").map(|t| format!("to use by {t}")))
        }
        "approved" => (state, at("expires").map(|t| format!("until {t}"))),
        "expired" => (state, at("expires").map(|t| format!("at {t}"))),
        "revoked" => (state, at("ended_by").map(|by| format!("by {by}"))),
        "denied" => (state, at("decided").map(|t| format!("at {t}"))),
        _ => (state, at("created").map(|t| format!("asked {t}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_read_as_words_with_their_targets_and_what_became_of_them() {
        let listed = json!({"requests": [
            {"id": "ar-1", "kind": "item", "state": "approved", "requester": "dev", "role": "ops",
             "targets": "orders-1", "approvals": 1, "approvals_needed": 1, "reviews": [],
             "item": {"type": "exec", "mbean": "java.lang:type=Memory", "operation": "gc", "arguments": []},
             "used": "2026-12-04T10:00:00Z", "expires": "2026-12-04T11:00:00Z", "created": "t"},
            {"id": "ar-2", "kind": "role", "state": "revoked", "requester": "dev", "role": "ops",
             "duration": "1h", "approvals": 1, "approvals_needed": 1, "reviews": [],
             "ended_by": "dev", "expires": "2026-12-04T11:00:00Z", "created": "t"},
            {"id": "ar-3", "kind": "item", "state": "approved", "requester": "dev", "role": "ops",
             "targets": "orders-2", "approvals": 1, "approvals_needed": 1, "reviews": [],
             "item": {"type": "write", "mbean": "d:k=v", "attribute": "Level", "value": "FINE"},
             "expires": "2026-12-04T11:00:00Z", "created": "t"}
        ]});
        let html = render("/console", "dev", &[], &listed, "T", None).into_string();
        assert!(html.contains("one run of <code>exec java.lang:type=Memory gc</code> with <code>[]</code> on <strong class=\"target\">orders-1</strong> as ops"), "{html}");
        assert!(
            html.contains("<td>used<br><small>at 2026-12-04T10:00:00Z</small></td>"),
            "{html}"
        );
        assert!(
            !html.contains("/console/access/ar-1/revoke"),
            "a used approval has nothing to revoke: {html}"
        );
        assert!(
            html.contains("<td>revoked<br><small>by dev</small></td>"),
            "{html}"
        );
        assert!(
            !html.contains("until"),
            "nothing ended reads \"until\": {html}"
        );
        assert!(
            html.contains(
                "= <code>&quot;FINE&quot;</code> on <strong class=\"target\">orders-2</strong>"
            ),
            "{html}"
        );
        assert!(html.contains("to use by 2026-12-04T11:00:00Z"), "{html}");
        assert!(html.contains("/console/access/ar-3/revoke"), "{html}");
        assert!(!html.contains("{&quot;"), "no item as JSON: {html}");
    }

    #[test]
    fn a_form_that_failed_comes_back_with_what_was_typed() {
        let roles = [
            Requestable {
                role: "ops".into(),
                max_duration: Duration::from_secs(3600),
                reason_required: true,
            },
            Requestable {
                role: "dba".into(),
                max_duration: Duration::from_secs(3600),
                reason_required: false,
            },
        ];
        let kept = Kept {
            status: 400,
            error: "duration \"soon\": say how long".into(),
            fields: vec![
                ("role".into(), "dba".into()),
                ("duration".into(), "soon".into()),
                ("reason".into(), "INC-7 <b>".into()),
            ],
        };
        let html = render(
            "/console",
            "dev",
            &roles,
            &json!({"requests": []}),
            "T",
            Some(&kept),
        )
        .into_string();
        assert!(
            html.contains("<p class=\"error\">duration &quot;soon&quot;: say how long</p>"),
            "{html}"
        );
        assert!(html.contains("<option value=\"dba\" selected>"), "{html}");
        assert!(html.contains("name=\"duration\" value=\"soon\""), "{html}");
        assert!(html.contains("value=\"INC-7 &lt;b&gt;\""), "{html}");
    }

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
        let html = render("/console", "lead", &[], &listed, "TOKEN", None).into_string();
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
