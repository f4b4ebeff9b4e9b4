//! The Prometheus side of the gateway, as pure functions: jmx_exporter's
//! rules files read unchanged ([`config`]), their `java.util.regex`
//! patterns ([`java_regex`]) and Java's number text ([`java_text`]), rule
//! matching ([`rules`]), and the exposition formats.
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
pub mod otlp;
pub mod otlp_grpc;
pub mod rules;
pub mod scrape;
pub mod values;

pub use rules::Module;
