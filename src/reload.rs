//! Reloading without a restart: on SIGHUP and when the config file, a
//! policy file or a credential file changes. A reload builds the whole new
//! set (targets, roles, policies, users, keys) first and swaps it in at
//! once; if anything in it is invalid, the old set stays and the error
//! (file and cause) is logged. Listeners and the audit log keep their
//! settings until a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::ConfigSource;
use crate::pipeline::Gateway;

/// Re-reads the config file and every file it names, and installs them.
/// Returns the number of targets and roles now in force.
pub fn reload_access(gateway: &Gateway, config_path: &Path) -> Result<(usize, usize), String> {
    reload(gateway, &ConfigSource::file(config_path))
}

/// [`reload_access`] for layered configuration.
pub fn reload(gateway: &Gateway, source: &ConfigSource) -> Result<(usize, usize), String> {
    let config = source.load().map_err(|e| {
        // A file that doesn't load is a failed reload too.
        gateway.count_reload(false);
        e.to_string()
    })?;
    gateway
        .reload(&config)
        .map_err(|e| format!("{}: {e}", source.describe()))?;
    Ok((config.targets.len(), config.roles.len()))
}

/// The files whose change triggers a reload: the config files and every
/// file they name.
fn watched_files(source: &ConfigSource) -> Vec<PathBuf> {
    let mut files = source.files.clone();
    files.extend(source.named_files());
    files
}

fn stamp(files: &[PathBuf]) -> Vec<Option<(SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        })
        .collect()
}

fn reload_logged(gateway: &Gateway, source: &ConfigSource, why: &str) {
    match reload(gateway, source) {
        Ok((targets, roles)) => {
            tracing::info!(targets, roles, reason = why, "configuration reloaded")
        }
        Err(e) => tracing::error!(
            reason = why,
            "reload failed, keeping the previous roles and policies: {e}"
        ),
    }
}

/// Watches for SIGHUP and for changes of the config and policy files
/// (checked every `interval`) and reloads. Runs until the task is dropped.
pub async fn watch(gateway: Arc<Gateway>, source: impl Into<ConfigSource>, interval: Duration) {
    let source: ConfigSource = source.into();
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut files = watched_files(&source);
    let mut last = stamp(&files);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<()>();
        tokio::select! {
            () = hangup => reload_logged(&gateway, &source, "SIGHUP"),
            _ = tick.tick() => {
                let now = stamp(&files);
                if now == last {
                    continue;
                }
                reload_logged(&gateway, &source, "file changed");
            }
        }
        files = watched_files(&source);
        last = stamp(&files);
    }
}
