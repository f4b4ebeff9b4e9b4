//! The fleet's journal of what changed: targets going down and up,
//! breakers opening and closing, targets discovered and removed,
//! configuration reloads, access requests and grants. A bounded ring in memory (the oldest go first),
//! numbered so that a reader asks for what came after the last it saw.
//! Who may see an event is the reader's door's call: an event names its
//! targets (with their labels when they are gone from the fleet).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Events kept; past it the oldest are dropped.
pub const CAPACITY: usize = 10_000;
/// Targets one event names; past it they are counted.
pub const MAX_NAMED: usize = 100;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    TargetDown,
    TargetUp,
    BreakerOpened,
    BreakerClosed,
    TargetsDiscovered,
    TargetsRemoved,
    ConfigReloaded,
    ConfigReloadFailed,
    /// Access requests' steps; their targets are those the request's
    /// role reaches within its targets.
    AccessRequested,
    AccessGranted,
    AccessDenied,
    AccessRevoked,
    AccessExpired,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::TargetDown => "target_down",
            Kind::TargetUp => "target_up",
            Kind::BreakerOpened => "breaker_opened",
            Kind::BreakerClosed => "breaker_closed",
            Kind::TargetsDiscovered => "targets_discovered",
            Kind::TargetsRemoved => "targets_removed",
            Kind::ConfigReloaded => "config_reloaded",
            Kind::ConfigReloadFailed => "config_reload_failed",
            Kind::AccessRequested => "access_requested",
            Kind::AccessGranted => "access_granted",
            Kind::AccessDenied => "access_denied",
            Kind::AccessRevoked => "access_revoked",
            Kind::AccessExpired => "access_expired",
        }
    }

    /// The kind of an access request's step, by its audit event's name.
    pub fn of_access_step(event: &str) -> Option<Kind> {
        [
            Kind::AccessRequested,
            Kind::AccessGranted,
            Kind::AccessDenied,
            Kind::AccessRevoked,
            Kind::AccessExpired,
        ]
        .into_iter()
        .find(|k| k.as_str() == event)
    }
}

/// A target an event names: its labels when it may be gone from the
/// fleet by the time the event is read.
#[derive(Debug, Clone)]
pub struct Named {
    pub name: String,
    pub labels: Option<crate::labels::Labels>,
}

#[derive(Debug, Clone)]
pub struct Event {
    pub seq: u64,
    pub at: SystemTime,
    pub kind: Kind,
    /// Empty: about the gateway itself (a reload).
    pub targets: Vec<Named>,
    /// Targets it is about beyond those named.
    pub more: usize,
    pub detail: String,
}

#[derive(Debug, Default)]
struct Ring {
    events: VecDeque<Arc<Event>>,
    next_seq: u64,
}

/// Events waiting for a slow subscriber; past it, it misses the oldest.
const BROADCAST: usize = 1024;

/// The journal; one per gateway, shared by whoever records.
#[derive(Debug)]
pub struct Journal {
    ring: Mutex<Ring>,
    /// Each event as it is recorded, for whoever tells others of it.
    recorded: tokio::sync::broadcast::Sender<Arc<Event>>,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal {
            ring: Mutex::default(),
            recorded: tokio::sync::broadcast::channel(BROADCAST).0,
        }
    }
}

impl Journal {
    /// The events recorded from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<Event>> {
        self.recorded.subscribe()
    }

    pub fn record(&self, kind: Kind, targets: impl IntoIterator<Item = Named>, detail: String) {
        let mut targets = targets.into_iter();
        let named: Vec<Named> = targets.by_ref().take(MAX_NAMED).collect();
        let more = targets.count();
        let mut ring = self.ring.lock().expect("journal lock");
        ring.next_seq += 1;
        let event = Arc::new(Event {
            seq: ring.next_seq,
            at: SystemTime::now(),
            kind,
            targets: named,
            more,
            detail,
        });
        if ring.events.len() >= CAPACITY {
            ring.events.pop_front();
        }
        ring.events.push_back(event.clone());
        // No subscriber: nobody to tell.
        let _ = self.recorded.send(event);
    }

    /// Up to `limit` events after `after` (0: from the oldest kept) that
    /// `visible` lets through, oldest first, and the number to ask after
    /// for more when there are more.
    pub fn after(
        &self,
        after: u64,
        limit: usize,
        visible: impl Fn(&Event) -> bool,
    ) -> (Vec<Arc<Event>>, Option<u64>) {
        let ring = self.ring.lock().expect("journal lock");
        let mut out = Vec::new();
        for e in ring.events.iter().filter(|e| e.seq > after) {
            if !visible(e) {
                continue;
            }
            if out.len() == limit {
                let last: &Arc<Event> = out.last().expect("limit is at least 1");
                return (out.clone(), Some(last.seq));
            }
            out.push(e.clone());
        }
        (out, None)
    }
}

/// A target by name only (it is in the fleet when the event is made).
pub fn named(name: &str) -> Named {
    Named {
        name: name.to_string(),
        labels: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_is_bounded_paged_and_filtered() {
        let j = Journal::default();
        for i in 0..(CAPACITY + 5) {
            j.record(Kind::TargetDown, [named(&format!("t{i}"))], String::new());
        }
        let (first, next) = j.after(0, 3, |_| true);
        assert_eq!(first[0].seq, 6, "the oldest five are gone");
        assert_eq!(next, Some(8));
        let (rest, _) = j.after(8, 2, |_| true);
        assert_eq!(rest[0].seq, 9);
        let (odd, _) = j.after(0, 10, |e| e.seq % 2 == 1);
        assert!(odd.iter().all(|e| e.seq % 2 == 1));
        let (none, next) = j.after(u64::MAX, 10, |_| true);
        assert!(none.is_empty() && next.is_none());
        j.record(
            Kind::TargetsRemoved,
            (0..250).map(|i| named(&i.to_string())),
            String::new(),
        );
        let (last, _) = j.after(CAPACITY as u64 + 5, 1, |_| true);
        assert_eq!((last[0].targets.len(), last[0].more), (MAX_NAMED, 150));
    }
}
