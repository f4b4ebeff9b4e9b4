//! Reloading without a restart: on SIGHUP and when the config file, a
//! policy file or a credential file changes. A reload builds the whole new
//! set (targets, roles, policies, users, keys) first and swaps it in at
//! once; if anything in it is invalid, the old set stays and the error
//! (file and cause) is logged. Listeners and the audit log keep their
//! settings until a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::ConfigSource;
use crate::pipeline::Gateway;
use crate::reload_trigger::{stamp, Stamp};

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
    let reloaded = gateway
        .reload(&config)
        .map_err(|e| format!("{}: {e}", source.describe()));
    // The fleet's, every source's targets folded.
    let counts = (gateway.fleet().len(), config.roles.len());
    drop(config);
    // The file's parse and the old fleet are a peak an idle gateway would
    // otherwise keep.
    crate::memory::release_freed();
    reloaded.map(|()| counts)
}

/// The files whose change triggers a reload: the config files and every
/// file they name.
fn watched_files(source: &ConfigSource) -> Vec<PathBuf> {
    let mut files = source.files.clone();
    files.extend(source.named_files());
    files
}

fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files.iter().map(|f| stamp(f)).collect()
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
    let mut trigger = crate::reload_trigger::ReloadTrigger::new(interval, "config reload");
    let mut files = watched_files(&source);
    let mut last = stamps(&files);
    loop {
        let signalled = trigger.next().await == crate::reload_trigger::Wake::Hangup;
        // Stamped before the reload reads the files: a write that lands
        // while the reload runs shows up as a change on the next tick
        // instead of being taken as already seen.
        let before = stamps(&files);
        if signalled {
            reload_logged(&gateway, &source, "SIGHUP");
        } else if before != last {
            reload_logged(&gateway, &source, "file changed");
        } else {
            continue;
        }
        let named = watched_files(&source);
        last = restamp(&files, &before, &named);
        files = named;
    }
}

/// The stamps for the files watched after a reload: those watched before
/// keep the stamp taken before the reload; newly named ones are stamped now.
fn restamp(old: &[PathBuf], before: &[Option<Stamp>], new: &[PathBuf]) -> Vec<Option<Stamp>> {
    new.iter()
        .map(|f| match old.iter().position(|o| o == f) {
            Some(i) => before[i],
            None => stamp(f),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_keeps_the_stamps_taken_before_it_read_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let (config, policy, added) = (
            dir.path().join("c.toml"),
            dir.path().join("p.xml"),
            dir.path().join("u.txt"),
        );
        for f in [&config, &policy, &added] {
            std::fs::write(f, "x").unwrap();
        }
        let old = vec![config.clone(), policy.clone()];
        let before = stamps(&old);
        // The config changes while the reload runs: its stamp must stay the
        // one from before, so the next tick sees the change.
        std::fs::write(&config, "a longer config").unwrap();
        let new = vec![config.clone(), added.clone()];
        let last = restamp(&old, &before, &new);
        assert_eq!(last[0], before[0]);
        assert_ne!(last[0], stamp(&config));
        assert_eq!(last[1], stamp(&added));
    }
}
