//! The process's limit on open files. Every client connection, agent
//! connection, probe and audit file is a descriptor; systemd and most
//! shells start a service with a soft limit of 1024 under a far higher
//! hard one, which a gateway of thousands of connections outgrows. At
//! start the soft limit is raised to the hard one (as Go's runtime does),
//! and a limit below what the configuration may hold open is a warning
//! that names the keys, not a `Too many open files` later.

use crate::health::HealthConfig;
use crate::pipeline::server::ServerConfig;

/// Descriptors beyond the connections: listeners, the audit log and its
/// sinks, configuration and inventory reads, resolvers, the admin door.
const MARGIN: u64 = 256;

/// What the configuration may hold open at once: its client
/// connections, agent exchanges in flight, agent connections kept for
/// reuse, health probes in flight, and [`MARGIN`].
pub fn needed(server: &ServerConfig, health: &HealthConfig) -> u64 {
    [
        server.max_connections,
        server.max_agent_exchanges,
        server.max_kept_agent_connections,
        health.max_probes_in_flight,
    ]
    .iter()
    .fold(MARGIN, |sum, &n| sum.saturating_add(n as u64))
}

/// The warning for a limit below `needed`, naming what to change.
pub fn shortfall(limit: u64, needed: u64) -> Option<String> {
    (limit < needed).then(|| {
        format!(
            "the open-files limit is {limit}, below the {needed} the configuration may hold open \
             (server.max_connections + server.max_agent_exchanges + server.max_kept_agent_connections \
             + health.max_probes_in_flight + {MARGIN}): raise the hard limit (systemd: LimitNOFILE=, \
             Docker: --ulimit nofile=) or lower those keys, else connections will fail with \
             `Too many open files`"
        )
    })
}

/// The open-files limit now: `(soft, hard)`.
#[cfg(unix)]
pub fn limits() -> std::io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 only on some targets
    Ok((limit.rlim_cur as u64, limit.rlim_max as u64))
}

/// Raises the soft limit to the hard one; the limit now in force.
#[cfg(unix)]
pub fn raise_to_hard_limit() -> std::io::Result<u64> {
    let (soft, hard) = limits()?;
    if soft < hard {
        let raised = libc::rlimit {
            rlim_cur: hard as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit only reads the struct given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_adds_every_bound_and_the_margin() {
        let config: crate::config::Config = toml::from_str(
            "[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = 100\nmax_agent_exchanges = 20\n\
             max_kept_agent_connections = 30\n[health]\nmax_probes_in_flight = 4\n",
        )
        .unwrap();
        assert_eq!(
            needed(&config.server, &config.health),
            100 + 20 + 30 + 4 + MARGIN
        );
    }

    #[test]
    fn a_limit_below_what_is_needed_says_which_keys_to_change() {
        assert_eq!(shortfall(10_000, 9_000), None);
        assert_eq!(shortfall(9_000, 9_000), None);
        let warning = shortfall(1024, 9_000).unwrap();
        assert!(warning.contains("1024"), "{warning}");
        assert!(
            warning.contains("server.max_kept_agent_connections"),
            "{warning}"
        );
        assert!(warning.contains("LimitNOFILE"), "{warning}");
    }
}
