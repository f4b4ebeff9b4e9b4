//! The fleet's journal for people and programs: `GET /jmxgate/events`
//! (JSON, paged by `?after=<seq>&limit=N`) and the console's events page.
//! A caller sees an event only when their roles reach one of its targets
//! (a reload: when they reach some target), and of its targets only those
//! they reach: nothing tells one team what another's fleet is doing.

use crate::pipeline::RequestContext;
use std::sync::Arc;

use maud::{html, Markup};
use serde_json::{json, Value};

use crate::events::{Event, Named};
use crate::pipeline::{state::State, Gateway};

const DEFAULT_EVENTS: usize = 100;
const MAX_EVENTS: usize = 1000;

/// `?after=&limit=`.
fn query(query: Option<&str>) -> Result<(u64, usize), String> {
    let (mut after, mut limit) = (0, DEFAULT_EVENTS);
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "after" => {
                after = v
                    .parse()
                    .map_err(|_| format!("after={v}: the seq of the last event seen"))?
            }
            "limit" => {
                limit = match v.parse::<usize>() {
                    Ok(n @ 1..=MAX_EVENTS) => n,
                    _ => return Err(format!("limit={v}: a number from 1 to {MAX_EVENTS}")),
                }
            }
            _ => {}
        }
    }
    Ok((after, limit))
}

/// An event as this caller may see it: its targets they reach only.
fn seen(e: &Event, reaches: &dyn Fn(&Named) -> bool, everything: bool) -> Value {
    let targets: Vec<&str> = e
        .targets
        .iter()
        .filter(|n| reaches(n))
        .map(|n| n.name.as_str())
        .collect();
    let mut v = json!({
        "seq": e.seq,
        "at": humantime::format_rfc3339_seconds(e.at).to_string(),
        "kind": e.kind.as_str(),
        "targets": targets,
        "detail": e.detail,
    });
    if everything && e.more > 0 {
        v["more"] = json!(e.more);
    }
    v
}

/// The events this viewer may see after `after`, and where more start.
pub(crate) async fn events_for(
    gateway: &Gateway,
    state: &State,
    parts: &http::request::Parts,
    viewer: &RequestContext,
) -> Result<(Vec<Value>, Option<u64>), (u16, String)> {
    let access = &state.access;
    let held: &[Arc<crate::access::Role>] = &viewer.held;
    let everything = access.is_open();
    let reaches = |n: &Named| match &n.labels {
        Some(labels) => access.reaches_named(held, &n.name, labels),
        None => state
            .fleet
            .by_name(&n.name)
            .is_some_and(|t| access.reaches(held, t)),
    };
    let reaches_some = everything || state.fleet.iter().any(|t| access.reaches(held, t));
    let selected = query(parts.uri.query()).map(|(after, limit)| {
        let (events, next) = gateway.health.journal().after(after, limit, |e| {
            if e.targets.is_empty() {
                reaches_some
            } else {
                e.targets.iter().any(&reaches)
            }
        });
        let seen: Vec<Value> = events
            .iter()
            .map(|e| seen(e, &reaches, everything))
            .collect();
        (seen, next)
    });
    let status = if selected.is_ok() { 200 } else { 400 };
    let listed = selected.as_ref().map_or(0, |(e, _)| e.len());
    if let Err(e) = super::audit_listing(gateway, viewer, "events", status, listed).await {
        return Err((e.status, e.message));
    }
    selected.map_err(|why| (400, why))
}

/// The console's events page.
pub(crate) fn render(base: &str, events: &[Value], next: Option<u64>) -> Markup {
    html! {
        p { a href={ (base) "/" } { "The fleet" } " › events" }
        table.events {
            thead { tr { th { "#" } th { "when" } th { "what" } th { "targets" } th { "detail" } } }
            tbody {
                @for e in events.iter().rev() {
                    tr class=(e["kind"].as_str().unwrap_or("")) {
                        td { (e["seq"]) }
                        td { (e["at"].as_str().unwrap_or("")) }
                        td { (e["kind"].as_str().unwrap_or("").replace('_', " ")) }
                        td {
                            @for t in e["targets"].as_array().into_iter().flatten() {
                                @let name = t.as_str().unwrap_or("");
                                a href={ (base) "/targets/" (super::target::encode(name)) } { (name) } " "
                            }
                            @if let Some(more) = e["more"].as_u64() { "and " (more) " more" }
                        }
                        td { (e["detail"].as_str().unwrap_or("")) }
                    }
                }
            }
        }
        @if let Some(after) = next {
            p { a.next href={ (base) "/events?after=" (after) } { "Newer events" } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_say_what_is_wrong() {
        assert_eq!(query(None).unwrap(), (0, DEFAULT_EVENTS));
        assert_eq!(query(Some("after=7&limit=3")).unwrap(), (7, 3));
        assert!(query(Some("after=x")).unwrap_err().contains("after"));
        assert!(query(Some("limit=0")).unwrap_err().contains("limit"));
    }
}
