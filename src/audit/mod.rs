//! The audit log: one record per request item and per failed
//! authentication, in JSON Lines files that are hash-chained across
//! records and files (`chain`), appended by the requests themselves and
//! made durable with group commit (`writer`), and anchored by signed
//! checkpoints (`checkpoint`). `jmxgate audit verify` and `jmxgate audit
//! query` read them.

pub mod chain;
pub mod checkpoint;
pub mod query;
pub mod record;
pub mod ship;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub use record::{Encoded, Entry, ValueMode};
pub use writer::{Health, WriterMetrics};

/// Which records must be on disk before the answer goes out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// write and exec items (and the requests that carry them).
    #[default]
    WriteExec,
    /// Every request.
    All,
}

/// What to do when the log cannot be written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// Refuse requests with 503 until the log is writable again.
    #[default]
    Closed,
    /// Keep serving; count and log every lost record loudly.
    Open,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Directory of the `audit-*.jsonl` files.
    pub dir: PathBuf,
    /// Also print every record to stdout.
    #[serde(default)]
    pub stdout: bool,
    #[serde(default)]
    pub durable: Durability,
    #[serde(default)]
    pub on_failure: OnFailure,
    /// Start a new file beyond this size.
    #[serde(default = "default_rotate_bytes")]
    pub rotate_bytes: u64,
    /// Start a new file after this long.
    #[serde(default = "default_rotate_after", with = "humantime_serde")]
    pub rotate_after: Duration,
    /// How written values and exec arguments are recorded.
    #[serde(default)]
    pub values: ValueMode,
    /// The `replica` of every record: which gateway wrote it. Default: the
    /// machine's hostname; `JMXGATE_REPLICA_ID` overrides both. Resolved
    /// by [`AuditConfig::problems`].
    #[serde(default)]
    pub replica_id: Option<String>,
    /// Ed25519 private key (PKCS#8 PEM) that signs checkpoints; without
    /// it, no checkpoints are written.
    #[serde(default)]
    pub signing_key_file: Option<PathBuf>,
    /// A checkpoint after this many records…
    #[serde(default = "default_checkpoint_records")]
    pub checkpoint_records: u64,
    /// …or after this long, when records were written since the last one.
    #[serde(default = "default_checkpoint_interval", with = "humantime_serde")]
    pub checkpoint_interval: Duration,
    /// Collectors the files are shipped to (`[[audit.sinks]]`).
    #[serde(default)]
    pub sinks: Vec<ship::config::SinkConfig>,
    /// Files every sink has shipped are deleted, oldest first, while the
    /// directory is larger; unset keeps everything.
    #[serde(default)]
    pub max_dir_bytes: Option<u64>,
}

/// Overrides `audit.replica_id` (one config file for several replicas).
pub const REPLICA_ENV: &str = "JMXGATE_REPLICA_ID";

fn default_checkpoint_records() -> u64 {
    1000
}

fn default_checkpoint_interval() -> Duration {
    Duration::from_secs(60)
}

/// The machine's hostname, for the default replica id.
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// The replica id where nothing names one: `JMXGATE_REPLICA_ID`, else the
/// hostname.
pub fn default_replica_id() -> Option<String> {
    std::env::var(REPLICA_ENV)
        .ok()
        .filter(|e| !e.is_empty())
        .or_else(hostname)
}

/// Why `id` can't be a replica id: it goes into syslog fields and file
/// listings as it is.
pub fn replica_id_problem(id: &str) -> Option<String> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    (!ok).then(|| {
        format!(
            "{id:?} is not a replica id: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
        )
    })
}

fn default_rotate_bytes() -> u64 {
    100 * 1024 * 1024
}

fn default_rotate_after() -> Duration {
    Duration::from_secs(24 * 3600)
}

impl AuditConfig {
    pub fn resolve_relative_paths(&mut self, base: &Path) {
        if self.dir.is_relative() {
            self.dir = base.join(&self.dir);
        }
        if let Some(key) = &mut self.signing_key_file {
            if key.is_relative() {
                *key = base.join(&*key);
            }
        }
    }

    /// Sets `replica_id` from `JMXGATE_REPLICA_ID`, the file or the
    /// hostname, and checks it, the signing key, the sinks and retention;
    /// returns what is wrong.
    pub fn problems(&mut self) -> Vec<String> {
        self.problems_with_env(std::env::var(REPLICA_ENV).ok())
    }

    fn problems_with_env(&mut self, env: Option<String>) -> Vec<String> {
        let mut problems = Vec::new();
        let (key, id) = match env.filter(|e| !e.is_empty()) {
            Some(e) => (REPLICA_ENV, Some(e)),
            None => match self.replica_id.take() {
                Some(id) => ("audit.replica_id", Some(id)),
                None => ("audit.replica_id (the hostname)", hostname()),
            },
        };
        match id {
            None => problems.push(
                "audit.replica_id: not set and the hostname is unknown; set it (or JMXGATE_REPLICA_ID)"
                    .into(),
            ),
            Some(id) => {
                if let Some(p) = replica_id_problem(&id) {
                    problems.push(format!("{key}: {p}"));
                }
                self.replica_id = Some(id);
            }
        }
        if let Some(file) = &self.signing_key_file {
            if let Err(e) = checkpoint::Signer::load(file) {
                problems.push(e);
            }
        }
        if self.checkpoint_records == 0 {
            problems.push("audit.checkpoint_records: must be 1 or more".into());
        }
        if self.checkpoint_interval.is_zero() {
            problems.push("audit.checkpoint_interval: must be longer than 0s".into());
        }
        problems.extend(ship::config::problems(&self.sinks, self.max_dir_bytes));
        problems
    }

    /// The resolved replica id (see [`AuditConfig::problems`]).
    pub fn replica(&self) -> &str {
        self.replica_id.as_deref().unwrap_or("unknown")
    }
}

/// How long a stopping gateway waits for its sinks to deliver the rest.
const SHIP_AT_CLOSE: Duration = Duration::from_secs(5);

/// A handle to the running audit log.
#[derive(Debug, Clone)]
pub struct AuditLog {
    writer: Arc<writer::Writer>,
    health: Arc<Health>,
    pub config: Arc<AuditConfig>,
    /// The running sinks; they stop with the last handle.
    shipping: Option<Arc<ship::Shipping>>,
}

impl AuditLog {
    pub fn start(config: &AuditConfig, metrics: WriterMetrics) -> Result<AuditLog, String> {
        let signer = config
            .signing_key_file
            .as_deref()
            .map(checkpoint::Signer::load)
            .transpose()?
            .map(Arc::new);
        let (writer, health) = writer::start(
            writer::FileSink {
                dir: config.dir.clone(),
                rotate_bytes: config.rotate_bytes.max(4096),
                rotate_after: config.rotate_after.max(Duration::from_secs(1)),
                durable_all: config.durable == Durability::All,
                stdout: config.stdout,
                replica: config.replica().to_string(),
                signer,
                checkpoint_records: config.checkpoint_records.max(1),
                checkpoint_interval: config.checkpoint_interval.max(Duration::from_millis(10)),
            },
            metrics.clone(),
        )?;
        let shipping = if config.sinks.is_empty() {
            None
        } else {
            let settings = ship::Settings {
                dir: config.dir.clone(),
                sinks: config.sinks.clone(),
                max_dir_bytes: config.max_dir_bytes,
                close_when_full: config.on_failure == OnFailure::Closed,
                replica: config.replica().to_string(),
            };
            Some(Arc::new(ship::start(
                settings,
                metrics.sinks,
                health.clone(),
            )?))
        };
        Ok(AuditLog {
            writer,
            health,
            config: Arc::new(config.clone()),
            shipping,
        })
    }

    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Writes the records and waits until they are written (and on disk
    /// when `durable`). `Err` says why they could not be.
    pub async fn write(&self, entries: Vec<Entry>, durable: bool) -> Result<(), String> {
        self.write_encoded(&Encoded::new(entries), durable).await
    }

    /// [`AuditLog::write`] for records already serialised.
    /// Appends records to the file now, without waiting for the disk.
    pub fn append(&self, records: &Encoded) -> Result<(), String> {
        self.writer.append(records, false).map(drop)
    }

    pub async fn write_encoded(&self, records: &Encoded, durable: bool) -> Result<(), String> {
        match self.writer.append(records, durable)? {
            Some(done) => done
                .await
                .unwrap_or_else(|_| Err("the audit sync thread has stopped".into())),
            None => Ok(()),
        }
    }

    /// Ends the current file with a `log_closed` record and, with a key, a
    /// checkpoint after it, on disk, when the gateway stops (a crash leaves
    /// neither; `verify` doesn't need them).
    pub async fn close(&self) -> Result<(), String> {
        let closing = Entry {
            time: record::now_rfc3339(),
            event: "log_closed".into(),
            note: Some("gateway stopped".into()),
            ..Entry::default()
        };
        let closed = match self.writer.append_last(&Encoded::new(vec![closing]))? {
            Some(done) => done
                .await
                .unwrap_or_else(|_| Err("the audit sync thread has stopped".into())),
            None => Ok(()),
        };
        // The last records, too, reach the collectors before the exit.
        if let Some(shipping) = &self.shipping {
            if !shipping.finish(SHIP_AT_CLOSE).await {
                tracing::warn!(
                    "audit sinks not drained within {}s; the rest goes at the next start",
                    SHIP_AT_CLOSE.as_secs()
                );
            }
        }
        closed
    }

    /// Asks a failed log to try again (it does so at most once a second);
    /// requests refused while the log is down call this, so the gateway
    /// reopens as soon as the log is writable.
    pub fn nudge(&self) {
        self.writer.nudge();
    }

    /// Writes records without waiting for durability (failed
    /// authentications: nothing is answered but a 401, which must not wait
    /// for the disk). A failure is counted and logged by the writer.
    pub fn write_later(&self, entries: Vec<Entry>) {
        let _ = self.writer.append(&Encoded::new(entries), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> AuditConfig {
        toml::from_str(&format!("dir = \"/tmp/x\"\n{extra}")).unwrap()
    }

    #[test]
    fn the_replica_id_comes_from_the_environment_the_file_or_the_hostname() {
        let mut c = config("replica_id = \"gw-1\"");
        assert!(c.problems_with_env(Some("gw-env".into())).is_empty());
        assert_eq!(c.replica(), "gw-env");
        let mut c = config("replica_id = \"gw-1\"");
        assert!(c.problems_with_env(None).is_empty());
        assert_eq!(c.replica(), "gw-1");
        let mut c = config("");
        assert!(c.problems_with_env(None).is_empty());
        assert_eq!(Some(c.replica().to_string()), hostname());
    }

    #[test]
    fn bad_replica_ids_and_keys_are_config_errors() {
        for bad in ["gw 1", "gw\"1", "", "x/y", "ü"] {
            let mut c = config(&format!("replica_id = {bad:?}"));
            let p = c.problems_with_env(None);
            assert_eq!(p.len(), 1, "{bad:?}: {p:?}");
            assert!(
                p[0].starts_with("audit.replica_id: ") && p[0].contains("1 to 64"),
                "{p:?}"
            );
        }
        let long = "a".repeat(65);
        assert_eq!(
            config(&format!("replica_id = {long:?}"))
                .problems_with_env(None)
                .len(),
            1
        );
        assert!(config(&format!("replica_id = {:?}", "a".repeat(64)))
            .problems_with_env(None)
            .is_empty());
        let p = config("").problems_with_env(Some("no spaces".into()));
        assert!(p[0].starts_with("JMXGATE_REPLICA_ID: "), "{p:?}");
        let p = config("signing_key_file = \"/nonexistent/audit.key\"\ncheckpoint_records = 0")
            .problems_with_env(Some("gw-1".into()));
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].contains("/nonexistent/audit.key") && p[0].contains("cannot read"),
            "{p:?}"
        );
        assert!(p[1].starts_with("audit.checkpoint_records"));
    }
}
