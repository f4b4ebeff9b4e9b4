//! OpenTelemetry's own JMX rules (the JMX Metric Insight format of
//! OpenTelemetry's Java agent and `jmx-scraper`), read unchanged and
//! applied over Jolokia, pure: a module of one or more rules files
//! ([`file`]), the MBeans and attributes a target's `list` says they need
//! ([`plan`]), the points the answers make, aggregated as upstream does,
//! and their Prometheus names ([`prometheus`]).
//!
//! A point is a [`Sample`](super::rules::Sample) whose `otel` says which
//! OpenTelemetry metric it belongs to: its name (`tomcat.request.count`),
//! instrument, unit and description; its labels are the point's
//! attributes under their OpenTelemetry names. The OTLP push sends them as
//! they are; `/prometheus` writes them under OpenTelemetry's Prometheus
//! names (`tomcat_request_count_total`).

pub mod file;
pub mod plan;
pub mod prometheus;
pub mod units;

pub use super::point::{Instrument, Metric, Point};

use std::collections::HashMap;
use std::sync::Arc;

use crate::protocol::object_name::wildmatch;
use crate::protocol::ObjectName;

/// The instrumentation scope of every point, as OpenTelemetry's agent
/// reports them.
pub const SCOPE: &str = "io.opentelemetry.jmx";

/// The rules files shipped with jmxgate, by the system names
/// `otel.jmx.target.system` takes (and the experimental ones also by
/// their file name).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("activemq", include_str!("rules/activemq.yaml")),
    ("camel", include_str!("rules/camel.yaml")),
    (
        "cassandra",
        include_str!("rules/experimental-cassandra.yaml"),
    ),
    ("hadoop", include_str!("rules/hadoop.yaml")),
    ("jetty", include_str!("rules/jetty.yaml")),
    ("jvm", include_str!("rules/jvm.yaml")),
    (
        "kafka-broker",
        include_str!("rules/experimental-kafka-broker.yaml"),
    ),
    (
        "kafka-connect",
        include_str!("rules/experimental-kafka-connect.yaml"),
    ),
    ("tomcat", include_str!("rules/tomcat.yaml")),
    ("wildfly", include_str!("rules/wildfly.yaml")),
];

/// A built-in file's text by system name (`tomcat`, `kafka-broker` or
/// `experimental-kafka-broker`).
pub fn built_in(name: &str) -> Option<&'static str> {
    let name = name.strip_prefix("experimental-").unwrap_or(name);
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Whether an `otel_rules` entry is a path to a rules file: not a
/// built-in system's name, and with a `/` or a `.` (a bare word that is no
/// system is a misspelt one, [`not_a_system`]).
pub fn is_path(entry: &str) -> bool {
    built_in(entry).is_none() && (entry.contains('/') || entry.contains('.'))
}

/// A module of OpenTelemetry rules: every rule of its files, in order.
#[derive(Debug)]
pub struct Module {
    pub name: String,
    pub rules: Vec<Rule>,
    /// Rules files' parts that can't run over Jolokia (a `handler`, Java
    /// code in OpenTelemetry's agent), for the log.
    pub ignored: Vec<String>,
}

/// One rule: the MBeans it reads and what each attribute becomes.
#[derive(Debug)]
pub struct Rule {
    /// The file and line it was written at, for messages.
    pub at: String,
    pub beans: Vec<ObjectName>,
    pub extractors: Vec<Extractor>,
}

/// One MBean attribute (or an item of a composite one) made one metric's
/// points.
#[derive(Debug)]
pub struct Extractor {
    /// The attribute and the items inside it (`Usage.used`: `Usage`,
    /// then `used`), escapes removed.
    pub path: Vec<String>,
    pub metric: Arc<Metric>,
    pub attributes: Vec<MetricAttribute>,
    pub drop_negative: bool,
    /// `sourceUnit` to `unit`, where they differ.
    pub convert: Option<units::Conversion>,
    /// A `state` metric: the attribute holding the state, and the state
    /// keys its values map to; one point per key, 1 for the current one.
    pub state: Option<State>,
}

/// One attribute of a metric's points and where its value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricAttribute {
    pub name: String,
    pub source: Source,
}

/// `param(…)`, `beanattr(…)`, `const(…)`, `lowercase(…)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A key property of the MBean's name.
    Param(String),
    /// Another attribute of the MBean (and the items inside it), as
    /// text.
    BeanAttribute(Vec<String>),
    Constant(String),
    Lowercase(Box<Source>),
}

/// A `state` metric's mapping of attribute values to state keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The metric attribute that carries the state key.
    pub attribute: String,
    /// Every key, in the order first written (the default among them).
    pub keys: Vec<String>,
    pub default: String,
    pub by_value: HashMap<String, String>,
}

impl State {
    /// The key a value of the state attribute maps to.
    pub fn key_of(&self, value: &str) -> &str {
        self.by_value.get(value).unwrap_or(&self.default)
    }
}

/// Why an `otel_rules` entry is neither a built-in system nor a path (a
/// word without `/` or `.`: a misspelt system), naming the systems.
pub fn not_a_system(entry: &str) -> Option<String> {
    if built_in(entry).is_some() || is_path(entry) {
        return None;
    }
    let known: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
    Some(format!(
        "otel_rules: {entry:?} is no built-in system ({}) and no path to a rules file",
        known.join(", ")
    ))
}

impl Module {
    /// The module of these rules files' texts (each with the name
    /// messages give it: a path, or `built-in jvm`), their rules in
    /// order; then the metrics `included` (when not empty) and not
    /// `excluded` (names, `*` and `?` as wildcards). Errors: every
    /// problem, each naming its file, rule and line.
    pub fn from_files(
        name: &str,
        files: &[(String, String)],
        included: &[String],
        excluded: &[String],
    ) -> Result<Module, Vec<String>> {
        let mut rules = Vec::new();
        let mut ignored = Vec::new();
        let mut problems = Vec::new();
        for (origin, text) in files {
            match file::read(origin, text) {
                Ok((mut r, mut i)) => {
                    rules.append(&mut r);
                    ignored.append(&mut i);
                }
                Err(mut e) => problems.append(&mut e),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let wanted = |metric: &str| {
            (included.is_empty() || included.iter().any(|p| wildmatch(metric, p)))
                && !excluded.iter().any(|p| wildmatch(metric, p))
        };
        for pattern in included {
            let used = rules
                .iter()
                .flat_map(|r: &Rule| &r.extractors)
                .any(|e| wildmatch(&e.metric.name, pattern));
            if !used {
                ignored.push(format!(
                    "otel_included: {pattern:?} names no metric of these rules"
                ));
            }
        }
        for rule in &mut rules {
            rule.extractors.retain(|e| wanted(&e.metric.name));
        }
        rules.retain(|r| !r.extractors.is_empty());
        Ok(Module {
            name: name.to_string(),
            rules,
            ignored,
        })
    }
}

#[cfg(test)]
mod tests;
