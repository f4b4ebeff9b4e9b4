//! The cases of jmx_exporter's own collector tests (`JmxCollectorTest`),
//! on the values its test MBeans give, with the same expectations.

use super::*;

const DESC: &str = "Attribute exposed for management";

/// A value of an MBean, as the collector finds it.
struct Bean {
    domain: &'static str,
    properties: Vec<(String, String)>,
    attr_keys: Vec<String>,
    attr: String,
    value: BeanValue,
}

fn bean(name: &'static str, attr: &str, value: BeanValue) -> Bean {
    let (domain, props) = name.split_once(':').unwrap();
    Bean {
        domain,
        properties: props
            .split(',')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect(),
        attr_keys: Vec::new(),
        attr: attr.to_string(),
        value,
    }
}

fn int(v: i64) -> BeanValue {
    BeanValue::Number {
        value: v as f64,
        text: v.to_string(),
    }
}

/// jmx_exporter's TestMBeanRegistry, the values its tests look at.
fn test_beans() -> Vec<Bean> {
    let composite = |key: &str, v: i64| Bean {
        attr_keys: vec!["PerformanceMetrics".into()],
        ..bean(
            "io.prometheus.jmx.test:name=PerformanceMetricsMBean",
            key,
            int(v),
        )
    };
    vec![
        bean(
            "hadoop:service=DataNode,name=DataNodeActivity-ams-hdd001-50010",
            "replaceBlockOpMinTime",
            int(200),
        ),
        bean(
            "org.apache.cassandra.concurrent:type=CONSISTENCY-MANAGER",
            "ActiveCount",
            int(100),
        ),
        bean(
            "org.apache.cassandra.metrics:type=Compaction,name=CompletedTasks",
            "Value",
            BeanValue::Number {
                value: f64::from(0.2f32),
                text: "0.2".into(),
            },
        ),
        bean("boolean:Type=Test", "True", BeanValue::Bool(true)),
        bean("boolean:Type=Test", "False", BeanValue::Bool(false)),
        bean(
            "org.bean.enum:type=StateMetrics",
            "State",
            BeanValue::Text("RUNNING".into()),
        ),
        bean(
            "Catalina:j2eeType=Servlet,WebModule=//localhost/host-manager,name=HTMLHostManager,J2EEApplication=none,J2EEServer=none",
            "RequestCount",
            int(1),
        ),
        bean(
            "org.apache.camel:context=my-camel-context,type=routes,name=\"my-route-name\"",
            "LastExchangeFailureTimestamp",
            BeanValue::number(1.573285945111E9),
        ),
        bean(
            "kafka.consumer:type=consumer-node-metrics,client-id=my-app-consumer,node-id=node-1",
            "request-rate",
            BeanValue::number(2.0),
        ),
        bean(
            "kafka.consumer:type=consumer-node-metrics,client-id=my-app-consumer,node-id=node-1",
            "request-total",
            BeanValue::number(123.0),
        ),
        composite("ActiveSessions", 2),
        composite("Bootstraps", 4),
        composite("BootstrapsDeferred", 6),
    ]
}

fn samples(yaml: &str) -> Vec<Sample> {
    let module = Module::from_yaml("test", yaml).unwrap();
    test_beans()
        .iter()
        .filter_map(|b| {
            let leaf = Leaf {
                domain: b.domain,
                properties: &b.properties,
                attr_keys: &b.attr_keys,
                attr_name: &b.attr,
                description: Some(DESC),
                value: &b.value,
                attribute_labels: &[],
            };
            match module.record(&leaf) {
                Outcome::Sample(s) => Some(s),
                _ => None,
            }
        })
        .collect()
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            let mut have: Vec<(&str, &str)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let mut want = labels.to_vec();
            have.sort();
            want.sort();
            s.name == name && have == want
        })
        .map(|s| s.value)
}

const HADOOP: &str =
    "^hadoop<service=DataNode, name=DataNodeActivity-ams-hdd001-50010><>replaceBlockOpMinTime:";

#[test]
fn name_is_replaced_on_match() {
    let s = samples(&format!("rules:\n- pattern: \"{HADOOP}\"\n  name: foo"));
    assert_eq!(value(&s, "foo", &[]), Some(200.0));
}

#[test]
fn snake_case_attribute_names() {
    let s = samples(
        "rules:\n- pattern: \"^hadoop<service=DataNode, name=DataNodeActivity-ams-hdd001-50010><>replace_block_op_min_time:\"\n  name: foo\n  attrNameSnakeCase: true",
    );
    assert_eq!(value(&s, "foo", &[]), Some(200.0));
}

#[test]
fn labels_are_set_and_empty_ones_left_out() {
    let s = samples(&format!(
        "rules:\n- pattern: \"{HADOOP}\"\n  name: foo\n  labels:\n    l: v"
    ));
    assert_eq!(value(&s, "foo", &[("l", "v")]), Some(200.0));
    let s = samples(&format!(
        "rules:\n- pattern: \"{HADOOP}\"\n  name: foo\n  labels:\n    '': v\n    l: ''"
    ));
    assert_eq!(value(&s, "foo", &[]), Some(200.0));
}

#[test]
fn lowercase_output_name_and_label_names() {
    let s = samples(&format!(
        "lowercaseOutputName: true\nrules:\n- pattern: \"{HADOOP}\"\n  name: Foo"
    ));
    assert_eq!(value(&s, "foo", &[]), Some(200.0));
    let s = samples(&format!(
        "lowercaseOutputLabelNames: true\nrules:\n- pattern: \"{HADOOP}\"\n  name: Foo\n  labels:\n    ABC: DEF"
    ));
    assert_eq!(value(&s, "Foo", &[("abc", "DEF")]), Some(200.0));
}

#[test]
fn name_and_labels_from_the_pattern_sanitised() {
    let s = samples(
        "rules:\n- pattern: \"^hadoop<(service)=(DataNode), name=DataNodeActivity-ams-hdd001-50010><>(replaceBlockOpMinTime):\"\n  name: hadoop_$3\n  labels:\n    \"$1\": \"$2\"",
    );
    assert_eq!(
        value(
            &s,
            "hadoop_replaceBlockOpMinTime",
            &[("service", "DataNode")]
        ),
        Some(200.0)
    );
    let s = samples(
        "rules:\n- pattern: \"^(hadoop<service=DataNode, )name=DataNodeActivity-ams-hdd001-50010><>replaceBlockOpMinTime:\"\n  name: \"$1\"\n  labels:\n    \"$1\": \"$1\"",
    );
    assert_eq!(
        value(
            &s,
            "hadoop_service_DataNode_",
            &[("hadoop_service_DataNode_", "hadoop<service=DataNode, ")]
        ),
        Some(200.0)
    );
}

#[test]
fn an_empty_name_stops_at_that_rule() {
    let s = samples("rules:\n- pattern: \".*\"\n  name: ''\n- pattern: \".*\"\n  name: foo");
    assert!(value(&s, "foo", &[]).is_none());
}

#[test]
fn the_default_export() {
    let s = samples("---");
    assert_eq!(
        value(
            &s,
            "org_apache_cassandra_concurrent_CONSISTENCY_MANAGER_ActiveCount",
            &[]
        ),
        Some(100.0)
    );
    assert_eq!(
        value(
            &s,
            "org_apache_cassandra_metrics_Compaction_Value",
            &[("name", "CompletedTasks")]
        ),
        Some(f64::from(0.2f32))
    );
    assert_eq!(
        value(
            &s,
            "hadoop_DataNode_replaceBlockOpMinTime",
            &[("name", "DataNodeActivity-ams-hdd001-50010")]
        ),
        Some(200.0)
    );
    assert_eq!(value(&s, "boolean_Test_True", &[]), Some(1.0));
    assert_eq!(value(&s, "boolean_Test_False", &[]), Some(0.0));
    // Quotes kept in label values; the first property names the metric.
    assert_eq!(
        value(
            &s,
            "org_apache_camel_my_camel_context_LastExchangeFailureTimestamp",
            &[("type", "routes"), ("name", "\"my-route-name\"")]
        ),
        Some(1.573285945111E9)
    );
    // Strings are exported only through a rule's value.
    assert!(!s.iter().any(|x| x.name.contains("StateMetrics")));
    let lower = samples("lowercaseOutputName: true");
    assert!(value(&lower, "boolean_test_true", &[]).is_some());
}

#[test]
fn the_default_help_names_name_type_and_attribute() {
    let s = samples("---");
    let cassandra = s
        .iter()
        .find(|x| x.name == "org_apache_cassandra_metrics_Compaction_Value")
        .unwrap();
    assert_eq!(
        cassandra.help,
        "Attribute exposed for management org.apache.cassandra.metrics:name=CompletedTasks,type=Compaction,attribute=Value"
    );
    let boolean = s.iter().find(|x| x.name == "boolean_Test_True").unwrap();
    assert_eq!(
        boolean.help,
        "Attribute exposed for management boolean:name=null,type=null,attribute=True"
    );
}

/// jmx_exporter's case continues the quoted pattern at column 0, which
/// SnakeYAML takes and YAML 1.2 does not: here it is indented.
#[test]
fn tomcats_servlet_request_pattern() {
    let s = samples(
        "rules:\n- pattern: 'Catalina<j2eeType=Servlet, WebModule=//([-a-zA-Z0-9+&@#/%?=~_|!:.,;]*[-a-zA-Z0-9+&@#/%=~_|]),\n    name=([-a-zA-Z0-9+/$%~_-|!.]*), J2EEApplication=none, \n    J2EEServer=none><>RequestCount:'\n  name: tomcat_request_servlet_count\n  labels:\n    module: \"$1\"\n    servlet: \"$2\"\n  help: Tomcat servlet request count\n  type: COUNTER\n  attrNameSnakeCase: false",
    );
    let sample = s
        .iter()
        .find(|x| x.name == "tomcat_request_servlet_count")
        .unwrap();
    assert_eq!(sample.metric_type, MetricType::Counter);
    assert_eq!(sample.help, "Tomcat servlet request count");
    assert_eq!(
        value(
            &s,
            "tomcat_request_servlet_count",
            &[
                ("module", "localhost/host-manager"),
                ("servlet", "HTMLHostManager")
            ]
        ),
        Some(1.0)
    );
}

#[test]
fn values_from_the_rule() {
    // `value:` empty is "null": no number, no sample.
    assert!(value(
        &samples("rules:\n- pattern: \".*\"\n  name: foo\n  value:"),
        "foo",
        &[]
    )
    .is_none());
    // A group, read as a number.
    let s = samples("rules:\n- pattern: \"^hadoop<.+-500(10)>\"\n  name: foo\n  value: $1");
    assert_eq!(value(&s, "foo", &[]), Some(10.0));
    // Not a number: nothing.
    assert!(value(
        &samples("rules:\n- pattern: \".*\"\n  name: foo\n  value: a"),
        "foo",
        &[]
    )
    .is_none());
    // An enum's name matched, a constant value.
    let s = samples(
        "rules:\n- pattern: \"org.bean.enum<type=StateMetrics.*>State: RUNNING\"\n  name: bean_running\n  value: 1",
    );
    assert_eq!(value(&s, "bean_running", &[]), Some(1.0));
    // valueFactor scales it.
    let s = samples(&format!(
        "rules:\n- pattern: \"{HADOOP}\"\n  name: foo\n  valueFactor: 0.001"
    ));
    assert_eq!(value(&s, "foo", &[]), Some(0.2));
}

#[test]
fn camels_timestamp_with_labels_from_the_pattern() {
    let s = samples(
        "rules:\n- pattern: 'org.apache.camel<context=([^,]+), type=routes, name=\"([^\"]+)\"><>LastExchangeFailureTimestamp'\n  name: org.apache.camel.LastExchangeFailureTimestamp\n  help: Exchanges Last Failure Timestamps\n  type: UNTYPED\n  labels:\n    context: \"$1\"\n    route: \"$2\"\n    type: routes",
    );
    assert_eq!(
        value(
            &s,
            "org_apache_camel_LastExchangeFailureTimestamp",
            &[
                ("context", "my-camel-context"),
                ("route", "my-route-name"),
                ("type", "routes")
            ]
        ),
        Some(1.573285945111E9)
    );
}

#[test]
fn composite_data_with_snake_case_names() {
    let s = samples(
        "rules:\n- pattern: \"io.prometheus.jmx.test<name=PerformanceMetricsMBean><PerformanceMetrics>.*\"\n  attrNameSnakeCase: true",
    );
    for (name, v) in [
        ("active_sessions", 2.0),
        ("bootstraps", 4.0),
        ("bootstraps_deferred", 6.0),
    ] {
        assert_eq!(
            value(
                &s,
                &format!(
                    "io_prometheus_jmx_test_PerformanceMetricsMBean_PerformanceMetrics_{name}"
                ),
                &[]
            ),
            Some(v),
            "{name}"
        );
    }
}

#[test]
fn counter_type_inferred_from_the_name_and_reserved_suffixes_dropped() {
    let rules = "rules:\n- pattern: 'kafka.consumer<type=.+, client-id=(.+), node-id=(.+)><>(.+):'\n  name: kafka_consumer_$3\n  labels:\n    client_id: $1\n    node_id: $2";
    for (infer, total_type) in [(true, MetricType::Counter), (false, MetricType::Unknown)] {
        let s = samples(&format!("inferCounterTypeFromName: {infer}\n{rules}"));
        let labels = [("client_id", "my-app-consumer"), ("node_id", "node-1")];
        let find = |name: &str| {
            s.iter()
                .find(|x| x.name == name)
                .unwrap_or_else(|| panic!("{name} in {s:#?}"))
        };
        // `request-total`: the `_total` suffix is taken off the name.
        assert_eq!(find("kafka_consumer_request").metric_type, total_type);
        assert_eq!(value(&s, "kafka_consumer_request", &labels), Some(123.0));
        assert_eq!(
            find("kafka_consumer_request_rate").metric_type,
            MetricType::Unknown
        );
    }
}

#[test]
fn names_are_made_safe_as_jmx_exporter_makes_them() {
    assert_eq!(safe_name("a.b-c"), "a_b_c");
    assert_eq!(safe_name("a__b..c"), "a_b_c");
    assert_eq!(safe_name("1abc"), "_1abc");
    assert_eq!(safe_name("ns:metric"), "ns:metric");
    assert_eq!(safe_name("héllo"), "h_llo");
    assert_eq!(
        snake_and_lower_case("replaceBlockOpMinTime"),
        "replace_block_op_min_time"
    );
    assert_eq!(snake_and_lower_case("HTTPRequests"), "httprequests");
    assert_eq!(snake_and_lower_case("A_Bc"), "a_bc");
    assert_eq!(strip_reserved_suffixes("x_info_total"), "x");
    assert_eq!(strip_reserved_suffixes("_total"), "total");
    assert_eq!(strip_reserved_suffixes("totals"), "totals");
}

#[test]
fn a_label_named_twice_is_reported() {
    let module = Module::from_yaml(
        "m",
        "rules:\n- pattern: '(.*)'\n  name: x\n  labels:\n    a: '1'\n    A: '2'\nlowercaseOutputLabelNames: true",
    )
    .unwrap();
    let v = int(1);
    let leaf = Leaf {
        domain: "d",
        properties: &[("k".into(), "v".into())],
        attr_keys: &[],
        attr_name: "a",
        description: None,
        value: &v,
        attribute_labels: &[],
    };
    assert_eq!(module.record(&leaf), Outcome::DuplicateLabel("a".into()));
}
