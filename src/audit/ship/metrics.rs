//! The sinks' metric handles (a leaf: `metrics.rs` registers them).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabel {
    pub sink: String,
}

#[derive(Debug, Clone, Default)]
pub struct SinkMetrics {
    /// Records written locally and not yet confirmed delivered.
    pub lag_records: Family<SinkLabel, Gauge>,
    /// Age of the oldest of them.
    pub lag_seconds: Family<SinkLabel, Gauge<f64, AtomicU64>>,
    pub send_failures: Family<SinkLabel, Counter>,
    pub records_sent: Family<SinkLabel, Counter>,
}
