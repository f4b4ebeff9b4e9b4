//! The one clock helper: Jolokia answers count time in seconds since the
//! Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the Unix epoch.
pub fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
