//! The audit file writer. A request appends its own records under one
//! lock that owns the chain's head and the open file: a record costs a
//! `write(2)` into the page cache and no thread hop. Records that must be
//! durable are then handed to the sync thread, which makes everything
//! written so far durable with one `fdatasync` (group commit), so many
//! concurrent requests share the cost of one disk flush.
//!
//! With a signing key, the writer also appends signed `checkpoint` records
//! (every `checkpoint_records` records, every `checkpoint_interval` when
//! records came meanwhile, before a rotation's `log_closed`, and last at
//! shutdown); a thread of its own wakes for the interval.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as sync_mpsc;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::oneshot;

use super::chain::{self, GENESIS};
use super::checkpoint::Signer;
use super::record::{now_rfc3339, Encoded, Entry};

/// The metric handles the writer feeds.
#[derive(Debug, Clone, Default)]
pub struct WriterMetrics {
    pub records: Counter,
    pub failures: Counter,
    /// Requests waiting for their records to be made durable.
    pub queue: Gauge,
    pub fsync_seconds: Option<Histogram>,
    /// Unix time of the last checkpoint written (0: none yet).
    pub last_checkpoint: Gauge,
    /// The `[[audit.sinks]]` series.
    pub sinks: super::ship::metrics::SinkMetrics,
}

/// Shared state readers of the log (pipeline, readiness) look at.
#[derive(Debug, Default)]
pub struct Health {
    failed: AtomicBool,
    reason: Mutex<String>,
    /// Set by retention while unshipped files fill `audit.max_dir_bytes`
    /// (with `on_failure = "closed"`): writable, but not to be used.
    held: AtomicBool,
    held_reason: Mutex<String>,
    pub metrics: WriterMetrics,
}

impl Health {
    /// `Err(reason)` while the log cannot be written, or is held.
    pub fn check(&self) -> Result<(), String> {
        self.writable()?;
        if self.held.load(Ordering::Acquire) {
            return Err(self
                .held_reason
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default());
        }
        Ok(())
    }

    /// Holds the log (`Some(reason)`) or releases it (`None`).
    pub fn hold(&self, reason: Option<String>) {
        if let Ok(mut r) = self.held_reason.lock() {
            *r = reason.clone().unwrap_or_default();
        }
        self.held.store(reason.is_some(), Ordering::Release);
    }

    /// `Err(reason)` while the log cannot be written.
    fn writable(&self) -> Result<(), String> {
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
    /// `replica` of every record.
    pub replica: String,
    /// Signs checkpoints; none without a key.
    pub signer: Option<Arc<Signer>>,
    /// A checkpoint after this many records…
    pub checkpoint_records: u64,
    /// …or after this long, when records were written meanwhile.
    pub checkpoint_interval: Duration,
}

/// One audit file; shared with the sync thread, which may still flush it
/// after a rotation replaced it.
#[derive(Debug)]
struct LogFile {
    file: File,
    path: PathBuf,
}

impl LogFile {
    fn sync(&self) -> Result<(), String> {
        self.file
            .sync_data()
            .map_err(|e| format!("fsync of {}: {e}", self.path.display()))
    }
}

struct Open {
    file: Arc<LogFile>,
    bytes: u64,
    opened: Instant,
}

/// What the lock guards: the chain's head and the file it continues in.
struct Log {
    sink: FileSink,
    next_seq: u64,
    prev: String,
    open: Option<Open>,
    last_recovery_try: Option<Instant>,
    /// Records written since the last checkpoint (checkpoints not counted).
    since_checkpoint: u64,
    /// The first of them: the next checkpoint's `first_seq`.
    uncovered_from: u64,
    last_checkpoint: Instant,
    last_checkpoint_gauge: Gauge,
}

/// Work for the sync thread, done in arrival order.
enum SyncJob {
    /// A new file's directory entry (so the file survives a crash).
    Dir(PathBuf),
    /// Flush a file; tell the request, if one waits.
    File(Arc<LogFile>, Option<oneshot::Sender<Result<(), String>>>),
}

/// The writer: appends under its lock, hands durability to its thread.
pub struct Writer {
    log: Mutex<Log>,
    health: Arc<Health>,
    syncs: sync_mpsc::Sender<SyncJob>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// Opens the log; continues the chain of the newest file in the directory
/// (a new file is always started, so a crash's torn tail is never
/// appended to).
pub fn start(sink: FileSink, metrics: WriterMetrics) -> Result<(Arc<Writer>, Arc<Health>), String> {
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o750);
    dir.create(&sink.dir)
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
    let uncovered_from = first_unproven(&files, next_seq)?;
    let last_checkpoint_gauge = metrics.last_checkpoint.clone();
    let health = Arc::new(Health {
        metrics,
        ..Health::default()
    });
    let (syncs, jobs) = sync_mpsc::channel();
    let mut log = Log {
        sink,
        next_seq,
        prev,
        open: None,
        last_recovery_try: None,
        since_checkpoint: next_seq - uncovered_from,
        uncovered_from,
        last_checkpoint: Instant::now(),
        last_checkpoint_gauge,
    };
    let why = previous
        .map(|p| format!("continues {p}"))
        .unwrap_or_else(|| "new log".into());
    for job in log.rotate(why)? {
        job.run(&health);
    }
    let thread_health = health.clone();
    std::thread::Builder::new()
        .name("jmxgate-audit-sync".into())
        .spawn(move || run_syncs(&jobs, &thread_health))
        .map_err(|e| format!("cannot start the audit sync thread: {e}"))?;
    let interval = log
        .sink
        .signer
        .is_some()
        .then_some(log.sink.checkpoint_interval);
    let writer = Arc::new(Writer {
        log: Mutex::new(log),
        health: health.clone(),
        syncs,
    });
    if let Some(interval) = interval {
        let weak = Arc::downgrade(&writer);
        std::thread::Builder::new()
            .name("jmxgate-audit-checkpoint".into())
            .spawn(move || run_checkpoints(&weak, interval))
            .map_err(|e| format!("cannot start the audit checkpoint thread: {e}"))?;
    }
    Ok((writer, health))
}

/// The first record no checkpoint proves yet, as far as the newest two
/// files tell (a clean stop ends a file with a checkpoint; a rotation
/// checkpoints just before it). Without one there, the oldest file's
/// first record: the log's start, when it never had a checkpoint.
fn first_unproven(files: &[PathBuf], next_seq: u64) -> Result<u64, String> {
    let read = |f: &PathBuf, e: std::io::Error| format!("{}: {e}", f.display());
    for f in files.iter().rev().take(2) {
        if let Some(seq) = chain::last_checkpoint(f).map_err(|e| read(f, e))? {
            return Ok((seq + 1).min(next_seq));
        }
    }
    match files.first() {
        Some(f) => Ok(chain::first_seq(f)
            .map_err(|e| read(f, e))?
            .unwrap_or(next_seq)
            .min(next_seq)),
        None => Ok(next_seq),
    }
}

/// Wakes at least once a second while the writer lives, for checkpoints
/// due by time.
fn run_checkpoints(writer: &Weak<Writer>, interval: Duration) {
    let tick = interval.clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        std::thread::sleep(tick);
        let Some(writer) = writer.upgrade() else {
            return;
        };
        writer.checkpoint_if_due();
    }
}

impl Writer {
    /// Appends the records to the file. When `durable` (or the sink makes
    /// everything durable), returns what to await until they are on disk.
    pub fn append(
        &self,
        records: &Encoded,
        durable: bool,
    ) -> Result<Option<oneshot::Receiver<Result<(), String>>>, String> {
        self.append_then(records, durable, false)
    }

    /// Appends the last records before a stop: a checkpoint follows them
    /// (with a key), so a cleanly stopped log is proven to its end.
    pub fn append_last(
        &self,
        records: &Encoded,
    ) -> Result<Option<oneshot::Receiver<Result<(), String>>>, String> {
        self.append_then(records, true, true)
    }

    fn append_then(
        &self,
        records: &Encoded,
        durable: bool,
        checkpoint: bool,
    ) -> Result<Option<oneshot::Receiver<Result<(), String>>>, String> {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(reason) = self.health.writable() {
            match log.try_recover(&reason) {
                Ok(jobs) => {
                    self.health.recovered();
                    self.queue(jobs);
                }
                Err(None) => return Err(reason),
                Err(Some(e)) => {
                    self.health.fail(e.clone());
                    return Err(e);
                }
            }
        }
        if records.is_empty() {
            return Ok(None);
        }
        let durable = durable || log.sink.durable_all;
        let file = match log.write(records) {
            Ok(file) => file,
            Err(e) => {
                self.health.fail(e.clone());
                return Err(e);
            }
        };
        self.health.metrics.records.inc_by(records.len() as u64);
        if checkpoint || log.checkpoint_due_by_count() {
            if let Err(e) = log.checkpoint() {
                self.health.fail(e.clone());
                return Err(e);
            }
        }
        if log.due_for_rotation() {
            match log.rotate("rotated".into()) {
                Ok(jobs) => self.queue(jobs),
                Err(e) => self.health.fail(e),
            }
        }
        drop(log);
        if !durable {
            return Ok(None);
        }
        let (ack, done) = oneshot::channel();
        self.health.metrics.queue.inc();
        if let Err(sync_mpsc::SendError(job)) = self.syncs.send(SyncJob::File(file, Some(ack))) {
            // The thread is gone (it panicked): flush here instead.
            job.run(&self.health);
        }
        Ok(Some(done))
    }

    /// Asks a failed log to try again (at most once a second).
    pub fn nudge(&self) {
        let _ = self.append(&Encoded::default(), false);
    }

    /// Writes a checkpoint when one is due by time (called by the
    /// checkpoint thread); the sync thread then flushes it.
    fn checkpoint_if_due(&self) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if self.health.check().is_err()
            || log.since_checkpoint == 0
            || log.last_checkpoint.elapsed() < log.sink.checkpoint_interval
        {
            return;
        }
        match log.checkpoint() {
            Ok(Some(file)) => {
                drop(log);
                self.queue(vec![SyncJob::File(file, None)]);
            }
            Ok(None) => {}
            Err(e) => self.health.fail(e),
        }
    }

    fn queue(&self, jobs: Vec<SyncJob>) {
        for job in jobs {
            if let Err(sync_mpsc::SendError(job)) = self.syncs.send(job) {
                job.run(&self.health);
            }
        }
    }
}

/// Records sealed and written at a time (about 600 KB).
const WRITE_CHUNK_RECORDS: usize = 1024;

impl Log {
    fn marker(event: &str, note: String) -> Encoded {
        Encoded::new(vec![Entry {
            time: now_rfc3339(),
            event: event.into(),
            note: Some(note),
            ..Entry::default()
        }])
    }

    fn checkpoint_due_by_count(&self) -> bool {
        self.sink.signer.is_some() && self.since_checkpoint >= self.sink.checkpoint_records.max(1)
    }

    /// Writes a signed checkpoint over every record so far, when there is
    /// a key and something to prove; returns the file it went to.
    fn checkpoint(&mut self) -> Result<Option<Arc<LogFile>>, String> {
        let Some(signer) = self.sink.signer.clone() else {
            return Ok(None);
        };
        if self.since_checkpoint == 0 {
            return Ok(None);
        }
        let seq = self.next_seq;
        let time = now_rfc3339();
        let sig = signer.sign(&super::checkpoint::Signed {
            replica: &self.sink.replica,
            seq,
            prev: &self.prev,
            time: &time,
            first_seq: Some(self.uncovered_from),
            last_seq: Some(seq - 1),
            key_id: signer.key_id(),
        });
        let record = Encoded::new(vec![Entry {
            time,
            event: "checkpoint".into(),
            key_id: Some(signer.key_id().to_string()),
            first_seq: Some(self.uncovered_from),
            last_seq: Some(seq - 1),
            sig: Some(sig),
            ..Entry::default()
        }]);
        let file = self.write(&record)?;
        // The checkpoint proves itself too: nothing is left uncovered.
        self.since_checkpoint = 0;
        self.uncovered_from = self.next_seq;
        self.last_checkpoint = Instant::now();
        self.last_checkpoint_gauge
            .set(i64::try_from(crate::clock::unix_seconds()).unwrap_or(i64::MAX));
        Ok(Some(file))
    }

    /// Seals and writes records; the chain advances with each chunk that
    /// reached the file (after a failure, the chunks before it stay, and
    /// the request is refused).
    fn write(&mut self, records: &Encoded) -> Result<Arc<LogFile>, String> {
        let Some(open) = self.open.as_mut() else {
            return Err("no audit file is open".into());
        };
        // In chunks: a fan-out to 100,000 targets would otherwise hold
        // all its sealed lines (some 80 MB) at once, beside the records.
        let mut bodies = records.bodies().peekable();
        let mut buf = Vec::new();
        while bodies.peek().is_some() {
            buf.clear();
            let (seq, prev) = chain::seal_records(
                bodies.by_ref().take(WRITE_CHUNK_RECORDS),
                self.next_seq,
                &self.prev,
                &self.sink.replica,
                &mut buf,
            );
            (&open.file.file)
                .write_all(&buf)
                .map_err(|e| format!("writing {}: {e}", open.file.path.display()))?;
            // What is in the file is the chain, even if a later chunk fails.
            open.bytes += buf.len() as u64;
            self.since_checkpoint += seq - self.next_seq;
            self.next_seq = seq;
            self.prev = prev;
            if self.sink.stdout {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&buf);
                let _ = out.flush();
            }
        }
        Ok(open.file.clone())
    }

    fn due_for_rotation(&self) -> bool {
        self.open.as_ref().is_some_and(|o| {
            o.bytes >= self.sink.rotate_bytes || o.opened.elapsed() >= self.sink.rotate_after
        })
    }

    /// Closes the current file (with a closing record) and opens a new one
    /// whose first record links to the last one written. Returns the
    /// flushes that make both files and the new directory entry durable;
    /// they run on the sync thread, ahead of any later request's flush.
    fn rotate(&mut self, why: String) -> Result<Vec<SyncJob>, String> {
        let mut jobs = Vec::new();
        let previous = self
            .open
            .as_ref()
            .map(|o| o.file.path.display().to_string());
        if self.open.is_some() {
            // The closing file is proven up to its last record but one.
            self.checkpoint()?;
            let close = Self::marker("log_closed", format!("{why}; continues in the next file"));
            jobs.push(SyncJob::File(self.write(&close)?, None));
        }
        let path = new_file_path(&self.sink.dir, self.next_seq);
        let mut options = OpenOptions::new();
        options.create_new(true).append(true);
        // The owner writes, a log-reading group may read, no one else.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o640);
        let file = options
            .open(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        jobs.push(SyncJob::Dir(self.sink.dir.clone()));
        self.open = Some(Open {
            file: Arc::new(LogFile { file, path }),
            bytes: 0,
            opened: Instant::now(),
        });
        let note = match previous {
            Some(p) => format!("{why}; follows {p}"),
            None => why,
        };
        let opened = Self::marker("log_opened", note);
        jobs.push(SyncJob::File(self.write(&opened)?, None));
        Ok(jobs)
    }

    /// After a failure, tries (at most once a second) to continue in a new
    /// file; the chain continues from the last record that was written.
    /// `Err(None)`: not tried this time.
    fn try_recover(&mut self, reason: &str) -> Result<Vec<SyncJob>, Option<String>> {
        if self
            .last_recovery_try
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return Err(None);
        }
        self.last_recovery_try = Some(Instant::now());
        self.open = None;
        self.rotate(format!("recovered after: {reason}"))
            .map_err(Some)
    }
}

impl SyncJob {
    /// Runs one job on its own (before the sync thread runs, or after it
    /// stopped).
    fn run(self, health: &Health) {
        match self {
            SyncJob::Dir(dir) => sync_dir(&dir),
            SyncJob::File(file, ack) => {
                let result = flush(&file, health);
                if let Some(ack) = ack {
                    // Counted out before the waiter wakes.
                    health.metrics.queue.dec();
                    let _ = ack.send(result);
                }
            }
        }
    }
}

/// Makes a new directory entry durable. Best effort: some filesystems
/// refuse to sync a directory.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn flush(file: &LogFile, health: &Health) -> Result<(), String> {
    let started = Instant::now();
    let result = file.sync();
    if let Some(h) = &health.metrics.fsync_seconds {
        h.observe(started.elapsed().as_secs_f64());
    }
    if let Err(e) = &result {
        health.fail(e.clone());
    }
    result
}

/// The sync thread: takes every job that arrived meanwhile and flushes
/// each file once for all of them (group commit). Every job was queued
/// after its write, so one flush covers them all.
fn run_syncs(jobs: &sync_mpsc::Receiver<SyncJob>, health: &Health) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < 4096 {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut flushed: Vec<(Arc<LogFile>, Result<(), String>)> = Vec::new();
        for job in batch {
            match job {
                SyncJob::Dir(dir) => sync_dir(&dir),
                SyncJob::File(file, ack) => {
                    let result = match flushed.iter().find(|(f, _)| Arc::ptr_eq(f, &file)) {
                        Some((_, r)) => r.clone(),
                        None => {
                            let r = flush(&file, health);
                            flushed.push((file, r.clone()));
                            r
                        }
                    };
                    if let Some(ack) = ack {
                        health.metrics.queue.dec();
                        let _ = ack.send(result);
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: usize) -> Entry {
        Entry {
            time: now_rfc3339(),
            event: "item".into(),
            index: Some(n),
            ..Entry::default()
        }
    }

    fn sink(dir: &Path, rotate_bytes: u64) -> FileSink {
        FileSink {
            dir: dir.to_path_buf(),
            rotate_bytes,
            rotate_after: Duration::from_secs(3600),
            durable_all: false,
            stdout: false,
            replica: "gw-test".into(),
            signer: None,
            checkpoint_records: 1000,
            checkpoint_interval: Duration::from_secs(3600),
        }
    }

    #[tokio::test]
    async fn a_large_append_is_written_in_chunks_of_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = WriterMetrics::default();
        let (writer, _health) = start(sink(dir.path(), 1 << 30), metrics.clone()).unwrap();
        let n = 2 * WRITE_CHUNK_RECORDS + 7;
        let records = Encoded::new((0..n).map(item).collect());
        let done = writer.append(&records, true).unwrap().expect("durable");
        done.await.unwrap().unwrap();
        let files = chain::files_in(dir.path()).unwrap();
        let report = chain::verify(&files).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        // log_opened, then the records in order.
        assert_eq!(report.records, n as u64 + 1);
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let indices: Vec<u64> = text
            .lines()
            .skip(1)
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(indices, (0..n as u64).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn concurrent_appends_rotate_and_restart_keep_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = WriterMetrics::default();
        let (writer, health) = start(sink(dir.path(), 4096), metrics.clone()).unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    for i in 0..50 {
                        let records = Encoded::new(vec![item(t * 100 + i), item(t * 100 + i)]);
                        // Every tenth one waits for the disk.
                        if let Some(done) = writer.append(&records, i % 10 == 0).unwrap() {
                            done.await.unwrap().unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert!(health.check().is_ok());
        assert_eq!(metrics.records.get(), 800);
        assert_eq!(metrics.queue.get(), 0, "every waiter was answered");
        drop(writer);
        // A restart continues the chain in a new file.
        let (writer, _) = start(sink(dir.path(), 4096), WriterMetrics::default()).unwrap();
        writer
            .append(&Encoded::new(vec![item(0)]), true)
            .unwrap()
            .unwrap()
            .await
            .unwrap()
            .unwrap();
        let files = chain::files_in(dir.path()).unwrap();
        assert!(files.len() > 10, "rotated by size: {} files", files.len());
        let report = chain::verify(&files).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        // 800 items, one log_opened per file, one log_closed per rotation.
        assert_eq!(report.records, 801 + 2 * files.len() as u64 - 2);
    }

    fn signed(sink: FileSink) -> (FileSink, Arc<Signer>) {
        let signer = Arc::new(Signer::new(super::super::checkpoint::generate().unwrap()));
        (
            FileSink {
                signer: Some(signer.clone()),
                ..sink
            },
            signer,
        )
    }

    fn events(dir: &Path) -> Vec<String> {
        chain::lines_in(dir)
            .unwrap()
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["event"].as_str().unwrap().to_string()
            })
            .collect()
    }

    #[test]
    fn checkpoints_come_by_time_only_when_records_came() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, _) = signed(sink(dir.path(), 1 << 30));
        sink.checkpoint_interval = Duration::from_millis(50);
        let metrics = WriterMetrics::default();
        let (writer, _) = start(sink, metrics.clone()).unwrap();
        writer.append(&Encoded::new(vec![item(1)]), false).unwrap();
        let started = Instant::now();
        while !events(dir.path()).contains(&"checkpoint".to_string()) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no checkpoint by time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(metrics.last_checkpoint.get() > 1_700_000_000);
        // Nothing new: no more checkpoints.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(events(dir.path()), ["log_opened", "item", "checkpoint"]);
    }

    #[test]
    fn a_rotation_checkpoints_just_before_log_closed_and_a_stop_last() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, signer) = signed(sink(dir.path(), 4096));
        let (writer, _) = start(sink, WriterMetrics::default()).unwrap();
        for i in 0..60 {
            writer.append(&Encoded::new(vec![item(i)]), false).unwrap();
        }
        writer.append_last(&Encoded::new(vec![item(60)])).unwrap();
        let events = events(dir.path());
        let closes: Vec<usize> = (0..events.len())
            .filter(|&i| events[i] == "log_closed")
            .collect();
        assert!(closes.len() > 1, "rotated: {events:?}");
        for i in closes {
            assert_eq!(events[i - 1], "checkpoint", "{events:?}");
        }
        assert_eq!(events.last().map(String::as_str), Some("checkpoint"));
        let mut keys = super::super::checkpoint::Keyring::default();
        keys.add(signer.verifying_key());
        let files = chain::files_in(dir.path()).unwrap();
        let report = chain::verify_with(&files, Some(&keys)).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert_eq!(report.unproven(), 0);
        assert_eq!(report.replica.as_deref(), Some("gw-test"));
    }

    #[test]
    fn without_a_key_there_are_no_checkpoints_but_a_replica() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, _) = start(sink(dir.path(), 1 << 30), WriterMetrics::default()).unwrap();
        for i in 0..1500 {
            writer.append(&Encoded::new(vec![item(i)]), false).unwrap();
        }
        writer.append_last(&Encoded::new(vec![item(0)])).unwrap();
        assert!(!events(dir.path()).contains(&"checkpoint".to_string()));
        let text = std::fs::read_to_string(&chain::files_in(dir.path()).unwrap()[0]).unwrap();
        assert!(text
            .lines()
            .all(|l| l.starts_with("{\"seq\":") && l.contains(",\"replica\":\"gw-test\",")));
    }

    #[cfg(unix)]
    #[test]
    fn audit_files_are_for_their_owner_and_group_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("new-audit-dir");
        let (writer, _) = start(sink(&log, 1 << 30), WriterMetrics::default()).unwrap();
        writer.append_last(&Encoded::new(vec![item(0)])).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let file = &chain::files_in(&log).unwrap()[0];
        assert_eq!(mode(file) & 0o007, 0, "{:o}", mode(file));
        assert_eq!(mode(file) & 0o600, 0o600);
        assert_eq!(mode(&log) & 0o007, 0, "{:o}", mode(&log));
    }
}
