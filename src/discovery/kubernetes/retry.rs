//! How a failing watch is retried and told: pure, unit-tested.
//!
//! kube-runtime's default back-off restarts from 0.8 s on every item a
//! watch yields, and a watch that can't list yields `Event::Init` before
//! each try: a ServiceAccount without `list pods` was retried (and logged,
//! and thought "working again") every second or so. Here a watch counts
//! as working only once its list is complete or the watch delivers an
//! event, and a refusal (401, 403) backs off to minutes: no retry soon
//! will be let in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;

/// First and longest pause after an ordinary failure (the API server
/// away, a timeout), as kube-runtime's default.
pub const RETRY_FIRST: Duration = Duration::from_millis(800);
pub const RETRY_MOST: Duration = Duration::from_secs(30);
/// First and longest pause after a refusal (401, 403): permissions
/// change by hand, not in a second.
pub const REFUSED_FIRST: Duration = Duration::from_secs(5);
pub const REFUSED_MOST: Duration = Duration::from_secs(300);

/// What one watch's stream last showed, shared between the stream (which
/// sees each item first) and its back-off.
#[derive(Debug, Default)]
pub struct WatchHealth {
    /// A list completed or an event came since the last failure.
    working: AtomicBool,
    /// The last failure was a refusal.
    refused: AtomicBool,
}

impl WatchHealth {
    /// Notes an item of the watch (before its back-off sees it).
    pub fn saw<K>(&self, item: &Result<watcher::Event<K>, watcher::Error>) {
        match item {
            Ok(event) => {
                if proves_working(event) {
                    self.working.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => {
                self.working.store(false, Ordering::Relaxed);
                self.refused.store(failure(e).refused, Ordering::Relaxed);
            }
        }
    }
}

/// Whether an event shows the watch works: a list done, or an object
/// changed. `Init` and `InitApply` come before a list has succeeded.
pub fn proves_working<K>(event: &watcher::Event<K>) -> bool {
    matches!(
        event,
        watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)
    )
}

/// The back-off of one watch: doubling from [`RETRY_FIRST`] to
/// [`RETRY_MOST`], or from [`REFUSED_FIRST`] to [`REFUSED_MOST`] after a
/// refusal, with a tenth of jitter so replicas don't retry in step; back
/// to the start only once the watch works (see [`WatchHealth`]).
#[derive(Debug)]
pub struct WatchBackoff {
    health: Arc<WatchHealth>,
    tries: u32,
}

impl WatchBackoff {
    pub fn new(health: Arc<WatchHealth>) -> WatchBackoff {
        WatchBackoff { health, tries: 0 }
    }

    /// The pause before try `tries + 1`, without jitter.
    pub fn pause(tries: u32, refused: bool) -> Duration {
        let (first, most) = if refused {
            (REFUSED_FIRST, REFUSED_MOST)
        } else {
            (RETRY_FIRST, RETRY_MOST)
        };
        first.saturating_mul(1u32 << tries.min(16)).min(most)
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let pause = Self::pause(self.tries, self.health.refused.load(Ordering::Relaxed));
        self.tries = self.tries.saturating_add(1);
        // 0.9 to 1.1 times the pause.
        Some(pause * (900 + crate::random::below(201)) / 1000)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    /// Called by the stream on every item; only a watch that works
    /// starts over.
    fn reset(&mut self) {
        if self.health.working.load(Ordering::Relaxed) {
            self.tries = 0;
        }
    }
}

/// A watch's failure, told for an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub why: String,
    /// The API server refused (401, 403): retried only minutes apart, and
    /// working again only once a list succeeds.
    pub refused: bool,
}

/// `e` in words: the API server's own status (code, reason, message)
/// rather than the Debug dump kube's error carries.
pub fn failure(e: &watcher::Error) -> Failure {
    let (doing, client) = match e {
        watcher::Error::InitialListFailed(c) => ("listing", c),
        watcher::Error::WatchStartFailed(c) => ("starting the watch", c),
        watcher::Error::WatchFailed(c) => ("watching", c),
        watcher::Error::WatchError(status) => return of_status("watching", status),
        watcher::Error::NoResourceVersion => {
            return Failure {
                why: e.to_string(),
                refused: false,
            }
        }
    };
    match client {
        kube::Error::Api(status) => of_status(doing, status),
        other => Failure {
            why: format!("{doing} failed: {other}"),
            refused: false,
        },
    }
}

fn of_status(doing: &str, status: &kube::core::Status) -> Failure {
    let refused = matches!(status.code, 401 | 403);
    let mut why = format!("{doing} failed: the API server answered {}", status.code);
    if !status.reason.is_empty() {
        why.push(' ');
        why.push_str(&status.reason);
    }
    if !status.message.is_empty() {
        why.push_str(": ");
        why.push_str(&status.message);
    }
    if refused {
        why.push_str(
            " (the gateway's ServiceAccount needs get, list and watch on pods there; \
             retried minutes apart until it has them)",
        );
    }
    Failure { why, refused }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn forbidden() -> watcher::Error {
        let status = kube::core::Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "pods is forbidden: User \"system:serviceaccount:shop:jmxgate\" cannot list resource \"pods\" in API group \"\" in the namespace \"shop\"".into(),
            ..Default::default()
        };
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn a_refusal_is_told_in_the_api_servers_words_without_a_dump() {
        let f = failure(&forbidden());
        assert!(f.refused);
        assert!(
            f.why.starts_with("listing failed: the API server answered 403 Forbidden: pods is forbidden: User \"system:serviceaccount:shop:jmxgate\" cannot list"),
            "{}",
            f.why
        );
        assert!(!f.why.contains("Status {"), "{}", f.why);
        let gone = kube::core::Status {
            code: 410,
            reason: "Expired".into(),
            ..Default::default()
        };
        let f = failure(&watcher::Error::WatchError(Box::new(gone)));
        assert_eq!(
            f.why,
            "watching failed: the API server answered 410 Expired"
        );
        assert!(!f.refused);
    }

    #[test]
    fn pauses_double_to_their_bound_and_refusals_wait_minutes() {
        let p = |n, refused| WatchBackoff::pause(n, refused);
        assert_eq!(p(0, false), RETRY_FIRST);
        assert_eq!(p(1, false), RETRY_FIRST * 2);
        assert_eq!(p(10, false), RETRY_MOST);
        assert_eq!(p(0, true), REFUSED_FIRST);
        assert_eq!(p(6, true), REFUSED_MOST);
        assert_eq!(p(u32::MAX, true), REFUSED_MOST);
    }

    /// The watcher's `Init` before each try of a list that fails is no
    /// success: the pauses keep growing; a completed list starts them
    /// over.
    #[test]
    fn only_a_working_watch_starts_the_pauses_over() {
        use kube::runtime::utils::Backoff;
        let health = Arc::new(WatchHealth::default());
        let mut backoff = WatchBackoff::new(health.clone());
        let mut pauses = Vec::new();
        for _ in 0..8 {
            health.saw::<Pod>(&Ok(watcher::Event::Init));
            backoff.reset();
            health.saw::<Pod>(&Err(forbidden()));
            pauses.push(backoff.next().unwrap());
        }
        // Each try's pause, its jitter aside: doubling up to the bound
        // (never started over by the Init before each try). Two pauses at
        // the bound may come in either order, so each is checked against
        // its own try's pause rather than against the one before.
        for (tries, pause) in pauses.iter().enumerate() {
            let plain = WatchBackoff::pause(tries as u32, true);
            assert!(
                *pause >= plain * 9 / 10 && *pause <= plain * 11 / 10,
                "try {tries}: {pause:?} for {plain:?}: {pauses:?}"
            );
        }
        assert!(pauses[0] >= REFUSED_FIRST * 9 / 10);
        assert!(*pauses.last().unwrap() >= REFUSED_MOST * 9 / 10);
        health.saw::<Pod>(&Ok(watcher::Event::InitDone));
        backoff.reset();
        health.saw::<Pod>(&Err(watcher::Error::NoResourceVersion));
        let again = backoff.next().unwrap();
        assert!(again <= RETRY_FIRST * 11 / 10, "{again:?}");
    }
}
