//! What wakes a reload loop: SIGHUP, or a period elapsed. One trigger for
//! the configuration's reload and the TLS listener's certificates, and the
//! [`Stamp`] both loops tell a changed file by.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tokio::time::{Interval, MissedTickBehavior};

/// Why a reload loop woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// SIGHUP: reload whether or not the files changed.
    Hangup,
    /// The period elapsed: reload if the files changed.
    Tick,
}

pub struct ReloadTrigger {
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
    tick: Option<Interval>,
}

impl ReloadTrigger {
    /// Wakes on SIGHUP and every `period` (never, when it is zero), the
    /// first time one period from now. `what` names the loop in a warning
    /// when SIGHUP can't be watched.
    pub fn new(period: Duration, what: &str) -> ReloadTrigger {
        let tick = (!period.is_zero()).then(|| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            t
        });
        #[cfg(unix)]
        let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| tracing::warn!("{what}: cannot watch for SIGHUP: {e}"))
            .ok();
        #[cfg(not(unix))]
        let _ = what;
        ReloadTrigger {
            #[cfg(unix)]
            hangup,
            tick,
        }
    }

    /// Waits for the next wake-up.
    pub async fn next(&mut self) -> Wake {
        let ticked = async {
            match self.tick.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(unix)]
        let hangup = async {
            let received = match self.hangup.as_mut() {
                Some(s) => s.recv().await.is_some(),
                None => false,
            };
            if !received {
                std::future::pending::<()>().await;
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<()>();
        tokio::select! {
            () = hangup => Wake::Hangup,
            () = ticked => Wake::Tick,
        }
    }
}

/// What identifies one version of a file: modification time, length and
/// (on Unix) inode, so that an atomic rename is seen even with a kept mtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// The file's stamp, `None` while it doesn't exist.
pub(crate) fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode,
    })
}
