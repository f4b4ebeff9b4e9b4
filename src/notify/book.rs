//! The notices waiting, per destination, and each destination's circuit.
//! Pure: every decision is made from what it is told and the instant it
//! is given; `Notifier` does the sending and the waiting.
//!
//! A destination (a URL, known here only by its hash) has two lanes: the
//! fleet's events, batched, and access requests' steps, sent first and
//! bounded apart, so no flood of fleet events crowds them out. It sends
//! one notice at a time (its notices arrive in order, and a hanging peer
//! holds one request of ours), so whatever it does, it holds back only its
//! own notices.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Lane, Notice};

/// A destination: the SHA-256 of its URL.
pub(super) type Key = [u8; 32];

/// Destinations known at once; a new one past it, when none is idle, has
/// its notices dropped (counted).
pub(super) const MAX_DESTINATIONS: usize = 256;
/// Notices waiting per destination, by lane (a fleet notice is a batch).
const FLEET_QUEUE: usize = 100;
const ACCESS_QUEUE: usize = 256;
/// Notices waiting gateway-wide, per lane: memory stays bounded whatever
/// the configuration or the rate of events, and the fleet's notices never
/// take the access steps' room.
const MAX_QUEUED: usize = 4096;
/// How long a fleet event waits for others of its kind to the same
/// destination, to go out with them as one notice.
pub(super) const BATCH_WINDOW: Duration = Duration::from_secs(1);
/// Failed attempts in a row (a connection error, a timeout, 429 or 5xx)
/// that open a destination's circuit.
pub(super) const FAILURES_TO_OPEN: u32 = 3;
/// How long an open circuit waits before one attempt is let through
/// (a probe); doubled after each failed probe, up to the longest.
const FIRST_COOLDOWN: Duration = Duration::from_secs(30);
const LONGEST_COOLDOWN: Duration = Duration::from_secs(300);

/// A notice in a lane, and the attempts made at it.
#[derive(Debug)]
pub(super) struct Waiting {
    pub notice: Notice,
    /// Not sent before this: a batch's window.
    ready_at: Instant,
    pub attempts: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Circuit {
    Closed {
        failures: u32,
    },
    /// Nothing is tried before `until`; then one attempt, the probe.
    Open {
        until: Instant,
        cooldown: Duration,
    },
}

impl Circuit {
    /// Whether attempts wait at `now` (open, its cooldown not over).
    fn holds(self, now: Instant) -> bool {
        matches!(self, Circuit::Open { until, .. } if until > now)
    }
}

#[derive(Debug)]
struct Destination {
    fleet: VecDeque<Waiting>,
    access: VecDeque<Waiting>,
    circuit: Circuit,
    /// Whether its sender runs (one per destination).
    sending: bool,
    /// Wakes its sender from a batch's window when an access step comes.
    wake: Arc<tokio::sync::Notify>,
}

impl Destination {
    fn lane(&mut self, lane: Lane) -> &mut VecDeque<Waiting> {
        match lane {
            Lane::Fleet => &mut self.fleet,
            Lane::Access => &mut self.access,
        }
    }

    fn is_idle(&self) -> bool {
        !self.sending && self.fleet.is_empty() && self.access.is_empty()
    }
}

/// What became of an offered notice.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Offered {
    /// In its lane; `start`: the destination has no sender yet.
    Queued { start: bool },
    /// Joined the fleet notice waiting before it (same kind and format).
    Batched,
    /// The destination's circuit is open: a fleet event is not kept.
    Skipped,
    /// No room (the reason, for the log).
    Dropped(&'static str),
}

/// What a destination's sender does next.
#[derive(Debug)]
pub(super) enum Next {
    Send(Waiting),
    /// Nothing before then (a batch's window, an open circuit) unless woken.
    Wait(Instant),
    /// Nothing waits: the sender ends.
    Done,
}

/// How an attempt changed a destination's circuit.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Attempted {
    /// Opened (or opened again after a failed probe) for this long.
    pub opened: Option<Duration>,
    /// Closed again: a probe was answered.
    pub closed: bool,
    /// Fleet notices waiting that were dropped as it opened.
    pub skipped: usize,
}

/// Every destination with notices, or an open circuit, or a sender.
#[derive(Debug, Default)]
pub(super) struct Book {
    destinations: HashMap<Key, Destination>,
    queued_fleet: usize,
    queued_access: usize,
}

impl Book {
    /// Queues `notice` for `key`.
    pub fn offer(&mut self, key: Key, notice: Notice, now: Instant) -> Offered {
        if !self.destinations.contains_key(&key) {
            if self.destinations.len() >= MAX_DESTINATIONS && !self.evict_idle() {
                return Offered::Dropped("too many webhook destinations at once");
            }
            self.destinations.insert(
                key,
                Destination {
                    fleet: VecDeque::new(),
                    access: VecDeque::new(),
                    circuit: Circuit::Closed { failures: 0 },
                    sending: false,
                    wake: Arc::default(),
                },
            );
        }
        let d = self.destinations.get_mut(&key).expect("inserted above");
        let lane = notice.lane();
        if lane == Lane::Fleet {
            if d.circuit.holds(now) {
                return Offered::Skipped;
            }
            // Only into the last: notices keep the order of their events
            // (a target's down is never told after its up).
            if let Some(last) = d.fleet.back_mut().filter(|l| l.notice.joins(&notice)) {
                last.notice.join(notice);
                return Offered::Batched;
            }
        }
        let (room, queued, ready_at) = match lane {
            Lane::Fleet => (FLEET_QUEUE, &mut self.queued_fleet, now + BATCH_WINDOW),
            Lane::Access => (ACCESS_QUEUE, &mut self.queued_access, now),
        };
        if *queued >= MAX_QUEUED {
            return Offered::Dropped("the webhook queue is full");
        }
        let waiting = d.lane(lane);
        if waiting.len() >= room {
            return Offered::Dropped("this webhook's queue is full");
        }
        waiting.push_back(Waiting {
            notice,
            ready_at,
            attempts: 0,
        });
        *queued += 1;
        let start = !d.sending;
        d.sending = true;
        Offered::Queued { start }
    }

    /// Drops one destination with nothing to do, to make room.
    fn evict_idle(&mut self) -> bool {
        let idle = self
            .destinations
            .iter()
            .find(|(_, d)| d.is_idle())
            .map(|(k, _)| *k);
        idle.is_some_and(|k| self.destinations.remove(&k).is_some())
    }

    /// What `key`'s sender does at `now`: access steps first, then the
    /// fleet's notices once their window has passed. Ending, it forgets a
    /// destination with a closed circuit.
    pub fn next(&mut self, key: &Key, now: Instant) -> Next {
        let Some(d) = self.destinations.get_mut(key) else {
            return Next::Done;
        };
        if let Circuit::Open { until, .. } = d.circuit {
            if until > now {
                if d.access.is_empty() {
                    d.sending = false;
                    return Next::Done;
                }
                return Next::Wait(until);
            }
        }
        if let Some(waiting) = d.access.pop_front() {
            self.queued_access -= 1;
            return Next::Send(waiting);
        }
        match d.fleet.front() {
            Some(first) if first.ready_at <= now => {
                self.queued_fleet -= 1;
                Next::Send(d.fleet.pop_front().expect("a first one"))
            }
            Some(first) => Next::Wait(first.ready_at),
            None => {
                d.sending = false;
                if matches!(d.circuit, Circuit::Closed { .. }) {
                    self.destinations.remove(key);
                }
                Next::Done
            }
        }
    }

    /// Whether an attempt may be made at `now` (closed, or the probe).
    pub fn may_attempt(&self, key: &Key, now: Instant) -> bool {
        self.destinations
            .get(key)
            .is_some_and(|d| !d.circuit.holds(now))
    }

    /// An attempt's outcome: `failed` for a connection error, a timeout,
    /// 429 or 5xx (an answer refusing the notice shows the hook is there).
    pub fn attempted(&mut self, key: &Key, failed: bool, now: Instant) -> Attempted {
        let Some(d) = self.destinations.get_mut(key) else {
            return Attempted::default();
        };
        let mut change = Attempted::default();
        d.circuit = match (d.circuit, failed) {
            (Circuit::Closed { .. }, false) => Circuit::Closed { failures: 0 },
            (Circuit::Closed { failures }, true) if failures + 1 < FAILURES_TO_OPEN => {
                Circuit::Closed {
                    failures: failures + 1,
                }
            }
            (Circuit::Closed { .. }, true) => {
                change.opened = Some(FIRST_COOLDOWN);
                Circuit::Open {
                    until: now + FIRST_COOLDOWN,
                    cooldown: FIRST_COOLDOWN,
                }
            }
            (Circuit::Open { .. }, false) => {
                change.closed = true;
                Circuit::Closed { failures: 0 }
            }
            (Circuit::Open { cooldown, .. }, true) => {
                let cooldown = (cooldown * 2).min(LONGEST_COOLDOWN);
                change.opened = Some(cooldown);
                Circuit::Open {
                    until: now + cooldown,
                    cooldown,
                }
            }
        };
        if change.opened.is_some() {
            change.skipped = d.fleet.len();
            self.queued_fleet -= d.fleet.len();
            d.fleet.clear();
        }
        change
    }

    /// An access step whose attempts the circuit stopped, first in its
    /// lane again: it goes when the destination answers.
    pub fn give_back(&mut self, key: &Key, waiting: Waiting) {
        if let Some(d) = self.destinations.get_mut(key) {
            d.access.push_front(waiting);
            self.queued_access += 1;
        }
    }

    /// What wakes `key`'s sender.
    pub fn wake(&self, key: &Key) -> Option<Arc<tokio::sync::Notify>> {
        self.destinations.get(key).map(|d| d.wake.clone())
    }

    /// Destinations whose circuit is open.
    pub fn circuits_open(&self) -> usize {
        self.destinations
            .values()
            .filter(|d| matches!(d.circuit, Circuit::Open { .. }))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Kind;
    use crate::notify::NotifyFormat;
    use crate::secret::Secret;

    const HOOK: Key = [1; 32];

    fn down(seq: u64, target: &str) -> Notice {
        Notice::event(
            Secret::new("https://hooks.example/T0KEN"),
            NotifyFormat::Json,
            Kind::TargetDown,
            seq,
            "2025-01-01T00:00:00Z",
            &[target],
            0,
            "probe: connection refused",
        )
    }

    fn step(id: &str) -> Notice {
        Notice::access(
            Secret::new("https://hooks.example/T0KEN"),
            NotifyFormat::Json,
            "access_requested",
            &serde_json::json!({ "id": id }),
        )
    }

    fn sent(next: Next) -> serde_json::Value {
        match next {
            Next::Send(w) => w.notice.body(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_burst_of_one_kind_is_one_notice_naming_the_first_and_counting_the_rest() {
        let mut book = Book::default();
        let t0 = Instant::now();
        assert_eq!(
            book.offer(HOOK, down(1, "t0"), t0),
            Offered::Queued { start: true }
        );
        for i in 1..600 {
            let offered = book.offer(HOOK, down(1 + i, &format!("t{i}")), t0);
            assert_eq!(offered, Offered::Batched);
        }
        // Held for its window, then one notice of the 600.
        assert!(matches!(book.next(&HOOK, t0), Next::Wait(t) if t == t0 + BATCH_WINDOW));
        let body = sent(book.next(&HOOK, t0 + BATCH_WINDOW));
        assert_eq!(body["event"], "target_down");
        assert_eq!(body["events"], 600);
        assert_eq!(
            (body["seq"].as_u64(), body["last_seq"].as_u64()),
            (Some(1), Some(600))
        );
        let named = body["targets"].as_array().unwrap();
        assert_eq!(named.len(), crate::events::MAX_NAMED);
        assert_eq!(named[0], "t0");
        assert_eq!(body["more"], 600 - crate::events::MAX_NAMED);
        assert!(matches!(book.next(&HOOK, t0 + BATCH_WINDOW), Next::Done));
        assert!(
            book.destinations.is_empty(),
            "an idle destination is forgotten"
        );
    }

    fn up(seq: u64, target: &str) -> Notice {
        Notice::event(
            Secret::new("https://hooks.example/T0KEN"),
            NotifyFormat::Json,
            Kind::TargetUp,
            seq,
            "2025-01-01T00:00:01Z",
            &[target],
            0,
            "it answered",
        )
    }

    #[test]
    fn events_keep_their_order_and_access_steps_go_first_with_room_of_their_own() {
        let mut book = Book::default();
        let t0 = Instant::now();
        book.offer(HOOK, down(1, "a"), t0);
        assert_eq!(
            book.offer(HOOK, up(2, "a"), t0),
            Offered::Queued { start: false }
        );
        // A down after the up is not folded into the first down.
        assert_eq!(
            book.offer(HOOK, down(3, "a"), t0),
            Offered::Queued { start: false }
        );
        // Events of alternating kinds don't batch: the fleet lane fills...
        let dropped = (4..1000).find_map(|seq| {
            let notice = if seq % 2 == 0 {
                up(seq, "x")
            } else {
                down(seq, "x")
            };
            match book.offer(HOOK, notice, t0) {
                Offered::Dropped(why) => Some(why),
                _ => None,
            }
        });
        assert_eq!(dropped, Some("this webhook's queue is full"));
        assert_eq!(book.queued_fleet, FLEET_QUEUE);
        // ...and access steps still have their room, and go first, at once.
        assert_eq!(
            book.offer(HOOK, step("ar-1"), t0),
            Offered::Queued { start: false }
        );
        assert_eq!(sent(book.next(&HOOK, t0))["request"]["id"], "ar-1");
        let later = t0 + BATCH_WINDOW;
        let told: Vec<(String, u64)> = (0..3)
            .map(|_| {
                let body = sent(book.next(&HOOK, later));
                (
                    body["event"].as_str().unwrap().to_string(),
                    body["seq"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            told,
            [
                ("target_down".to_string(), 1),
                ("target_up".to_string(), 2),
                ("target_down".to_string(), 3)
            ]
        );
    }

    #[test]
    fn a_failing_destination_opens_its_circuit_skips_fleet_events_and_keeps_access_steps() {
        let mut book = Book::default();
        let t0 = Instant::now();
        book.offer(HOOK, step("ar-1"), t0);
        let Next::Send(first) = book.next(&HOOK, t0) else {
            panic!("not sent");
        };
        book.offer(HOOK, down(2, "b"), t0);
        for failure in 1..FAILURES_TO_OPEN {
            assert!(book.may_attempt(&HOOK, t0));
            assert_eq!(
                book.attempted(&HOOK, true, t0),
                Attempted::default(),
                "{failure}"
            );
        }
        assert_eq!(
            book.attempted(&HOOK, true, t0),
            Attempted {
                opened: Some(FIRST_COOLDOWN),
                closed: false,
                skipped: 1
            }
        );
        assert_eq!(book.circuits_open(), 1);
        assert!(!book.may_attempt(&HOOK, t0));
        // While open: fleet events are not kept, access steps wait, the
        // one stopped first in line.
        assert_eq!(book.offer(HOOK, down(3, "c"), t0), Offered::Skipped);
        book.give_back(&HOOK, first);
        book.offer(HOOK, step("ar-2"), t0);
        assert!(matches!(book.next(&HOOK, t0), Next::Wait(t) if t == t0 + FIRST_COOLDOWN));
        // The probe after the cooldown fails: open for twice as long.
        let probe_at = t0 + FIRST_COOLDOWN;
        assert!(book.may_attempt(&HOOK, probe_at));
        let Next::Send(probe) = book.next(&HOOK, probe_at) else {
            panic!("no probe");
        };
        assert_eq!(probe.notice.body()["request"]["id"], "ar-1");
        assert_eq!(
            book.attempted(&HOOK, true, probe_at).opened,
            Some(FIRST_COOLDOWN * 2)
        );
        book.give_back(&HOOK, probe);
        assert!(!book.may_attempt(&HOOK, probe_at + FIRST_COOLDOWN));
        // The next probe is answered: closed, and the rest go.
        let again = probe_at + FIRST_COOLDOWN * 2;
        assert_eq!(sent(book.next(&HOOK, again))["request"]["id"], "ar-1");
        assert!(book.attempted(&HOOK, false, again).closed);
        assert_eq!(book.circuits_open(), 0);
        assert_eq!(sent(book.next(&HOOK, again))["request"]["id"], "ar-2");
        assert_eq!(
            book.offer(HOOK, down(4, "d"), again),
            Offered::Queued { start: false }
        );
    }

    #[test]
    fn destinations_and_queued_notices_are_bounded_gateway_wide() {
        let mut book = Book::default();
        let t0 = Instant::now();
        for i in 0..MAX_DESTINATIONS {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_be_bytes());
            assert_eq!(
                book.offer(key, step("s"), t0),
                Offered::Queued { start: true }
            );
        }
        assert_eq!(
            book.offer([0xff; 32], step("s"), t0),
            Offered::Dropped("too many webhook destinations at once")
        );
        // One whose circuit is open and that has nothing to send is kept
        // (its circuit remembered) until its room is needed.
        let mut first = [0; 32];
        first[..8].copy_from_slice(&0u64.to_be_bytes());
        assert!(matches!(book.next(&first, t0), Next::Send(_)));
        for _ in 0..FAILURES_TO_OPEN {
            book.attempted(&first, true, t0);
        }
        assert!(matches!(book.next(&first, t0), Next::Done));
        assert_eq!(book.circuits_open(), 1);
        assert_eq!(
            book.offer([0xff; 32], step("s"), t0),
            Offered::Queued { start: true }
        );
        assert_eq!(book.circuits_open(), 0);
        // Access steps to many destinations fill the gateway-wide room, and
        // stop there.
        let mut dropped = 0;
        for i in 0..MAX_DESTINATIONS {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_be_bytes());
            for _ in 0..ACCESS_QUEUE {
                if matches!(book.offer(key, step("s"), t0), Offered::Dropped(_)) {
                    dropped += 1;
                }
            }
        }
        assert!(dropped > 0);
        assert_eq!(book.queued_access, MAX_QUEUED);
        // The fleet's lane has its own room.
        assert!(matches!(
            book.offer([0xff; 32], down(1, "a"), t0),
            Offered::Queued { .. }
        ));
    }
}
