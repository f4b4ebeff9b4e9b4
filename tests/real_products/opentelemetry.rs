//! OpenTelemetry's own JMX rules, the shipped files unchanged, against the
//! real products: Tomcat 10 (`tomcat`, `jvm`), ActiveMQ 5.17
//! (`activemq`, `jvm`) and Jetty 9 (`jetty`, `jvm`), through both agent
//! generations. Each push goes to two real receivers: grpcio with the
//! official OpenTelemetry protos (tests/clients/otlp-grpc), where every
//! metric upstream's tests (../shared/otel-jmx/tests: `TomcatTest`,
//! `ActiveMqTest`, `JettyTest`, `JvmTest`) expect must arrive with their
//! description, unit, instrument and attributes, and nothing else; and
//! VictoriaMetrics with OpenTelemetry's Prometheus naming, whose series
//! must be exactly those `/prometheus` serves for the same module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point, Metric};

use crate::common::otlp_receiver::GrpcReceiver;
use crate::common::{self, Gateway, Generation};
use crate::products::{present, Product, ProductJvm};
use crate::victoria::Victoria;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Instrument {
    Gauge,
    Counter,
    UpDownCounter,
}

/// One metric as upstream's tests expect it: its instrument, unit,
/// description, and the attributes every point of it carries.
struct Expected {
    name: &'static str,
    instrument: Instrument,
    unit: &'static str,
    description: &'static str,
    attributes: &'static [&'static str],
}

const fn e(
    name: &'static str,
    instrument: Instrument,
    unit: &'static str,
    description: &'static str,
    attributes: &'static [&'static str],
) -> Expected {
    Expected {
        name,
        instrument,
        unit,
        description,
        attributes,
    }
}

use Instrument::{Counter, Gauge, UpDownCounter};

/// `JvmTest`.
const JVM: &[Expected] = &[
    e("jvm.memory.used", UpDownCounter, "By", "Measure of memory used.", &["jvm.memory.pool.name", "jvm.memory.type"]),
    e("jvm.memory.committed", UpDownCounter, "By", "Measure of memory committed.", &["jvm.memory.pool.name", "jvm.memory.type"]),
    e("jvm.memory.limit", UpDownCounter, "By", "Measure of max obtainable memory.", &["jvm.memory.pool.name", "jvm.memory.type"]),
    e("jvm.memory.init", UpDownCounter, "By", "Measure of initial memory requested.", &["jvm.memory.pool.name", "jvm.memory.type"]),
    e("jvm.memory.used_after_last_gc", UpDownCounter, "By", "Measure of memory used, as measured after the most recent garbage collection event on this pool.", &["jvm.memory.pool.name", "jvm.memory.type"]),
    e("jvm.thread.count", UpDownCounter, "{thread}", "Number of executing platform threads.", &[]),
    e("jvm.class.loaded", Counter, "{class}", "Number of classes loaded since JVM start.", &[]),
    e("jvm.class.unloaded", Counter, "{class}", "Number of classes unloaded since JVM start.", &[]),
    e("jvm.class.count", UpDownCounter, "{class}", "Number of classes currently loaded.", &[]),
    e("jvm.cpu.count", UpDownCounter, "{cpu}", "Number of processors available to the Java virtual machine.", &[]),
    e("jvm.cpu.time", Counter, "s", "CPU time used by the process as reported by the JVM.", &[]),
    e("jvm.cpu.recent_utilization", Gauge, "1", "Recent CPU utilization for the process as reported by the JVM.", &[]),
    e("jvm.file_descriptor.count", UpDownCounter, "{file_descriptor}", "Number of open file descriptors as reported by the JVM.", &[]),
    e("jvm.file_descriptor.limit", UpDownCounter, "{file_descriptor}", "Measure of max open file descriptors as reported by the JVM.", &[]),
    e("jvm.system.cpu.load_1m", Gauge, "{run_queue_item}", "Average CPU load of the whole system for the last minute as reported by the JVM.", &[]),
    e("jvm.system.cpu.utilization", Gauge, "1", "Recent CPU utilization for the whole system as reported by the JVM.", &[]),
    e("jvm.buffer.memory.used", UpDownCounter, "By", "Measure of memory used by buffers.", &["jvm.buffer.pool.name"]),
    e("jvm.buffer.memory.limit", UpDownCounter, "By", "Measure of total memory capacity of buffers.", &["jvm.buffer.pool.name"]),
    e("jvm.buffer.count", UpDownCounter, "{buffer}", "Number of buffers in the pool.", &["jvm.buffer.pool.name"]),
];

/// `TomcatTest`.
const TOMCAT: &[Expected] = &[
    e(
        "tomcat.error.count",
        Counter,
        "{error}",
        "The number of errors.",
        &["tomcat.request.processor.name"],
    ),
    e(
        "tomcat.request.count",
        Counter,
        "{request}",
        "The number of requests processed.",
        &["tomcat.request.processor.name"],
    ),
    e(
        "tomcat.request.duration.max",
        Gauge,
        "s",
        "The longest request processing time.",
        &["tomcat.request.processor.name"],
    ),
    e(
        "tomcat.request.duration.sum",
        Counter,
        "s",
        "Total time of processing all requests.",
        &["tomcat.request.processor.name"],
    ),
    e(
        "tomcat.network.io",
        Counter,
        "By",
        "The number of bytes transmitted.",
        &["network.io.direction", "tomcat.request.processor.name"],
    ),
    e(
        "tomcat.session.active.count",
        UpDownCounter,
        "{session}",
        "The number of currently active sessions.",
        &["tomcat.context"],
    ),
    e(
        "tomcat.session.active.limit",
        UpDownCounter,
        "{session}",
        "Maximum possible number of active sessions.",
        &["tomcat.context"],
    ),
    e(
        "tomcat.thread.count",
        UpDownCounter,
        "{thread}",
        "Total thread count of the thread pool.",
        &["tomcat.thread.pool.name"],
    ),
    e(
        "tomcat.thread.limit",
        UpDownCounter,
        "{thread}",
        "Maximum possible number of threads in the thread pool.",
        &["tomcat.thread.pool.name"],
    ),
    e(
        "tomcat.thread.busy.count",
        UpDownCounter,
        "{thread}",
        "Number of busy threads in the thread pool.",
        &["tomcat.thread.pool.name"],
    ),
];

const DESTINATION: &[&str] = &[
    "activemq.broker.name",
    "activemq.destination.type",
    "messaging.destination.name",
];
const BROKER: &[&str] = &["activemq.broker.name"];

/// `ActiveMqTest`.
const ACTIVEMQ: &[Expected] = &[
    e(
        "activemq.producer.count",
        UpDownCounter,
        "{producer}",
        "The number of producers attached to this destination.",
        DESTINATION,
    ),
    e(
        "activemq.consumer.count",
        UpDownCounter,
        "{consumer}",
        "The number of consumers subscribed to this destination.",
        DESTINATION,
    ),
    e(
        "activemq.message.queue.size",
        UpDownCounter,
        "{message}",
        "The current number of messages waiting to be consumed.",
        DESTINATION,
    ),
    e(
        "activemq.message.expired",
        Counter,
        "{message}",
        "The number of messages not delivered because they expired.",
        DESTINATION,
    ),
    e(
        "activemq.message.enqueued",
        Counter,
        "{message}",
        "The number of messages sent to this destination.",
        DESTINATION,
    ),
    e(
        "activemq.message.dequeued",
        Counter,
        "{message}",
        "The number of messages acknowledged and removed from this destination.",
        DESTINATION,
    ),
    e(
        "activemq.message.enqueue.average_duration",
        Gauge,
        "s",
        "The average time a message was held on this destination.",
        DESTINATION,
    ),
    e(
        "activemq.destination.memory.usage",
        UpDownCounter,
        "By",
        "The amount of used memory by this destination.",
        DESTINATION,
    ),
    e(
        "activemq.destination.memory.limit",
        UpDownCounter,
        "By",
        "The amount of configured memory limit for this destination.",
        DESTINATION,
    ),
    e(
        "activemq.destination.temp.utilization",
        Gauge,
        "1",
        "The fraction of non-persistent storage used by this destination.",
        DESTINATION,
    ),
    e(
        "activemq.destination.temp.limit",
        UpDownCounter,
        "By",
        "The amount of configured non-persistent storage limit for this destination.",
        DESTINATION,
    ),
    e(
        "activemq.connection.count",
        UpDownCounter,
        "{connection}",
        "The number of active connections.",
        BROKER,
    ),
    e(
        "activemq.memory.utilization",
        Gauge,
        "1",
        "The fraction of broker memory used.",
        BROKER,
    ),
    e(
        "activemq.memory.limit",
        UpDownCounter,
        "By",
        "The amount of configured broker memory limit.",
        BROKER,
    ),
    e(
        "activemq.store.utilization",
        Gauge,
        "1",
        "The fraction of broker persistent storage used.",
        BROKER,
    ),
    e(
        "activemq.store.limit",
        UpDownCounter,
        "By",
        "The amount of configured broker persistent storage limit.",
        BROKER,
    ),
    e(
        "activemq.temp.utilization",
        Gauge,
        "1",
        "The fraction of broker non-persistent storage used.",
        BROKER,
    ),
    e(
        "activemq.temp.limit",
        UpDownCounter,
        "By",
        "The amount of configured broker non-persistent storage limit.",
        BROKER,
    ),
];

/// `JettyTest` for Jetty 9 (its sessions' metrics are 9 to 11's).
const JETTY: &[Expected] = &[
    e(
        "jetty.thread.count",
        UpDownCounter,
        "{thread}",
        "The current number of threads.",
        &[],
    ),
    e(
        "jetty.thread.limit",
        UpDownCounter,
        "{thread}",
        "The configured maximum number of threads in the pool.",
        &[],
    ),
    e(
        "jetty.thread.idle.count",
        UpDownCounter,
        "{thread}",
        "The current number of idle threads.",
        &[],
    ),
    e(
        "jetty.thread.busy.count",
        UpDownCounter,
        "{thread}",
        "The current number of busy threads.",
        &[],
    ),
    e(
        "jetty.thread.queue.size",
        UpDownCounter,
        "{job}",
        "The current job queue size.",
        &[],
    ),
    e(
        "jetty.select.count",
        Counter,
        "{operation}",
        "The number of select calls.",
        &[],
    ),
    e(
        "jetty.session.created.count",
        Counter,
        "{session}",
        "The total number of created sessions.",
        &["jetty.context"],
    ),
    e(
        "jetty.session.duration.sum",
        Counter,
        "s",
        "The cumulated session duration.",
        &["jetty.context"],
    ),
];

impl Product {
    fn otel_system(self) -> &'static str {
        match self {
            Product::Tomcat => "tomcat",
            Product::ActiveMq => "activemq",
            Product::Jetty => "jetty",
            Product::ZooKeeper => unreachable!("OpenTelemetry ships no ZooKeeper rules"),
        }
    }

    fn otel_expected(self) -> &'static [Expected] {
        match self {
            Product::Tomcat => TOMCAT,
            Product::ActiveMq => ACTIVEMQ,
            Product::Jetty => JETTY,
            Product::ZooKeeper => &[],
        }
    }
}

/// The latest version of each metric the receiver took, by name, and the
/// scopes they came under.
fn received(receiver: &GrpcReceiver) -> (BTreeMap<String, Metric>, BTreeSet<String>) {
    let mut metrics = BTreeMap::new();
    let mut scopes = BTreeSet::new();
    for request in receiver.calls().into_iter().filter_map(|c| c.request) {
        for rm in request.resource_metrics {
            for sm in rm.scope_metrics {
                scopes.insert(sm.scope.map(|s| s.name).unwrap_or_default());
                for m in sm.metrics {
                    metrics.insert(m.name.clone(), m);
                }
            }
        }
    }
    (metrics, scopes)
}

fn instrument_of(m: &Metric) -> Option<Instrument> {
    match &m.data {
        Some(Data::Gauge(_)) => Some(Gauge),
        Some(Data::Sum(s)) if s.is_monotonic => Some(Counter),
        Some(Data::Sum(_)) => Some(UpDownCounter),
        _ => None,
    }
}

fn points(m: &Metric) -> &[opentelemetry_proto::tonic::metrics::v1::NumberDataPoint] {
    match &m.data {
        Some(Data::Gauge(g)) => &g.data_points,
        Some(Data::Sum(s)) => &s.data_points,
        _ => &[],
    }
}

/// A point's attributes, name → text.
fn attributes(
    p: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint,
) -> BTreeMap<String, String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    p.attributes
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

/// Every value one attribute has across a metric's points.
fn values_of(
    metrics: &BTreeMap<String, Metric>,
    metric: &str,
    attribute: &str,
) -> BTreeSet<String> {
    metrics
        .get(metric)
        .map(|m| {
            points(m)
                .iter()
                .filter_map(|p| attributes(p).get(attribute).cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// What differs from upstream's expectations; empty when none does.
fn check_against(expected: &[&Expected], metrics: &BTreeMap<String, Metric>) -> Vec<String> {
    let mut problems = Vec::new();
    let wanted: BTreeSet<&str> = expected.iter().map(|e| e.name).collect();
    for name in metrics.keys() {
        if !wanted.contains(name.as_str()) {
            problems.push(format!("{name}: not defined for this product"));
        }
    }
    for e in expected {
        let Some(m) = metrics.get(e.name) else {
            problems.push(format!("{}: not received", e.name));
            continue;
        };
        if instrument_of(m) != Some(e.instrument) {
            problems.push(format!(
                "{}: {:?}, expected {:?}",
                e.name,
                instrument_of(m),
                e.instrument
            ));
        }
        if m.unit != e.unit {
            problems.push(format!(
                "{}: unit {:?}, expected {:?}",
                e.name, m.unit, e.unit
            ));
        }
        if m.description != e.description {
            problems.push(format!("{}: description {:?}", e.name, m.description));
        }
        let want: BTreeSet<&str> = e.attributes.iter().copied().collect();
        for p in points(m) {
            let attrs = attributes(p);
            let have: BTreeSet<&str> = attrs.keys().map(String::as_str).collect();
            if have != want {
                problems.push(format!("{}: a point with attributes {attrs:?}", e.name));
            }
        }
        if points(m).is_empty() {
            problems.push(format!("{}: no points", e.name));
        }
    }
    problems
}

/// A Prometheus exposition's series, name → label sets, without the
/// `target` label and the gateway's own families; and each family's HELP
/// and TYPE.
#[allow(clippy::type_complexity)]
fn exposition(
    text: &str,
) -> (
    BTreeSet<(String, BTreeMap<String, String>)>,
    BTreeMap<String, (String, String)>,
) {
    let mut series = BTreeSet::new();
    let mut meta: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            meta.entry(name.into()).or_default().0 =
                help.replace("\\\\", "\\").replace("\\n", "\n");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            meta.entry(name.into()).or_default().1 = kind.to_string();
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        // `name{labels} value`: a label's value may hold spaces.
        let Some((series_text, _value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = match series_text.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series_text, ""),
        };
        if name.starts_with("jmx_scrape_") || name.starts_with("jmxgate_scrape_") {
            continue;
        }
        let mut labels: BTreeMap<String, String> =
            common::exposition_labels(labels).into_iter().collect();
        labels.remove("target");
        series.insert((name.to_string(), labels));
    }
    (series, meta)
}

/// One product through one agent generation, pushed to both receivers
/// and scraped.
async fn otel_rules_on(product: Product, generation: Generation) {
    if !present(
        &format!("{product:?} (Debian)"),
        Path::new(product.installed_file()),
    ) || !generation.available()
    {
        return;
    }
    let (jvm, receiver, vm) = tokio::join!(
        ProductJvm::start(product, generation, None),
        GrpcReceiver::start(&[]),
        Victoria::start()
    );
    let config = format!(
        r#"[[targets]]
name = "product"
url = "{url}"
max_response_bytes = 1048576

[[prometheus.modules]]
name = "otel"
otel_rules = ["{system}", "jvm"]

[[otlp.exports]]
name = "grpc"
protocol = "grpc"
endpoint = "http://127.0.0.1:{grpc}"
interval = "1s"
targets = "product"
module = "otel"

[[otlp.exports]]
name = "vm"
endpoint = "{vm}"
interval = "1s"
targets = "product"
module = "otel"
"#,
        url = jvm.jolokia_url,
        system = product.otel_system(),
        grpc = receiver.port,
        vm = vm.url("/opentelemetry"),
    );
    let gw = Gateway::start(&config).await;
    let label = format!("{product:?} through Jolokia {}", generation.version());
    let expected: Vec<&Expected> = product.otel_expected().iter().chain(JVM).collect();

    // Upstream's expectations, in what the gRPC receiver decoded: waited
    // for, as the agent's own tests wait (CPU load reads -1 until sampled).
    let (metrics, scopes) = common::eventually(
        &format!("{label}: every metric upstream's tests expect, as they expect it"),
        Duration::from_secs(120),
        || async {
            let (metrics, scopes) = received(&receiver);
            let problems = check_against(&expected, &metrics);
            if problems.is_empty() {
                Ok((metrics, scopes))
            } else {
                Err(problems.join("\n"))
            }
        },
    )
    .await;
    assert_eq!(
        scopes,
        BTreeSet::from(["io.opentelemetry.jmx".to_string()]),
        "{label}"
    );
    check_values(product, &jvm, &metrics, &label);

    // The same points through VictoriaMetrics' OpenTelemetry-to-Prometheus
    // naming are the series /prometheus writes for the module.
    let scraped =
        common::get_text(&gw.http, &gw.url("/prometheus?target=product&module=otel")).await;
    assert!(
        scraped.contains("jmx_scrape_error{target=\"product\"} 0"),
        "{label}:\n{scraped}"
    );
    let (ours, meta) = exposition(&scraped);
    let names: BTreeSet<&str> = ours.iter().map(|(n, _)| n.as_str()).collect();
    let label_keys: BTreeSet<String> = ours.iter().flat_map(|(_, l)| l.keys().cloned()).collect();
    // Series whose label values are stable between a scrape and a push
    // (every series: values are not compared, only names and labels).
    let pushed = common::eventually(
        &format!("{label}: VictoriaMetrics holds the series /prometheus serves"),
        Duration::from_secs(90),
        || async {
            let theirs: BTreeSet<(String, BTreeMap<String, String>)> = vm
                .series("product")
                .await
                .into_iter()
                .map(|mut s| {
                    let name = s.remove("__name__").unwrap_or_default();
                    s.retain(|k, _| label_keys.contains(k));
                    (name, s)
                })
                .collect();
            if theirs == ours {
                Ok(theirs)
            } else {
                let missing: Vec<_> = ours.difference(&theirs).collect();
                let extra: Vec<_> = theirs.difference(&ours).collect();
                Err(format!(
                    "only /prometheus: {missing:?}\nonly VictoriaMetrics: {extra:?}"
                ))
            }
        },
    )
    .await;
    assert!(!pushed.is_empty());
    // HELP is the description, TYPE counter for monotonic sums only.
    for e in &expected {
        let m = &metrics[e.name];
        let prom = ours
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| {
                meta.get(*n).is_some_and(|(help, _)| help == &m.description) && names.contains(n)
            })
            .unwrap_or_else(|| {
                panic!(
                    "{label}: no family of /prometheus has {}'s description",
                    e.name
                )
            });
        let kind = &meta[prom].1;
        let want = if e.instrument == Counter {
            "counter"
        } else {
            "gauge"
        };
        assert_eq!(kind, want, "{label}: {prom} ({})", e.name);
    }
    eprintln!("{label}: {} metrics as upstream expects, {} series alike in /prometheus and VictoriaMetrics", expected.len(), pushed.len());
}

/// The attribute values upstream's tests fix, for this setup, and
/// integers sent as integers.
fn check_values(
    product: Product,
    jvm: &ProductJvm,
    metrics: &BTreeMap<String, Metric>,
    label: &str,
) {
    let set = |values: &[&str]| {
        values
            .iter()
            .map(|v| v.to_string())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(
        values_of(metrics, "jvm.memory.used", "jvm.memory.type"),
        set(&["heap", "non_heap"]),
        "{label}"
    );
    // Only heap pools are collected.
    assert_eq!(
        values_of(metrics, "jvm.memory.used_after_last_gc", "jvm.memory.type"),
        set(&["heap"]),
        "{label}"
    );
    let is_int = |metric: &str| {
        points(&metrics[metric])
            .iter()
            .all(|p| matches!(p.value, Some(number_data_point::Value::AsInt(_))))
    };
    assert!(is_int("jvm.thread.count"), "{label}: ThreadCount is an int");
    assert!(
        !is_int("jvm.cpu.time"),
        "{label}: converted from ns, a double"
    );
    match product {
        Product::Tomcat => {
            // The connector listens on 127.0.0.1: its beans' name, quoted
            // in the ObjectName as Tomcat registers it.
            let connector = format!("\"http-nio-127.0.0.1-{}\"", jvm.product_port.unwrap());
            for (metric, attribute) in [
                ("tomcat.request.count", "tomcat.request.processor.name"),
                ("tomcat.thread.count", "tomcat.thread.pool.name"),
            ] {
                assert_eq!(
                    values_of(metrics, metric, attribute),
                    set(&[&connector]),
                    "{label}: {metric}"
                );
            }
            assert_eq!(
                values_of(metrics, "tomcat.network.io", "network.io.direction"),
                set(&["receive", "transmit"]),
                "{label}"
            );
            assert_eq!(
                values_of(metrics, "tomcat.session.active.count", "tomcat.context"),
                set(&["/"]),
                "{label}"
            );
            // Two requests made when it started (a page and a 404).
            let requests: i64 = points(&metrics["tomcat.request.count"])
                .iter()
                .map(|p| match p.value {
                    Some(number_data_point::Value::AsInt(i)) => i,
                    other => panic!("{label}: requestCount {other:?}"),
                })
                .sum();
            assert!(requests >= 2, "{label}: {requests} requests");
        }
        Product::ActiveMq => {
            let destinations = values_of(
                metrics,
                "activemq.message.enqueued",
                "messaging.destination.name",
            );
            for d in ["jmxgate.queue", "jmxgate.topic"] {
                assert!(destinations.contains(d), "{label}: {destinations:?}");
            }
            assert_eq!(
                values_of(
                    metrics,
                    "activemq.message.enqueued",
                    "activemq.destination.type"
                ),
                set(&["queue", "topic"]),
                "{label}"
            );
            assert_eq!(
                values_of(metrics, "activemq.connection.count", "activemq.broker.name"),
                set(&["localhost"]),
                "{label}"
            );
        }
        Product::Jetty => {
            assert_eq!(
                values_of(metrics, "jetty.session.created.count", "jetty.context").len(),
                1,
                "{label}"
            );
        }
        Product::ZooKeeper => {}
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_tomcat_through_jolokia_1_7_1() {
    otel_rules_on(Product::Tomcat, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_tomcat_through_jolokia_2_6_0() {
    otel_rules_on(Product::Tomcat, Generation::V2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_activemq_through_jolokia_1_7_1() {
    otel_rules_on(Product::ActiveMq, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_activemq_through_jolokia_2_6_0() {
    otel_rules_on(Product::ActiveMq, Generation::V2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_jetty_9_through_jolokia_1_7_1() {
    otel_rules_on(Product::Jetty, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_rules_on_jetty_9_through_jolokia_2_6_0() {
    otel_rules_on(Product::Jetty, Generation::V2).await;
}
