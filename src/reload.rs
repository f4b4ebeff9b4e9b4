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

/// One version of a watched file: its stamp, and a digest of its content
/// for when the stamp moves but the content doesn't (a `touch`, a
/// deployment tool rewriting the same bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    stamp: Option<Stamp>,
    digest: Option<u64>,
}

fn digest(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

/// The file's version now, read only when its stamp is not `known`'s.
fn version(path: &Path, known: Option<&Version>) -> Version {
    let stamp = stamp(path);
    match known {
        Some(k) if k.stamp == stamp => *k,
        _ => Version {
            stamp,
            digest: stamp.and_then(|_| digest(path)),
        },
    }
}

/// The files' versions now, `known` being the earlier ones by position.
fn versions(files: &[PathBuf], known: &[Version]) -> Vec<Version> {
    files
        .iter()
        .enumerate()
        .map(|(i, f)| version(f, known.get(i)))
        .collect()
}

/// Whether a file's content changed (or it came or went) between two
/// versions of the same list.
fn content_changed(before: &[Version], now: &[Version]) -> bool {
    before.len() != now.len() || before.iter().zip(now).any(|(b, n)| b.digest != n.digest)
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
    let mut last = versions(&files, &[]);
    loop {
        let signalled = trigger.next().await == crate::reload_trigger::Wake::Hangup;
        // Read before the reload reads the files: a write that lands
        // while the reload runs shows up as a change on the next tick
        // instead of being taken as already seen.
        let before = versions(&files, &last);
        if signalled {
            reload_logged(&gateway, &source, "SIGHUP");
        } else if content_changed(&last, &before) {
            reload_logged(&gateway, &source, "file changed");
        } else {
            // Touched but the same: nothing to reload, and the new
            // stamps spare reading them again.
            last = before;
            continue;
        }
        let named = watched_files(&source);
        last = restamp(&files, &before, &named);
        files = named;
    }
}

/// The versions for the files watched after a reload: those watched
/// before keep the version read before the reload; newly named ones are
/// read now.
fn restamp(old: &[PathBuf], before: &[Version], new: &[PathBuf]) -> Vec<Version> {
    new.iter()
        .map(|f| match old.iter().position(|o| o == f) {
            Some(i) => before[i],
            None => version(f, None),
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
        let before = versions(&old, &[]);
        // The config changes while the reload runs: its version must stay
        // the one from before, so the next tick sees the change.
        std::fs::write(&config, "a longer config").unwrap();
        let new = vec![config.clone(), added.clone()];
        let last = restamp(&old, &before, &new);
        assert_eq!(last[0], before[0]);
        assert_ne!(last[0].stamp, stamp(&config));
        assert!(content_changed(&last, &versions(&new, &last)));
        assert_eq!(last[1].stamp, stamp(&added));
    }

    /// A file rewritten with the same bytes (or touched) is no change; a
    /// file that appears, goes or changes a byte is.
    #[test]
    fn only_a_change_of_content_counts() {
        let dir = tempfile::tempdir().unwrap();
        let (config, later) = (dir.path().join("c.toml"), dir.path().join("later.txt"));
        std::fs::write(&config, "listen = 1").unwrap();
        let files = vec![config.clone(), later.clone()];
        let first = versions(&files, &[]);
        // The same bytes again, through a new inode (as an editor or a
        // ConfigMap update writes): the stamp moves, the content doesn't.
        std::fs::remove_file(&config).unwrap();
        std::fs::write(&config, "listen = 1").unwrap();
        let touched = versions(&files, &first);
        assert_ne!(touched[0].stamp, first[0].stamp);
        assert!(!content_changed(&first, &touched));
        std::fs::write(&later, "now here").unwrap();
        assert!(content_changed(&touched, &versions(&files, &touched)));
        std::fs::write(&config, "listen = 20").unwrap();
        let edited = versions(&files, &touched);
        assert!(content_changed(&touched, &edited));
    }
}
