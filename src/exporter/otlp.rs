//! jmx_exporter's samples as OpenTelemetry metrics, pure: one Resource per
//! target, one Metric per sample name, and the mapping OpenTelemetry's
//! Prometheus compatibility specification gives for the way back, so a
//! receiver that turns OTLP into Prometheus names (`_total` for monotonic
//! sums, no unit suffix where no unit is set) ends with the series a
//! scrape of `/prometheus` gives:
//!
//! - `COUNTER`: a monotonic cumulative Sum, named without `_total`, its
//!   start time the JVM's (or the first push's) until the target restarts;
//! - `GAUGE` and `UNTYPED`: a Gauge;
//! - HELP: the description; labels: the data point's attributes.
//!
//! Requests are cut below a size in bytes, whole resources at a time where
//! they fit (a resource larger than the limit is split by metric); a
//! request a receiver refuses can be halved until the one point it
//! refuses is found.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use super::otel::SCOPE as OTEL_SCOPE;
use super::point::Instrument;
use super::rules::{MetricType, Sample};

/// The instrumentation scope every point is under.
pub const SCOPE: &str = "jmxgate";

/// One target's push: who it is and what its rules made.
#[derive(Debug, Clone)]
pub struct TargetPoints<'a> {
    /// Resource attributes, in order (`service.instance.id` first).
    pub resource: Vec<(String, String)>,
    pub samples: &'a [Sample],
    /// When its counters started counting (Unix nanoseconds).
    pub start_unix_nano: u64,
    /// When the values were read (Unix nanoseconds).
    pub time_unix_nano: u64,
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..KeyValue::default()
    }
}

/// The resource of one target: its attributes and its metrics, one per
/// sample name in the order first seen. OpenTelemetry rules' points keep
/// their metric's instrument (an up-down counter a non-monotonic sum),
/// unit, description and integer values, under the scope
/// `io.opentelemetry.jmx`, as OpenTelemetry's own agent sends them.
pub fn resource_metrics(t: &TargetPoints<'_>, version: &str) -> ResourceMetrics {
    let mut metrics: Vec<Metric> = Vec::new();
    let mut index: std::collections::HashMap<(&str, MetricType), usize> =
        std::collections::HashMap::new();
    let otel_scope = t.samples.iter().any(|s| s.otel.is_some());
    for s in t.samples {
        let (kind, integer) = match &s.otel {
            Some(p) => (p.metric.instrument, p.integer),
            None if s.metric_type == MetricType::Counter => (Instrument::Counter, false),
            None => (Instrument::Gauge, false),
        };
        let value = if integer && s.value.fract() == 0.0 && s.value.abs() < 9.0e15 {
            number_data_point::Value::AsInt(s.value as i64)
        } else {
            number_data_point::Value::AsDouble(s.value)
        };
        let point = NumberDataPoint {
            attributes: s.labels.iter().map(|(k, v)| text(k, v)).collect(),
            start_time_unix_nano: if kind == Instrument::Gauge {
                0
            } else {
                t.start_unix_nano
            },
            time_unix_nano: t.time_unix_nano,
            value: Some(value),
            ..NumberDataPoint::default()
        };
        let i = *index.entry((&s.name, s.metric_type)).or_insert_with(|| {
            let sum = |is_monotonic| {
                metric::Data::Sum(Sum {
                    data_points: Vec::new(),
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    is_monotonic,
                })
            };
            let (description, unit) = match &s.otel {
                Some(p) => (
                    p.metric.description.clone().unwrap_or_default(),
                    p.metric.unit.clone(),
                ),
                None => (s.help.clone(), String::new()),
            };
            metrics.push(Metric {
                name: s.name.clone(),
                description,
                unit,
                data: Some(match kind {
                    Instrument::Counter => sum(true),
                    Instrument::UpDownCounter => sum(false),
                    Instrument::Gauge => metric::Data::Gauge(Gauge {
                        data_points: Vec::new(),
                    }),
                }),
                ..Metric::default()
            });
            metrics.len() - 1
        });
        match &mut metrics[i].data {
            Some(metric::Data::Sum(sum)) => sum.data_points.push(point),
            Some(metric::Data::Gauge(g)) => g.data_points.push(point),
            _ => {}
        }
    }
    ResourceMetrics {
        resource: Some(Resource {
            attributes: t.resource.iter().map(|(k, v)| text(k, v)).collect(),
            ..Resource::default()
        }),
        scope_metrics: vec![ScopeMetrics {
            scope: Some(InstrumentationScope {
                name: if otel_scope { OTEL_SCOPE } else { SCOPE }.to_string(),
                version: version.to_string(),
                ..InstrumentationScope::default()
            }),
            metrics,
            ..ScopeMetrics::default()
        }],
        ..ResourceMetrics::default()
    }
}

/// Requests of at most about `max_bytes` each (encoded, before gzip):
/// resources are added while they fit; a resource alone over the limit
/// is split into parts of its metrics, each under the same resource. A
/// single metric over the limit goes alone (it can't be cut further
/// without changing what it says).
pub fn batches(
    resources: Vec<ResourceMetrics>,
    max_bytes: usize,
) -> Vec<ExportMetricsServiceRequest> {
    let mut out = Vec::new();
    let mut current: Vec<ResourceMetrics> = Vec::new();
    let mut size = 0usize;
    let flush = |current: &mut Vec<ResourceMetrics>,
                 size: &mut usize,
                 out: &mut Vec<ExportMetricsServiceRequest>| {
        if !current.is_empty() {
            out.push(ExportMetricsServiceRequest {
                resource_metrics: std::mem::take(current),
            });
            *size = 0;
        }
    };
    for rm in resources {
        let len = rm.encoded_len() + 8;
        if len > max_bytes {
            flush(&mut current, &mut size, &mut out);
            for part in split(rm, max_bytes) {
                out.push(ExportMetricsServiceRequest {
                    resource_metrics: vec![part],
                });
            }
            continue;
        }
        if size + len > max_bytes {
            flush(&mut current, &mut size, &mut out);
        }
        size += len;
        current.push(rm);
    }
    flush(&mut current, &mut size, &mut out);
    out
}

/// One resource's metrics in parts under `max_bytes`, each part with the
/// resource and scope.
fn split(rm: ResourceMetrics, max_bytes: usize) -> Vec<ResourceMetrics> {
    let mut parts = Vec::new();
    let (resource, mut scopes) = (rm.resource, rm.scope_metrics);
    let Some(scope) = scopes.pop() else {
        return parts;
    };
    let shell = |metrics: Vec<Metric>| ResourceMetrics {
        resource: resource.clone(),
        scope_metrics: vec![ScopeMetrics {
            scope: scope.scope.clone(),
            metrics,
            ..ScopeMetrics::default()
        }],
        ..ResourceMetrics::default()
    };
    let mut metrics = Vec::new();
    let mut size = 0;
    for m in scope.metrics {
        let len = m.encoded_len() + 8;
        if size + len > max_bytes && !metrics.is_empty() {
            parts.push(shell(std::mem::take(&mut metrics)));
            size = 0;
        }
        size += len;
        metrics.push(m);
    }
    if !metrics.is_empty() {
        parts.push(shell(metrics));
    }
    parts
}

/// The data points a request carries.
pub fn points(request: &ExportMetricsServiceRequest) -> u64 {
    let in_metric = |m: &Metric| match &m.data {
        Some(metric::Data::Sum(s)) => s.data_points.len(),
        Some(metric::Data::Gauge(g)) => g.data_points.len(),
        _ => 0,
    };
    request
        .resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .map(|m| in_metric(m) as u64)
        .sum()
}

/// A request in two, each part keeping the resource, scope and metric its
/// points belong to: by resources, else by metrics, else by data points.
/// `None`: one point, which can't be cut.
pub fn halves(
    request: ExportMetricsServiceRequest,
) -> Option<(ExportMetricsServiceRequest, ExportMetricsServiceRequest)> {
    let wrap = |resource_metrics| ExportMetricsServiceRequest { resource_metrics };
    let mut resources = request.resource_metrics;
    if resources.len() > 1 {
        let second = resources.split_off(resources.len() / 2);
        return Some((wrap(resources), wrap(second)));
    }
    let mut rm = resources.pop()?;
    let mut scope = rm.scope_metrics.pop()?;
    let rebuild = |rm: &ResourceMetrics, scope: &ScopeMetrics, metrics: Vec<Metric>| {
        let mut rm = rm.clone();
        rm.scope_metrics = vec![ScopeMetrics {
            metrics,
            ..scope.clone()
        }];
        wrap(vec![rm])
    };
    // Earlier scopes (none today) stay with the first half.
    if scope.metrics.len() > 1 {
        let second = scope.metrics.split_off(scope.metrics.len() / 2);
        let first = std::mem::take(&mut scope.metrics);
        let a = rebuild(&rm, &scope, first);
        rm.scope_metrics.clear();
        return Some((a, rebuild(&rm, &scope, second)));
    }
    let mut metric = scope.metrics.pop()?;
    let second_points = match &mut metric.data {
        Some(metric::Data::Sum(s)) if s.data_points.len() > 1 => metric::Data::Sum(Sum {
            data_points: s.data_points.split_off(s.data_points.len() / 2),
            ..s.clone()
        }),
        Some(metric::Data::Gauge(g)) if g.data_points.len() > 1 => metric::Data::Gauge(Gauge {
            data_points: g.data_points.split_off(g.data_points.len() / 2),
        }),
        _ => return None,
    };
    let second = Metric {
        data: Some(second_points),
        ..metric.clone()
    };
    let a = rebuild(&rm, &scope, vec![metric]);
    rm.scope_metrics.clear();
    Some((a, rebuild(&rm, &scope, vec![second])))
}

/// Gzip, as the OTLP exporters send.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("writing to memory");
    e.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, t: MetricType, labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            name: name.into(),
            match_name: String::new(),
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

    fn target_points(samples: &[Sample]) -> TargetPoints<'_> {
        TargetPoints {
            resource: vec![("service.instance.id".into(), "orders-1".into())],
            samples,
            start_unix_nano: 1_000,
            time_unix_nano: 5_000,
        }
    }

    #[test]
    fn counters_are_monotonic_sums_with_their_start_and_gauges_are_gauges() {
        let samples = [
            sample("requests", MetricType::Counter, &[("node", "1")], 7.0),
            sample("requests", MetricType::Counter, &[("node", "2")], 9.0),
            sample("heap_used", MetricType::Gauge, &[], 12.5),
            sample("odd", MetricType::Unknown, &[], 1.0),
        ];
        let rm = resource_metrics(&target_points(&samples), "1.2.3");
        let scope = &rm.scope_metrics[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "jmxgate");
        assert_eq!(scope.scope.as_ref().unwrap().version, "1.2.3");
        let names: Vec<&str> = scope.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["requests", "heap_used", "odd"]);
        let Some(metric::Data::Sum(sum)) = &scope.metrics[0].data else {
            panic!("a sum")
        };
        assert!(sum.is_monotonic);
        assert_eq!(
            sum.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        assert_eq!(sum.data_points.len(), 2);
        assert_eq!(sum.data_points[1].start_time_unix_nano, 1_000);
        assert_eq!(sum.data_points[1].attributes[0].key, "node");
        assert_eq!(scope.metrics[0].description, "help of requests");
        assert!(matches!(
            scope.metrics[2].data,
            Some(metric::Data::Gauge(_))
        ));
        let Some(metric::Data::Gauge(g)) = &scope.metrics[1].data else {
            panic!("a gauge")
        };
        assert_eq!(g.data_points[0].start_time_unix_nano, 0);
        assert_eq!(g.data_points[0].time_unix_nano, 5_000);
        assert!(
            scope.metrics.iter().all(|m| m.unit.is_empty()),
            "no unit: no suffix"
        );
    }

    #[test]
    fn requests_stay_under_the_size_limit_and_lose_nothing() {
        let many: Vec<Sample> = (0..200)
            .map(|i| sample(&format!("m{i}"), MetricType::Gauge, &[("k", "v")], i as f64))
            .collect();
        let resources: Vec<ResourceMetrics> = (0..5)
            .map(|_| resource_metrics(&target_points(&many), "v"))
            .collect();
        let limit = 8 * 1024;
        let out = batches(resources, limit);
        assert!(out.len() > 5, "{} requests", out.len());
        let mut total = 0;
        for r in &out {
            let bytes = r.encode_to_vec();
            assert!(bytes.len() <= limit + 64, "{}", bytes.len());
            let r = ExportMetricsServiceRequest::decode(bytes.as_slice()).unwrap();
            for rm in &r.resource_metrics {
                assert!(rm.resource.is_some());
                total += rm.scope_metrics[0].metrics.len();
            }
        }
        assert_eq!(total, 5 * 200);
        let small = batches(
            vec![resource_metrics(&target_points(&many[..2]), "v")],
            limit,
        );
        assert_eq!(small.len(), 1);
    }

    #[test]
    fn halving_finds_any_one_point_and_keeps_what_each_point_belongs_to() {
        let samples: Vec<Sample> = (0..7)
            .flat_map(|i| {
                [
                    sample(&format!("c{i}"), MetricType::Counter, &[("n", "1")], 1.0),
                    sample(&format!("c{i}"), MetricType::Counter, &[("n", "2")], 2.0),
                ]
            })
            .collect();
        let request = ExportMetricsServiceRequest {
            resource_metrics: (0..3)
                .map(|_| resource_metrics(&target_points(&samples), "v"))
                .collect(),
        };
        assert_eq!(points(&request), 42);
        // Halve down to single points: every one is reached, whole.
        let mut pending = vec![request];
        let mut singles = Vec::new();
        while let Some(r) = pending.pop() {
            let before = points(&r);
            match halves(r.clone()) {
                Some((a, b)) => {
                    assert_eq!(points(&a) + points(&b), before);
                    assert!(points(&a) > 0 && points(&b) > 0);
                    pending.extend([a, b]);
                }
                None => singles.push(r),
            }
        }
        assert_eq!(singles.len(), 42);
        for one in &singles {
            assert_eq!(points(one), 1);
            let rm = &one.resource_metrics[0];
            assert_eq!(
                rm.resource.as_ref().unwrap().attributes[0].key,
                "service.instance.id"
            );
            let scope = &rm.scope_metrics[0];
            assert_eq!(scope.scope.as_ref().unwrap().name, SCOPE);
            let Some(metric::Data::Sum(sum)) = &scope.metrics[0].data else {
                panic!("still a sum")
            };
            assert!(sum.is_monotonic);
            assert_eq!(sum.data_points[0].start_time_unix_nano, 1_000);
        }
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read as _;
        let data = b"otlp".repeat(100);
        let zipped = gzip(&data);
        let mut d = flate2::read::GzDecoder::new(zipped.as_slice());
        let mut back = Vec::new();
        d.read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
    }
}
