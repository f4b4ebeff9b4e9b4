//! Plans from `list` answers as the agents give them, and samples from
//! their read answers: jmx_exporter's include and exclude cases.

use serde_json::{json, Value};

use super::*;
use crate::exporter::limits::Limits;

/// A `list` answer's value: three MBeans of jmx_exporter's tests and the
/// JVM's Runtime and OperatingSystem MBeans.
fn list() -> Value {
    let attr =
        |t: &str| json!({"type": t, "desc": "Attribute exposed for management", "rw": false});
    json!({
        "java.lang": {
            "type=OperatingSystem": {"attr": {"ProcessCpuTime": attr("long")}},
            "type=Runtime": {"attr": {"Uptime": attr("long"), "SystemProperties": attr("javax.management.openmbean.TabularData"),
                                      "ClassPath": attr("java.lang.String")}}
        },
        "org.apache.cassandra.concurrent": {
            "type=CONSISTENCY-MANAGER": {"attr": {"ActiveCount": attr("int")}}
        },
        "org.apache.cassandra.metrics": {
            "type=Compaction,name=CompletedTasks": {"attr": {"Value": attr("float")}}
        },
        "hadoop": {
            "service=DataNode,name=DataNodeActivity-ams-hdd001-50010": {"attr": {
                "replaceBlockOpMinTime": attr("int"),
                "Started": attr("java.util.Date"),
                "Scores": attr("[I"),
                "Hidden": {"type": "int", "r": false, "rw": false}
            }}
        }
    })
}

fn planned(yaml: &str) -> Vec<String> {
    let module = Module::from_yaml("m", yaml).unwrap();
    Plan::from_list(&module, &list())
        .beans
        .iter()
        .flat_map(|b| {
            b.attributes
                .iter()
                .chain(&b.dates)
                .map(move |a| format!("{}:{}", b.name, a.name))
        })
        .collect()
}

#[test]
fn every_readable_attribute_by_default_but_the_costly_ones() {
    let all = planned("{}");
    assert!(all.contains(&"java.lang:type=OperatingSystem:ProcessCpuTime".to_string()));
    assert!(all.contains(&"java.lang:type=Runtime:Uptime".to_string()));
    assert!(!all
        .iter()
        .any(|a| a.ends_with("SystemProperties") || a.ends_with("ClassPath")));
    assert!(!all.iter().any(|a| a.ends_with(":Hidden")), "not readable");
    assert!(
        !all.iter().any(|a| a.ends_with(":Scores")),
        "arrays are never exported"
    );
    assert!(all.iter().any(|a| a.ends_with(":Started")));
}

#[test]
fn include_and_exclude_object_names() {
    for include in ["includeObjectNames", "whitelistObjectNames"] {
        let got = planned(&format!(
            "{include}:\n- java.lang:*\n- java.lang:*\n- org.apache.cassandra.concurrent:*"
        ));
        assert!(got
            .iter()
            .any(|a| a.starts_with("java.lang:type=OperatingSystem")));
        assert!(got
            .iter()
            .any(|a| a.starts_with("org.apache.cassandra.concurrent:")));
        assert!(!got
            .iter()
            .any(|a| a.starts_with("org.apache.cassandra.metrics:")));
        assert!(!got.iter().any(|a| a.starts_with("hadoop:")));
    }
    for (include, exclude) in [
        ("includeObjectNames", "excludeObjectNames"),
        ("whitelistObjectNames", "blacklistObjectNames"),
    ] {
        let got = planned(&format!(
            "{include}:\n- java.lang:*\n- org.apache.cassandra.concurrent:*\n{exclude}:\n- org.apache.cassandra.concurrent:*"
        ));
        assert!(got.iter().any(|a| a.starts_with("java.lang:")));
        assert!(!got.iter().any(|a| a.starts_with("org.apache.cassandra")));
    }
    let no_jvm = planned("excludeJvmMetrics: true");
    assert!(!no_jvm.iter().any(|a| a.starts_with("java.lang:")));
}

#[test]
fn attribute_filters_by_object_name() {
    let got = planned("excludeObjectNameAttributes:\n  'java.lang:type=Runtime': [Uptime]");
    assert!(!got.contains(&"java.lang:type=Runtime:Uptime".to_string()));
    assert!(got.contains(&"java.lang:type=OperatingSystem:ProcessCpuTime".to_string()));
    let only = planned("includeObjectNameAttributes:\n  'java.lang:type=Runtime': [Uptime]");
    assert_eq!(only, ["java.lang:type=Runtime:Uptime"]);
}

#[test]
fn answers_become_samples_and_denials_are_counted() {
    let module = Module::from_yaml("m", "{}").unwrap();
    let plan = Plan::from_list(&module, &list());
    let reads = json_reads(plan.reads());
    // The date is read as milliseconds.
    assert!(reads
        .iter()
        .any(|(_, r)| r["path"] == "time" && r["attribute"] == "Started"));
    let answers: Vec<(Read, Value)> = reads
        .iter()
        .map(|(read, request)| {
            let value = match (request["mbean"].as_str().unwrap(), request["attribute"].clone()) {
                (_, Value::String(_)) => json!(1573285945111i64),
                ("java.lang:type=OperatingSystem", _) => json!({"ProcessCpuTime": 120000000}),
                ("java.lang:type=Runtime", _) => json!({"Uptime": {"error_type": "java.lang.SecurityException",
                    ".error": true, "error": "Reading attribute Uptime is forbidden for MBean java.lang:type=Runtime"}}),
                ("org.apache.cassandra.concurrent:type=CONSISTENCY-MANAGER", _) => json!({"ActiveCount": 100}),
                ("org.apache.cassandra.metrics:type=Compaction,name=CompletedTasks", _) => json!({"Value": 0.2}),
                (_, _) => json!({"replaceBlockOpMinTime": "ERROR: Reading attribute replaceBlockOpMinTime is forbidden for MBean hadoop:service=DataNode,name=DataNodeActivity-ams-hdd001-50010 (class java.lang.SecurityException)"}),
            };
            (*read, json!({"status": 200, "value": value}))
        })
        .collect();
    let scraped = plan.apply(&module, &answers, &Limits::default());
    let names: Vec<&str> = scraped.samples.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"java_lang_OperatingSystem_ProcessCpuTime"),
        "{names:?}"
    );
    assert!(names.contains(&"org_apache_cassandra_metrics_Compaction_Value"));
    assert!(names.contains(&"hadoop_DataNode_Started"));
    let float = scraped
        .samples
        .iter()
        .find(|s| s.name == "org_apache_cassandra_metrics_Compaction_Value")
        .unwrap();
    assert_eq!(
        float.value,
        f64::from(0.2f32),
        "a float widened as Java widens it"
    );
    let started = scraped
        .samples
        .iter()
        .find(|s| s.name == "hadoop_DataNode_Started")
        .unwrap();
    assert_eq!(started.value, 1573285945.111);
    // 2.x's error object and 1.x's error text, both the policy's denial.
    assert_eq!(scraped.denied, 2);
    assert!(!names.contains(&"java_lang_Runtime_Uptime"));
}

#[test]
fn customizers_add_attribute_labels_and_extra_metrics() {
    let module = Module::from_yaml(
        "m",
        "includeObjectNames: ['io.prometheus.jmx:type=customValue']\nmetricCustomizers:\n  - mbeanFilter:\n      domain: io.prometheus.jmx\n      properties:\n        type: customValue\n    attributesAsLabels:\n      - Text\n    extraMetrics:\n      - name: isActive\n        value: true\n        description: still active",
    )
    .unwrap();
    let list = json!({"io.prometheus.jmx": {"type=customValue": {"attr": {
        "Value": {"type": "java.lang.Integer", "desc": "Value"},
        "Text": {"type": "java.lang.String", "desc": "Text"}}}}});
    let plan = Plan::from_list(&module, &list);
    let answers: Vec<(Read, Value)> = json_reads(plan.reads())
        .into_iter()
        .map(|(r, _)| {
            (
                r,
                json!({"status": 200, "value": {"Value": 345, "Text": "value"}}),
            )
        })
        .collect();
    let scraped = plan.apply(&module, &answers, &Limits::default());
    let find = |n: &str| {
        scraped
            .samples
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("{n}: {:#?}", scraped.samples))
    };
    let value = find("io_prometheus_jmx_customValue_Value");
    assert_eq!(value.labels, [("Text".to_string(), "value".to_string())]);
    assert_eq!(value.value, 345.0);
    let extra = find("io_prometheus_jmx_customValue_isActive");
    assert_eq!(extra.value, 1.0);
    assert_eq!(extra.labels, [("Text".to_string(), "value".to_string())]);
}

/// A plan for one MBean with a counter and a table, and the answers for
/// given values of both.
fn remembering(yaml: &str) -> (Module, Plan) {
    let module = Module::from_yaml("m", yaml).unwrap();
    let list = json!({"app": {"type=Queue,name=orders": {"attr": {
        "Depth": {"type": "long", "desc": "Depth"},
        "Sizes": {"type": "javax.management.openmbean.TabularData", "desc": "Sizes"}}}}});
    let plan = Plan::from_list(&module, &list);
    (module, plan)
}

fn answered(plan: &Plan, depth: i64, sizes: Value) -> Vec<(Read, Value)> {
    json_reads(plan.reads())
        .into_iter()
        .map(|(r, _)| {
            (
                r,
                json!({"status": 200, "value": {"Depth": depth, "Sizes": sizes}}),
            )
        })
        .collect()
}

fn sample_texts(scraped: &Scraped) -> Vec<String> {
    scraped
        .samples
        .iter()
        .map(|s| format!("{}{:?} {}", s.name, s.labels, s.value))
        .collect()
}

#[test]
fn mappings_are_reused_only_where_they_still_hold() {
    // No rules: nothing looks at values, so every mapping is reused.
    let (module, plan) = remembering("{}");
    let first = plan.apply(
        &module,
        &answered(&plan, 1, json!({"a": 1})),
        &Limits::default(),
    );
    assert_eq!(first.mapped, 2);
    let second = plan.apply(
        &module,
        &answered(&plan, 2, json!({"a": 5})),
        &Limits::default(),
    );
    assert_eq!(second.mapped, 0);
    assert_eq!(
        sample_texts(&second),
        [
            "app_Queue_Depth[(\"name\", \"orders\")] 2",
            "app_Queue_Sizes[(\"name\", \"orders\"), (\"key\", \"a\")] 5"
        ]
    );
    // A row more moves values to other places: each is mapped anew where
    // its place no longer holds the same leaf.
    let third = plan.apply(
        &module,
        &answered(&plan, 2, json!({"0": 7, "a": 5})),
        &Limits::default(),
    );
    assert_eq!(sample_texts(&third).len(), 3);
    assert!(sample_texts(&third)
        .contains(&"app_Queue_Sizes[(\"name\", \"orders\"), (\"key\", \"0\")] 7".to_string()));
    assert!(third.mapped >= 1);

    // A rule that reads the value: mapped again whenever the value changes,
    // reused while it doesn't.
    let (module, plan) = remembering(
        "rules:\n- pattern: 'app<type=Queue, name=(\\w+)><>Depth: (\\d)$'\n  name: queue_depth_single_digit\n  labels:\n    queue: $1\n- pattern: 'app<type=Queue, name=(\\w+)><>Depth: '\n  name: queue_depth\n",
    );
    let small = plan.apply(&module, &answered(&plan, 3, json!({})), &Limits::default());
    assert_eq!(small.samples[0].name, "queue_depth_single_digit");
    let same = plan.apply(&module, &answered(&plan, 3, json!({})), &Limits::default());
    assert_eq!(same.mapped, 0);
    assert_eq!(sample_texts(&same), sample_texts(&small));
    let large = plan.apply(&module, &answered(&plan, 42, json!({})), &Limits::default());
    assert_eq!(large.mapped, 1);
    assert_eq!(sample_texts(&large), ["queue_depth[] 42"]);

    // `cache: true`: the rule sees `<cache>`, so its mapping holds for
    // every value.
    let (module, plan) = remembering(
        "rules:\n- pattern: 'app<type=Queue, name=(\\w+)><>Depth'\n  name: queue_depth\n  cache: true\n  labels:\n    queue: $1\n",
    );
    plan.apply(&module, &answered(&plan, 1, json!({})), &Limits::default());
    let again = plan.apply(&module, &answered(&plan, 9, json!({})), &Limits::default());
    assert_eq!(again.mapped, 0);
    assert_eq!(
        sample_texts(&again),
        ["queue_depth[(\"queue\", \"orders\")] 9"]
    );
}

/// A list of one MBean whose one attribute is a composite, and its answer:
/// `breadth` items at each of `depth` levels (a full tree where `full`,
/// else one nested item and `breadth - 1` numbers at each level), keys
/// of `key_len` bytes.
fn nested(depth: usize, breadth: usize, key_len: usize) -> (Plan, Module, Vec<(Read, Value)>) {
    nested_tree(depth, breadth, key_len, true)
}

fn nested_tree(
    depth: usize,
    breadth: usize,
    key_len: usize,
    full: bool,
) -> (Plan, Module, Vec<(Read, Value)>) {
    fn level(depth: usize, breadth: usize, key_len: usize, full: bool) -> Value {
        let mut map = serde_json::Map::new();
        for i in 0..breadth {
            let key = format!("{i:0>key_len$}");
            let v = if depth == 0 || (!full && i > 0) {
                json!(i)
            } else {
                level(depth - 1, breadth, key_len, full)
            };
            map.insert(key, v);
        }
        Value::Object(map)
    }
    let module = Module::from_yaml("m", "{}").unwrap();
    let list = json!({"evil": {"type=Deep,name=x": {"attr": {
        "Tree": {"type": "javax.management.openmbean.CompositeData", "desc": "Tree"}}}}});
    let plan = Plan::from_list(&module, &list);
    let answers = json_reads(plan.reads())
        .into_iter()
        .map(|(r, _)| {
            let value = json!({"Tree": level(depth, breadth, key_len, full)});
            (r, json!({"status": 200, "value": value}))
        })
        .collect();
    (plan, module, answers)
}

#[test]
fn every_bound_stops_the_scrape_and_names_itself() {
    let (plan, module, answers) = nested(2, 20, 4);
    let unbounded = plan.apply(&module, &answers, &Limits::default());
    assert_eq!(unbounded.exceeded, None);
    assert_eq!(unbounded.samples.len(), 20 * 20 * 20);

    let bounded = |limits: Limits| plan.apply(&module, &answers, &limits);
    let samples = bounded(Limits {
        sample_limit: 100,
        ..Limits::default()
    });
    assert_eq!(samples.exceeded, Some(Exceeded::Samples(100)));
    // It stopped at the bound, not after making the rest.
    assert!(samples.samples.len() <= 100);
    assert!(samples.mapped <= 101, "{}", samples.mapped);

    let names = bounded(Limits {
        name_length_limit: 20,
        ..Limits::default()
    });
    assert_eq!(names.exceeded, Some(Exceeded::NameLength(20)));

    let labels = bounded(Limits {
        label_limit: 1,
        ..Limits::default()
    });
    assert_eq!(labels.exceeded, Some(Exceeded::Labels(1)));

    let body = bounded(Limits {
        body_size_limit: 10_000,
        ..Limits::default()
    });
    assert_eq!(body.exceeded, Some(Exceeded::BodySize(10_000)));

    let late = bounded(Limits {
        deadline: Some(std::time::Instant::now()),
        ..Limits::default()
    });
    assert_eq!(late.exceeded, Some(Exceeded::Deadline));
    assert!(late.samples.len() < 20 * 20 * 20);
    for e in [
        Exceeded::Samples(1),
        Exceeded::Labels(1),
        Exceeded::NameLength(1),
        Exceeded::LabelValueLength(1),
        Exceeded::BodySize(1),
    ] {
        assert!(
            e.to_string().contains(&format!("prometheus.{}", e.key())),
            "{e}"
        );
    }
}

#[test]
fn a_deep_composite_is_cut_where_its_names_grow_too_long() {
    // Keys of 200 bytes, 100 levels of 50 items: every leaf's name would
    // be up to 20 KB, each level repeating the path above it. The walk
    // stops a subtree as soon as the text its rules would see passes
    // match_length_limit.
    let (plan, module, answers) = nested_tree(100, 50, 200, false);
    let scraped = plan.apply(&module, &answers, &Limits::default());
    // Within the match length but over the name length: the target fails.
    assert_eq!(scraped.exceeded, Some(Exceeded::NameLength(512)));
    let scraped = plan.apply(
        &module,
        &answers,
        &Limits {
            name_length_limit: 100_000,
            ..Limits::default()
        },
    );
    assert_eq!(scraped.exceeded, None);
    // Levels within 8 KB of text (about 40 of 200-byte keys) give their
    // 49 numbers; the rest is cut, once per level too deep.
    assert!(scraped.samples.len() < 49 * 41, "{}", scraped.samples.len());
    assert!(scraped.samples.len() > 49 * 30, "{}", scraped.samples.len());
    assert!(scraped.too_long > 0);
}

#[test]
fn a_plan_weighs_the_mappings_it_remembers() {
    let (plan, module, answers) = nested(2, 20, 4);
    let empty = plan.estimated_bytes();
    plan.apply(&module, &answers, &Limits::default());
    let full = plan.estimated_bytes();
    // 8,000 mappings, each with a name, a match name and a help text.
    assert!(full > empty + 8_000 * 100, "{empty} -> {full}");
    // The same scrape again replaces them: no growth.
    plan.apply(&module, &answers, &Limits::default());
    assert_eq!(plan.estimated_bytes(), full);
}

/// One MBean of three attributes the agent reads (a number, a broadly
/// declared one, one it can't serialise), and one never read (an object
/// graph's type).
fn catalina() -> (Module, Plan) {
    let module = Module::from_yaml("m", "{}").unwrap();
    let list = json!({"Catalina": {"type=Server": {"attr": {
        "port": {"type": "int", "desc": "port"},
        "value": {"type": "java.lang.Object", "desc": "value"},
        "broken": {"type": "java.lang.String", "desc": "broken"},
        "managedResource": {"type": "org.apache.catalina.core.StandardServer", "desc": "it"},
        "Names": {"type": "javax.management.ObjectName", "desc": "never a sample"},
        "Usage": {"type": "long", "desc": "usage"}
    }}}});
    let plan = Plan::from_list(&module, &list);
    (module, plan)
}

#[test]
fn names_are_not_read_and_classes_are_read_bounded() {
    let (_, plan) = catalina();
    let reads = json_reads(plan.reads());
    let text = serde_json::to_string(&reads.iter().map(|(_, r)| r).collect::<Vec<_>>()).unwrap();
    assert!(!text.contains("Names"), "{text}");
    let bounded: Vec<&Value> = reads
        .iter()
        .filter(|(r, _)| matches!(r, Read::Bounded(_)))
        .map(|(_, r)| r)
        .collect();
    assert_eq!(bounded.len(), 1, "{text}");
    assert_eq!(bounded[0]["attribute"], json!(["value", "managedResource"]));
    assert_eq!(bounded[0]["config"]["maxDepth"], "2");
    let whole: Vec<&Value> = reads
        .iter()
        .filter(|(r, _)| matches!(r, Read::Attributes(_)))
        .map(|(_, r)| r)
        .collect();
    assert_eq!(whole.len(), 1);
    assert!(!whole[0]["attribute"]
        .as_array()
        .unwrap()
        .contains(&json!("value")));
}

#[test]
fn a_bean_whose_read_fails_whole_is_read_attribute_by_attribute_and_loses_only_the_one() {
    let (module, plan) = catalina();
    let reads = json_reads(plan.reads());
    // The agent can't serialise `broken`, so the bean's read fails whole;
    // the bounded read of `value` answers.
    let answered: Vec<(Read, Value)> = reads
        .iter()
        .map(|(read, _)| {
            let answer = match read {
                Read::Attributes(_) => {
                    json!({"status": 500, "error_type": "java.lang.IllegalArgumentException",
                    "error": "Cannot convert a \"java.lang.Object\" value to \"java.lang.String\""})
                }
                _ => json!({"status": 200, "value": {"value": 12}}),
            };
            (*read, answer)
        })
        .collect();
    let again = json_reads(plan.split_failed(&answered));
    let names: Vec<&str> = again
        .iter()
        .map(|(_, r)| r["attribute"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    let single = |name: &str, ok: bool| {
        if ok {
            let value = match name {
                "value" => json!(12),
                "managedResource" => json!({"a": "b"}),
                _ => json!(7),
            };
            json!({"status": 200, "value": value})
        } else {
            json!({"status": 500, "error_type": "java.lang.IllegalArgumentException", "error": "Cannot convert"})
        }
    };
    let mut all = answered.clone();
    all.extend(again.iter().map(|(read, r)| {
        let name = r["attribute"].as_str().unwrap();
        (*read, single(name, name != "broken"))
    }));
    let first = plan.apply(&module, &plan.assemble(all), &Limits::default());
    let samples = sample_texts(&first);
    assert_eq!(first.failed, 1, "{samples:?}");
    assert!(
        samples
            .iter()
            .any(|s| s.starts_with("Catalina_Server_port")),
        "{samples:?}"
    );
    assert!(
        samples
            .iter()
            .any(|s| s.starts_with("Catalina_Server_Usage")),
        "{samples:?}"
    );
    assert!(
        samples
            .iter()
            .any(|s| s.starts_with("Catalina_Server_value")),
        "{samples:?}"
    );

    // The next scrape reads attribute by attribute, `broken` left out and
    // still counted.
    let next = json_reads(plan.reads());
    assert!(next.iter().all(|(r, _)| matches!(r, Read::Attribute(..))));
    assert_eq!(next.len(), 4);
    let answered: Vec<(Read, Value)> = next
        .iter()
        .map(|(read, r)| (*read, single(r["attribute"].as_str().unwrap(), true)))
        .collect();
    assert!(plan.split_failed(&answered).is_empty());
    let second = plan.apply(&module, &plan.assemble(answered), &Limits::default());
    assert_eq!(second.failed, 1);
    assert_eq!(sample_texts(&second), samples);
}

#[test]
fn an_attribute_the_agent_does_not_support_is_not_a_failure() {
    let module = Module::from_yaml("m", "{}").unwrap();
    let list = json!({"java.lang": {"type=MemoryPool,name=Metaspace": {"attr": {
        "UsageThreshold": {"type": "long", "desc": "t"},
        "Usage": {"type": "long", "desc": "u"}
    }}}});
    let plan = Plan::from_list(&module, &list);
    for unsupported in [
        json!({".error": true, "error_type": "java.lang.UnsupportedOperationException",
               "error": "Usage threshold is not supported"}),
        json!("ERROR: Usage threshold is not supported (class java.lang.UnsupportedOperationException)"),
    ] {
        let answered: Vec<(Read, Value)> = json_reads(plan.reads())
            .into_iter()
            .map(|(r, _)| {
                (r, json!({"status": 200, "value": {"UsageThreshold": unsupported.clone(), "Usage": 5}}))
            })
            .collect();
        let scraped = plan.apply(&module, &plan.assemble(answered), &Limits::default());
        assert_eq!((scraped.failed, scraped.unsupported), (0, 1));
        assert_eq!(scraped.samples.len(), 1);
    }
}

/// A plan's reads as the JSON items agents get (without a target).
fn json_reads(reads: Vec<(Read, super::PlannedRead)>) -> Vec<(Read, Value)> {
    reads
        .into_iter()
        .map(|(read, r)| (read, r.expect("a valid MBean name").to_agent_json()))
        .collect()
}
