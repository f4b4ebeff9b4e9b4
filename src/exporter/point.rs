//! What an OpenTelemetry point is, beside a jmx_exporter sample: the
//! metric it belongs to (name, instrument, unit, description) and whether
//! its value is an integer. A leaf of the exporter: `rules::Sample`
//! carries one, `otel` makes them.

use std::sync::Arc;

/// What a metric is, for every point of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    pub name: String,
    /// `None`: the MBean attribute's own description, as upstream does.
    pub description: Option<String>,
    pub unit: String,
    pub instrument: Instrument,
}

/// The asynchronous instrument a metric is reported by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instrument {
    Gauge,
    /// A monotonic sum.
    Counter,
    /// A non-monotonic sum.
    UpDownCounter,
}

/// What makes a jmx_exporter-shaped sample (`rules::Sample`) an
/// OpenTelemetry point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub metric: Arc<Metric>,
    /// Read as an integer (and neither converted nor summed with a
    /// double): sent as one.
    pub integer: bool,
}

impl Metric {
    /// The metric with the MBean attribute's description where the rule
    /// gave none.
    pub fn described(self: &Arc<Metric>, from_mbean: Option<&str>) -> Arc<Metric> {
        match (&self.description, from_mbean) {
            (None, Some(d)) if !d.trim().is_empty() => Arc::new(Metric {
                description: Some(d.trim().to_string()),
                ..(**self).clone()
            }),
            _ => self.clone(),
        }
    }
}
