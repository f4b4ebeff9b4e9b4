//! Shipping the audit files to collectors: each `[[audit.sinks]]` is a
//! task that reads the files (durable first: nothing is shipped that is
//! not written locally) from its persisted cursor and sends each record
//! as an RFC 5424 message over TLS (RFC 5425), in batches confirmed by a
//! graceful close. Plus retention under `audit.max_dir_bytes`.
//!
//! ```text
//! writer ─▶ audit-*.jsonl ─▶ Tail ─▶ batch ─▶ cursor "sending a..=b" ─▶ TLS send,
//!   close_notify + FIN, wait for the collector's close ─▶ cursor "next b+1"
//! ```
//!
//! Syslog over TCP has no acknowledgements; the collector closing its side
//! after ours is the only confirmation it gives: it reads everything sent
//! before our close first. A crash (or a failure) after a batch was sent
//! but before it was confirmed resends it: the only duplicates, logged as
//! such and recognisable by replica and seq.

pub mod config;
pub mod cursor;
pub mod metrics;
pub mod syslog;
pub mod tail;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use self::config::SinkConfig;
use self::cursor::Cursor;
use self::metrics::{SinkLabel, SinkMetrics};
use self::tail::{Line, Newest, Tail};
use super::writer::Health;

const POLL: Duration = Duration::from_millis(100);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const RETENTION_EVERY: Duration = Duration::from_secs(2);

/// What shipping needs from `[audit]`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub dir: PathBuf,
    pub sinks: Vec<SinkConfig>,
    pub max_dir_bytes: Option<u64>,
    /// `audit.on_failure = "closed"`: a full directory refuses requests.
    pub close_when_full: bool,
    pub replica: String,
}

/// The running sinks; they stop when this is dropped, or drain with
/// [`Shipping::finish`].
#[derive(Debug)]
pub struct Shipping {
    _stop: tokio::sync::oneshot::Sender<()>,
    drain: tokio::sync::watch::Sender<bool>,
    /// Closed when every sink has ended.
    ended: tokio::sync::Mutex<tokio::sync::oneshot::Receiver<()>>,
}

impl Shipping {
    /// Lets every sink send what is written (the shutdown's last records
    /// too) and end, waiting at most `within`; true when all got there.
    /// What is left goes at the next start, from the cursor.
    pub async fn finish(&self, within: Duration) -> bool {
        let _ = self.drain.send(true);
        let mut ended = self.ended.lock().await;
        tokio::time::timeout(within, &mut *ended).await.is_ok()
    }
}

/// Starts every sink (and retention) on a thread of its own, so that
/// shipping never competes with requests for the runtime. Errors in the
/// sinks' TLS files stop the start.
pub fn start(
    settings: Settings,
    metrics: SinkMetrics,
    health: Arc<Health>,
) -> Result<Shipping, String> {
    let mut sinks = Vec::new();
    for cfg in &settings.sinks {
        let Prepared {
            tls,
            server_name,
            cursor_path,
            cursor,
        } = prepare(cfg, &settings.dir)?;
        let label = SinkLabel {
            sink: cfg.name.clone(),
        };
        sinks.push(Sink {
            shipped: Arc::new(AtomicU64::new(cursor.next)),
            cfg: cfg.clone(),
            dir: settings.dir.clone(),
            replica: settings.replica.clone(),
            tls,
            server_name,
            cursor_path,
            cursor,
            lag_records: metrics.lag_records.get_or_create(&label).clone(),
            lag_seconds: metrics.lag_seconds.get_or_create(&label).clone(),
            failures: metrics.send_failures.get_or_create(&label).clone(),
            sent: metrics.records_sent.get_or_create(&label).clone(),
        });
    }
    let retention = settings.max_dir_bytes.map(|budget| Retention {
        dir: settings.dir.clone(),
        budget,
        close_when_full: settings.close_when_full,
        shipped: sinks
            .iter()
            .map(|s| (s.cfg.name.clone(), s.shipped.clone()))
            .collect(),
        health,
        full: false,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the audit shipping runtime: {e}"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (drain, draining) = tokio::sync::watch::channel(false);
    let (ended_tx, ended) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("jmxgate-audit-ship".into())
        .spawn(move || {
            runtime.block_on(async move {
                let sinks: Vec<_> = sinks
                    .into_iter()
                    .map(|sink| tokio::spawn(sink.run(draining.clone())))
                    .collect();
                if let Some(r) = retention {
                    tokio::spawn(r.run());
                }
                tokio::select! {
                    _ = stopped => {}
                    _ = futures::future::join_all(sinks) => {}
                }
            });
            drop(ended_tx);
        })
        .map_err(|e| format!("cannot start the audit shipping thread: {e}"))?;
    Ok(Shipping {
        _stop: stop,
        drain,
        ended: tokio::sync::Mutex::new(ended),
    })
}

/// What a sink needs from its files: TLS settings and its cursor.
struct Prepared {
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    cursor_path: PathBuf,
    cursor: Cursor,
}

fn prepare(cfg: &SinkConfig, dir: &Path) -> Result<Prepared, String> {
    let at = |e: String| format!("audit.sinks \"{}\": {e}", cfg.name);
    let tls = tokio_rustls::TlsConnector::from(client_config(cfg).map_err(at)?);
    let server_name = ServerName::try_from(cfg.server_name().map_err(at)?)
        .map_err(|e| at(format!("server_name: {e}")))?;
    let cursor_path = cursor::path(dir, &cfg.name);
    let cursor = Cursor::load(&cursor_path).map_err(at)?;
    Ok(Prepared {
        tls,
        server_name,
        cursor_path,
        cursor,
    })
}

/// Reads every sink's files (CA, client certificate and key, cursor) as
/// a start would, without starting anything (`jmxgate check-config`).
pub fn check(sinks: &[SinkConfig], dir: &Path) -> Result<(), String> {
    sinks.iter().try_for_each(|cfg| prepare(cfg, dir).map(drop))
}

/// The rustls client configuration of a sink: the collector verified
/// against `ca_file`, a client certificate when configured.
fn client_config(cfg: &SinkConfig) -> Result<Arc<rustls::ClientConfig>, String> {
    let ca_file = cfg.ca_file.as_ref().ok_or("ca_file is required")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in crate::tls::load_certs(ca_file, "ca_file")? {
        roots
            .add(cert)
            .map_err(|e| format!("ca_file {}: {e}", ca_file.display()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS versions: {e}"))?
    .with_root_certificates(roots);
    let config = match (&cfg.cert_file, &cfg.key_file) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(
                crate::tls::load_certs(cert, "cert_file")?,
                crate::tls::load_private_key(key, "key_file")?,
            )
            .map_err(|e| format!("cert_file/key_file {}: {e}", cert.display()))?,
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

struct Sink {
    cfg: SinkConfig,
    dir: PathBuf,
    replica: String,
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    cursor_path: PathBuf,
    cursor: Cursor,
    /// The cursor's `next`, for retention.
    shipped: Arc<AtomicU64>,
    lag_records: prometheus_client::metrics::gauge::Gauge,
    lag_seconds: prometheus_client::metrics::gauge::Gauge<f64, AtomicU64>,
    failures: prometheus_client::metrics::counter::Counter,
    sent: prometheus_client::metrics::counter::Counter,
}

/// Why a batch was not confirmed, and whether any of it may have arrived.
struct Failure {
    why: String,
    maybe_delivered: bool,
}

impl Sink {
    /// Ships until stopped; once `draining` turns true, ends when every
    /// written record is delivered, or at the first failure.
    async fn run(mut self, mut draining: tokio::sync::watch::Receiver<bool>) {
        let name = self.cfg.name.clone();
        if let Some(r) = self.cursor.sending.clone() {
            tracing::warn!(
                sink = %name,
                "resending seq {}..={}, which the collector may already have (its delivery was not confirmed before the gateway stopped)",
                r.start(),
                r.end()
            );
        }
        tracing::info!(sink = %name, address = %self.cfg.address, next_seq = self.cursor.next, "audit sink started");
        let mut tail = Tail::new(&self.dir, self.cursor.next);
        let mut newest = Newest::default();
        let mut batch: Vec<Line> = Vec::new();
        let mut lingered = false;
        let mut failing: Option<String> = None;
        let mut lagging = false;
        let mut read_error = false;
        let mut backoff = FIRST_BACKOFF;
        loop {
            if batch.len() < self.cfg.batch_records {
                match tail.read(self.cfg.batch_records - batch.len()) {
                    Ok(lines) => {
                        if read_error {
                            tracing::info!(sink = %name, "audit files readable again");
                            read_error = false;
                        }
                        batch.extend(lines);
                    }
                    Err(e) if !read_error => {
                        tracing::error!(sink = %name, "cannot read the audit files in {}: {e}", self.dir.display());
                        read_error = true;
                    }
                    Err(_) => {}
                }
                for note in tail.notes.drain(..) {
                    tracing::warn!(sink = %name, "{note}");
                }
            }
            let lag = self.update_lag(&mut newest, &batch);
            if lag > self.cfg.max_lag_records && !lagging {
                tracing::warn!(sink = %name, lag_records = lag, max_lag_records = self.cfg.max_lag_records, "audit sink is behind by more than max_lag_records");
                lagging = true;
            } else if lag <= self.cfg.max_lag_records && lagging {
                tracing::info!(sink = %name, lag_records = lag, "audit sink caught up below max_lag_records");
                lagging = false;
            }
            let drained = *draining.borrow();
            if batch.is_empty() {
                if drained {
                    tracing::info!(sink = %name, next_seq = self.cursor.next, "audit sink drained");
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    _ = draining.changed() => {}
                }
                continue;
            }
            // A short wait lets a burst go as one batch.
            if batch.len() < self.cfg.batch_records && !lingered && !drained {
                lingered = true;
                tokio::time::sleep(self.cfg.linger).await;
                continue;
            }
            lingered = false;
            let (first, last) = (batch[0].seq, batch[batch.len() - 1].seq);
            match self.send(&batch).await {
                Ok(()) => {
                    self.cursor = Cursor {
                        next: last + 1,
                        sending: None,
                    };
                    if let Err(e) = self.cursor.save(&self.cursor_path) {
                        // Delivered; a restart before the next save resends.
                        tracing::error!(sink = %name, "{e}");
                    }
                    self.shipped.store(last + 1, Ordering::Release);
                    self.sent.inc_by(batch.len() as u64);
                    batch.clear();
                    backoff = FIRST_BACKOFF;
                    if failing.take().is_some() {
                        tracing::info!(sink = %name, "audit sink delivering again (seq {first}..={last} confirmed)");
                    }
                    tracing::debug!(sink = %name, "seq {first}..={last} delivered");
                }
                Err(f) => {
                    self.failures.inc();
                    if f.maybe_delivered {
                        tracing::warn!(sink = %name, "resending seq {first}..={last}, which the collector may already have ({})", f.why);
                    }
                    if failing.is_none() {
                        tracing::warn!(sink = %name, address = %self.cfg.address, "audit sink cannot deliver, retrying with backoff up to {}s: {}", MAX_BACKOFF.as_secs(), f.why);
                    }
                    failing = Some(f.why);
                    if drained {
                        tracing::warn!(sink = %name, next_seq = self.cursor.next, "audit sink stopped undrained: the rest goes at the next start");
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Sets the lag gauges; returns the records behind.
    fn update_lag(&self, newest: &mut Newest, batch: &[Line]) -> u64 {
        let newest = newest.update(&self.dir).ok().flatten();
        let behind = newest.map_or(0, |n| (n + 1).saturating_sub(self.cursor.next));
        self.lag_records
            .set(i64::try_from(behind).unwrap_or(i64::MAX));
        let age = batch
            .first()
            .and_then(|l| l.time.as_deref())
            .and_then(|t| humantime::parse_rfc3339(t).ok())
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        self.lag_seconds.set(if behind == 0 { 0.0 } else { age });
        behind
    }

    /// Sends a batch on a new connection and confirms it by closing.
    async fn send(&mut self, batch: &[Line]) -> Result<(), Failure> {
        let fail = |why: String| Failure {
            why,
            maybe_delivered: false,
        };
        let range = batch[0].seq..=batch[batch.len() - 1].seq;
        if self.cursor.sending.as_ref() != Some(&range) {
            self.cursor.sending = Some(range);
            self.cursor.save(&self.cursor_path).map_err(fail)?;
        }
        let mut frames = Vec::with_capacity(batch.iter().map(|l| l.text.len() + 200).sum());
        let mut msg = Vec::new();
        for line in batch {
            msg.clear();
            syslog::format(
                &syslog::Message {
                    facility: self.cfg.facility.code(),
                    time: line.time.as_deref(),
                    replica: &self.replica,
                    seq: line.seq,
                    hash: &line.hash,
                    line: &line.text,
                },
                &mut msg,
            );
            syslog::frame(&msg, &mut frames);
        }
        let limit = self.cfg.timeout;
        let tcp = tokio::time::timeout(limit, tokio::net::TcpStream::connect(&self.cfg.address))
            .await
            .map_err(|_| fail(format!("connecting to {} timed out", self.cfg.address)))?
            .map_err(|e| fail(format!("connecting to {}: {e}", self.cfg.address)))?;
        let _ = tcp.set_nodelay(true);
        let mut tls = tokio::time::timeout(limit, self.tls.connect(self.server_name.clone(), tcp))
            .await
            .map_err(|_| fail("TLS handshake timed out".into()))?
            .map_err(|e| fail(format!("TLS handshake: {e}")))?;
        let sent = |why: String| Failure {
            why,
            maybe_delivered: true,
        };
        let started = Instant::now();
        // Our close_notify and FIN follow the batch; the collector closes
        // its side only after reading all of it.
        let deadline = tokio::time::Instant::now()
            + limit
            + Duration::from_secs(frames.len() as u64 / (1 << 20));
        tokio::time::timeout_at(deadline, async {
            tls.write_all(&frames).await?;
            tls.shutdown().await
        })
        .await
        .map_err(|_| sent("sending timed out".into()))?
        .map_err(|e| sent(format!("sending: {e}")))?;
        let mut scratch = [0u8; 512];
        loop {
            match tokio::time::timeout_at(deadline, tls.read(&mut scratch)).await {
                Err(_) => {
                    return Err(sent(format!(
                        "the collector did not close the connection within {limit:?} of ours"
                    )))
                }
                Ok(Ok(0)) => break,
                // Collectors don't answer; anything they say is ignored.
                Ok(Ok(_)) => {}
                // A close without close_notify still comes after our data.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Ok(Err(e)) => return Err(sent(format!("waiting for the collector's close: {e}"))),
            }
        }
        tracing::trace!(records = batch.len(), elapsed = ?started.elapsed(), "batch confirmed");
        Ok(())
    }
}

/// Deletes files every sink has shipped while the directory is over
/// budget; when the oldest file is unshipped, holds the log (closed) or
/// warns (open).
struct Retention {
    dir: PathBuf,
    budget: u64,
    close_when_full: bool,
    shipped: Vec<(String, Arc<AtomicU64>)>,
    health: Arc<Health>,
    full: bool,
}

impl Retention {
    async fn run(mut self) {
        loop {
            if let Err(e) = self.once() {
                tracing::warn!("audit retention in {}: {e}", self.dir.display());
            }
            tokio::time::sleep(RETENTION_EVERY).await;
        }
    }

    fn once(&mut self) -> std::io::Result<()> {
        let files = super::chain::files_in(&self.dir)?;
        let mut sizes = Vec::new();
        for f in &files {
            sizes.push(std::fs::metadata(f)?.len());
        }
        let mut total: u64 = sizes.iter().sum();
        let (slowest, shipped) = self
            .shipped
            .iter()
            .map(|(n, s)| (n.as_str(), s.load(Ordering::Acquire)))
            .min_by_key(|(_, s)| *s)
            .unwrap_or(("", u64::MAX));
        let mut blocked = None;
        // Never the newest file: the writer appends to it.
        for (i, f) in files.iter().enumerate().take(files.len().saturating_sub(1)) {
            if total <= self.budget {
                break;
            }
            // Unknown (a file still empty, unreadable): keep the file.
            let next_first = super::chain::first_seq_in_name(&files[i + 1]).unwrap_or(u64::MAX);
            if next_first > shipped {
                blocked = Some(f.clone());
                break;
            }
            std::fs::remove_file(f)?;
            tracing::info!(
                "audit file {} deleted: shipped by every sink and audit.max_dir_bytes exceeded",
                f.display()
            );
            total -= sizes[i];
        }
        let full = blocked.is_some();
        if full && !self.full {
            let oldest = blocked
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or_default();
            let reason = format!(
                "audit.max_dir_bytes ({}) exceeded ({total} bytes) and the oldest file {oldest} is not yet shipped by sink \"{slowest}\"",
                self.budget
            );
            if self.close_when_full {
                tracing::error!("{reason}: refusing requests until it catches up (audit.on_failure = \"closed\")");
                self.health.hold(Some(reason));
            } else {
                tracing::error!("{reason}: still writing (audit.on_failure = \"open\"); the directory grows beyond its budget");
            }
        } else if !full && self.full {
            tracing::warn!("audit directory back within audit.max_dir_bytes");
            self.health.hold(None);
        }
        self.full = full;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_deletes_shipped_files_and_holds_for_unshipped_ones() {
        let dir = tempfile::tempdir().unwrap();
        for first in [0, 10, 20, 30] {
            let name = format!("audit-{first:012}-20260101T000000Z.jsonl");
            std::fs::write(dir.path().join(name), vec![b'x'; 1000]).unwrap();
        }
        let shipped = Arc::new(AtomicU64::new(15));
        let health = Arc::new(Health::default());
        let mut r = Retention {
            dir: dir.path().to_path_buf(),
            budget: 1500,
            close_when_full: true,
            shipped: vec![("siem".into(), shipped.clone())],
            health: health.clone(),
            full: false,
        };
        r.once().unwrap();
        // The first file (seq 0..=9) went; the second is not wholly shipped.
        let left = super::super::chain::files_in(dir.path()).unwrap();
        assert_eq!(left.len(), 3);
        let why = health.check().unwrap_err();
        assert!(why.contains("not yet shipped by sink \"siem\""), "{why}");
        // The sink catches up: everything but the newest file goes.
        shipped.store(40, Ordering::Release);
        r.once().unwrap();
        assert_eq!(super::super::chain::files_in(dir.path()).unwrap().len(), 1);
        assert!(health.check().is_ok());
    }
}
