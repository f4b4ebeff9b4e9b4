//! Samples into metric families and out as text, as jmx_exporter's
//! collector and client_java write them: one family per name, typed only
//! when all its samples agree; an `_objectname` label on every sample of a
//! family where two would otherwise be the same; families sorted by name
//! and samples by labels; values as Java's `Double.toString`. Two formats:
//! the Prometheus text format 0.0.4 and OpenMetrics 1.0, chosen by the
//! scraper's `Accept` header.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use super::java_text::double_to_string;
use super::rules::{MetricType, Sample};

/// The exposition formats the gateway writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Text,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header prefers (by `q`, OpenMetrics on a
    /// tie, as client_java); the text format without one.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut text, mut open) = (None::<f32>, None::<f32>);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0f32;
            let mut version = None;
            for p in parts {
                if let Some((k, v)) = p.split_once('=') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.trim().parse().unwrap_or(0.0),
                        "version" => version = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            let slot = match (media.as_str(), version.as_deref()) {
                ("application/openmetrics-text", None | Some("1.0.0") | Some("0.0.1")) => &mut open,
                ("text/plain", None | Some("0.0.4")) | ("*/*" | "text/*", _) => &mut text,
                _ => continue,
            };
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
        match (open, text) {
            (Some(o), t) if o > 0.0 && o >= t.unwrap_or(0.0) => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// One sample ready to be written.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    /// Sorted by name.
    labels: Vec<(String, String)>,
    value: f64,
}

#[derive(Debug)]
struct Family {
    metric_type: Option<MetricType>,
    help: String,
    points: Vec<Point>,
}

/// Metric families being gathered for one answer.
#[derive(Debug, Default)]
pub struct Exposition {
    families: BTreeMap<String, Family>,
    /// Samples left out because another had the same name and labels.
    pub duplicates: usize,
}

impl Exposition {
    /// Adds one target's samples: families are formed and name collisions
    /// resolved per target, as if each were scraped alone; then `extra`
    /// labels (the target's) are added to each. A sample already holding
    /// one of those label names keeps its own as `exported_<name>`
    /// (`exported_exported_<name>` where that is taken too, as Prometheus
    /// renames). Samples named like one of `reserved` (the families the
    /// gateway writes itself) are left out: the number is returned.
    pub fn add_target(
        &mut self,
        samples: Vec<Sample>,
        extra: &[(String, String)],
        reserved: &[&str],
    ) -> usize {
        let mut left_out = 0;
        let kept: Vec<Sample> = samples
            .into_iter()
            .filter(|s| {
                let reserved = reserved.contains(&s.name.as_str());
                left_out += usize::from(reserved);
                !reserved
            })
            .collect();
        for (name, (metric_type, group)) in families_of(kept) {
            let help = group[0].help.clone();
            let family = self.families.entry(name).or_insert_with(|| Family {
                metric_type: Some(metric_type),
                help,
                points: Vec::new(),
            });
            if family.metric_type != Some(metric_type) {
                family.metric_type = None;
            }
            for s in group {
                let mut labels = s.labels;
                for (k, v) in extra {
                    exported(&mut labels, k);
                    labels.push((k.clone(), v.clone()));
                }
                family.points.push(Point {
                    labels: sorted(&labels),
                    value: s.value,
                });
            }
        }
        left_out
    }

    /// Adds a gauge the gateway itself reports (scrape errors, durations).
    pub fn add_gauge(&mut self, name: &str, help: &str, labels: &[(String, String)], value: f64) {
        let family = self
            .families
            .entry(name.to_string())
            .or_insert_with(|| Family {
                metric_type: Some(MetricType::Gauge),
                help: help.to_string(),
                points: Vec::new(),
            });
        family.points.push(Point {
            labels: sorted(labels),
            value,
        });
    }

    /// The whole answer in `format`.
    pub fn write(&mut self, format: Format) -> String {
        let mut out = String::with_capacity(self.families.len() * 128);
        for (name, family) in &mut self.families {
            family
                .points
                .sort_by(|a, b| label_order(&a.labels, &b.labels));
            let before = family.points.len();
            family.points.dedup_by(|b, a| a.labels == b.labels);
            self.duplicates += before - family.points.len();
            let metric_type = family.metric_type.unwrap_or(MetricType::Unknown);
            write_family(
                &mut out,
                format,
                name,
                metric_type,
                &family.help,
                &family.points,
            );
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

/// Prometheus's rename of a scraped label the target's own label would
/// overwrite (`resolveConflictingExposedLabels`): `name` becomes
/// `exported_name`, or where that is taken `exported_exported_name`, and
/// so on, so no label name is given twice and none is lost.
fn exported(labels: &mut [(String, String)], name: &str) {
    let Some(at) = labels.iter().position(|(n, _)| n == name) else {
        return;
    };
    let mut renamed = format!("exported_{name}");
    while labels.iter().any(|(n, _)| *n == renamed) {
        renamed.insert_str(0, "exported_");
    }
    labels[at].0 = renamed;
}

/// One target's samples as jmx_exporter's collector makes its families:
/// by name, each family typed as all its samples agree (else untyped),
/// and an `_objectname` label on every sample of a family where two would
/// otherwise be the same. What `/prometheus` writes and OTLP pushes.
pub fn families_of(samples: Vec<Sample>) -> BTreeMap<String, (MetricType, Vec<Sample>)> {
    let mut by_name: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    for s in samples {
        by_name.entry(s.name.clone()).or_default().push(s);
    }
    by_name
        .into_iter()
        .map(|(name, mut group)| {
            let unique = {
                let mut seen = HashSet::new();
                group.iter().all(|s| {
                    let mut labels: Vec<&(String, String)> = s.labels.iter().collect();
                    labels.sort_by(|a, b| a.0.cmp(&b.0));
                    seen.insert(labels)
                })
            };
            let metric_type = common_type(group.iter().map(|s| s.metric_type));
            if !unique {
                for s in &mut group {
                    let object_name = object_name_of(&s.match_name).to_string();
                    s.labels.push(("_objectname".into(), object_name));
                }
            }
            (name, (metric_type, group))
        })
        .collect()
}

fn common_type(mut types: impl Iterator<Item = MetricType>) -> MetricType {
    let first = types.next().unwrap_or(MetricType::Unknown);
    if types.all(|t| t == first) {
        first
    } else {
        MetricType::Unknown
    }
}

fn sorted(labels: &[(String, String)]) -> Vec<(String, String)> {
    let mut l = labels.to_vec();
    l.sort_by(|a, b| a.0.cmp(&b.0));
    l
}

/// client_java's `Labels.compareTo`: the names first, then the values.
fn label_order(a: &[(String, String)], b: &[(String, String)]) -> std::cmp::Ordering {
    fn names(l: &[(String, String)]) -> impl Iterator<Item = &String> {
        l.iter().map(|(n, _)| n)
    }
    fn values(l: &[(String, String)]) -> impl Iterator<Item = &String> {
        l.iter().map(|(_, v)| v)
    }
    names(a)
        .cmp(names(b))
        .then_with(|| values(a).cmp(values(b)))
}

/// jmx_exporter's `getDomainName`: the match name up to its last `:`.
fn object_name_of(match_name: &str) -> &str {
    match match_name.rfind(':') {
        Some(at) if at > 0 => &match_name[..at],
        _ => match_name,
    }
}

fn write_family(
    out: &mut String,
    format: Format,
    name: &str,
    metric_type: MetricType,
    help: &str,
    points: &[Point],
) {
    if points.is_empty() {
        return;
    }
    let counter = metric_type == MetricType::Counter;
    let sample_name = if counter {
        format!("{name}_total")
    } else {
        name.to_string()
    };
    match format {
        Format::Text => {
            let type_name = match metric_type {
                MetricType::Counter => "counter",
                MetricType::Gauge => "gauge",
                MetricType::Unknown => "untyped",
            };
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {sample_name} {}", escape_help_text(help));
            }
            let _ = writeln!(out, "# TYPE {sample_name} {type_name}");
        }
        Format::OpenMetrics => {
            let type_name = match metric_type {
                MetricType::Counter => "counter",
                MetricType::Gauge => "gauge",
                MetricType::Unknown => "unknown",
            };
            let _ = writeln!(out, "# TYPE {name} {type_name}");
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {name} {}", escape_value(help));
            }
        }
    }
    for p in points {
        out.push_str(&sample_name);
        if !p.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in p.labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k}=\"{}\"", escape_value(v));
            }
            out.push('}');
        }
        out.push(' ');
        out.push_str(&sample_value(p.value));
        out.push('\n');
    }
}

/// client_java's `writeDouble`: `+Inf`, `-Inf`, else `Double.toString`.
fn sample_value(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        double_to_string(v)
    }
}

/// HELP in the text format: `\` and newline escaped.
fn escape_help_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values (and HELP in OpenMetrics): `\`, `"` and newline escaped.
fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(
        name: &str,
        t: MetricType,
        labels: &[(&str, &str)],
        value: f64,
        match_name: &str,
    ) -> Sample {
        Sample {
            name: name.into(),
            match_name: match_name.into(),
            metric_type: t,
            help: format!("help of {name}"),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
            otel: None,
        }
    }

    #[test]
    fn text_format_as_client_java_writes_it() {
        let mut e = Exposition::default();
        e.add_target(
            vec![
                sample(
                    "b_requests",
                    MetricType::Counter,
                    &[("node", "1"), ("clientId", "x")],
                    123.0,
                    "x",
                ),
                sample("a_rate", MetricType::Gauge, &[], 2.0, "x"),
                sample(
                    "c",
                    MetricType::Unknown,
                    &[("v", "say \"hi\"\\\n")],
                    1e7,
                    "x",
                ),
            ],
            &[],
            &[],
        );
        assert_eq!(
            e.write(Format::Text),
            "# HELP a_rate help of a_rate\n# TYPE a_rate gauge\na_rate 2.0\n\
             # HELP b_requests_total help of b_requests\n# TYPE b_requests_total counter\n\
             b_requests_total{clientId=\"x\",node=\"1\"} 123.0\n\
             # HELP c help of c\n# TYPE c untyped\nc{v=\"say \\\"hi\\\"\\\\\\n\"} 1.0E7\n"
        );
    }

    #[test]
    fn openmetrics_as_client_java_writes_it() {
        let mut e = Exposition::default();
        e.add_target(
            vec![
                sample("b_requests", MetricType::Counter, &[], 1.0, "x"),
                sample("c", MetricType::Unknown, &[], 0.5, "x"),
            ],
            &[],
            &[],
        );
        assert_eq!(
            e.write(Format::OpenMetrics),
            "# TYPE b_requests counter\n# HELP b_requests help of b_requests\nb_requests_total 1.0\n\
             # TYPE c unknown\n# HELP c help of c\nc 0.5\n# EOF\n"
        );
    }

    #[test]
    fn colliding_samples_get_their_object_name_and_mixed_types_none() {
        let mut e = Exposition::default();
        e.add_target(
            vec![
                sample(
                    "t",
                    MetricType::Gauge,
                    &[],
                    1.0,
                    "io.test<type=Total-Value><>Total: 345",
                ),
                sample(
                    "t",
                    MetricType::Counter,
                    &[],
                    2.0,
                    "io.test<type=Total.Value><>Total: 345",
                ),
            ],
            &[("target".into(), "a".into())],
            &[],
        );
        let text = e.write(Format::Text);
        assert!(text.contains("# TYPE t untyped\n"), "{text}");
        assert!(
            text.contains("t{_objectname=\"io.test<type=Total-Value><>Total\",target=\"a\"} 1.0\n"),
            "{text}"
        );
    }

    #[test]
    fn each_target_is_its_own_scrape_and_a_label_of_its_own_is_kept() {
        let mut e = Exposition::default();
        for t in ["a", "b"] {
            e.add_target(
                vec![sample(
                    "x",
                    MetricType::Gauge,
                    &[("target", "inner")],
                    1.0,
                    "m",
                )],
                &[("target".into(), t.into())],
                &[],
            );
        }
        let text = e.write(Format::Text);
        assert!(
            text.contains("x{exported_target=\"inner\",target=\"a\"} 1.0\n"),
            "{text}"
        );
        assert!(
            text.contains("x{exported_target=\"inner\",target=\"b\"} 1.0\n"),
            "{text}"
        );
        assert!(!text.contains("_objectname"), "no collision: {text}");
    }

    #[test]
    fn a_taken_exported_name_moves_on_as_prometheus_renames() {
        let mut e = Exposition::default();
        e.add_target(
            vec![sample(
                "x",
                MetricType::Gauge,
                &[("target", "a"), ("exported_target", "b")],
                1.0,
                "m",
            )],
            &[("target".into(), "t".into())],
            &[],
        );
        let text = e.write(Format::Text);
        assert!(
            text.contains(
                "x{exported_exported_target=\"a\",exported_target=\"b\",target=\"t\"} 1.0\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_gateways_own_families_are_not_an_agents_to_write() {
        let mut e = Exposition::default();
        let left_out = e.add_target(
            vec![
                sample("jmx_scrape_error", MetricType::Counter, &[], 736.0, "m"),
                sample("y", MetricType::Gauge, &[], 1.0, "m"),
            ],
            &[("target".into(), "t".into())],
            &["jmx_scrape_error"],
        );
        assert_eq!(left_out, 1);
        e.add_gauge(
            "jmx_scrape_error",
            "Non-zero if this scrape failed.",
            &[("target".into(), "t".into())],
            0.0,
        );
        let text = e.write(Format::Text);
        assert!(text.contains("# TYPE jmx_scrape_error gauge\n"), "{text}");
        assert!(
            text.contains("jmx_scrape_error{target=\"t\"} 0.0\n"),
            "{text}"
        );
        assert!(!text.contains("736"), "{text}");
    }

    #[test]
    fn the_accept_header_decides_the_format() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        // Prometheus 2.x and 3.x defaults.
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.2"
            )),
            Format::Text
        );
        assert_eq!(Format::negotiate(Some("application/json")), Format::Text);
    }
}
