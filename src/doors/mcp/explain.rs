//! The `explain` tool: what `/jmxgate/explain` tells about a request, for
//! the caller's own roles, target by target: the decision, the role and
//! rule that decide it, and how the gateway would run it. It is judged by
//! the same route and authorize as a call ([`Gateway::judge`]); nothing is
//! sent to an agent. Only targets the caller's roles reach are named (a
//! selector reaches no others), and only the caller's own rules.

use std::time::Instant;

use serde_json::{json, Value};

use super::answer::Outcome;
use super::tools::ToolName;
use super::McpCaller;
use crate::pipeline::authorize::approval;
use crate::pipeline::{audit, parse, route, Gateway, Judged};

/// The assistant's hint for a name it may not use: the same as the other
/// tools give (`answer::shape`), whether the target is hidden or absent.
fn no_such_target(target: &str) -> String {
    format!(
        "{target}: no such target that you may reach; list_targets shows the targets you may reach"
    )
}

/// `explain` for `target` (a name or a selector): the item judged for
/// the caller, audited as an `explain` record.
pub(crate) async fn explain_tool(
    gateway: &Gateway,
    caller: &McpCaller,
    target: &str,
    item: &parse::ParsedItem,
) -> Outcome {
    let started = Instant::now();
    let state = &caller.state;
    let parsed = parse::Parsed::typed(vec![Ok(item.clone())]);
    let Some(asked) = parsed.items.first() else {
        return Outcome::Failed("explain: nothing to explain".into());
    };
    let judged_as = caller.judged_as();
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let judged = gateway.judge(state, &judged_as, addressing, asked);
    let results = match per_target(caller, target, judged) {
        Ok(results) => results,
        Err((status, error_type, text)) => {
            crate::doors::mcp::audit_refused_call(
                gateway,
                caller,
                ToolName::Explain.as_str(),
                status,
                error_type,
                &text,
            )
            .await;
            return Outcome::Failed(text);
        }
    };
    let allowed = results.iter().any(|r| r["decision"] == "allow");
    let decision = if allowed { "allow" } else { "deny" };
    let note = format!("explained {} target(s): {decision}", results.len());
    let who = caller.who(Some(ToolName::Explain.as_str()), started.elapsed());
    let record = audit::RequestRecord {
        who: &who,
        event: "explain",
        decision: "allowed",
        status: 200,
        error_type: None,
        target: Some(target),
        note: &note,
    };
    if let Err(e) = gateway.record(audit::Event::Request(record)).await {
        return Outcome::Failed(e.message);
    }
    let item = item.describe();
    let mut answer = json!({
        "target": target,
        "type": item["type"],
        "decision": decision,
        "results": results,
    });
    for key in ["mbean", "attribute", "operation", "path"] {
        if let Some(v) = item.get(key) {
            answer[key] = v.clone();
        }
    }
    Outcome::Done(answer)
}

/// One entry per target, as `/jmxgate/explain` words it; or why there is
/// nothing to explain (status, error type and text), for a target the
/// caller may not see or a request that could not be routed.
fn per_target(
    caller: &McpCaller,
    given: &str,
    judged: Judged<'_>,
) -> Result<Vec<Value>, (u16, &'static str, String)> {
    let allow = |target: &crate::fleet::Target,
                 allowed: crate::pipeline::authorize::Allowed,
                 request: Option<&crate::protocol::Request>| {
        if !caller.page_reaches(target) {
            // From a browser page, a call would be refused here.
            let page = caller.page.as_ref().map_or("", |p| p.origin.as_str());
            return json!({
                "target": target.name, "decision": "deny", "status": 403,
                "error": format!("Origin {page} is not admitted by the <cors> <allow-origin> of \
                                  your roles that reach this target"),
                "rule": "the page's origin: no role of yours that reaches this target admits it",
            });
        }
        let mut entry = json!({
            "target": target.name, "decision": "allow", "rule": allowed.rule,
            "roles": allowed.grant.roles(), "plan": allowed.plan.name(),
        });
        // Allowed, but it runs only once a reviewer approves this item:
        // said as `/jmxgate/explain` says it.
        if let (Some(role), Some(request)) = (&allowed.approval, request) {
            entry["approval_required"] = approval::rule_text(role, request).into();
        }
        entry
    };
    let deny = |target: &str, error: &crate::protocol::ProtocolError, rule: &str| {
        json!({
            "target": target, "decision": "deny", "status": error.status,
            "error": error.message, "rule": rule,
        })
    };
    match judged {
        Judged::Failed {
            target,
            error,
            rule,
            hidden,
        } => match rule {
            _ if hidden || error.error_type == "jmxgate.UnknownTarget" => {
                Err((404, "jmxgate.UnknownTarget", no_such_target(given)))
            }
            // Malformed or unroutable (a selector that matches nothing).
            None => Err((
                error.status,
                "jmxgate.BadRequest",
                match target {
                    Some(_) if error.message.starts_with("Target ") => error.message,
                    _ => format!("{given}: {}", error.message),
                },
            )),
            // Denied before routing (no role), or on the one target.
            Some(rule) => Ok(vec![deny(
                target.as_deref().unwrap_or(given),
                &error,
                &rule,
            )]),
        },
        Judged::Local { allowed, .. } => Ok(vec![json!({
            "target": "gateway", "decision": "allow", "rule": allowed.rule,
            "roles": allowed.grant.roles(), "plan": allowed.plan.name(),
        })]),
        Judged::Agent {
            target,
            allowed,
            request,
            ..
        } => Ok(vec![allow(&target, allowed, Some(request))]),
        Judged::Group { outcomes, .. } => Ok(outcomes
            .into_iter()
            .map(|(target, outcome)| match outcome {
                Ok(allowed) => allow(&target, allowed, None),
                Err(denied) => deny(&target.name, &denied.error, &denied.rule),
            })
            .collect()),
    }
}
