//! Target health: what the last exchanges and background `version` probes
//! said about each agent, and a circuit breaker. After `failures_to_open`
//! failed exchanges in a row (the agent unreachable, timing out or not
//! answering Jolokia), items for it are answered at once with 503
//! `jmxgate.TargetUnavailable` instead of waiting for timeouts, until a
//! probe succeeds. Health is kept by target name, so it survives reloads;
//! a name that leaves the fleet loses its entry ([`HealthBook::retain`]), so
//! a target added again under that name starts afresh.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

/// `[health]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// How often every target is asked for its `version`; `0s` turns the
    /// probes, and with them the circuit breaker, off.
    #[serde(default = "default_probe_interval", with = "humantime_serde")]
    pub probe_interval: Duration,
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

/// How a round of probes is spread over `interval` for `targets`
/// targets: every `tick`, the next `per_tick` targets. Ticks are at
/// least 10 ms apart, so a large fleet is probed in small batches rather
/// than one timer per target.
pub fn probe_pacing(targets: usize, interval: Duration) -> (Duration, usize) {
    const MIN_TICK: Duration = Duration::from_millis(10);
    let most_ticks = (interval.as_millis() / MIN_TICK.as_millis()).max(1) as usize;
    let ticks = targets.clamp(1, most_ticks);
    let per_tick = targets.div_ceil(ticks).max(1);
    (interval / ticks as u32, per_tick)
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
}

#[derive(Debug)]
pub struct TargetHealth {
    name: String,
    state: Mutex<HealthState>,
    /// 0: the breaker never opens.
    failures_to_open: u32,
    /// Set when the target leaves the fleet; exchanges and probes still
    /// under way then must not bring its gauges back.
    retired: AtomicBool,
}

impl TargetHealth {
    /// The target's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn new(name: &str, failures_to_open: u32) -> TargetHealth {
        TargetHealth {
            name: name.to_string(),
            state: Mutex::default(),
            failures_to_open,
            retired: AtomicBool::new(false),
        }
    }

    /// Whether the target has left the fleet (see [`HealthBook::retain`]).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    pub fn snapshot(&self) -> HealthState {
        self.state.lock().expect("health lock").clone()
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
    }

    /// Whether the next probe round should ask this target: not while
    /// real exchanges answered within `interval` (passive health), unless
    /// its breaker is open, it was last seen down, or no probe has yet
    /// learnt its agent's version.
    pub fn needs_probe(&self, interval: Duration) -> bool {
        let s = self.state.lock().expect("health lock");
        s.open_since.is_some()
            || s.up != Some(true)
            || s.agent_version.is_none()
            || s.answered_at.is_none_or(|t| t.elapsed() >= interval)
    }

    fn record(&self, outcome: Result<Duration, String>) {
        let mut s = self.state.lock().expect("health lock");
        s.last_check = Some(SystemTime::now());
        match changed(s.up, outcome.is_ok()) {
            Some(Change::Down) => tracing::warn!(
                target_name = %self.name,
                error = outcome.as_ref().err().map_or("", String::as_str),
                "target down: an exchange or health probe failed (logged again only when it is back and fails anew)"
            ),
            Some(Change::Up) => {
                tracing::info!(target_name = %self.name, "target up again: it answered")
            }
            None => {}
        }
        match outcome {
            Ok(latency) => {
                s.up = Some(true);
                s.latency = Some(latency);
                s.consecutive_failures = 0;
                s.last_error = None;
                // An exchange only runs while closed; nothing to close here.
            }
            Err(error) => {
                s.up = Some(false);
                s.consecutive_failures += 1;
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
                }
                s.agent_version = version.or(s.agent_version.take());
                s.protocol = protocol.or(s.protocol.take());
            }
            Err(e) => self.record(Err(e)),
        }
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
}

impl HealthBook {
    /// `failures_to_open` 0 never opens a breaker (probes off).
    pub fn new(failures_to_open: u32) -> HealthBook {
        HealthBook {
            entries: Mutex::default(),
            failures_to_open,
        }
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
            .or_insert_with(|| Arc::new(TargetHealth::new(name, self.failures_to_open)))
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
    #[test]
    fn probes_are_spread_over_the_interval_in_batches() {
        let thirty = Duration::from_secs(30);
        // Few targets: one per tick, evenly apart.
        assert_eq!(probe_pacing(3, thirty), (Duration::from_secs(10), 1));
        // Many: ticks no closer than 10 ms, batches cover every target.
        let (tick, per_tick) = probe_pacing(100_000, thirty);
        assert_eq!(tick, Duration::from_millis(10));
        assert!(per_tick * 3000 >= 100_000 && per_tick == 34, "{per_tick}");
        assert_eq!(probe_pacing(0, thirty).1, 1);
    }

    use super::*;

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
        let h = TargetHealth::new("t", 3);
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
        let h = TargetHealth::new("t", 2);
        h.record_exchange(Err("x".into()));
        h.record_exchange(Ok(Duration::from_millis(1)));
        h.record_exchange(Err("x".into()));
        assert!(h.refusal().is_none());
        let never = TargetHealth::new("t", 0);
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
        let book = HealthBook::new(3);
        // Answers but never probed: the first probe learns its version.
        let u = book.for_target("u");
        u.record_exchange(Ok(Duration::from_millis(2)));
        assert!(u.needs_probe(minute));
        // Probed, no traffic: the next round asks again.
        let t = book.for_target("a");
        t.record_probe(Ok((
            Duration::from_millis(2),
            Some("1.7.1".into()),
            Some("7.2".into()),
        )));
        assert!(t.needs_probe(minute));
        // Real answers within the interval: no probe; beyond it: one.
        t.record_exchange(Ok(Duration::from_millis(2)));
        assert!(!t.needs_probe(minute));
        assert!(t.needs_probe(Duration::ZERO));
        // It stops answering: down, probed again at once.
        t.record_exchange(Err("refused".into()));
        assert!(t.needs_probe(minute));
        for _ in 0..3 {
            t.record_exchange(Err("refused".into()));
        }
        assert!(t.refusal().is_some() && t.needs_probe(minute));
    }
}
