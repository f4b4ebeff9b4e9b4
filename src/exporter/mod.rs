//! The Prometheus side of the gateway, as pure functions: jmx_exporter's
//! rules files read unchanged ([`config`]), their `java.util.regex`
//! patterns ([`java_regex`]) and Java's number text ([`java_text`]), rule
//! matching ([`rules`]), OpenTelemetry's own JMX rules ([`otel`]), the
//! exposition formats and OTLP's encoding.
//!
//! Nothing here does I/O or knows the pipeline: the Prometheus door
//! (`doors/prometheus`) feeds it agents' answers and writes out what it
//! gives.

pub mod config;
pub mod exposition;
pub mod java_regex;
pub mod java_text;
pub mod limits;
pub mod open_telemetry;
pub mod otel;
pub mod otlp;
pub mod otlp_grpc;
pub mod point;
pub mod rules;
pub mod scrape;
pub mod values;

pub use rules::Module;

/// A module's rules: a jmx_exporter configuration file, or OpenTelemetry's
/// JMX rules files.
// One per module, behind an `Arc`: its size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Rules {
    JmxExporter(Module),
    OpenTelemetry(otel::Module),
}

impl Rules {
    pub fn name(&self) -> &str {
        match self {
            Rules::JmxExporter(m) => &m.name,
            Rules::OpenTelemetry(m) => &m.name,
        }
    }

    /// The jmx_exporter file's `openTelemetry:` block (OpenTelemetry's
    /// rules files have none).
    pub fn open_telemetry_block(&self) -> Option<&open_telemetry::OpenTelemetryBlock> {
        match self {
            Rules::JmxExporter(m) => m.open_telemetry.as_ref(),
            Rules::OpenTelemetry(_) => None,
        }
    }

    /// What the files hold that is not used, for the log.
    pub fn ignored(&self) -> &[String] {
        match self {
            Rules::JmxExporter(m) => &m.ignored,
            Rules::OpenTelemetry(m) => &m.ignored,
        }
    }
}
