//! The format's corners as upstream's own tests pin them
//! (`RuleParserTest`, `UnitConverterTest`, `StateMappingTest`,
//! `MetricAggregationTest`, `AttributeExtractorTest` in
//! ../shared/otel-jmx/tests), on MBeans given as an agent's `list` and
//! read answers would give them.

use serde_json::{json, Value};

use super::file::read;
use super::plan::Plan;
use super::units::Conversion;
use super::*;
use crate::exporter::limits::Limits;
use crate::exporter::rules::Sample;
use crate::exporter::scrape::Read;

/// A module of built-in files, as `otel_rules` names them.
fn load(names: &[&str], included: &[&str], excluded: &[&str]) -> Result<Module, Vec<String>> {
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                built_in(n).unwrap_or_else(|| panic!("{n}")).to_string(),
            )
        })
        .collect();
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Module::from_files("m", &files, &strings(included), &strings(excluded))
}

fn rules(yaml: &str) -> Vec<Rule> {
    read("test.yaml", yaml)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .0
}

fn refused(yaml: &str) -> String {
    match read("test.yaml", yaml) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e) => e.join("\n"),
    }
}

fn module(yaml: &str) -> Module {
    Module {
        name: "m".into(),
        rules: rules(yaml),
        ignored: Vec::new(),
    }
}

/// The type Jolokia's `list` gives a value like this one.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_i64() => "long",
        Value::Number(_) => "double",
        Value::Bool(_) => "boolean",
        Value::String(_) => "java.lang.String",
        _ => "javax.management.openmbean.CompositeData",
    }
}

/// The points a module makes of these MBeans (name, attribute values),
/// through the plan's own reads and assembly, as a scrape makes them.
fn scrape(module: &Module, beans: &[(&str, Value)]) -> crate::exporter::scrape::Scraped {
    let mut list = serde_json::Map::new();
    for (name, values) in beans {
        let (domain, keys) = name.split_once(':').unwrap();
        let attr: serde_json::Map<String, Value> = values
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    json!({"type": type_of(v), "desc": format!("{k} of the bean"), "rw": false}),
                )
            })
            .collect();
        list.entry(domain.to_string())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .unwrap()
            .insert(keys.to_string(), json!({"attr": attr, "desc": "test"}));
    }
    let plan = Plan::from_list(module, &Value::Object(list), 10_000);
    let answers: Vec<(Read, Value)> = plan
        .reads
        .reads()
        .into_iter()
        .map(|(read, _)| {
            let Read::Attributes(b) = read else {
                panic!("{read:?}")
            };
            let bean = &plan.reads.beans[b];
            let all = &beans.iter().find(|(n, _)| *n == bean.name).unwrap().1;
            let value: serde_json::Map<String, Value> = bean
                .attributes
                .iter()
                .map(|a| (a.name.clone(), all[&a.name].clone()))
                .collect();
            (read, json!({"status": 200, "value": value}))
        })
        .collect();
    let answers = plan.reads.assemble(answers);
    plan.apply(module, &answers, &Limits::default())
}

fn points(module: &Module, beans: &[(&str, Value)]) -> Vec<Sample> {
    let scraped = scrape(module, beans);
    assert_eq!(scraped.exceeded, None);
    scraped.samples
}

fn labels(s: &Sample) -> Vec<(&str, &str)> {
    let mut l: Vec<(&str, &str)> = s
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    l.sort();
    l
}

fn metric(s: &Sample) -> &Metric {
    &s.otel.as_ref().expect("an OpenTelemetry point").metric
}

// UnitConverterTest

#[test]
fn predefined_conversions_give_upstreams_values() {
    for (value, unit, expected) in [
        (1_000_000_000.0, "ns", 1.0),
        (25.0, "ns", 0.000000025),
        (96614101945.0, "ns", 96.614101945),
        (0.0, "ns", 0.0),
        (1_000_000.0, "us", 1.0),
        (25.0, "us", 0.000025),
        (96614101945.0, "us", 96614.101945),
        (1000.0, "ms", 1.0),
        (25.0, "ms", 0.025),
        (9661410.0, "ms", 9661.41),
        (0.0, "ms", 0.0),
    ] {
        let c = Conversion::between(Some(unit), Some("s")).unwrap().unwrap();
        assert_eq!(c.apply(value), expected, "{value} {unit}");
    }
    for (value, expected) in [(100.0, 1.0), (99.0, 0.99), (1.0, 0.01), (0.0, 0.0)] {
        let c = Conversion::between(Some("%"), Some("1")).unwrap().unwrap();
        assert_eq!(c.apply(value), expected);
    }
}

#[test]
fn unknown_conversions_are_refused_in_upstreams_words_and_unset_units_skip() {
    for (from, to) in [("--", "--"), ("ms", "non-existing"), ("non-existing", "s")] {
        let e = Conversion::between(Some(from), Some(to)).unwrap_err();
        assert!(
            e.starts_with(&format!("Unsupported conversion from [{from}] to [{to}]")),
            "{e}"
        );
    }
    for (from, to) in [
        (None, Some("s")),
        (Some(""), Some("s")),
        (Some("1"), Some("")),
    ] {
        assert_eq!(Conversion::between(from, to).unwrap(), None);
    }
    // In a file: refused when it is read, with the rule and its line.
    let e = refused("rules:\n  - bean: a:type=b\n    mapping:\n      T:\n        unit: s\n        sourceUnit: h\n");
    assert!(
        e.contains("rule 1 (line 2)") && e.contains("mapping T (line 5)"),
        "{e}"
    );
    assert!(e.contains("Unsupported conversion from [h] to [s]"), "{e}");
}

// StateMappingTest

fn state_of(yaml_map: &str) -> Result<State, String> {
    let yaml = format!(
        "rules:\n  - bean: a:type=b\n    mapping:\n      S:\n        type: state\n        metric: s\n        metricAttribute:\n          st:\n{yaml_map}"
    );
    match read("t", &yaml) {
        Ok((r, _)) => Ok(r[0].extractors[0].state.clone().unwrap()),
        Err(e) => Err(e.join("\n")),
    }
}

#[test]
fn state_mappings_need_exactly_one_default_and_map_each_value_once() {
    let only = state_of("            default: '*'\n").unwrap();
    assert_eq!(only.default, "default");
    assert_eq!(only.keys, ["default"]);
    assert_eq!(only.key_of("other"), "default");
    assert!(state_of("            a: '*'\n            b: '*'\n")
        .unwrap_err()
        .contains("one default"));
    assert!(state_of("            state: value\n")
        .unwrap_err()
        .contains("no default"));
    let e =
        state_of("            d: '*'\n            s1: value\n            s2: value\n").unwrap_err();
    assert!(e.contains("mapped to two states"), "{e}");
    let m = state_of(
        "            unknown: '*'\n            ok: [value1, value1bis]\n            ko: value2\n",
    )
    .unwrap();
    assert_eq!(m.keys.len(), 3);
    assert_eq!(m.default, "unknown");
    assert_eq!(m.key_of("value1"), "ok");
    assert_eq!(m.key_of("value1bis"), "ok");
    assert_eq!(m.key_of("value2"), "ko");
    assert_eq!(m.key_of("other"), "unknown");
}

// RuleParserTest

const CONF2: &str = "---
rules:
  - beans:
      - OBJECT:NAME1=*
      - OBJECT:NAME2=*
    metricAttribute:
      LABEL_KEY1: param(PARAMETER)
      LABEL_KEY2: beanattr(ATTRIBUTE)
    prefix: METRIC_NAME_PREFIX
    mapping:
      ATTRIBUTE1:
        metric: METRIC_NAME1
        type: Gauge
        desc: DESCRIPTION1
        unit: UNIT1
        metricAttribute:
          LABEL_KEY3: const(CONSTANT)
      ATTRIBUTE2:
        metric: METRIC_NAME2
        desc: DESCRIPTION2
        sourceUnit: ms
        unit: s
      ATTRIBUTE3:
      ATTRIBUTE4:
  - beans:
      - OBJECT:NAME3=*
    mapping:
      ATTRIBUTE3:
        metric: METRIC_NAME3
        unit: ''
";

#[test]
fn a_rule_gives_each_mapping_its_prefix_attributes_and_defaults() {
    // Upstream's CONF2, but ATTRIBUTE2's units: its SOURCE_UNIT2 to UNIT2
    // has no conversion, which upstream finds only as values come.
    let r = rules(CONF2);
    assert_eq!(r.len(), 2);
    let names: Vec<&str> = r[0].beans.iter().map(|b| b.as_str()).collect();
    assert_eq!(names, ["OBJECT:NAME1=*", "OBJECT:NAME2=*"]);
    let e = &r[0].extractors;
    assert_eq!(e.len(), 4);
    assert_eq!(e[0].metric.name, "METRIC_NAME_PREFIXMETRIC_NAME1");
    assert_eq!(e[0].metric.instrument, Instrument::Gauge);
    assert_eq!(e[0].metric.unit, "UNIT1");
    assert_eq!(e[0].metric.description.as_deref(), Some("DESCRIPTION1"));
    let attrs: Vec<(&str, &Source)> = e[0]
        .attributes
        .iter()
        .map(|a| (a.name.as_str(), &a.source))
        .collect();
    assert_eq!(
        attrs,
        [
            ("LABEL_KEY1", &Source::Param("PARAMETER".into())),
            (
                "LABEL_KEY2",
                &Source::BeanAttribute(vec!["ATTRIBUTE".into()])
            ),
            ("LABEL_KEY3", &Source::Constant("CONSTANT".into())),
        ]
    );
    assert_eq!(e[1].metric.name, "METRIC_NAME_PREFIXMETRIC_NAME2");
    assert!(e[1].convert.is_some());
    // A mapping with nothing under it: the attribute's name, the rule's
    // type (gauge) and unit (none).
    assert_eq!(e[2].metric.name, "METRIC_NAME_PREFIXATTRIBUTE3");
    assert_eq!(e[2].metric.instrument, Instrument::Gauge);
    assert_eq!(e[2].attributes.len(), 2);
    assert_eq!(r[1].extractors[0].metric.name, "METRIC_NAME3");
    assert_eq!(r[1].extractors[0].metric.unit, "");
}

#[test]
fn rule_level_type_units_and_drop_negative_values_are_each_mappings_default() {
    // CONF4, its units made ones that convert.
    let r = rules(
        "rules:
  - bean: my-test:type=4
    metricAttribute:
      LABEL_KEY1: param(PARAMETER)
    prefix: PREFIX.
    type: upDownCounter
    sourceUnit: ms
    unit: s
    dropNegativeValues: true
    mapping:
      A.b:
        metric: METRIC_NAME1
        type: counter
        desc: DESCRIPTION1
        sourceUnit: '%'
        unit: '1'
      ATTRIBUTE2:
        metric: METRIC_NAME2
        desc: DESCRIPTION2
        unit: s
        dropNegativeValues: false
      ATTRIBUTE3:
",
    );
    let e = &r[0].extractors;
    assert_eq!(e[0].path, ["A", "b"]);
    assert_eq!(e[0].metric.name, "PREFIX.METRIC_NAME1");
    assert_eq!(e[0].metric.instrument, Instrument::Counter);
    assert_eq!(
        e[0].convert,
        Conversion::between(Some("%"), Some("1")).unwrap()
    );
    assert!(e[0].drop_negative);
    assert_eq!(e[1].metric.instrument, Instrument::UpDownCounter);
    assert_eq!(
        e[1].convert,
        Conversion::between(Some("ms"), Some("s")).unwrap()
    );
    assert!(!e[1].drop_negative);
    assert_eq!(e[2].metric.name, "PREFIX.ATTRIBUTE3");
    assert_eq!(e[2].metric.unit, "s");
    assert_eq!(e[2].metric.instrument, Instrument::UpDownCounter);
}

#[test]
fn a_mappings_own_attributes_override_and_join_the_rules() {
    // CONF6 and CONF7.
    let six = rules("rules:\n  - bean: my-test:type=6\n    unit: ''\n    metricAttribute:\n      key1: const(value1)\n    mapping:\n      ATTRIBUTE:\n        metricAttribute:\n          key1: const(value2)\n");
    assert_eq!(
        six[0].extractors[0].attributes,
        [MetricAttribute {
            name: "key1".into(),
            source: Source::Constant("value2".into())
        }]
    );
    let seven = rules("rules:\n  - bean: my-test:type=7\n    unit: ''\n    metricAttribute:\n      key1: const(value1)\n    mapping:\n      ATTRIBUTE:\n        metricAttribute:\n          key2: const(value2)\n");
    let names: Vec<&str> = seven[0].extractors[0]
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["key1", "key2"]);
}

#[test]
fn an_escaped_dot_is_part_of_the_attribute_name() {
    // CONF8.
    let r = rules(
        "rules:\n  - bean: my-test:type=8\n    unit: UNIT8\n    mapping:\n      Attr.with\\.dot:\n",
    );
    let e = &r[0].extractors[0];
    assert_eq!(e.path, ["Attr", "with.dot"]);
    assert_eq!(e.metric.name, "Attr.with.dot");
    assert_eq!(e.metric.unit, "UNIT8");
}

#[test]
fn a_state_metric_is_an_up_down_counter_of_unit_one_per_state() {
    // CONF9, then its values as upstream's mock gives them.
    let m = module(
        "rules:
  - bean: my-test:type=9
    mapping:
      jmxStateAttribute:
        type: state
        metric: state_metric
        metricAttribute:
          state_attribute:
            ok: STARTED
            failed: [STOPPED,FAILED]
            degraded: '*'
",
    );
    let e = &m.rules[0].extractors[0];
    assert_eq!(e.metric.instrument, Instrument::UpDownCounter);
    assert_eq!(e.metric.unit, "1");
    let got = points(
        &m,
        &[("my-test:type=9", json!({"jmxStateAttribute": "STOPPED"}))],
    );
    let mut by_state: Vec<(String, f64)> = got
        .iter()
        .map(|s| (s.labels[0].1.clone(), s.value))
        .collect();
    by_state.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        by_state,
        [
            ("degraded".into(), 0.0),
            ("failed".into(), 1.0),
            ("ok".into(), 0.0)
        ]
    );
    assert!(got
        .iter()
        .all(|s| s.name == "state_metric" && s.otel.as_ref().unwrap().integer));
    // A value no key names: the default's.
    let other = points(
        &m,
        &[("my-test:type=9", json!({"jmxStateAttribute": "PAUSED"}))],
    );
    let on: Vec<&str> = other
        .iter()
        .filter(|s| s.value == 1.0)
        .map(|s| s.labels[0].1.as_str())
        .collect();
    assert_eq!(on, ["degraded"]);
}

#[test]
fn lowercase_wraps_each_source() {
    // CONF10.
    let m = module(
        "rules:
  - bean: my-test:type=10_Hello
    mapping:
      jmxAttribute:
        type: counter
        unit: ''
        metric: my_metric
        metricAttribute:
          to_lower_const: lowercase(const(Hello))
          to_lower_attribute: lowercase(beanattr(beanAttribute))
          to_lower_param: lowercase(param(type))
",
    );
    let got = points(
        &m,
        &[(
            "my-test:type=10_Hello",
            json!({"jmxAttribute": 3, "beanAttribute": "MiXeD"}),
        )],
    );
    assert_eq!(
        labels(&got[0]),
        [
            ("to_lower_attribute", "mixed"),
            ("to_lower_const", "hello"),
            ("to_lower_param", "10_hello")
        ]
    );
}

#[test]
fn an_empty_file_has_no_rules() {
    for text in ["---\n", "", "# nothing\n", "rules:\n"] {
        assert!(rules(text).is_empty(), "{text:?}");
    }
}

#[test]
fn drop_negative_values_leaves_negatives_out_and_keeps_the_rest() {
    // CONF11, for -1, 0 and 1.
    let m = module(
        "rules:
  - bean: my-test:type=11_Hello
    type: counter
    unit: '{item}'
    mapping:
      negativeDropped:
        dropNegativeValues: true
        metric: negative_drop
      negativeKept:
        dropNegativeValues: false
        metric: negative_keep
",
    );
    for v in [-1, 0, 1] {
        let got = points(
            &m,
            &[(
                "my-test:type=11_Hello",
                json!({"negativeDropped": v, "negativeKept": v}),
            )],
        );
        let names: Vec<&str> = got.iter().map(|s| s.name.as_str()).collect();
        if v < 0 {
            assert_eq!(names, ["negative_keep"]);
        } else {
            assert_eq!(names, ["negative_drop", "negative_keep"]);
        }
        assert!(got.iter().all(|s| s.value == f64::from(v)));
    }
}

#[test]
fn bad_rules_are_refused_with_upstreams_reason_the_rule_and_its_line() {
    for (yaml, reason) in [
        ("rules:\n  - mapping:\n      A:\n        metric: M\n", "No ObjectName specified"),
        ("rules:\n  - bean: BAD_OBJECT_NAME\n    mapping:\n      A:\n        metric: M\n        unit: '1'\n", "not a valid JMX object name"),
        ("rules:\n  - bean: domain:type=6\n    mapping:\n", "No MBean attributes specified"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      .used:\n        metric: M\n", "Invalid attribute name"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metricAttribute:\n          LABEL: something\n        metric: M\n", "Invalid metric attribute expression"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        type: gage\n        metric: M\n", "Invalid metric type"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metricAttribute:\n          LABEL: beanattr(.used)\n        metric: M\n", "Invalid attribute name"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metricAttribute:\n          LABEL: beanattr( )\n        metric: M\n", "Invalid metric attribute expression"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metricAttribute:\n          LABEL: param( )\n        metric: M\n", "Invalid metric attribute"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        type: gauge\n        metric: M\n", "Metric unit is required"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        type: state\n        metric: M\n", "no state mapping"),
        ("rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metric: 9lives\n        unit: '1'\n", "not an OpenTelemetry instrument name"),
    ] {
        let e = refused(yaml);
        assert!(e.contains(reason), "{yaml}\n{e}");
        assert!(e.contains("test.yaml: rule 1 (line 2)"), "{e}");
    }
    // Unknown keys: upstream's "Unrecognized key(s) found", here the
    // YAML reader's "unknown field", with its line.
    for yaml in [
        "rules:\n  - bean: domain:name=you\n    mapping:\n      A:\n        metrics: M\n",
        "rules:\n  - bean: domain:name=you\n    mapping:\n      metricAttribute:\n        key: const(value)\n      A:\n        metric: M\n",
    ] {
        let e = refused(yaml);
        assert!(e.contains("unknown field") || e.contains("Unrecognized"), "{e}");
        assert!(e.contains("line"), "{e}");
    }
    // Every problem of a file at once.
    let two = refused("rules:\n  - bean: a:b=c\n    mapping:\n      A:\n        type: gage\n  - bean: a:b=d\n    mapping:\n      B:\n        type: counter\n");
    assert!(two.contains("rule 1") && two.contains("rule 2"), "{two}");
    assert!(refused("this: [is not\n").contains("test.yaml"));
    assert!(refused("- just\n- a list\n").contains("test.yaml"));
}

// MetricAggregationTest: MBeans otel.jmx.test:type=Hello,a=…,b=… with
// `Value`, one metric per type, `b` as an attribute or not.

fn hello_module(metric_type: &str, attributes: &str) -> Module {
    module(&format!(
        "rules:\n  - bean: otel.jmx.test:type=Hello,*\n    mapping:\n      Value:\n        metric: test.metric\n        type: {metric_type}\n        unit: '1'\n        desc: description\n{attributes}"
    ))
}

#[test]
fn one_mbean_is_one_point_without_attributes() {
    for t in ["counter", "updowncounter", "gauge"] {
        let got = points(
            &hello_module(t, ""),
            &[("otel.jmx.test:type=Hello", json!({"Value": 42}))],
        );
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].value, 42.0);
        assert!(got[0].labels.is_empty());
        assert_eq!(metric(&got[0]).description.as_deref(), Some("description"));
        assert_eq!(metric(&got[0]).unit, "1");
    }
}

#[test]
fn keys_no_attribute_names_are_aggregated_sum_for_sums_last_for_gauges() {
    let two = [
        ("otel.jmx.test:type=Hello,a=value1", json!({"Value": 42})),
        ("otel.jmx.test:type=Hello,a=value2", json!({"Value": 37})),
    ];
    for (t, expected) in [("counter", 79.0), ("updowncounter", 79.0), ("gauge", 37.0)] {
        let got = points(&hello_module(t, ""), &two);
        assert_eq!(got.len(), 1, "{t}");
        assert_eq!(got[0].value, expected, "{t}");
        assert!(got[0].labels.is_empty());
    }
    let four = [
        ("otel.jmx.test:type=Hello,a=1,b=x", json!({"Value": 1})),
        ("otel.jmx.test:type=Hello,a=2,b=y", json!({"Value": 2})),
        ("otel.jmx.test:type=Hello,a=3,b=x", json!({"Value": 3})),
        ("otel.jmx.test:type=Hello,a=4,b=y", json!({"Value": 4})),
    ];
    for t in ["counter", "updowncounter"] {
        assert_eq!(points(&hello_module(t, ""), &four)[0].value, 10.0);
    }
    // Upstream's gauge takes whichever its MBean server's set gave last;
    // here the agent's list order decides.
    assert_eq!(points(&hello_module("gauge", ""), &four)[0].value, 4.0);
    let by_b = "        metricAttribute:\n          test.metric.param: param(b)\n";
    for (t, x, y) in [
        ("counter", 4.0, 6.0),
        ("updowncounter", 4.0, 6.0),
        ("gauge", 3.0, 4.0),
    ] {
        let got = points(&hello_module(t, by_b), &four);
        let values: Vec<(&str, f64)> = got
            .iter()
            .map(|s| (s.labels[0].1.as_str(), s.value))
            .collect();
        assert_eq!(values, [("x", x), ("y", y)], "{t}");
    }
}

// AttributeExtractorTest

#[test]
fn integers_stay_integers_doubles_doubles_and_text_is_a_counted_drop() {
    let m = module(
        "rules:\n  - bean: otel.jmx.test:type=Test1\n    unit: '1'\n    metricAttribute:\n      bool: beanattr(BooleanAttribute)\n      enum: beanattr(EnumAttribute)\n    mapping:\n      IntAttribute:\n      LongAttribute:\n      DoubleAttribute:\n      StringAttribute:\n      BooleanAttribute:\n",
    );
    let scraped = scrape(
        &m,
        &[(
            "otel.jmx.test:type=Test1",
            json!({"IntAttribute": 12, "LongAttribute": 13, "DoubleAttribute": 15.0,
                   "StringAttribute": "", "BooleanAttribute": true, "EnumAttribute": "ENUM_VALUE"}),
        )],
    );
    let got: Vec<(&str, f64, bool)> = scraped
        .samples
        .iter()
        .map(|s| (s.name.as_str(), s.value, s.otel.as_ref().unwrap().integer))
        .collect();
    assert_eq!(
        got,
        [
            ("IntAttribute", 12.0, true),
            ("LongAttribute", 13.0, true),
            ("DoubleAttribute", 15.0, false)
        ]
    );
    assert_eq!(scraped.not_numeric, 2);
    assert_eq!(
        labels(&scraped.samples[0]),
        [("bool", "true"), ("enum", "ENUM_VALUE")]
    );
    // A description from the MBean where the rule gave none.
    assert_eq!(
        metric(&scraped.samples[0]).description.as_deref(),
        Some("IntAttribute of the bean")
    );
}

#[test]
fn composite_items_and_converted_values() {
    let m = module(
        "rules:\n  - bean: java.lang:type=Memory\n    mapping:\n      HeapMemoryUsage.used:\n        metric: heap\n        type: updowncounter\n        unit: By\n      Uptime:\n        metric: up\n        sourceUnit: ms\n        unit: s\n        type: counter\n",
    );
    let got = points(
        &m,
        &[(
            "java.lang:type=Memory",
            json!({"HeapMemoryUsage": {"used": 1024, "max": 4096}, "Uptime": 2500}),
        )],
    );
    let values: Vec<(&str, f64, bool)> = got
        .iter()
        .map(|s| (s.name.as_str(), s.value, s.otel.as_ref().unwrap().integer))
        .collect();
    assert_eq!(values, [("heap", 1024.0, true), ("up", 2.5, false)]);
}

#[test]
fn a_denied_or_failed_attribute_costs_only_itself() {
    let m = module("rules:\n  - bean: a:type=b\n    unit: '1'\n    mapping:\n      A:\n      B:\n");
    let plan = Plan::from_list(
        &m,
        &json!({"a": {"type=b": {"attr": {"A": {"type": "long"}, "B": {"type": "long"}}}}}),
        100,
    );
    let answers = vec![(
        Read::Attributes(0),
        json!({"status": 200, "value": {"A": 1, "B": {".error": true, "error_type": "java.lang.SecurityException", "error": "Reading attribute B is forbidden"}}}),
    )];
    let s = plan.apply(&m, &answers, &Limits::default());
    assert_eq!(s.samples.len(), 1);
    assert_eq!(s.denied, 1);
}

#[test]
fn a_pattern_matching_more_mbeans_than_samples_allowed_fails_without_reading() {
    // 100,001 MBeans, one over the default sample_limit: each would give
    // a sample at least, so the scrape fails before a read is sent.
    let m = module("rules:\n  - bean: a:type=*\n    unit: '1'\n    mapping:\n      A:\n");
    let mut names = serde_json::Map::new();
    for i in 0..100_001 {
        names.insert(
            format!("type={i}"),
            json!({"attr": {"A": {"type": "long"}}}),
        );
    }
    let limits = Limits::default();
    let plan = Plan::from_list(&m, &json!({ "a": names }), limits.sample_limit);
    assert_eq!(plan.reads.beans.len(), 100_000);
    let s = plan.apply(&m, &[], &limits);
    assert_eq!(
        s.exceeded,
        Some(crate::exporter::limits::Exceeded::Samples(100_000))
    );
    assert!(s.samples.is_empty());
}

#[test]
fn every_built_in_file_loads_and_names_its_metrics_as_its_docs() {
    for (name, _) in BUILT_IN {
        let m = load(&[name], &[], &[]).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(!m.rules.is_empty(), "{name}");
    }
    let cassandra = load(&["experimental-cassandra"], &[], &[]).unwrap();
    assert!(cassandra
        .ignored
        .iter()
        .any(|i| i.contains("handler cassandra-compaction-progress")));
    let tomcat = load(&["tomcat"], &[], &[]).unwrap();
    let names: Vec<&str> = tomcat
        .rules
        .iter()
        .flat_map(|r| &r.extractors)
        .map(|e| e.metric.name.as_str())
        .collect();
    assert!(names.contains(&"tomcat.request.count") && names.contains(&"tomcat.network.io"));
    // YAML anchors: bytesSent's metric is bytesReceived's.
    let io: Vec<&Extractor> = tomcat.rules[0]
        .extractors
        .iter()
        .filter(|e| e.metric.name == "tomcat.network.io")
        .collect();
    assert_eq!(io.len(), 2);
    assert_eq!(io[0].metric, io[1].metric);
}

#[test]
fn included_and_excluded_pick_metrics_by_name() {
    let m = load(
        &["jvm"],
        &["jvm.memory.*", "jvm.thread.count"],
        &["jvm.memory.init"],
    )
    .unwrap();
    let mut names: Vec<&str> = m
        .rules
        .iter()
        .flat_map(|r| &r.extractors)
        .map(|e| e.metric.name.as_str())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "jvm.memory.committed",
            "jvm.memory.limit",
            "jvm.memory.used",
            "jvm.memory.used_after_last_gc",
            "jvm.thread.count"
        ]
    );
    let unused = load(&["jvm"], &["no.such.metric"], &[]).unwrap();
    assert!(unused.ignored.iter().any(|i| i.contains("no.such.metric")));
    let misspelt = not_a_system("tomcta").unwrap();
    assert!(
        misspelt.contains("no built-in system") && misspelt.contains("tomcat"),
        "{misspelt}"
    );
    for fine in [
        "tomcat",
        "experimental-kafka-broker",
        "rules/mine.yaml",
        "/etc/x.yml",
    ] {
        assert_eq!(not_a_system(fine), None, "{fine}");
    }
}

#[test]
fn prometheus_names_follow_opentelemetrys_translation() {
    let name = |n: &str, unit: &str, instrument| {
        super::prometheus::metric_name(&Metric {
            name: n.into(),
            description: None,
            unit: unit.into(),
            instrument,
        })
    };
    use Instrument::*;
    assert_eq!(
        name("tomcat.request.count", "{request}", Counter),
        "tomcat_request_count_total"
    );
    assert_eq!(
        name("tomcat.request.duration.sum", "s", Counter),
        "tomcat_request_duration_sum_seconds_total"
    );
    assert_eq!(
        name("jvm.memory.used", "By", UpDownCounter),
        "jvm_memory_used_bytes"
    );
    assert_eq!(
        name("jvm.cpu.recent_utilization", "1", Gauge),
        "jvm_cpu_recent_utilization_ratio"
    );
    assert_eq!(
        name("tomcat.connector.status", "1", UpDownCounter),
        "tomcat_connector_status"
    );
    assert_eq!(name("rate", "{request}/s", Gauge), "rate_per_second");
    assert_eq!(name("x.total", "1", Counter), "x_total");
    assert_eq!(
        super::prometheus::label_name("tomcat.request.processor.name"),
        "tomcat_request_processor_name"
    );
}
