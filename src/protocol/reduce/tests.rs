use serde_json::{json, Value};

use super::*;

fn reduce(v: Value) -> Result<Reduce, ProtocolError> {
    Reduce::from_raw(&serde_json::value::to_raw_value(&v).unwrap())
}

fn ok(value: Value) -> Response {
    Response::value(&value, 1000)
}

fn fold(op: Value, shape: Shape, answers: &[(&str, Response)]) -> Value {
    let mut folder = Folder::new(&reduce(op).unwrap(), shape);
    for (target, answer) in answers {
        folder.add(target, answer);
    }
    folder.finish()
}

#[test]
fn reduce_fields_are_checked() {
    assert_eq!(reduce(json!({"op": "sum"})).unwrap(), Reduce::new(Op::Sum));
    assert_eq!(
        reduce(json!({"op": "top", "n": 3, "path": "used"}))
            .unwrap()
            .op,
        Op::Top(3)
    );
    assert_eq!(
        reduce(json!({"op": "group", "by": "value"})).unwrap().op,
        Op::Group
    );
    let err = |v: Value| reduce(v).unwrap_err().message;
    assert!(err(json!("sum")).contains("an object with an \"op\""));
    assert!(err(json!({})).contains("\"op\" is missing"));
    assert!(err(json!({"op": "median"})).contains("unknown op \"median\" (sum, min"));
    assert!(err(json!({"op": "top"})).contains("needs \"n\""));
    assert!(err(json!({"op": "top", "n": 0})).contains("from 1 to"));
    assert!(err(json!({"op": "top", "n": 2.5})).contains("whole number"));
    assert!(err(json!({"op": "sum", "n": 2})).contains("for top and bottom only"));
    assert!(err(json!({"op": "sum", "by": "value"})).contains("for group only"));
    assert!(err(json!({"op": "sum", "limit": 2})).contains("unknown field \"limit\""));
    assert!(err(json!({"op": "sum", "path": 3})).contains("\"path\" must be text"));
    // What a client writes is what the gateway reads back.
    for op in [
        Op::Sum,
        Op::Min,
        Op::Max,
        Op::Avg,
        Op::Count,
        Op::Top(4),
        Op::Bottom(2),
        Op::Group,
    ] {
        let r = Reduce {
            op,
            path: Some("a!/b/c".into()),
        };
        assert_eq!(reduce(r.to_json()).unwrap(), r);
    }
}

#[test]
fn numbers_fold_exactly_and_ties_go_by_target_name() {
    let answers = [
        ("c", ok(json!({"used": 30}))),
        ("a", ok(json!({"used": 30}))),
        ("b", ok(json!({"used": 10}))),
        ("d", ok(json!({"used": 20.5}))),
    ];
    let at = |op: Value| fold(op, Shape::Single, &answers);
    assert_eq!(
        at(json!({"op": "sum", "path": "used"}))["result"],
        json!(90.5)
    );
    assert_eq!(
        at(json!({"op": "avg", "path": "used"}))["result"],
        json!(22.625)
    );
    assert_eq!(at(json!({"op": "count"}))["result"], json!(4));
    assert_eq!(
        at(json!({"op": "max", "path": "used"}))["result"],
        json!({"target": "a", "value": 30})
    );
    assert_eq!(
        at(json!({"op": "min", "path": "used"}))["result"],
        json!({"target": "b", "value": 10})
    );
    assert_eq!(
        at(json!({"op": "top", "n": 3, "path": "used"}))["result"],
        json!([{"target": "a", "value": 30}, {"target": "c", "value": 30}, {"target": "d", "value": 20.5}])
    );
    assert_eq!(
        at(json!({"op": "bottom", "n": 9, "path": "used"}))["result"],
        json!([{"target": "b", "value": 10}, {"target": "d", "value": 20.5},
               {"target": "a", "value": 30}, {"target": "c", "value": 30}])
    );
    let answer = at(json!({"op": "sum", "path": "used"}));
    assert_eq!(answer["count"], json!(4));
    assert_eq!(answer["errors"], json!({}));
    // Longs beyond a double's 53 bits add and compare exactly.
    let big = [
        ("x", ok(json!(9007199254740993i64))),
        ("y", ok(json!(9007199254740992i64))),
        ("z", ok(json!("1"))),
    ];
    assert_eq!(
        fold(json!({"op": "sum"}), Shape::Single, &big)["result"],
        json!(18014398509481986i64)
    );
    assert_eq!(
        fold(json!({"op": "max"}), Shape::Single, &big)["result"],
        json!({"target": "x", "value": 9007199254740993i64})
    );
}

#[test]
fn errors_and_non_numbers_are_listed_never_fatal() {
    let denied = Response::error(&ProtocolError::new(
        403,
        "java.lang.SecurityException",
        "Reading attribute HeapMemoryUsage is forbidden",
    ));
    let answers = [
        ("up", ok(json!({"used": 5}))),
        ("denied", denied),
        ("text", ok(json!({"used": "lots"}))),
        ("shape", ok(json!(7))),
        ("missing", ok(json!({"max": 1}))),
    ];
    let answer = fold(
        json!({"op": "sum", "path": "used"}),
        Shape::Single,
        &answers,
    );
    assert_eq!(answer["result"], json!(5));
    assert_eq!(answer["count"], json!(1));
    let errors = &answer["errors"];
    assert_eq!(errors["denied"]["status"], json!(403));
    assert_eq!(
        errors["denied"]["error_type"],
        json!("java.lang.SecurityException")
    );
    assert_eq!(errors["text"]["error"], json!("Not a number: \"lots\""));
    assert_eq!(errors["text"]["error_type"], json!("jmxgate.NotANumber"));
    assert_eq!(
        errors["shape"]["error"],
        json!("No \"used\" in the value: it is a number")
    );
    assert_eq!(
        errors["missing"]["error"],
        json!("No \"used\" in the value")
    );
    assert_eq!(errors.as_object().unwrap().len(), 4);
    // Nothing usable at all: no result, still an answer.
    let none = fold(
        json!({"op": "avg", "path": "used"}),
        Shape::Single,
        &answers[1..2],
    );
    assert_eq!(none["result"], Value::Null);
    assert_eq!(none["count"], json!(0));
    assert_eq!(
        fold(json!({"op": "top", "n": 2}), Shape::Single, &[])["result"],
        json!([])
    );
    assert_eq!(
        fold(json!({"op": "sum"}), Shape::Single, &[])["result"],
        json!(0)
    );
}

#[test]
fn groups_say_which_targets_answered_each_value() {
    let answers = [
        ("b", ok(json!("RUNNING"))),
        ("c", ok(json!("STOPPED"))),
        ("a", ok(json!("RUNNING"))),
        ("d", ok(json!({"major": 2}))),
    ];
    assert_eq!(
        fold(
            json!({"op": "group", "by": "value"}),
            Shape::Single,
            &answers
        )["result"],
        json!([
            {"value": "RUNNING", "targets": ["a", "b"]},
            {"value": "STOPPED", "targets": ["c"]},
            {"value": {"major": 2}, "targets": ["d"]},
        ])
    );
}

#[test]
fn pattern_reads_are_reduced_per_attribute() {
    let gc = |young: i64, old: i64| {
        ok(json!({
            "java.lang:name=Young,type=GarbageCollector": {"CollectionCount": young, "Name": "Young"},
            "java.lang:name=Old,type=GarbageCollector": {"CollectionCount": old, "Name": "Old"},
        }))
    };
    let answers = [("a", gc(10, 1)), ("b", gc(30, 2))];
    let shape = || Shape::PerAttribute {
        pattern: true,
        asked: Vec::new(),
    };
    let top = fold(json!({"op": "top", "n": 2}), shape(), &answers);
    assert_eq!(
        top["result"]["CollectionCount"],
        json!([
            {"target": "b", "mbean": "java.lang:name=Young,type=GarbageCollector", "value": 30},
            {"target": "a", "mbean": "java.lang:name=Young,type=GarbageCollector", "value": 10},
        ])
    );
    assert_eq!(top["count"]["CollectionCount"], json!(4));
    // A text attribute can't be summed: listed per target, the numbers
    // still count.
    let sum = fold(json!({"op": "sum"}), shape(), &answers);
    assert_eq!(sum["result"]["CollectionCount"], json!(43));
    let error = &sum["errors"]["a"];
    assert_eq!(error["error_type"], "jmxgate.NotANumber");
    let text = error["error"].as_str().unwrap();
    assert!(
        text.contains("Name of java.lang:name=")
            && text.contains("Not a number: \"")
            && text.ends_with("(and 1 more)"),
        "{sum}"
    );
    assert_eq!(sum["count"]["Name"], json!(0));
    // Each attribute that gave nothing usable is listed, with its MBean.
    assert_eq!(
        error["attributes"],
        json!([
            {"attribute": "Name", "mbean": "java.lang:name=Young,type=GarbageCollector",
             "error_type": "jmxgate.NotANumber", "error": "Not a number: \"Young\""},
            {"attribute": "Name", "mbean": "java.lang:name=Old,type=GarbageCollector",
             "error_type": "jmxgate.NotANumber", "error": "Not a number: \"Old\""},
        ])
    );
    // Several attributes of one MBean.
    let many = fold(
        json!({"op": "max"}),
        Shape::PerAttribute {
            pattern: false,
            asked: vec!["ThreadCount".into(), "PeakThreadCount".into()],
        },
        &[
            ("a", ok(json!({"ThreadCount": 40, "PeakThreadCount": 50}))),
            ("b", ok(json!({"ThreadCount": 45, "PeakThreadCount": 48}))),
        ],
    );
    assert_eq!(
        many["result"]["ThreadCount"],
        json!({"target": "b", "value": 45})
    );
    assert_eq!(
        many["result"]["PeakThreadCount"],
        json!({"target": "a", "value": 50})
    );
}

const OPS: [&str; 8] = [
    "sum", "avg", "min", "max", "count", "top", "bottom", "group",
];

fn op_json(op: &str) -> Value {
    match op {
        "top" | "bottom" => json!({"op": op, "n": 5}),
        "group" => json!({"op": "group", "by": "value"}),
        _ => json!({"op": op}),
    }
}

/// What an answer holds when nothing at all went in, per op.
fn nothing(op: &str) -> Value {
    match op {
        "sum" | "count" => json!(0),
        "avg" | "min" | "max" => Value::Null,
        _ => json!([]),
    }
}

/// A status-200 answer without a value is no value at all: listed, for
/// every op (count and group included), never folded in as `null`.
#[test]
fn an_answer_without_a_value_is_listed_for_every_op() {
    let mut bare = ok(json!(1));
    bare.remove("value");
    for op in OPS {
        let answer = fold(
            op_json(op),
            Shape::Single,
            &[("up", ok(json!(3))), ("bare", bare.clone())],
        );
        assert_eq!(answer["count"], json!(1), "{op}: {answer}");
        assert_eq!(
            answer["errors"]["bare"],
            json!({"error_type": "jmxgate.NoValue", "error": "The agent's answer has no value", "status": 400}),
            "{op}"
        );
        assert!(
            !answer["result"].to_string().contains("null"),
            "{op}: {answer}"
        );
    }
}

/// A value nested too deeply to be read is listed, not taken as `null`.
#[test]
fn a_value_too_deep_to_read_is_listed() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let mut answer = ok(json!(1));
    answer.set_raw(
        "value",
        serde_json::value::RawValue::from_string(deep).unwrap(),
    );
    for op in ["count", "group"] {
        let got = fold(op_json(op), Shape::Single, &[("deep", answer.clone())]);
        assert_eq!(got["count"], json!(0), "{op}: {got}");
        assert_eq!(got["result"], nothing(op), "{op}: {got}");
        assert_eq!(got["errors"]["deep"]["error_type"], "jmxgate.Unreadable");
        let text = got["errors"]["deep"]["error"].as_str().unwrap();
        assert!(
            text.starts_with("The agent's value could not be read: "),
            "{text}"
        );
    }
}

/// A real `null` (an attribute whose value is null) is a value to count
/// and to group, and no number: listed for the numeric ops.
#[test]
fn a_null_value_counts_and_groups_but_is_no_number() {
    let answers = [
        ("a", ok(json!(4))),
        ("n", ok(Value::Null)),
        ("p", ok(json!({"used": null}))),
    ];
    assert_eq!(
        fold(op_json("count"), Shape::Single, &answers)["result"],
        json!(3)
    );
    assert_eq!(
        fold(op_json("group"), Shape::Single, &answers[..2])["result"],
        json!([{"value": 4, "targets": ["a"]}, {"value": null, "targets": ["n"]}])
    );
    for op in ["sum", "avg", "min", "max", "top", "bottom"] {
        let answer = fold(op_json(op), Shape::Single, &answers[..2]);
        assert_eq!(answer["count"], json!(1), "{op}");
        assert_eq!(
            answer["errors"]["n"],
            json!({"error_type": "jmxgate.NotANumber", "error": "Not a number: the value is null", "status": 400}),
            "{op}"
        );
    }
    // An inner path to a null: the same.
    let used = fold(
        json!({"op": "count", "path": "used"}),
        Shape::Single,
        &answers[2..],
    );
    assert_eq!(used["result"], json!(1));
    let used = fold(
        json!({"op": "max", "path": "used"}),
        Shape::Single,
        &answers[2..],
    );
    assert_eq!(
        used["errors"]["p"]["error"],
        "Not a number: the value is null"
    );
}

/// With `ignoreErrors`, an agent puts its error in place of an attribute
/// it could not read: an object with `.error` (2.x) or `ERROR: … (class
/// …)` text (1.x). Listed per attribute with the agent's words, for every
/// op; the attribute's readable values still fold.
#[test]
fn an_attribute_the_agent_could_not_read_is_listed_for_every_op() {
    let v2 = json!({"Int": 40, "NullValue": null, "NoSuch": {
        "error_type": "javax.management.AttributeNotFoundException", ".error": true,
        "error_type_jmx": "javax.management.AttributeNotFoundException",
        "error": "No such attribute: NoSuch"}});
    let v1 = json!({"Int": 2, "NullValue": null,
        "NoSuch": "ERROR: No such attribute: NoSuch (class javax.management.AttributeNotFoundException)"});
    let shape = || Shape::PerAttribute {
        pattern: false,
        asked: vec!["Int".into(), "NoSuch".into(), "NullValue".into()],
    };
    let want_listed = json!({"attribute": "NoSuch",
        "error_type": "javax.management.AttributeNotFoundException",
        "error": "Could not be read: No such attribute: NoSuch"});
    for op in OPS {
        let answer = fold(
            op_json(op),
            shape(),
            &[("two", ok(v2.clone())), ("one", ok(v1.clone()))],
        );
        assert_eq!(answer["count"]["NoSuch"], json!(0), "{op}: {answer}");
        assert_eq!(answer["result"]["NoSuch"], nothing(op), "{op}: {answer}");
        assert_eq!(answer["count"]["Int"], json!(2), "{op}: {answer}");
        for target in ["one", "two"] {
            let error = &answer["errors"][target];
            let listed = error["attributes"].as_array().unwrap();
            assert!(listed.contains(&want_listed), "{op}: {error}");
            let text = error["error"].as_str().unwrap();
            assert!(
                text.starts_with("NoSuch: Could not be read: No such attribute: NoSuch")
                    || text.starts_with("NullValue: Not a number"),
                "{op}: {text}"
            );
        }
        // A null attribute: a value for count and group only.
        let counted = matches!(op, "count" | "group");
        assert_eq!(
            answer["count"]["NullValue"],
            json!(if counted { 2 } else { 0 }),
            "{op}"
        );
        let listed = answer["errors"]["one"]["attributes"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(listed, if counted { 1 } else { 2 }, "{op}: {answer}");
    }
    let group = fold(
        op_json("group"),
        shape(),
        &[("two", ok(v2.clone())), ("one", ok(v1.clone()))],
    );
    assert_eq!(
        group["result"]["NullValue"],
        json!([{"value": null, "targets": ["one", "two"]}])
    );
}

/// An attribute the read named but the answer lacks is missing, not
/// null; a pattern's MBean whose read failed is listed with its words.
#[test]
fn a_named_attribute_missing_from_the_answer_is_listed() {
    let shape = Shape::PerAttribute {
        pattern: false,
        asked: vec!["Int".into(), "Gone".into()],
    };
    let answer = fold(op_json("count"), shape, &[("a", ok(json!({"Int": 1})))]);
    assert_eq!(answer["count"], json!({"Int": 1, "Gone": 0}));
    assert_eq!(
        answer["errors"]["a"]["attributes"],
        json!([{"attribute": "Gone", "error_type": "jmxgate.NoValue", "error": "Missing from the agent's answer"}])
    );
    assert_eq!(
        answer["errors"]["a"]["error"],
        "Gone: Missing from the agent's answer"
    );
    let pattern = Shape::PerAttribute {
        pattern: true,
        asked: Vec::new(),
    };
    let answer = fold(
        op_json("group"),
        pattern,
        &[(
            "a",
            ok(json!({
                "d:name=x": {"Level": 1},
                "d:name=y": "ERROR: Reading attribute Level is forbidden for MBean d:name=y",
                "d:name=z": {"Level": "ERROR: Failed (class java.lang.IllegalStateException)"},
            })),
        )],
    );
    assert_eq!(
        answer["result"]["Level"],
        json!([{"value": 1, "targets": [{"target": "a", "mbean": "d:name=x"}]}])
    );
    assert_eq!(
        answer["errors"]["a"]["attributes"],
        json!([
            {"mbean": "d:name=y", "error_type": "jmxgate.Unreadable",
             "error": "Could not be read: Reading attribute Level is forbidden for MBean d:name=y"},
            {"attribute": "Level", "mbean": "d:name=z", "error_type": "java.lang.IllegalStateException",
             "error": "Could not be read: Failed"},
        ])
    );
    assert_eq!(
        answer["errors"]["a"]["error"],
        "d:name=y: Could not be read: Reading attribute Level is forbidden for MBean d:name=y (and 1 more)"
    );
}

/// However many attributes fail on a target, its entry lists a bounded
/// number; the summary counts them all.
#[test]
fn a_targets_listed_problems_are_bounded() {
    let many: serde_json::Map<String, Value> = (0..100)
        .map(|i| (format!("A{i:03}"), json!("text")))
        .collect();
    let shape = Shape::PerAttribute {
        pattern: false,
        asked: Vec::new(),
    };
    let answer = fold(op_json("sum"), shape, &[("a", ok(Value::Object(many)))]);
    let error = &answer["errors"]["a"];
    assert_eq!(
        error["attributes"].as_array().unwrap().len(),
        MAX_LISTED_PROBLEMS
    );
    assert!(
        error["error"].as_str().unwrap().ends_with("(and 99 more)"),
        "{error}"
    );
    let reduced: Reduced = serde_json::from_value(answer).unwrap();
    assert_eq!(reduced.errors["a"].attributes.len(), MAX_LISTED_PROBLEMS);
    assert_eq!(
        reduced.errors["a"].attributes[0].attribute.as_deref(),
        Some("A000")
    );
}

/// Top and bottom keep only what they need as they go; what they keep is
/// what sorting everything would give.
#[test]
fn ranking_while_folding_equals_ranking_at_the_end() {
    let mut seed = 7u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % 50
    };
    let answers: Vec<(String, Response)> = (0..2000)
        .map(|i| (format!("t-{i:04}"), ok(json!(next()))))
        .collect();
    for (op, largest_first) in [("top", true), ("bottom", false)] {
        let mut folder = Folder::new(&reduce(json!({"op": op, "n": 25})).unwrap(), Shape::Single);
        for (t, a) in &answers {
            folder.add(t, a);
        }
        let got = folder.finish()["result"].clone();
        let mut all: Vec<(u64, &str)> = answers
            .iter()
            .map(|(t, a)| (a.field::<u64>("value").unwrap(), t.as_str()))
            .collect();
        all.sort_by(|a, b| {
            let v = if largest_first {
                b.0.cmp(&a.0)
            } else {
                a.0.cmp(&b.0)
            };
            v.then(a.1.cmp(b.1))
        });
        let want: Vec<Value> = all[..25]
            .iter()
            .map(|(v, t)| json!({"target": t, "value": v}))
            .collect();
        assert_eq!(got, Value::Array(want), "{op}");
    }
}

#[test]
fn reduced_answers_read_back_typed() {
    let answer = fold(
        json!({"op": "top", "n": 2}),
        Shape::Single,
        &[("a", ok(json!(1))), ("b", ok(json!(2)))],
    );
    let reduced: Reduced = serde_json::from_value(answer).unwrap();
    let ranked = reduced.ranked().unwrap();
    assert_eq!(ranked[0].target, "b");
    assert_eq!(reduced.counted(), Some(2));
    let sum: Reduced = serde_json::from_value(fold(
        json!({"op": "sum"}),
        Shape::Single,
        &[("a", ok(json!(2)))],
    ))
    .unwrap();
    assert_eq!(sum.number(), Some(2.0));
    let max: Reduced = serde_json::from_value(fold(
        json!({"op": "max"}),
        Shape::Single,
        &[("a", ok(json!(2)))],
    ))
    .unwrap();
    assert_eq!(max.ranked().unwrap()[0].target, "a");
}

#[test]
fn a_composite_value_says_which_keys_a_path_may_pick_the_same_for_every_target() {
    let heap = |used: u64| ok(json!({"committed": 10, "init": 1, "max": 20, "used": used}));
    let answer = fold(
        op_json("sum"),
        Shape::Single,
        &[("a", heap(3)), ("b", heap(4)), ("c", ok(json!([1, 2])))],
    );
    assert_eq!(answer["count"], 0);
    let said = "Not a number: an object with keys committed, init, max, used; a path picks \
                one (e.g. \"committed\")";
    assert_eq!(answer["errors"]["a"]["error"], said);
    assert_eq!(answer["errors"]["b"]["error"], said);
    assert_eq!(answer["errors"]["a"]["error_type"], "jmxgate.NotANumber");
    assert_eq!(
        answer["errors"]["c"]["error"],
        "Not a number: a list of 2 values; a path picks one by index (e.g. \"0\")"
    );
}

#[test]
fn a_path_in_raw_text_finds_what_a_parsed_value_does() {
    let values = [
        r#"{"used": 5, "max": {"a": [1, {"b": "x"}]}, "used": 7}"#,
        r#"[10, [20, 30], {"k": null}]"#,
        r#"{"a\"b": 1, "é": {"": 2}}"#,
        "42",
        r#""text""#,
        "null",
        "[]",
        "{}",
    ];
    let paths: [&[&str]; 12] = [
        &[],
        &["used"],
        &["max", "a", "1", "b"],
        &["max", "a", "2"],
        &["1", "0"],
        &["2", "k"],
        &["a\"b"],
        &["é", ""],
        &["missing"],
        &["x", "y"],
        &["0"],
        &["-1"],
    ];
    for value in values {
        for path in paths {
            let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
            let raw = RawValue::from_string(value.to_string()).unwrap();
            let parsed = at_path(serde_json::from_str(value).unwrap(), &path);
            let skipped = raw_at_path(&raw, &path);
            assert_eq!(
                format!("{parsed:?}"),
                format!("{skipped:?}"),
                "{value} at {path:?}"
            );
        }
    }
}
