//! Health as one view across replicas. With `[cluster]` each target is
//! probed by its owner only, so the others learn its health from the
//! owner: every replica answers, on its admin listener, what changed in
//! the health of the targets it owns since a count the reader names
//! ([`HealthBook::report`]), and adopts what the owners answer
//! ([`HealthBook::adopt`]), so the console, `/jolokia/targets`, `/readyz`
//! and every replica's breaker agree whoever probed. A replica's own
//! exchanges still count at once; the owner's next result replaces them.
//!
//! Why not through the membership engine: health changes with every
//! probe, and the engine would carry every target's result of every
//! replica; it carries only who is a member and where its admin listener
//! is. The reading is in `jobs/health_view.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{changed, Change, HealthBook, TargetHealth};

/// One target's health as its owner last saw it, on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    pub name: String,
    pub up: bool,
    pub failures: u32,
    pub successes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
    /// When the owner last heard from it (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// When the owner's breaker opened (Unix milliseconds); absent: closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since_ms: Option<u64>,
}

/// A replica's answer to "what changed since `since`": its owned targets'
/// health changed since then, and the count to ask from next time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// This replica's book: a count of another book (the process
    /// restarted) means nothing here, and is answered in full.
    pub incarnation: String,
    /// Ask `since` this next time.
    pub upto: u64,
    pub targets: Vec<Shared>,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

impl TargetHealth {
    /// Its health as the other replicas adopt it; `None` while unknown.
    fn shared(&self) -> Option<Shared> {
        let s = self.state.lock().expect("health lock");
        Some(Shared {
            name: self.name.to_string(),
            up: s.up?,
            failures: s.consecutive_failures,
            successes: s.consecutive_successes,
            latency_us: s
                .latency
                .map(|l| u64::try_from(l.as_micros()).unwrap_or(u64::MAX)),
            checked_ms: s.last_check.map(unix_ms),
            error: s.last_error.clone(),
            agent: s.agent_version.clone(),
            protocol: s.protocol.clone(),
            open_since_ms: s.open_since.map(unix_ms),
        })
    }

    /// Takes the owner's (`owner`) view of this target. Its changes are
    /// told to the journal as the owner's own are, but logged only at
    /// DEBUG: the owner has said them at WARN already. When a real
    /// exchange here answered last is kept (this replica's passive health).
    fn adopt(&self, from: &Shared, owner: &str) {
        let mut s = self.state.lock().expect("health lock");
        let change = changed(s.up, from.up);
        let opened = s.open_since.is_none() && from.open_since_ms.is_some();
        let closed = s.open_since.is_some() && from.open_since_ms.is_none();
        s.up = Some(from.up);
        s.consecutive_failures = from.failures;
        s.consecutive_successes = from.successes;
        s.latency = from.latency_us.map(Duration::from_micros);
        s.last_check = from.checked_ms.map(from_unix_ms);
        s.last_error = from.error.clone();
        if from.agent.is_some() {
            s.agent_version = from.agent.clone();
        }
        if from.protocol.is_some() {
            s.protocol = from.protocol.clone();
        }
        s.open_since = from.open_since_ms.map(from_unix_ms);
        drop(s);
        let by = format!("probed by replica {owner}");
        match change {
            Some(Change::Down) => {
                tracing::debug!(target_name = %self.name, owner, "target down, as its owner saw it");
                let error = from.error.as_deref().unwrap_or("no answer");
                self.tell(crate::events::Kind::TargetDown, &format!("{error} ({by})"));
            }
            Some(Change::Up) => {
                tracing::debug!(target_name = %self.name, owner, "target up again, as its owner saw it");
                self.tell(
                    crate::events::Kind::TargetUp,
                    &format!("it answered ({by})"),
                );
            }
            None => {}
        }
        if opened {
            self.tell(
                crate::events::Kind::BreakerOpened,
                &format!("{} failures in a row ({by})", from.failures),
            );
        }
        if closed {
            self.tell(
                crate::events::Kind::BreakerClosed,
                &format!("it answered a health probe ({by})"),
            );
        }
    }
}

impl HealthBook {
    /// This book's incarnation, as its reports name it.
    pub fn incarnation(&self) -> &str {
        &self.book.incarnation
    }

    /// The health of the targets `owned` accepts that changed here after
    /// count `since` of book `incarnation` (another book, or none: every
    /// target this replica has heard from). Entries changed while this
    /// runs may come again next time, never not at all: the count is
    /// read first, and a target's mark is set after its change.
    pub fn report(
        &self,
        since: u64,
        incarnation: Option<&str>,
        mut owned: impl FnMut(&Arc<str>) -> bool,
    ) -> Report {
        let upto = self.book.changes.load(Ordering::SeqCst);
        let since = if incarnation == Some(self.incarnation()) {
            since
        } else {
            0
        };
        let changed: Vec<Arc<TargetHealth>> = self
            .entries
            .lock()
            .expect("health lock")
            .values()
            .filter(|h| h.seq.load(Ordering::SeqCst) > since)
            .cloned()
            .collect();
        Report {
            incarnation: self.incarnation().to_string(),
            upto,
            targets: changed
                .iter()
                .filter(|h| owned(h.shared_name()))
                .filter_map(|h| h.shared())
                .collect(),
        }
    }

    /// Adopts replica `owner`'s report for the targets `owns` says it owns
    /// (by this replica's view: during a change of members, two may both
    /// report one target for an interval, and only its owner counts).
    /// Targets this book does not hold are passed over. Returns each
    /// adopted target with whether it is up, for its gauge.
    pub fn adopt(
        &self,
        owner: &str,
        report: &Report,
        mut owns: impl FnMut(&str) -> bool,
    ) -> Vec<(Arc<TargetHealth>, bool)> {
        let found: Vec<(Arc<TargetHealth>, &Shared)> = {
            let entries = self.entries.lock().expect("health lock");
            report
                .targets
                .iter()
                .filter_map(|s| Some((entries.get(&s.name)?.clone(), s)))
                .collect()
        };
        found
            .into_iter()
            .filter(|(h, s)| !h.is_retired() && owns(&s.name))
            .map(|(h, s)| {
                h.adopt(s, owner);
                (h, s.up)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed(h: &TargetHealth, ok: bool) {
        h.record_probe(if ok {
            Ok((
                Duration::from_millis(3),
                Some("2.6.0".into()),
                Some("8.0".into()),
            ))
        } else {
            Err("connection refused".into())
        });
    }

    #[test]
    fn a_report_holds_what_changed_since_the_count_asked_and_only_owned_targets() {
        let owner = HealthBook::new(2);
        for name in ["a", "b", "c"] {
            owner.for_target(name);
        }
        // Never heard from: nothing to tell.
        let r = owner.report(0, None, |_| true);
        assert!(r.targets.is_empty());
        probed(&owner.for_target("a"), true);
        probed(&owner.for_target("b"), false);
        let first = owner.report(0, None, |n| &**n != "c");
        let mut names: Vec<&str> = first.targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "b"]);
        // Asked again from its count: nothing new, then only what changed.
        let inc = Some(first.incarnation.as_str());
        assert!(owner.report(first.upto, inc, |_| true).targets.is_empty());
        probed(&owner.for_target("b"), false);
        let next = owner.report(first.upto, inc, |_| true);
        assert_eq!(next.targets.len(), 1);
        assert_eq!(next.targets[0].name, "b");
        assert_eq!(next.targets[0].failures, 2);
        assert!(next.targets[0].open_since_ms.is_some(), "{next:?}");
        // A count of another book is answered in full.
        assert_eq!(
            owner
                .report(next.upto, Some("other"), |_| true)
                .targets
                .len(),
            2
        );
        // Not owned: never told, however changed.
        probed(&owner.for_target("c"), true);
        assert!(owner
            .report(next.upto, inc, |n| &**n != "c")
            .targets
            .is_empty());
    }

    #[test]
    fn a_follower_takes_the_owners_state_breaker_and_version_and_tells_its_journal() {
        let owner = HealthBook::new(2);
        let follower = HealthBook::new(2);
        let here = follower.for_target("a");
        follower.for_target("b");
        probed(&owner.for_target("a"), false);
        probed(&owner.for_target("a"), false);
        let report = owner.report(0, None, |_| true);
        let adopted = follower.adopt("gw-1", &report, |_| true);
        assert_eq!(adopted.len(), 1);
        assert!(!adopted[0].1);
        let s = here.snapshot();
        assert_eq!(s.up, Some(false));
        assert_eq!(s.consecutive_failures, 2);
        assert!(
            s.open_since.is_some(),
            "the owner's breaker is open here too"
        );
        assert!(here.refusal().is_some());
        let told: Vec<String> = follower
            .journal()
            .after(0, 100, |_| true)
            .0
            .iter()
            .map(|e| e.detail.clone())
            .collect();
        assert!(
            told.iter().any(|d| d.contains("probed by replica gw-1")),
            "{told:?}"
        );
        // Back up at the owner: closed here, its version learnt.
        probed(&owner.for_target("a"), true);
        let again = owner.report(report.upto, Some(&report.incarnation), |_| true);
        follower.adopt("gw-1", &again, |_| true);
        let s = here.snapshot();
        assert_eq!(s.up, Some(true));
        assert!(s.open_since.is_none());
        assert_eq!(s.agent_version.as_deref(), Some("2.6.0"));
        assert_eq!(s.protocol.as_deref(), Some("8.0"));
        // Adopting changes no count here: it is not this replica's news.
        assert!(follower.report(0, None, |_| true).targets.is_empty());
    }

    #[test]
    fn a_report_from_a_replica_that_does_not_own_the_target_is_passed_over() {
        let owner = HealthBook::new(2);
        let follower = HealthBook::new(2);
        let here = follower.for_target("a");
        probed(&owner.for_target("a"), false);
        let report = owner.report(0, None, |_| true);
        assert!(follower.adopt("gw-1", &report, |_| false).is_empty());
        assert_eq!(here.snapshot().up, None);
        // Unknown here (not in this replica's fleet): passed over too.
        let stranger = HealthBook::new(2);
        assert!(stranger.adopt("gw-1", &report, |_| true).is_empty());
    }

    #[test]
    fn reports_survive_json() {
        let owner = HealthBook::new(2);
        probed(&owner.for_target("a"), true);
        let report = owner.report(0, None, |_| true);
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
    }
}
