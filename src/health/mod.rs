//! Target health: what the last exchanges and background `version` probes
//! said about each agent, and a circuit breaker. After `failures_to_open`
//! failed exchanges in a row (the agent unreachable, timing out or not
//! answering Jolokia), items for it are answered at once with 503
//! `jmxgate.TargetUnavailable` instead of waiting for timeouts, until a
//! probe succeeds. Health is kept by target name, so it survives reloads;
//! a name that leaves the fleet loses its entry ([`HealthBook::retain`]), so
//! a target added again under that name starts afresh.

pub mod shared;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

/// `[health]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// How often a round of probes runs, each asking the targets that
    /// need it for their `version`; `0s` turns the probes, and with them
    /// the circuit breaker, off.
    #[serde(default = "default_probe_interval", with = "humantime_serde")]
    pub probe_interval: Duration,
    /// How far apart, at most, the probes of a stable target are (one
    /// that answered its last [`STABLE_AFTER`] probes or exchanges): a
    /// whole number of probe intervals, from 1 (every round) to
    /// [`MAX_STABLE_ROUNDS`]. Unset: by the fleet's size, every round
    /// while stable probes stay within [`STABLE_PROBES_PER_SECOND`], so a
    /// large fleet's probes cost little and a small one's are not spaced.
    #[serde(default, with = "humantime_serde")]
    pub stable_probe_interval: Option<Duration>,
    /// Failed exchanges in a row that open a target's breaker.
    #[serde(default = "default_failures_to_open")]
    pub failures_to_open: u32,
    /// Probes in flight at once, all targets together.
    #[serde(default = "default_max_probes_in_flight")]
    pub max_probes_in_flight: usize,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            probe_interval: default_probe_interval(),
            stable_probe_interval: None,
            failures_to_open: default_failures_to_open(),
            max_probes_in_flight: default_max_probes_in_flight(),
        }
    }
}

fn default_probe_interval() -> Duration {
    Duration::from_secs(30)
}

fn default_failures_to_open() -> u32 {
    3
}

fn default_max_probes_in_flight() -> usize {
    64
}

/// Probes or exchanges answered in a row that make a target stable.
pub const STABLE_AFTER: u32 = 3;
/// Probes a second that stable targets may cost when
/// `stable_probe_interval` is unset: a fleet within it (5,000 targets
/// every 10 s, 15,000 every 30 s) has every target probed every round;
/// a larger one has its stable targets probed as much less often as
/// that needs, within [`MAX_STABLE_ROUNDS`]. A probe costs mostly the
/// kernel's connect and close: at 1,000 a second, 100,000 stand-in
/// targets idled at 11-15 % of a core on the 2-core bench machine, at
/// 500 at 8-9 %.
pub const STABLE_PROBES_PER_SECOND: u64 = 500;
/// The most probe intervals a stable target goes without a probe: how
/// late a quiet target's failure may be noticed is bounded by this.
pub const MAX_STABLE_ROUNDS: u32 = 30;

impl HealthConfig {
    /// What is wrong with `[health]`, for the configuration's check.
    pub fn problems(&self) -> Vec<String> {
        if self.max_probes_in_flight == 0 {
            // Once taken as 1 without a word.
            return vec!["health.max_probes_in_flight: must be greater than zero".into()];
        }
        let (Some(stable), false) = (self.stable_probe_interval, self.probe_interval.is_zero())
        else {
            return Vec::new();
        };
        let most = self.probe_interval * MAX_STABLE_ROUNDS;
        if stable < self.probe_interval || stable > most {
            return vec![format!(
                "health.stable_probe_interval: {} is not between probe_interval ({}) and {MAX_STABLE_ROUNDS} times it ({}): a stable target is probed at least every probe_interval and at most that far apart",
                humantime::format_duration(stable),
                humantime::format_duration(self.probe_interval),
                humantime::format_duration(most),
            )];
        }
        Vec::new()
    }

    /// Rounds (probe intervals) between probes of a stable target in a
    /// fleet of `targets`: the whole intervals within
    /// `stable_probe_interval`, so never further apart than it says;
    /// unset, as few as keep them within [`STABLE_PROBES_PER_SECOND`].
    pub fn stable_rounds(&self, targets: usize) -> u32 {
        if self.probe_interval.is_zero() {
            return 1;
        }
        let rounds = match self.stable_probe_interval {
            Some(stable) => stable.as_nanos() / self.probe_interval.as_nanos(),
            None => {
                let per_round = STABLE_PROBES_PER_SECOND as f64 * self.probe_interval.as_secs_f64();
                (targets as f64 / per_round.max(1.0)).ceil() as u128
            }
        };
        u32::try_from(rounds)
            .unwrap_or(u32::MAX)
            .clamp(1, MAX_STABLE_ROUNDS)
    }
}

/// The ticks a round of probes is spread over: `(tick, ticks)`, ticks at
/// least 10 ms apart (100 a second, whatever the fleet), so a large fleet
/// is probed in small batches rather than one timer per target. Each
/// target has a tick of its own ([`TargetHealth::probe_tick`]), so its
/// probes are one interval apart and rounds have no bursts.
pub fn probe_ticks(interval: Duration) -> (Duration, u64) {
    const MIN_TICK: Duration = Duration::from_millis(10);
    let ticks = (interval.as_nanos() / MIN_TICK.as_nanos()).clamp(1, u32::MAX as u128) as u32;
    (interval / ticks, u64::from(ticks))
}

/// A name's fixed place in the probe schedule: FNV-1a, then mixed
/// (splitmix64's finaliser) so neighbouring names (`t-1`, `t-2`) land far
/// apart. Not randomised per process: a restart keeps each target's phase.
fn phase_of(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// What a probe round does with one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeDecision {
    Send,
    /// Real exchanges answered within the interval (passive health).
    Answered,
    /// Stable, and this is not one of its rounds.
    Stable,
}

impl ProbeDecision {
    /// `jmxgate_health_probes_total`'s `result`.
    pub fn label(self) -> &'static str {
        match self {
            ProbeDecision::Send => "sent",
            ProbeDecision::Answered => "skipped",
            ProbeDecision::Stable => "stable_skipped",
        }
    }
}

/// One target's health as last seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthState {
    /// `None` until the first exchange or probe.
    pub up: Option<bool>,
    pub consecutive_failures: u32,
    pub latency: Option<Duration>,
    pub last_check: Option<SystemTime>,
    pub last_error: Option<String>,
    /// From the last successful probe: the agent's version and protocol.
    pub agent_version: Option<String>,
    pub protocol: Option<String>,
    /// When the breaker opened; `None` while closed.
    pub open_since: Option<SystemTime>,
    /// When a real exchange (not a probe) last succeeded: while that is
    /// within the probe interval, the target needs no probe.
    pub answered_at: Option<std::time::Instant>,
    /// Probes and exchanges answered in a row (see [`STABLE_AFTER`]).
    pub consecutive_successes: u32,
}

#[derive(Debug)]
pub struct TargetHealth {
    /// Shared with its metric series' labels.
    name: Arc<str>,
    state: Mutex<HealthState>,
    /// 0: the breaker never opens.
    failures_to_open: u32,
    /// Set when the target leaves the fleet; exchanges and probes still
    /// under way then must not bring its gauges back.
    retired: AtomicBool,
    /// From the name: its tick within a round and its stable rounds.
    phase: u64,
    /// Its `jmxgate_agent_up` series, as looked up last, and the metrics'
    /// generation then (`Metrics::probed`): a probe costs no label lookup.
    pub(crate) up_gauge: Mutex<Option<(u64, prometheus_client::metrics::gauge::Gauge)>>,
    /// Where its changes are told, and counted for the other replicas.
    book: Arc<Book>,
    /// The book's change count when this target's state last changed by
    /// this replica's own probes or exchanges (see [`shared`]).
    seq: AtomicU64,
}

/// What every target of one book shares: the journal its changes are
/// told to (the console's events) and the count of changes, which orders
/// them for the replicas that read this one's results (`shared.rs`).
#[derive(Debug)]
pub struct Book {
    journal: Arc<crate::events::Journal>,
    changes: AtomicU64,
    /// Random per book: a reader's count of another book (this process
    /// restarted) is not taken for this one's.
    incarnation: String,
}

impl Default for Book {
    fn default() -> Book {
        Book {
            journal: Arc::default(),
            changes: AtomicU64::new(0),
            incarnation: crate::random::hex(8),
        }
    }
}

impl TargetHealth {
    /// The target's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as its metric series hold it.
    pub fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    fn new(name: &str, failures_to_open: u32, book: Arc<Book>) -> TargetHealth {
        TargetHealth {
            name: name.into(),
            state: Mutex::default(),
            failures_to_open,
            retired: AtomicBool::new(false),
            phase: phase_of(name),
            up_gauge: Mutex::default(),
            book,
            seq: AtomicU64::new(0),
        }
    }

    fn tell(&self, kind: crate::events::Kind, detail: &str) {
        self.book
            .journal
            .record(kind, [crate::events::named(&self.name)], detail.to_string());
    }

    /// Marks the state changed by this replica's own outcome, after the
    /// change: a reader that saw the old count reads it again next time.
    fn changed_here(&self) {
        let at = self.book.changes.fetch_add(1, Ordering::SeqCst) + 1;
        self.seq.store(at, Ordering::SeqCst);
    }

    /// Whether the target has left the fleet (see [`HealthBook::retain`]).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    pub fn snapshot(&self) -> HealthState {
        self.state.lock().expect("health lock").clone()
    }

    /// Whether it answered last (`None`: not yet known), without copying
    /// the rest: the console counts a whole fleet with it.
    pub fn is_up(&self) -> Option<bool> {
        self.state.lock().expect("health lock").up
    }

    /// Why items must not be sent now, if the breaker is open.
    pub fn refusal(&self) -> Option<String> {
        let s = self.state.lock().expect("health lock");
        let since = s.open_since?;
        let ago = SystemTime::now()
            .duration_since(since)
            .unwrap_or_default()
            .as_secs();
        Some(format!(
            "failed {} times in a row ({}), circuit open for {ago}s; answered without contacting it until a health probe succeeds",
            s.consecutive_failures,
            s.last_error.as_deref().unwrap_or("no answer")
        ))
    }

    /// An exchange's outcome (probes use [`record_probe`](Self::record_probe)).
    /// A change of state is logged once: WARN when the target goes down
    /// (first seen down, or down after up), INFO when it is back; the
    /// failures of a target already down are not news (each exchange's
    /// own line is DEBUG, `dispatch::exchange`).
    pub fn record_exchange(&self, outcome: Result<Duration, String>) {
        if outcome.is_ok() {
            self.state.lock().expect("health lock").answered_at = Some(std::time::Instant::now());
        }
        self.record(outcome);
        self.changed_here();
    }

    /// Which of `ticks` ticks of every round probes this target.
    pub fn probe_tick(&self, ticks: u64) -> u64 {
        self.phase % ticks.max(1)
    }

    /// Whether probe round `round` asks this target. Down, never seen,
    /// breaker open or agent version unknown: always. Otherwise not while
    /// real exchanges answered within `interval` (passive health), and,
    /// once stable (answered [`STABLE_AFTER`] times in a row), only every
    /// `stable_rounds`-th round, which one set by its name so stable
    /// targets spread evenly over the rounds.
    pub fn probe_decision(
        &self,
        interval: Duration,
        round: u64,
        stable_rounds: u32,
    ) -> ProbeDecision {
        let s = self.state.lock().expect("health lock");
        if s.open_since.is_some() || s.up != Some(true) || s.agent_version.is_none() {
            return ProbeDecision::Send;
        }
        if s.answered_at.is_some_and(|t| t.elapsed() < interval) {
            return ProbeDecision::Answered;
        }
        let rounds = u64::from(stable_rounds.max(1));
        if s.consecutive_successes >= STABLE_AFTER
            && !round.wrapping_add(self.phase >> 32).is_multiple_of(rounds)
        {
            return ProbeDecision::Stable;
        }
        ProbeDecision::Send
    }

    fn record(&self, outcome: Result<Duration, String>) {
        let mut s = self.state.lock().expect("health lock");
        s.last_check = Some(SystemTime::now());
        match changed(s.up, outcome.is_ok()) {
            Some(Change::Down) => {
                let error = outcome.as_ref().err().map_or("", String::as_str);
                tracing::warn!(
                    target_name = %self.name,
                    error,
                    "target down: an exchange or health probe failed (logged again only when it is back and fails anew)"
                );
                self.tell(crate::events::Kind::TargetDown, error);
            }
            Some(Change::Up) => {
                tracing::info!(target_name = %self.name, "target up again: it answered");
                self.tell(crate::events::Kind::TargetUp, "it answered");
            }
            None => {}
        }
        match outcome {
            Ok(latency) => {
                s.up = Some(true);
                s.latency = Some(latency);
                s.consecutive_failures = 0;
                s.consecutive_successes = s.consecutive_successes.saturating_add(1);
                s.last_error = None;
                // An exchange only runs while closed; nothing to close here.
            }
            Err(error) => {
                s.up = Some(false);
                s.consecutive_failures += 1;
                s.consecutive_successes = 0;
                s.last_error = Some(error);
                if self.failures_to_open > 0
                    && s.consecutive_failures >= self.failures_to_open
                    && s.open_since.is_none()
                {
                    s.open_since = Some(SystemTime::now());
                    tracing::warn!(
                        target_name = %self.name,
                        failures = s.consecutive_failures,
                        last_error = s.last_error.as_deref().unwrap_or(""),
                        "circuit opened: items for this target are refused until a health probe succeeds"
                    );
                    self.tell(
                        crate::events::Kind::BreakerOpened,
                        &format!("{} failures in a row", s.consecutive_failures),
                    );
                }
            }
        }
    }

    /// A probe's outcome: on success, the agent's version and protocol,
    /// and the breaker closes.
    pub fn record_probe(
        &self,
        outcome: Result<(Duration, Option<String>, Option<String>), String>,
    ) {
        match outcome {
            Ok((latency, version, protocol)) => {
                self.record(Ok(latency));
                let mut s = self.state.lock().expect("health lock");
                if s.open_since.take().is_some() {
                    tracing::info!(target_name = %self.name, "circuit closed: the target answered a health probe");
                    self.tell(
                        crate::events::Kind::BreakerClosed,
                        "it answered a health probe",
                    );
                }
                s.agent_version = version.or(s.agent_version.take());
                s.protocol = protocol.or(s.protocol.take());
            }
            Err(e) => self.record(Err(e)),
        }
        self.changed_here();
    }
}

/// A change of a target's state worth one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Down after up, or down when first seen.
    Down,
    /// Up after down.
    Up,
}

/// What an outcome (`ok`) changes for a target last seen `up` (`None`:
/// never seen): a failure is news once, until the target answers again.
pub fn changed(up: Option<bool>, ok: bool) -> Option<Change> {
    match (up, ok) {
        (Some(false), true) => Some(Change::Up),
        (Some(true) | None, false) => Some(Change::Down),
        _ => None,
    }
}

/// Every target's health, by name.
#[derive(Debug)]
pub struct HealthBook {
    entries: Mutex<HashMap<String, Arc<TargetHealth>>>,
    failures_to_open: u32,
    book: Arc<Book>,
}

impl HealthBook {
    /// `failures_to_open` 0 never opens a breaker (probes off).
    pub fn new(failures_to_open: u32) -> HealthBook {
        HealthBook {
            entries: Mutex::default(),
            failures_to_open,
            book: Arc::default(),
        }
    }

    /// The journal its targets' changes go to (and the fleet's others).
    pub fn journal(&self) -> &Arc<crate::events::Journal> {
        &self.book.journal
    }

    pub fn from_config(config: &HealthConfig) -> HealthBook {
        let breaker = if config.probe_interval.is_zero() {
            0
        } else {
            config.failures_to_open
        };
        HealthBook::new(breaker)
    }

    /// The target's health, the same value across reloads.
    pub fn for_target(&self, name: &str) -> Arc<TargetHealth> {
        self.entries
            .lock()
            .expect("health lock")
            .entry(name.to_string())
            .or_insert_with(|| {
                Arc::new(TargetHealth::new(
                    name,
                    self.failures_to_open,
                    self.book.clone(),
                ))
            })
            .clone()
    }

    /// Drops the entries of `names` (targets a discovery change removed)
    /// as [`retain`](Self::retain) does; returns those it held.
    pub fn forget<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut entries = self.entries.lock().expect("health lock");
        names
            .into_iter()
            .filter_map(|name| {
                let health = entries.remove(name)?;
                health.retired.store(true, Ordering::SeqCst);
                Some(name.to_string())
            })
            .collect()
    }

    /// Drops the entries of names `keep` refuses (targets no longer in the
    /// fleet) and returns those names. Targets still held elsewhere (a
    /// request in flight on the previous fleet) keep their value; the book
    /// just forgets it, so the name, if added again, starts unknown with a
    /// closed breaker.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut gone = Vec::new();
        self.entries
            .lock()
            .expect("health lock")
            .retain(|name, health| {
                let stays = keep(name);
                if !stays {
                    health.retired.store(true, Ordering::SeqCst);
                    gone.push(name.clone());
                }
                stays
            });
        gone
    }

    /// How many targets have an entry.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("health lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for HealthBook {
    fn default() -> Self {
        HealthBook::new(default_failures_to_open())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed_ok(h: &TargetHealth) {
        h.record_probe(Ok((
            Duration::from_millis(2),
            Some("1.7.1".into()),
            Some("7.2".into()),
        )));
    }

    #[test]
    fn rounds_are_ticks_at_least_10ms_apart_and_targets_spread_evenly_over_them() {
        assert_eq!(
            probe_ticks(Duration::from_secs(10)),
            (Duration::from_millis(10), 1000)
        );
        assert_eq!(
            probe_ticks(Duration::from_millis(25)),
            (Duration::from_micros(12_500), 2)
        );
        assert_eq!(probe_ticks(Duration::from_millis(1)).1, 1);
        // 100,000 targets over 1000 ticks: about 100 each, no burst.
        let mut per_tick = vec![0u32; 1000];
        for i in 0..100_000 {
            per_tick[TargetHealth::new(&format!("t-{i}"), 3, Arc::default()).probe_tick(1000)
                as usize] += 1;
        }
        let (least, most) = (per_tick.iter().min(), per_tick.iter().max());
        assert!(
            *least.unwrap() >= 60 && *most.unwrap() <= 140,
            "{least:?}..{most:?}"
        );
        // A name's tick is fixed: its probes are one interval apart.
        let t = TargetHealth::new("t-7", 3, Arc::default());
        assert_eq!(
            t.probe_tick(1000),
            TargetHealth::new("t-7", 3, Arc::default()).probe_tick(1000)
        );
    }

    #[test]
    fn stable_probe_interval_is_whole_rounds_within_bounds() {
        let with = |probe: u64, stable: Option<u64>| HealthConfig {
            probe_interval: Duration::from_secs(probe),
            stable_probe_interval: stable.map(Duration::from_secs),
            ..HealthConfig::default()
        };
        // Default: every round up to 500 stable probes a second, then
        // as many rounds apart as keep them there, 30 at most.
        assert_eq!(with(10, None).stable_rounds(10), 1);
        assert_eq!(with(10, None).stable_rounds(5_000), 1);
        assert_eq!(with(10, None).stable_rounds(5_001), 2);
        assert_eq!(with(10, None).stable_rounds(50_000), 10);
        assert_eq!(with(10, None).stable_rounds(100_000), 20);
        assert_eq!(with(10, None).stable_rounds(1_000_000), 30);
        assert_eq!(with(30, None).stable_rounds(15_000), 1);
        assert_eq!(with(30, None).stable_rounds(100_000), 7);
        // Configured: rounded down, so never further apart than that,
        // whatever the fleet.
        assert_eq!(with(10, Some(45)).stable_rounds(10), 4);
        assert_eq!(with(10, Some(10)).stable_rounds(100_000), 1);
        assert!(with(10, Some(300)).problems().is_empty());
        assert!(with(10, None).problems().is_empty());
        for bad in [5, 301] {
            let problems = with(10, Some(bad)).problems();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("health.stable_probe_interval: ")
                    && problems[0].contains("between probe_interval (10s) and 30 times it (5m)"),
                "{problems:?}"
            );
        }
        // Probes off: nothing to check.
        assert!(with(0, Some(5)).problems().is_empty());
        assert_eq!(with(0, None).stable_rounds(100_000), 1);
    }

    #[test]
    fn stable_targets_are_probed_every_nth_round_others_every_round() {
        let minute = Duration::from_secs(60);
        let h = TargetHealth::new("s", 3, Arc::default());
        // New, then answering fewer than STABLE_AFTER in a row: every round.
        for round in 0..STABLE_AFTER as u64 {
            assert_eq!(h.probe_decision(minute, round, 4), ProbeDecision::Send);
            probed_ok(&h);
        }
        // Stable: one round in 4, and a whole number of rounds apart.
        let due: Vec<u64> = (0..12)
            .filter(|&r| h.probe_decision(minute, r, 4) == ProbeDecision::Send)
            .collect();
        assert_eq!(due.len(), 3, "{due:?}");
        assert!(due.windows(2).all(|w| w[1] - w[0] == 4), "{due:?}");
        assert_eq!(
            h.probe_decision(minute, due[0] + 1, 4),
            ProbeDecision::Stable
        );
        // With 1 round (stable_probe_interval = probe_interval): every one.
        assert!((0..5).all(|r| h.probe_decision(minute, r, 1) == ProbeDecision::Send));
        // Stable targets spread over the rounds by name: each round
        // has about a quarter of them.
        let mut per_round = [0u32; 4];
        for i in 0..4000 {
            let t = TargetHealth::new(&format!("t-{i}"), 3, Arc::default());
            for _ in 0..STABLE_AFTER {
                probed_ok(&t);
            }
            for (round, n) in per_round.iter_mut().enumerate() {
                *n += u32::from(t.probe_decision(minute, round as u64, 4) == ProbeDecision::Send);
            }
        }
        assert!(
            per_round.iter().all(|&n| (850..=1150).contains(&n)),
            "{per_round:?}"
        );
        // A failure: no longer stable, probed every round until it has
        // answered STABLE_AFTER times in a row again.
        h.record_probe(Err("refused".into()));
        assert!((0..8).all(|r| h.probe_decision(minute, r, 4) == ProbeDecision::Send));
        probed_ok(&h);
        assert_eq!(h.probe_decision(minute, due[0] + 1, 4), ProbeDecision::Send);
        // So is a target whose breaker is open.
        let open = TargetHealth::new("o", 1, Arc::default());
        for _ in 0..STABLE_AFTER {
            probed_ok(&open);
        }
        open.record_exchange(Err("refused".into()));
        assert!(open.refusal().is_some());
        assert!((0..8).all(|r| open.probe_decision(minute, r, 4) == ProbeDecision::Send));
    }

    #[test]
    fn a_target_going_down_is_news_once_until_it_is_back() {
        // Outcomes in a row, from never seen: what each one changes.
        let outcomes = [false, false, false, true, true, false, false];
        let mut up = None;
        let mut said = Vec::new();
        for ok in outcomes {
            said.push(changed(up, ok));
            up = Some(ok);
        }
        use Change::*;
        assert_eq!(
            said,
            [Some(Down), None, None, Some(Up), None, Some(Down), None]
        );
        // First seen up is no news.
        assert_eq!(changed(None, true), None);
    }

    #[test]
    fn the_breaker_opens_after_failures_and_a_probe_closes_it() {
        let h = TargetHealth::new("t", 3, Arc::default());
        h.record_exchange(Err("refused".into()));
        h.record_exchange(Err("refused".into()));
        assert!(h.refusal().is_none());
        h.record_exchange(Err("refused".into()));
        let why = h.refusal().unwrap();
        assert!(
            why.starts_with("failed 3 times in a row (refused)"),
            "{why}"
        );
        h.record_probe(Err("still refused".into()));
        assert!(h.refusal().is_some());
        h.record_probe(Ok((
            Duration::from_millis(4),
            Some("1.7.1".into()),
            Some("7.2".into()),
        )));
        assert!(h.refusal().is_none());
        let s = h.snapshot();
        assert_eq!(s.up, Some(true));
        assert_eq!(s.consecutive_failures, 0);
        assert_eq!(s.agent_version.as_deref(), Some("1.7.1"));
    }

    #[test]
    fn a_success_resets_the_count_and_zero_never_opens() {
        let h = TargetHealth::new("t", 2, Arc::default());
        h.record_exchange(Err("x".into()));
        h.record_exchange(Ok(Duration::from_millis(1)));
        h.record_exchange(Err("x".into()));
        assert!(h.refusal().is_none());
        let never = TargetHealth::new("t", 0, Arc::default());
        for _ in 0..10 {
            never.record_exchange(Err("x".into()));
        }
        assert!(never.refusal().is_none());
    }

    #[test]
    fn health_survives_by_name() {
        let book = HealthBook::new(3);
        let a = book.for_target("a");
        a.record_exchange(Err("x".into()));
        assert_eq!(book.for_target("a").snapshot().consecutive_failures, 1);
        assert_eq!(book.for_target("b").snapshot().up, None);
    }

    #[test]
    fn names_that_leave_are_forgotten_and_start_afresh_when_back() {
        let book = HealthBook::new(2);
        let a = book.for_target("a");
        a.record_exchange(Err("x".into()));
        a.record_exchange(Err("x".into()));
        assert!(a.refusal().is_some());
        let b = book.for_target("b");
        b.record_exchange(Err("x".into()));
        book.for_target("c");

        let mut gone = book.retain(|n| n == "b");
        gone.sort();
        assert_eq!(gone, vec!["a", "c"]);
        assert_eq!(book.len(), 1);
        // The one kept is the same value, failures and all.
        assert!(Arc::ptr_eq(&book.for_target("b"), &b));
        assert_eq!(b.snapshot().consecutive_failures, 1);
        // "a" back under the same name: no inherited breaker.
        let again = book.for_target("a");
        assert!(!Arc::ptr_eq(&again, &a));
        assert_eq!(again.snapshot(), HealthState::default());
        assert!(again.refusal().is_none());
        assert!(book.retain(|_| true).is_empty());
    }

    #[test]
    fn targets_answering_real_traffic_need_no_probe() {
        let minute = Duration::from_secs(60);
        let decide = |h: &TargetHealth, interval| h.probe_decision(interval, 0, 1);
        let book = HealthBook::new(3);
        // Answers but never probed: the first probe learns its version.
        let u = book.for_target("u");
        u.record_exchange(Ok(Duration::from_millis(2)));
        assert_eq!(decide(&u, minute), ProbeDecision::Send);
        // Probed, no traffic: the next round asks again.
        let t = book.for_target("a");
        probed_ok(&t);
        assert_eq!(decide(&t, minute), ProbeDecision::Send);
        // Real answers within the interval: no probe; beyond it: one.
        t.record_exchange(Ok(Duration::from_millis(2)));
        assert_eq!(decide(&t, minute), ProbeDecision::Answered);
        assert_eq!(decide(&t, Duration::ZERO), ProbeDecision::Send);
        // It stops answering: down, probed again at once.
        t.record_exchange(Err("refused".into()));
        assert_eq!(decide(&t, minute), ProbeDecision::Send);
        for _ in 0..3 {
            t.record_exchange(Err("refused".into()));
        }
        assert!(t.refusal().is_some());
        assert_eq!(decide(&t, minute), ProbeDecision::Send);
    }
}
