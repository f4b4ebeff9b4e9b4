//! What the Prometheus door keeps across scrapes: its section, the
//! compiled modules and the plans (a leaf of the door, so the gateway's
//! state can hold it without importing the door).

use std::sync::Arc;

use super::config::{self, PrometheusConfig};
use crate::exporter::scrape::Plan;

/// What the door keeps across scrapes, rebuilt on reload: the compiled
/// modules and the plans made from targets' `list` answers.
pub struct Exporter {
    pub config: PrometheusConfig,
    pub modules: config::Modules,
    /// By target, module and the list answer's text: a plan is made once
    /// per list, and again only when the MBeans (or the caller's view of
    /// them) change.
    pub(super) plans: moka::sync::Cache<u64, Arc<Plan>>,
}

impl Exporter {
    pub fn new(config: &PrometheusConfig) -> Result<Exporter, String> {
        Ok(Exporter {
            modules: config.modules()?,
            config: config.clone(),
            plans: moka::sync::Cache::builder()
                .max_capacity(config.plan_cache_bytes)
                .weigher(|_, plan: &Arc<Plan>| plan.estimated_bytes())
                .build(),
        })
    }
}
