//! The OTLP door, outbound: each `[[otlp.exports]]` pushes the samples of
//! the targets it selects, made by a Prometheus door module (jmx_exporter's
//! rules, read unchanged), to an OTLP/HTTP receiver every interval. The
//! export runs as its own principal holding its `role`: the targets are
//! chosen and read through the shared phases exactly as a scraper's
//! (`doors::prometheus::scrape_targets`, `scrape_one`), and each push leaves
//! one audit record per target (`"channel":"otlp"`).
//!
//! - `config`: the section, merged with the module's `openTelemetry:`
//!   block into what an export does ([`config::ExportSettings`]);
//! - `push`: one push, from reading the targets to queued requests;
//! - `deliver`: the queue's sender (retries, halving refused requests);
//! - `reason`: what `/readyz` and the log say of a receiver's answers.
//!
//! Here: the running exports, started, restarted and stopped to match the
//! configuration on every reload, and their state for `/readyz`.

pub mod config;
mod deliver;
mod push;
mod reason;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;

use crate::doors::DoorSections;
use crate::jobs::JobSections;
use crate::pipeline::Gateway;
use config::ExportSettings;

/// A request waiting to be sent: the message (to halve it when the
/// receiver refuses it) and its gzipped encoding.
struct Pending {
    /// Which push of its export made it (they count from 1).
    push: u64,
    request: ExportMetricsServiceRequest,
    body: Vec<u8>,
    points: u64,
    /// The last request of its push: once it is handled, the push's
    /// outcome is known and counted.
    last: bool,
}

/// One running export's state between pushes.
struct Export {
    settings: ExportSettings,
    /// A push is under way: the next one due is skipped.
    pushing: AtomicBool,
    /// Pushes made so far.
    pushes: AtomicU64,
    /// Per target: when its counters started.
    starts: Mutex<HashMap<String, push::Start>>,
    /// Which of its `(export, target)` duties this replica owns.
    owned: Mutex<crate::cluster::Owned>,
    queue: Mutex<VecDeque<Pending>>,
    queued: tokio::sync::Notify,
    /// Why the last push or request failed; `None` after one succeeds.
    /// Read by `/readyz`, open to all: how it failed, never a receiver's
    /// words.
    trouble: Mutex<Option<String>>,
}

impl Export {
    fn set_trouble(&self, why: Option<String>) {
        *self.trouble.lock().expect("trouble lock") = why;
    }
}

struct Running {
    export: Arc<Export>,
    tasks: Vec<tokio::task::AbortHandle>,
}

/// The exports running now.
pub struct Exports {
    running: Mutex<BTreeMap<String, Running>>,
    /// Exports configured but not running, and why (`/readyz`).
    not_started: Mutex<BTreeMap<String, String>>,
}

impl Default for Exports {
    fn default() -> Self {
        Exports {
            running: Mutex::new(BTreeMap::new()),
            not_started: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Exports {
    /// Exports that can't push now, each with why, for `/readyz`.
    pub fn trouble(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .not_started
            .lock()
            .expect("exports lock")
            .iter()
            .map(|(name, why)| format!("OTLP export {name} not running: {why}"))
            .collect();
        for (name, r) in self.running.lock().expect("exports lock").iter() {
            if let Some(why) = r.export.trouble.lock().expect("trouble lock").as_ref() {
                out.push(format!("OTLP export {name}: {why}"));
            }
        }
        out
    }
}

/// The exports of `gateway`, which it holds without knowing them (the
/// composition root puts them in).
pub(crate) fn exports(gateway: &Gateway) -> &Exports {
    gateway.rooms.get()
}

/// Runs the configured exports while the gateway lives, matching them
/// to the configuration after every reload: an added export starts, a
/// removed one stops (its queued requests dropped, counted), a changed
/// one restarts, keeping its targets' counter start times when its
/// module is the same.
pub fn spawn_otlp_exports(gateway: &Arc<Gateway>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(gateway);
    let mut changed = gateway.reloaded.subscribe();
    tokio::spawn(async move {
        loop {
            match weak.upgrade() {
                Some(gateway) => match_otlp_exports(&gateway),
                None => return,
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    })
}

fn match_otlp_exports(gateway: &Arc<Gateway>) {
    let state = gateway.state.load_full();
    let configured = &state.otlp().exports;
    let mut wanted = BTreeMap::new();
    let mut not_started = BTreeMap::new();
    for (i, c) in configured.iter().enumerate() {
        let block = state
            .prometheus()
            .modules
            .get(&c.module)
            .and_then(|m| m.open_telemetry_block());
        match c.settings(i, block) {
            Ok(s) => {
                wanted.insert(s.name.clone(), s);
            }
            Err(problems) => {
                let why = problems.join("; ");
                tracing::error!(export = %c.name(i), "OTLP export not started: {why}");
                not_started.insert(c.name(i), why);
            }
        }
    }
    let mut running = exports(gateway).running.lock().expect("exports lock");
    let mut carried = HashMap::new();
    running.retain(|name, r| {
        if wanted.get(name) == Some(&r.export.settings) {
            return true;
        }
        for task in &r.tasks {
            task.abort();
        }
        let queue = std::mem::take(&mut *r.export.queue.lock().expect("queue lock"));
        let lost: u64 = queue.iter().map(|p| p.points).sum();
        if lost > 0 {
            gateway.metrics.otlp(true, name, "dropped", lost);
        }
        if wanted
            .get(name)
            .is_some_and(|s| s.module == r.export.settings.module)
        {
            let starts = std::mem::take(&mut *r.export.starts.lock().expect("starts lock"));
            carried.insert(name.clone(), starts);
            tracing::info!(export = %name, "OTLP export changed: restarted");
        } else {
            tracing::info!(export = %name, "OTLP export stopped");
        }
        false
    });
    for (name, settings) in wanted {
        if running.contains_key(&name) {
            continue;
        }
        let sender = match deliver::sender(&settings) {
            Ok(s) => s,
            Err(why) => {
                tracing::error!(export = %name, "OTLP export not started: {why}");
                not_started.insert(name, why);
                continue;
            }
        };
        let export = Arc::new(Export {
            settings,
            pushing: AtomicBool::new(false),
            pushes: AtomicU64::new(0),
            starts: Mutex::new(carried.remove(&name).unwrap_or_default()),
            owned: Mutex::default(),
            queue: Mutex::new(VecDeque::new()),
            queued: tokio::sync::Notify::new(),
            trouble: Mutex::new(None),
        });
        let tasks = vec![
            tokio::spawn(deliver::send_loop(
                Arc::downgrade(gateway),
                export.clone(),
                sender,
            ))
            .abort_handle(),
            tokio::spawn(push::tick_loop(Arc::downgrade(gateway), export.clone())).abort_handle(),
        ];
        tracing::info!(export = %name, url_host = %host_of(&export.settings.url), "OTLP export started");
        running.insert(name, Running { export, tasks });
    }
    *exports(gateway).not_started.lock().expect("exports lock") = not_started;
}

/// Why exports can't push now (none: all well), for `/readyz`.
pub fn otlp_trouble(gateway: &Gateway) -> Vec<String> {
    exports(gateway).trouble()
}

/// The receiver's host and port, for logs (the URL may carry a token).
fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_default()
}

impl Drop for Exports {
    /// The gateway is gone: so are its exports' tasks.
    fn drop(&mut self) {
        if let Ok(running) = self.running.get_mut() {
            for r in running.values() {
                for task in &r.tasks {
                    task.abort();
                }
            }
        }
    }
}
