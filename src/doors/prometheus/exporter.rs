//! What the Prometheus door keeps across scrapes: its section, the
//! compiled modules and the plans (a leaf of the door, so the gateway's
//! state can hold it without importing the door).

use std::sync::Arc;

use tokio::sync::Semaphore;

use serde_json::Value;

use super::config::{self, PrometheusConfig};
use crate::exporter::limits::Limits;
use crate::exporter::scrape::{Plan, Read, Scraped};
use crate::exporter::{otel, Rules};

/// A target's plan under one module: jmx_exporter's, or OpenTelemetry
/// rules' (which reads through a jmx_exporter plan of only the MBeans and
/// attributes its rules name).
#[derive(Debug)]
pub(crate) enum Planned {
    JmxExporter(Plan),
    OpenTelemetry(otel::plan::Plan),
}

impl Planned {
    /// The plan for a target's `list` under `rules`; OpenTelemetry rules
    /// match at most `max_beans` MBeans (each gives a sample at least).
    pub(crate) fn make(rules: &Rules, list: &Value, max_beans: usize) -> Planned {
        match rules {
            Rules::JmxExporter(m) => Planned::JmxExporter(Plan::from_list(m, list)),
            Rules::OpenTelemetry(m) => {
                Planned::OpenTelemetry(otel::plan::Plan::from_list(m, list, max_beans))
            }
        }
    }

    /// What is read, and how the answers are assembled.
    pub(crate) fn reads(&self) -> &Plan {
        match self {
            Planned::JmxExporter(p) => p,
            Planned::OpenTelemetry(p) => &p.reads,
        }
    }

    /// The samples of the assembled answers.
    pub(crate) fn apply(
        &self,
        rules: &Rules,
        answers: &[(Read, Value)],
        limits: &Limits,
    ) -> Scraped {
        match (self, rules) {
            (Planned::JmxExporter(p), Rules::JmxExporter(m)) => p.apply(m, answers, limits),
            (Planned::OpenTelemetry(p), Rules::OpenTelemetry(m)) => p.apply(m, answers, limits),
            // Plans are cached by module name and rules are rebuilt on
            // reload with the cache: a mismatch is a plan of a module
            // renamed meanwhile, so nothing.
            _ => Scraped::default(),
        }
    }

    fn estimated_bytes(&self) -> u32 {
        self.reads().estimated_bytes()
    }
}

/// What the door keeps across scrapes, rebuilt on reload: the compiled
/// modules and the plans made from targets' `list` answers.
pub struct Exporter {
    pub config: PrometheusConfig,
    pub modules: config::Modules,
    /// By target, module and the list answer's text: a plan is made once
    /// per list, and again only when the MBeans (or the caller's view of
    /// them) change.
    pub(crate) plans: moka::sync::Cache<u64, Arc<Planned>>,
    /// Where plans, samples and expositions are made.
    pub(crate) cpu: CpuPool,
}

/// A bounded set of threads for the scrapes' CPU work (plans from `list`
/// answers, rule matching, the exposition text): off the serving
/// workers, whose other connections would otherwise wait behind a big or
/// hostile scrape, and at most `threads` at once, so scrapes queue here
/// rather than take every core.
pub(crate) struct CpuPool {
    permits: Arc<Semaphore>,
}

impl CpuPool {
    fn new(threads: usize) -> CpuPool {
        CpuPool {
            permits: Arc::new(Semaphore::new(threads.max(1))),
        }
    }

    /// Runs `work` on a blocking thread once one of the pool's places is
    /// free. The place is held until `work` returns, even when the caller
    /// stops waiting: work that checks its deadline ends soon after.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        tokio::task::spawn_blocking(move || {
            let _held = permit;
            work()
        })
        .await
        .ok()
    }
}

impl Exporter {
    pub fn new(config: &PrometheusConfig) -> Result<Exporter, String> {
        Ok(Exporter {
            modules: config.modules()?,
            config: config.clone(),
            plans: moka::sync::Cache::builder()
                .max_capacity(config.plan_cache_bytes)
                .weigher(|_, plan: &Arc<Planned>| plan.estimated_bytes())
                .build(),
            cpu: CpuPool::new(config.cpu_threads()),
        })
    }
}
