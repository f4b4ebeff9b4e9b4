//! OpenTelemetry points under the names OpenTelemetry's Prometheus
//! compatibility rules give them (the Collector's translator, and what
//! VictoriaMetrics' `-opentelemetry.usePrometheusNaming` makes of the same
//! points pushed over OTLP): the name's words (split at anything not a
//! letter or digit) joined by `_`, the unit's Prometheus word added
//! (`s` → `seconds`, `By` → `bytes`, `{request}` nothing, `1` nothing,
//! `x/s` → `x_per_second`), `total` for a monotonic sum, `ratio` for a
//! gauge of unit `1`; attribute names with `_` for what is not a letter
//! or digit. An up-down counter is a gauge there.

use super::{Instrument, Metric};
use crate::exporter::rules::{MetricType, Sample};

/// Each point as `/prometheus` writes it; samples that are no
/// OpenTelemetry point stay as they are.
pub fn to_prometheus(samples: Vec<Sample>) -> Vec<Sample> {
    samples
        .into_iter()
        .map(|mut s| {
            if let Some(point) = &s.otel {
                // The exposition writes a counter's samples with `_total`
                // (its family without, in OpenMetrics), as jmx_exporter's.
                let name = metric_name(&point.metric);
                s.name = match point.metric.instrument {
                    Instrument::Counter => name.trim_end_matches("_total").to_string(),
                    _ => name,
                };
                s.metric_type = match point.metric.instrument {
                    Instrument::Counter => MetricType::Counter,
                    Instrument::Gauge | Instrument::UpDownCounter => MetricType::Gauge,
                };
                for (k, _) in &mut s.labels {
                    *k = label_name(k);
                }
            }
            s
        })
        .collect()
}

/// A metric's Prometheus name.
pub fn metric_name(metric: &Metric) -> String {
    let mut words: Vec<String> = words(&metric.name);
    let (main, per) = match metric.unit.split_once('/') {
        Some((m, p)) => (m.trim(), Some(p.trim())),
        None => (metric.unit.trim(), None),
    };
    if !main.is_empty() && !main.contains(['{', '}']) {
        let unit = clean(unit_word(main));
        if !unit.is_empty() && !words.contains(&unit) {
            words.push(unit);
        }
    }
    if let Some(per) = per.filter(|p| !p.is_empty() && !p.contains(['{', '}'])) {
        let unit = clean(per_unit_word(per));
        if !unit.is_empty() && !words.contains(&unit) {
            words.push("per".into());
            words.push(unit);
        }
    }
    if metric.instrument == Instrument::Counter {
        words.retain(|w| w != "total");
        words.push("total".into());
    }
    if metric.unit == "1" && metric.instrument == Instrument::Gauge {
        words.retain(|w| w != "ratio");
        words.push("ratio".into());
    }
    let name = words.join("_");
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    }
}

/// An attribute's Prometheus label name.
pub fn label_name(key: &str) -> String {
    let mut out: String = key
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out = format!("key_{out}");
    } else if out.starts_with('_') && !out.starts_with("__") {
        out = format!("key{out}");
    }
    out
}

fn words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Letters and digits, the rest `_`, none at the ends.
fn clean(s: &str) -> String {
    words(s).join("_")
}

fn unit_word(unit: &str) -> &str {
    match unit {
        "d" => "days",
        "h" => "hours",
        "min" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "By" => "bytes",
        "KiBy" => "kibibytes",
        "MiBy" => "mebibytes",
        "GiBy" => "gibibytes",
        "TiBy" => "tibibytes",
        "KBy" => "kilobytes",
        "MBy" => "megabytes",
        "GBy" => "gigabytes",
        "TBy" => "terabytes",
        "m" => "meters",
        "V" => "volts",
        "A" => "amperes",
        "J" => "joules",
        "W" => "watts",
        "g" => "grams",
        "Cel" => "celsius",
        "Hz" => "hertz",
        "1" => "",
        "%" => "percent",
        other => other,
    }
}

fn per_unit_word(unit: &str) -> &str {
    match unit {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        other => other,
    }
}
