//! `/jmxgate/explain`: what the gateway would decide for a request, item by
//! item, without running it.

use axum::body::Body;
use http::{Method, Response as HttpResponse};

use crate::doors::jolokia::JolokiaDoor;
use crate::pipeline::route::Addressing;
use crate::pipeline::state::State;
use crate::pipeline::visible_target;
use crate::pipeline::{audit, authorize, respond, Gateway, HttpError, Judged, Refused};

/// One item's entry in an explain report: its decision and rule, the plan
/// or the error, per target for a group.
fn explained(index: usize, kind: Option<&str>, judged: Judged<'_>) -> serde_json::Value {
    let mut entry = serde_json::json!({ "index": index, "type": kind });
    let allow = |entry: &mut serde_json::Value, target: &str, allowed: authorize::Allowed| {
        entry["target"] = target.into();
        entry["decision"] = "allow".into();
        entry["rule"] = (*allowed.rule).into();
        entry["plan"] = allowed.plan.name().into();
        entry["roles"] = allowed.grant.roles().into();
    };
    match judged {
        Judged::Failed {
            target,
            error,
            rule,
            hidden,
        } => {
            let (target, rule) = if hidden { (None, None) } else { (target, rule) };
            entry["target"] = target.into();
            entry["decision"] = "deny".into();
            entry["status"] = error.status.into();
            entry["error"] = error.message.into();
            entry["rule"] = rule
                .unwrap_or_else(|| "the request could not be routed".into())
                .into();
        }
        Judged::Local { allowed, .. } => allow(&mut entry, "gateway", allowed),
        Judged::Agent {
            target,
            allowed,
            request,
            ..
        } => {
            // Allowed, but it runs only once a reviewer approves this item.
            let waits = allowed
                .approval
                .as_ref()
                .map(|role| authorize::approval::rule_text(role, request));
            allow(&mut entry, &target.name, allowed);
            if let Some(why) = waits {
                entry["approval_required"] = why.into();
            }
        }
        Judged::Group {
            selector, outcomes, ..
        } => {
            let targets: Vec<serde_json::Value> = outcomes
                .into_iter()
                .map(|(target, outcome)| match outcome {
                    Ok(allowed) => serde_json::json!({
                        "target": target.name, "decision": "allow",
                        "rule": allowed.rule, "plan": allowed.plan.name(),
                    }),
                    Err(denied) => serde_json::json!({
                        "target": target.name, "decision": "deny",
                        "status": denied.error.status, "error": denied.error.message,
                        "rule": denied.rule,
                    }),
                })
                .collect();
            let any_allowed = targets.iter().any(|t| t["decision"] == "allow");
            entry["target"] = selector.into();
            entry["decision"] = if any_allowed { "allow" } else { "deny" }.into();
            entry["targets"] = targets.into();
        }
    }
    entry
}

/// `POST /jmxgate/explain`: the route and authorize decisions for each
/// item of a request, for the caller's own roles, without contacting
/// any agent. `?target=<name>` judges it as sent to that target's
/// virtual URL, `?method=GET` as if it came by GET. It passes the
/// same admission and authentication as any request, and is audited:
/// it tells what the policy would allow.
pub(crate) async fn explain(
    gateway: &Gateway,
    state: &State,
    door: JolokiaDoor<'_>,
    body: Body,
    refused: &Refused<'_>,
) -> HttpResponse<Body> {
    let JolokiaDoor { parts, cors, .. } = door;
    let (ctx, headers) = (refused.ctx, refused.headers);
    let held = &ctx.held[..];
    if parts.method != Method::POST {
        let e = HttpError::new(
            405,
            "jmxgate.MethodNotAllowed",
            "POST the request (or bulk) to explain",
        );
        return refused.answer(&e, None, cors).await;
    }
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let param = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    // `?target=` is judged as that target's virtual URL.
    let virtual_target = match param("target") {
        None => None,
        Some(name) => match visible_target(state, held, name) {
            Ok(t) => Some(t),
            Err(e) => return refused.answer(&e, Some(name), cors).await,
        },
    };
    let method = match param("method").map(str::to_ascii_uppercase).as_deref() {
        None | Some("POST") => "POST",
        Some("GET") => "GET",
        Some(other) => {
            let e = HttpError::bad_request(format!("method={other}: use GET or POST"));
            return refused.answer(&e, None, cors).await;
        }
    };
    let parsed = match crate::doors::jolokia::read_request(
        gateway,
        state,
        &Method::POST,
        "",
        parts.uri.query(),
        body,
    )
    .await
    {
        Ok(p) => p,
        Err(e) => return refused.answer(&e, None, cors).await,
    };
    let addressing = match &virtual_target {
        Some(t) => Addressing::Virtual(t),
        None => Addressing::Proxy {
            default_target: state.default_target.as_ref(),
        },
    };
    let caller = ctx.caller(method);
    let report: Vec<serde_json::Value> = parsed
        .items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let kind = item
                .parsed
                .as_ref()
                .ok()
                .map(|p| p.request.command.type_name());
            explained(index, kind, gateway.judge(state, &caller, addressing, item))
        })
        .collect();
    let decisions: Vec<&str> = report
        .iter()
        .map(|r| r["decision"].as_str().unwrap_or("-"))
        .collect();
    let note = format!(
        "explained {} item(s): {}",
        report.len(),
        decisions.join(", ")
    );
    let record = audit::RequestRecord {
        who: &ctx.who(),
        event: "explain",
        decision: "allowed",
        status: 200,
        error_type: None,
        target: param("target"),
        note: &note,
    };
    let recorded = gateway.record(audit::Event::Request(record)).await;
    if let Err(e) = recorded {
        return respond::http_error(&e, headers, cors);
    }
    let body = if parsed.bulk {
        serde_json::to_vec(&report)
    } else {
        serde_json::to_vec(&report[0])
    }
    .expect("JSON values serialise");
    respond::http_response(body, &crate::protocol::Params::default(), headers, cors)
}
