//! What a caller's resources are made of and when they change: a
//! target's resource (its labels, state, agent and the MBeans a search
//! found), and the `subscriptions/listen` loop that tells a caller of the
//! changes it may see, from the gateway's own view of its targets.

use rmcp::service::SubscriptionContext;
use serde_json::{json, Value};

use super::{resources, McpCaller};
use crate::pipeline::Gateway;

/// How often a subscription looks at what it watches (the gateway's own
/// view of its targets: no agent is asked).
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// How long one `subscriptions/listen` runs before it ends gracefully.
pub const LISTEN_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// What a watched resource's content depends on, per URI: its target's
/// state, agent and labels as the gateway knows them; `None` where the
/// caller sees no such target.
type Look = (&'static str, Option<String>, Option<String>, String);

fn watched(gateway: &Gateway, caller: &McpCaller, uris: &[String]) -> Vec<Option<Look>> {
    let state = gateway.state.load();
    uris.iter()
        .map(|uri| {
            let name = match resources::parse(uri).ok()? {
                resources::Resource::Target(t) | resources::Resource::Mbean { target: t, .. } => t,
            };
            let t = state.fleet.by_name(&name)?;
            if !state.access.reaches(&caller.ctx.held, t) || !caller.page_reaches(t) {
                return None;
            }
            let v = t.view();
            let labels: Vec<String> = v.labels.iter().map(|(k, l)| format!("{k}={l}")).collect();
            Some((
                v.health.state,
                v.agent.version,
                v.agent.protocol,
                labels.join(","),
            ))
        })
        .collect()
}

/// The names of the targets the caller may see now (for `list_changed`).
fn visible_names(gateway: &Gateway, caller: &McpCaller) -> Vec<String> {
    let state = gateway.state.load();
    let mut names: Vec<String> = state
        .fleet
        .iter()
        .filter(|t| state.access.reaches(&caller.ctx.held, t) && caller.page_reaches(t))
        .map(|t| t.name.clone())
        .collect();
    names.sort_unstable();
    names
}

/// Runs one `subscriptions/listen` for `caller`: a look every
/// [`WATCH_EVERY`] at what it watches, a notification for each change,
/// until the client goes or [`LISTEN_FOR`] has passed (a graceful end:
/// the client listens again).
pub(super) async fn listen(
    gateway: &Gateway,
    caller: &McpCaller,
    subscription: SubscriptionContext,
) {
    let uris = subscription
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let list = subscription.accepted().resources_list_changed == Some(true);
    let sink = subscription.sink().clone();
    let watching = async {
        let mut before = watched(gateway, caller, &uris);
        let mut listed = visible_names(gateway, caller);
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = watched(gateway, caller, &uris);
            for uri in resources::changed(&uris, &before, &now) {
                if sink.notify_resource_updated(uri).await.is_err() {
                    return;
                }
            }
            before = now;
            if list {
                let names = visible_names(gateway, caller);
                if names != listed && sink.notify_resource_list_changed().await.is_err() {
                    return;
                }
                listed = names;
            }
        }
    };
    tokio::select! {
        () = watching => {}
        () = subscription.cancelled() => {}
        () = tokio::time::sleep(LISTEN_FOR) => {}
    }
}

/// A target's resource: its labels, and the MBeans a `search_mbeans` of
/// it found for the caller, each with its resource URI.
pub(super) fn target_resource(caller: &McpCaller, target: &str, found: Value) -> Value {
    let labels: serde_json::Map<String, Value> = caller
        .state
        .fleet
        .by_name(target)
        .map(|t| {
            t.labels
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect()
        })
        .unwrap_or_default();
    let mbeans: Vec<Value> = found["results"][0]["mbeans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| json!({"name": m, "uri": resources::mbean_uri(target, m)}))
        .collect();
    let (health, agent) = caller
        .state
        .fleet
        .by_name(target)
        .map(|t| {
            let v = t.view();
            (
                json!(v.health.state),
                json!({"version": v.agent.version, "protocol": v.agent.protocol}),
            )
        })
        .unwrap_or_default();
    let mut resource = json!({"target": target, "labels": labels, "health": health,
                              "agent": agent, "mbeans": mbeans});
    if found.get("next_cursor").is_some() || found.get("truncated").is_some() {
        resource["truncated"] = json!(
            "more MBeans than one answer holds: search_mbeans with a pattern,              or its next_cursor, finds the rest"
        );
    }
    resource
}
