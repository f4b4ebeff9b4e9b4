//! `[[events.webhooks]]`: the fleet's journal told to webhooks, per event
//! kind, with the same delivery as access-request notices (`notify`:
//! queued per destination, bursts of a kind batched, retried, a circuit
//! per destination, never in a request's way, the URL a secret). A hook
//! may be narrowed to targets (a selector): it hears only of events about
//! them, and of those targets only; a reload, about no target, goes to
//! hooks without one.
//!
//! The journal broadcasts what it records; one task per gateway reads it
//! and, against the configuration of the moment (a reload changes the
//! hooks at once), queues the notices.

use std::sync::Arc;

pub mod config;

use crate::access::TargetSelector;
use crate::events::{Event, Named};
use crate::jobs::JobSections;
use crate::notify::Notice;

use crate::pipeline::Gateway;
use config::WebhookConfig;

/// A target's labels by name, for events that name a target of the
/// fleet without them.
pub type LabelsOf<'a> = &'a dyn Fn(&str) -> Option<crate::labels::Labels>;

/// The notice a hook gets of `event`, if any: its kind is one the hook
/// names, and (for a hook with targets) the event is about some of them,
/// which alone it names.
pub fn notice_for(hook: &WebhookConfig, event: &Event, labels_of: LabelsOf<'_>) -> Option<Notice> {
    let kind = event.kind.as_str();
    if !hook.kinds.is_empty() && !hook.kinds.iter().any(|k| k == kind) {
        return None;
    }
    let selector = match &hook.targets {
        Some(s) => Some(TargetSelector::parse(s).ok()?),
        None => None,
    };
    let matches = |n: &Named| {
        let Some(selector) = &selector else {
            return true;
        };
        let labels = n.labels.clone().or_else(|| labels_of(&n.name));
        labels.is_some_and(|labels| selector.matches_named(&n.name, &labels))
    };
    let targets: Vec<&str> = event
        .targets
        .iter()
        .filter(|n| matches(n))
        .map(|n| n.name.as_str())
        .collect();
    if hook.targets.is_some() && targets.is_empty() {
        return None;
    }
    // Past the named targets, the count is only known of the whole event.
    let more = if hook.targets.is_none() {
        event.more
    } else {
        0
    };
    let at = humantime::format_rfc3339_seconds(event.at).to_string();
    Some(Notice::event(
        hook.url.clone(),
        hook.format,
        event.kind,
        event.seq,
        &at,
        &targets,
        more,
        &event.detail,
    ))
}

/// The part of `event` this replica tells, with `[cluster]`: of an event
/// about the fleet's targets (down, up, breakers, discovered, removed),
/// which every replica may see, the targets it owns (none: `None`), so
/// each target's news is told once, by its owner; the count past the
/// named targets by the owner of the first. Access steps and reloads
/// happen on one replica, which tells them whole.
pub fn this_replicas_part(event: &Event, view: &crate::cluster::View) -> Option<Event> {
    use crate::events::Kind;
    let about_the_fleet = matches!(
        event.kind,
        Kind::TargetDown
            | Kind::TargetUp
            | Kind::BreakerOpened
            | Kind::BreakerClosed
            | Kind::TargetsDiscovered
            | Kind::TargetsRemoved
    );
    if !about_the_fleet || event.targets.is_empty() {
        return Some(event.clone());
    }
    let targets: Vec<Named> = event
        .targets
        .iter()
        .filter(|n| view.owns(&n.name))
        .cloned()
        .collect();
    if targets.is_empty() {
        return None;
    }
    let more = if view.owns(&event.targets[0].name) {
        event.more
    } else {
        0
    };
    Some(Event {
        targets,
        more,
        detail: event.detail.clone(),
        ..*event
    })
}

/// Tells `[[events.webhooks]]` what the journal records, until the
/// gateway is dropped.
pub fn spawn_event_webhooks(gateway: &Arc<Gateway>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(gateway);
    let mut recorded = gateway.health.journal().subscribe();
    tokio::spawn(async move {
        loop {
            let event = match recorded.recv().await {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        "event webhooks: {missed} events went by untold (too many at once)"
                    );
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            let Some(gateway) = weak.upgrade() else {
                return;
            };
            let state = gateway.state.load_full();
            if state.events().webhooks.is_empty() {
                continue;
            }
            let Some(event) = this_replicas_part(&event, &gateway.cluster.view()) else {
                continue;
            };
            let labels_of = |name: &str| state.fleet.by_name(name).map(|t| t.labels.clone());
            for (i, hook) in state.events().webhooks.iter().enumerate() {
                if let Some(notice) = notice_for(hook, &event, &labels_of) {
                    gateway
                        .notifier
                        .send(notice.named(&format!("events.webhooks[{i}]")));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_targets_news_is_told_by_its_owner_and_the_rest_by_whoever_saw_it() {
        use crate::cluster::View;
        let ids = ["gw-0", "gw-1", "gw-2"];
        let views: Vec<View> = ids.iter().map(|me| View::of_members(me, &ids)).collect();
        let names: Vec<String> = (0..30).map(|i| format!("orders-{i}")).collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "prod")).collect();
        let mut discovered = event(Kind::TargetsDiscovered, &pairs);
        discovered.more = 5;
        let parts: Vec<Event> = views
            .iter()
            .filter_map(|v| this_replicas_part(&discovered, v))
            .collect();
        let mut told: Vec<&str> = parts
            .iter()
            .flat_map(|e| e.targets.iter().map(|n| n.name.as_str()))
            .collect();
        told.sort_unstable();
        let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
        all.sort_unstable();
        assert_eq!(told, all, "every target told once");
        assert_eq!(parts.iter().map(|e| e.more).sum::<usize>(), 5);
        let down = event(Kind::TargetDown, &[("orders-3", "prod")]);
        assert_eq!(
            views
                .iter()
                .filter(|v| this_replicas_part(&down, v).is_some())
                .count(),
            1
        );
        // An access step is told by the replica it happened on.
        let granted = event(Kind::AccessGranted, &[("orders-3", "prod")]);
        assert!(views
            .iter()
            .all(|v| this_replicas_part(&granted, v).is_some()));
    }

    fn nothing(_: &str) -> Option<crate::labels::Labels> {
        None
    }

    use crate::events::Kind;

    fn hook(toml_text: &str) -> WebhookConfig {
        toml::from_str(&format!(
            "url = \"https://hooks.example/T0KEN\"\n{toml_text}"
        ))
        .unwrap()
    }

    fn event(kind: Kind, targets: &[(&str, &str)]) -> Event {
        Event {
            seq: 7,
            at: std::time::SystemTime::UNIX_EPOCH,
            kind,
            targets: targets
                .iter()
                .map(|(name, ns)| Named {
                    name: name.to_string(),
                    labels: Some([("namespace", *ns)].into_iter().collect()),
                })
                .collect(),
            more: 0,
            detail: "probe: connection refused".into(),
        }
    }

    #[test]
    fn hooks_hear_their_kinds_about_their_targets_only() {
        let shop = hook("kinds = [\"target_down\"]\ntargets = \"namespace=shop\"");
        let down = event(Kind::TargetDown, &[("a", "shop"), ("b", "billing")]);
        let body = notice_for(&shop, &down, &nothing).unwrap().body();
        assert_eq!(body["event"], "target_down");
        assert_eq!(body["targets"], serde_json::json!(["a"]));
        assert_eq!(body["seq"], 7);
        assert!(notice_for(&shop, &event(Kind::TargetUp, &[("a", "shop")]), &nothing).is_none());
        assert!(notice_for(
            &shop,
            &event(Kind::TargetDown, &[("b", "billing")]),
            &nothing
        )
        .is_none());
        // A target of the fleet named without its labels: looked up.
        let bare = Event {
            targets: vec![crate::events::named("c")],
            ..event(Kind::TargetDown, &[])
        };
        let shop_labels = |_: &str| Some([("namespace", "shop")].into_iter().collect());
        assert!(notice_for(&shop, &bare, &shop_labels).is_some());
        assert!(notice_for(&shop, &bare, &nothing).is_none());
        // A reload is about no target: for hooks without targets.
        assert!(notice_for(&shop, &event(Kind::ConfigReloaded, &[]), &nothing).is_none());
        let all = hook("");
        assert!(notice_for(&all, &event(Kind::ConfigReloaded, &[]), &nothing).is_some());
        let slack = hook("format = \"slack\"");
        let text = notice_for(
            &slack,
            &event(Kind::TargetDown, &[("<!here>", "x")]),
            &nothing,
        )
        .unwrap()
        .body()["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(text.starts_with("target down: &lt;!here&gt;"), "{text}");
    }
}
