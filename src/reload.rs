//! Reloading roles and policies without a restart: on SIGHUP and when the
//! config file or a policy file changes. A reload builds the whole new set
//! first and swaps it in at once; if anything in it is invalid, the old set
//! stays and the error (file and cause) is logged.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::access::AccessControl;
use crate::config::Config;
use crate::pipeline::Gateway;

/// Re-reads the config file and the policies it names, and installs them.
pub fn reload_access(gateway: &Gateway, config_path: &Path) -> Result<usize, String> {
    let config = Config::load(config_path).map_err(|e| e.to_string())?;
    let access = AccessControl::from_config(&config)
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
    let roles = access.roles().len();
    gateway.set_access(access);
    Ok(roles)
}

/// The files whose change triggers a reload: the config and every policy.
fn watched_files(gateway: &Gateway, config_path: &Path) -> Vec<PathBuf> {
    let mut files = vec![config_path.to_path_buf()];
    files.extend(
        gateway
            .access()
            .roles()
            .iter()
            .filter_map(|r| r.policy_file.clone()),
    );
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

fn reload_logged(gateway: &Gateway, config_path: &Path, why: &str) {
    match reload_access(gateway, config_path) {
        Ok(roles) => tracing::info!(roles, reason = why, "roles and policies reloaded"),
        Err(e) => tracing::error!(
            reason = why,
            "reload failed, keeping the previous roles and policies: {e}"
        ),
    }
}

/// Watches for SIGHUP and for changes of the config and policy files
/// (checked every `interval`) and reloads. Runs until the task is dropped.
pub async fn watch(gateway: Arc<Gateway>, config_path: PathBuf, interval: Duration) {
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut files = watched_files(&gateway, &config_path);
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
            () = hangup => reload_logged(&gateway, &config_path, "SIGHUP"),
            _ = tick.tick() => {
                let now = stamp(&files);
                if now == last {
                    continue;
                }
                reload_logged(&gateway, &config_path, "file changed");
            }
        }
        files = watched_files(&gateway, &config_path);
        last = stamp(&files);
    }
}
