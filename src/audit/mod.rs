//! The audit log: one record per request item and per failed
//! authentication, in JSON Lines files that are hash-chained across
//! records and files (`chain`), appended by the requests themselves and
//! made durable with group commit (`writer`). `jmxgate audit verify` and `jmxgate audit query` read them.

pub mod chain;
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
    /// Collectors the files are shipped to (`[[audit.sinks]]`).
    #[serde(default)]
    pub sinks: Vec<ship::config::SinkConfig>,
    /// Files every sink has shipped are deleted, oldest first, while the
    /// directory is larger; unset keeps everything.
    #[serde(default)]
    pub max_dir_bytes: Option<u64>,
}

fn default_rotate_bytes() -> u64 {
    100 * 1024 * 1024
}

fn default_rotate_after() -> Duration {
    Duration::from_secs(24 * 3600)
}

impl AuditConfig {
    /// What is wrong with the sinks and retention settings.
    pub fn problems(&self) -> Vec<String> {
        ship::config::problems(&self.sinks, self.max_dir_bytes)
    }

    pub fn resolve_relative_paths(&mut self, base: &Path) {
        if self.dir.is_relative() {
            self.dir = base.join(&self.dir);
        }
    }
}

/// A handle to the running audit log.
#[derive(Debug, Clone)]
pub struct AuditLog {
    writer: Arc<writer::Writer>,
    health: Arc<Health>,
    pub config: Arc<AuditConfig>,
    /// The running sinks; they stop with the last handle.
    _shipping: Option<Arc<ship::Shipping>>,
}

impl AuditLog {
    pub fn start(config: &AuditConfig, metrics: WriterMetrics) -> Result<AuditLog, String> {
        let (writer, health) = writer::start(
            writer::FileSink {
                dir: config.dir.clone(),
                rotate_bytes: config.rotate_bytes.max(4096),
                rotate_after: config.rotate_after.max(Duration::from_secs(1)),
                durable_all: config.durable == Durability::All,
                stdout: config.stdout,
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
                replica: ship::replica_id(),
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
            _shipping: shipping,
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
    pub async fn write_encoded(&self, records: &Encoded, durable: bool) -> Result<(), String> {
        match self.writer.append(records, durable)? {
            Some(done) => done
                .await
                .unwrap_or_else(|_| Err("the audit sync thread has stopped".into())),
            None => Ok(()),
        }
    }

    /// Ends the current file with a `log_closed` record, on disk, when the
    /// gateway stops (a crash leaves no such record; `verify` doesn't need
    /// one).
    pub async fn close(&self) -> Result<(), String> {
        let closing = Entry {
            time: record::now_rfc3339(),
            event: "log_closed".into(),
            note: Some("gateway stopped".into()),
            ..Entry::default()
        };
        self.write(vec![closing], true).await
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
