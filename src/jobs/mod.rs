//! Work with no request: OTLP pushes, webhooks and health probes, each
//! run off the request path (under a system context where it reads).
//! With `[cluster]`, each duty is done by the one replica that owns it
//! (`cluster::View::owns`); `ownership.rs` counts this replica's share.

pub mod health_view;
pub mod otlp;
pub mod ownership;
pub mod probes;
pub mod webhooks;

use crate::pipeline::state::State;

/// The jobs' sections of the state in force, which the phases hold
/// without knowing them (the composition root puts them in).
pub(crate) trait JobSections {
    /// `[events]`: who is told of the journal's events.
    fn events(&self) -> &webhooks::config::EventsConfig;
    /// `[otlp]`: the exports the OTLP job runs.
    fn otlp(&self) -> &otlp::config::OtlpConfig;
}

impl JobSections for State {
    fn events(&self) -> &webhooks::config::EventsConfig {
        self.sections.get()
    }

    fn otlp(&self) -> &otlp::config::OtlpConfig {
        self.sections.get()
    }
}
