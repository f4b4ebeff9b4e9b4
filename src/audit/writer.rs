//! The audit file writer: one thread owns the file. Requests hand it their
//! records and wait for the acknowledgement; everything that arrived
//! meanwhile is written in one batch and, when any of it must be durable,
//! made durable with one `fdatasync` (group commit), so many concurrent
//! requests share the cost of one disk flush.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::chain::{self, GENESIS};
use super::record::{now_rfc3339, Entry};

/// Records of one request, and whether they must be on disk before the
/// answer goes out.
pub struct Submission {
    pub entries: Vec<Entry>,
    pub durable: bool,
    pub ack: Option<oneshot::Sender<Result<(), String>>>,
}

/// The metric handles the writer feeds.
#[derive(Debug, Clone, Default)]
pub struct WriterMetrics {
    pub records: Counter,
    pub failures: Counter,
    pub queue: Gauge,
    pub fsync_seconds: Option<Histogram>,
}

/// Shared state readers of the log (pipeline, readiness) look at.
#[derive(Debug, Default)]
pub struct Health {
    failed: AtomicBool,
    reason: Mutex<String>,
    pub metrics: WriterMetrics,
}

impl Health {
    /// `Err(reason)` while the log cannot be written.
    pub fn check(&self) -> Result<(), String> {
        if self.failed.load(Ordering::Acquire) {
            Err(self.reason.lock().map(|r| r.clone()).unwrap_or_default())
        } else {
            Ok(())
        }
    }

    fn fail(&self, reason: String) {
        tracing::error!("AUDIT LOG CANNOT BE WRITTEN: {reason}");
        self.metrics.failures.inc();
        if let Ok(mut r) = self.reason.lock() {
            *r = reason;
        }
        self.failed.store(true, Ordering::Release);
    }

    fn recovered(&self) {
        if self.failed.swap(false, Ordering::AcqRel) {
            tracing::warn!("audit log writable again");
        }
    }
}

/// Where and how records are written.
#[derive(Debug, Clone)]
pub struct FileSink {
    pub dir: PathBuf,
    pub rotate_bytes: u64,
    pub rotate_after: Duration,
    /// Make every record durable, not only write and exec.
    pub durable_all: bool,
    /// Also print every line to stdout.
    pub stdout: bool,
}

struct Open {
    file: File,
    path: PathBuf,
    bytes: u64,
    opened: Instant,
}

struct Writer {
    sink: FileSink,
    health: Arc<Health>,
    next_seq: u64,
    prev: String,
    open: Option<Open>,
    last_recovery_try: Option<Instant>,
}

/// The writer's inbox, its health, and its thread.
pub type Started = (
    mpsc::UnboundedSender<Submission>,
    Arc<Health>,
    std::thread::JoinHandle<()>,
);

/// Starts the writer thread; continues the chain of the newest file in
/// the directory (a new file is always started, so a crash's torn tail is
/// never appended to).
pub fn start(sink: FileSink, metrics: WriterMetrics) -> Result<Started, String> {
    std::fs::create_dir_all(&sink.dir)
        .map_err(|e| format!("audit dir {}: {e}", sink.dir.display()))?;
    let files =
        chain::files_in(&sink.dir).map_err(|e| format!("audit dir {}: {e}", sink.dir.display()))?;
    let (next_seq, prev) = match files.last() {
        Some(last) => {
            match chain::last_record(last).map_err(|e| format!("{}: {e}", last.display()))? {
                Some((seq, hash)) => (seq + 1, hash),
                None => (0, GENESIS.to_string()),
            }
        }
        None => (0, GENESIS.to_string()),
    };
    let previous = files.last().map(|f| f.display().to_string());
    let health = Arc::new(Health {
        metrics,
        ..Health::default()
    });
    let mut writer = Writer {
        sink,
        health: health.clone(),
        next_seq,
        prev,
        open: None,
        last_recovery_try: None,
    };
    writer.rotate(
        previous
            .map(|p| format!("continues {p}"))
            .unwrap_or_else(|| "new log".into()),
    )?;
    let (tx, rx) = mpsc::unbounded_channel();
    let handle = std::thread::Builder::new()
        .name("jmxgate-audit".into())
        .spawn(move || writer.run(rx))
        .map_err(|e| format!("cannot start the audit writer: {e}"))?;
    Ok((tx, health, handle))
}

impl Writer {
    fn run(mut self, mut rx: mpsc::UnboundedReceiver<Submission>) {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(s) => batch.push(s),
                    Err(_) => break,
                }
            }
            self.health.metrics.queue.set(rx.len() as i64);
            let result = self.write_batch(&mut batch);
            for s in batch {
                if let Some(ack) = s.ack {
                    let _ = ack.send(result.clone());
                }
            }
        }
        // Channel closed: the gateway is shutting down.
        let _ = self.append(
            vec![self.marker("log_closed", "gateway stopped".into())],
            true,
        );
    }

    fn marker(&self, event: &str, note: String) -> Entry {
        Entry {
            time: now_rfc3339(),
            event: event.into(),
            note: Some(note),
            ..Entry::default()
        }
    }

    fn write_batch(&mut self, batch: &mut [Submission]) -> Result<(), String> {
        if let Err(reason) = self.health.check() {
            if !self.try_recover(&reason) {
                return Err(reason);
            }
        }
        let durable = self.sink.durable_all || batch.iter().any(|s| s.durable);
        let entries: Vec<Entry> = batch
            .iter_mut()
            .flat_map(|s| std::mem::take(&mut s.entries))
            .collect();
        match self.append(entries, durable) {
            Ok(()) => {
                let open = self.open.as_ref().expect("a file is open after a write");
                if open.bytes >= self.sink.rotate_bytes
                    || open.opened.elapsed() >= self.sink.rotate_after
                {
                    if let Err(e) = self.rotate("rotated".into()) {
                        self.health.fail(e);
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.health.fail(e.clone());
                Err(e)
            }
        }
    }

    /// Seals and writes entries; the chain advances only if all of it
    /// reached the file (and the disk, when `durable`).
    fn append(&mut self, entries: Vec<Entry>, durable: bool) -> Result<(), String> {
        let Some(open) = self.open.as_mut() else {
            return Err("no audit file is open".into());
        };
        let mut seq = self.next_seq;
        let mut prev = self.prev.clone();
        let mut buf = Vec::with_capacity(entries.len() * 400);
        for mut e in entries {
            e.seq = seq;
            e.prev = prev;
            // Serialised and sealed in the batch's buffer: no copy per record.
            let start = buf.len();
            serde_json::to_writer(&mut buf, &e).map_err(|e| e.to_string())?;
            prev = chain::seal_in_place(&mut buf, start);
            buf.push(b'\n');
            seq += 1;
        }
        let path = open.path.display().to_string();
        open.file
            .write_all(&buf)
            .map_err(|e| format!("writing {path}: {e}"))?;
        if durable {
            let started = Instant::now();
            open.file
                .sync_data()
                .map_err(|e| format!("fsync of {path}: {e}"))?;
            if let Some(h) = &self.health.metrics.fsync_seconds {
                h.observe(started.elapsed().as_secs_f64());
            }
        }
        open.bytes += buf.len() as u64;
        self.health.metrics.records.inc_by(seq - self.next_seq);
        self.next_seq = seq;
        self.prev = prev;
        if self.sink.stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&buf);
            let _ = out.flush();
        }
        Ok(())
    }

    /// Closes the current file (with a closing record) and opens a new one
    /// whose first record links to the last one written.
    fn rotate(&mut self, why: String) -> Result<(), String> {
        let previous = self.open.as_ref().map(|o| o.path.display().to_string());
        if self.open.is_some() {
            let close = self.marker("log_closed", format!("{why}; continues in the next file"));
            self.append(vec![close], true)?;
        }
        let path = new_file_path(&self.sink.dir, self.next_seq);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        // Make the new directory entry itself durable.
        if let Ok(dir) = File::open(&self.sink.dir) {
            let _ = dir.sync_all();
        }
        self.open = Some(Open {
            file,
            path,
            bytes: 0,
            opened: Instant::now(),
        });
        let note = match previous {
            Some(p) => format!("{why}; follows {p}"),
            None => why,
        };
        let opened = self.marker("log_opened", note);
        self.append(vec![opened], true)
    }

    /// After a failure, tries (at most once a second) to continue in a new
    /// file. The chain continues from the last record that was written.
    fn try_recover(&mut self, reason: &str) -> bool {
        if self
            .last_recovery_try
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return false;
        }
        self.last_recovery_try = Some(Instant::now());
        self.open = None;
        match self.rotate(format!("recovered after: {reason}")) {
            Ok(()) => {
                self.health.recovered();
                true
            }
            Err(e) => {
                self.health.fail(e);
                false
            }
        }
    }
}

fn new_file_path(dir: &Path, first_seq: u64) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    dir.join(format!("audit-{first_seq:012}-{stamp}.jsonl"))
}
