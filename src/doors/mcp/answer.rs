//! A Jolokia answer turned into a tool result: structured content an
//! assistant can use directly, or a tool error with the gateway's (the
//! policy's, the agent's) own wording.

use serde_json::{json, Map, Value};

use super::tools::ToolName;

/// What a tool call produced: its structured content, or an error text.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done(Value),
    Failed(String),
}

/// The merged Jolokia answer of one tool call's item.
pub struct Answered<'a> {
    pub tool: ToolName,
    pub target: &'a str,
    pub fan_out: bool,
    /// The item as sent (its `mbean`, `attribute`, `operation`).
    pub item: &'a Value,
    /// `describe_mbean`'s ObjectName.
    pub mbean: Option<&'a str>,
    pub answer: Value,
}

/// The error's text, with the agent's `error_type` (an exception class
/// tells an assistant what went wrong: `NoSuchMethodException`).
fn error_text(answer: &Value) -> String {
    let text = answer["error"]
        .as_str()
        .map_or_else(|| format!("status {}", answer["status"]), str::to_string);
    match answer["error_type"].as_str() {
        Some(t) if !t.is_empty() && !text.contains(t) => format!("{text} ({t})"),
        _ => text,
    }
}

fn failed(answer: &Value) -> bool {
    answer["status"].as_u64() != Some(200)
}

/// A fan-out's error entry (`merge::FanOutAnswers`): only `error`,
/// `error_type` and `status`; as the tool shows it.
fn fan_out_error(target: &str, v: &Value) -> Option<Value> {
    let o = v.as_object()?;
    let only_error_keys = o
        .keys()
        .all(|k| matches!(k.as_str(), "error" | "error_type" | "status"));
    (only_error_keys && o.contains_key("error")).then(|| {
        let mut entry = json!({
            "target": target,
            "status": o.get("status").and_then(Value::as_u64).unwrap_or(500),
            "error": o.get("error").cloned().unwrap_or(Value::Null),
        });
        if let Some(t) = o.get("error_type").filter(|t| t.is_string()) {
            entry["error_type"] = t.clone();
        }
        entry
    })
}

pub fn shape(a: Answered<'_>) -> Outcome {
    if failed(&a.answer) {
        // The router's wording points Jolokia users at GET …/targets.
        if a.answer["error_type"] == "jmxgate.UnknownTarget" {
            return Outcome::Failed(format!(
                "{}: no such target that you may reach; list_targets shows the targets you may reach",
                a.target
            ));
        }
        let text = error_text(&a.answer);
        // A selector's own failures ("Target selector … matches no
        // target") and a fan-out's ("Target "x": …") name it already.
        return Outcome::Failed(if text.starts_with("Target ") {
            text
        } else {
            format!("{}: {text}", a.target)
        });
    }
    let value = a.answer.get("value").cloned().unwrap_or(Value::Null);
    let field = |k: &str| a.item.get(k).cloned().unwrap_or(Value::Null);
    match a.tool {
        ToolName::SearchMbeans | ToolName::ReadAttributes => {
            let key = if a.tool == ToolName::SearchMbeans {
                "mbeans"
            } else {
                "values"
            };
            let pattern = a.item["mbean"]
                .as_str()
                .and_then(|m| crate::protocol::object_name::ObjectName::parse(m).ok())
                .is_some_and(|n| n.is_pattern());
            let shown = |v: Value| match a.tool {
                ToolName::ReadAttributes => uniform_errors(v, pattern),
                _ => v,
            };
            let results: Vec<Value> = if a.fan_out {
                let Value::Object(per_target) = value else {
                    return Outcome::Failed(format!("{}: unexpected answer {value}", a.target));
                };
                per_target
                    .into_iter()
                    .map(|(target, v)| match fan_out_error(&target, &v) {
                        Some(entry) => entry,
                        None => json!({"target": target, key: shown(v)}),
                    })
                    .collect()
            } else {
                vec![json!({"target": a.target, key: shown(value)})]
            };
            Outcome::Done(json!({ "results": results }))
        }
        ToolName::FleetSummary => {
            let mut summary = json!({
                "target": a.target,
                "mbean": field("mbean"),
                "attribute": field("attribute"),
                "op": a.item["reduce"]["op"].clone(),
            });
            if let Some(p) = a.item.get("path") {
                summary["path"] = p.clone();
            }
            let Value::Object(mut reduced) = value else {
                return Outcome::Failed(format!("{}: unexpected answer {value}", a.target));
            };
            let errors = match reduced.remove("errors") {
                Some(Value::Object(errors)) => errors,
                _ => Map::new(),
            };
            let failed = errors.len();
            let reasons = summarise_errors(errors);
            if !any_value(reduced.get("count")) {
                return Outcome::Failed(no_value(a.target, failed, &reasons));
            }
            for (k, v) in reduced {
                summary[k] = v;
            }
            summary["failed"] = json!(failed);
            summary["errors"] = Value::Array(reasons);
            Outcome::Done(summary)
        }
        ToolName::DescribeMbean => Outcome::Done(describe(a.target, a.mbean, &value)),
        ToolName::WriteAttribute => Outcome::Done(json!({
            "target": a.target,
            "mbean": field("mbean"),
            "attribute": field("attribute"),
            "previous": value,
        })),
        ToolName::ExecuteOperation => Outcome::Done(json!({
            "target": a.target,
            "mbean": field("mbean"),
            "operation": field("operation"),
            "result": value,
        })),
        // Answered without an item.
        ToolName::ListTargets
        | ToolName::Explain
        | ToolName::RequestAccess
        | ToolName::AccessRequestStatus => Outcome::Done(value),
    }
}

/// The rule of the caller's own roles that refused a call on a target
/// (`role viewer: <deny> <mbean> … attribute Special`), as
/// `/jmxgate/explain` names it. `target` is `None` when the refusal came
/// before routing (a caller without roles).
#[derive(Debug, Clone, PartialEq)]
pub struct DeniedBy {
    pub target: Option<String>,
    pub rule: String,
}

/// Most rules a tool error names (one per distinct rule).
const MAX_RULES: usize = 5;

/// Names the deciding rule of each policy denial in a tool's answer: after
/// a tool error's text (`…; denied by role viewer: <deny> …`, a line of
/// its own after a summary's reasons), as
/// `denied_by` in a group's per-target error entry, and in a summary's
/// error reason (its first target's rule).
pub fn name_denials(outcome: Outcome, denied_by: &[DeniedBy]) -> Outcome {
    if denied_by.is_empty() {
        return outcome;
    }
    let rule_of = |target: &str| {
        denied_by
            .iter()
            .find(|d| d.target.as_deref() == Some(target))
            .map(|d| d.rule.clone())
    };
    match outcome {
        Outcome::Failed(text) => {
            let mut rules: Vec<&str> = Vec::new();
            for d in denied_by {
                if !rules.contains(&d.rule.as_str()) {
                    rules.push(&d.rule);
                }
            }
            let left_out = rules.len().saturating_sub(MAX_RULES);
            rules.truncate(MAX_RULES);
            let mut named = rules.join("; ");
            if left_out > 0 {
                named.push_str(&format!("; and {left_out} more"));
            }
            // A summary's reasons are lines: the rules are one more.
            Outcome::Failed(if text.contains('\n') {
                format!("{text}\nDenied by {named}")
            } else {
                format!("{text}; denied by {named}")
            })
        }
        Outcome::Done(mut value) => {
            for entry in value["results"].as_array_mut().into_iter().flatten() {
                if entry.get("error").is_none() {
                    continue;
                }
                if let Some(rule) = entry["target"].as_str().and_then(rule_of) {
                    entry["denied_by"] = json!(rule);
                }
            }
            for reason in value["errors"].as_array_mut().into_iter().flatten() {
                let first = reason["targets"][0].as_str().and_then(rule_of);
                if let Some(rule) = first {
                    reason["denied_by"] = json!(rule);
                }
            }
            Outcome::Done(value)
        }
    }
}

/// Most target names one reason of a `fleet_summary` lists (its `count`
/// says how many had it).
pub const MAX_NAMED: usize = 5;

/// Whether a reduced answer's `count` holds a value from some target:
/// a number, or per attribute (a pattern read) a number per attribute.
fn any_value(count: Option<&Value>) -> bool {
    match count {
        Some(Value::Number(n)) => n.as_u64() != Some(0),
        Some(Value::Object(per_attribute)) => per_attribute
            .values()
            .any(|n| n.as_u64().is_some_and(|n| n > 0)),
        _ => false,
    }
}

/// A reduced answer's `errors` (one entry per target, by name) as
/// reasons: targets with the same `error_type` and `status` together, with
/// how many, the first [`MAX_NAMED`] names and the first one's message;
/// most targets first. Only the names the caller's own fan-out answered
/// are there to be named.
fn summarise_errors(errors: Map<String, Value>) -> Vec<Value> {
    let mut reasons: Vec<(String, Option<u64>, Value)> = Vec::new();
    for (target, e) in errors {
        let error_type = e["error_type"].as_str().unwrap_or_default().to_string();
        let status = e["status"].as_u64();
        match reasons
            .iter_mut()
            .find(|(t, s, _)| *t == error_type && *s == status)
        {
            Some((_, _, reason)) => {
                reason["count"] = json!(reason["count"].as_u64().unwrap_or(0) + 1);
                if let Some(named) = reason["targets"].as_array_mut() {
                    if named.len() < MAX_NAMED {
                        named.push(json!(target));
                    }
                }
            }
            None => {
                let mut reason = Map::new();
                if !error_type.is_empty() {
                    reason.insert("error_type".into(), json!(error_type));
                }
                if let Some(status) = status {
                    reason.insert("status".into(), json!(status));
                }
                let message = e["error"]
                    .as_str()
                    .map_or_else(|| format!("status {}", e["status"]), str::to_string);
                reason.insert("error".into(), json!(message));
                reason.insert("count".into(), json!(1));
                reason.insert("targets".into(), json!([target]));
                reasons.push((error_type, status, Value::Object(reason)));
            }
        }
    }
    // Stable: equal counts keep the order of their first target's name.
    reasons.sort_by_key(|(_, _, r)| std::cmp::Reverse(r["count"].as_u64().unwrap_or(0)));
    reasons.into_iter().map(|(_, _, r)| r).collect()
}

/// The tool error of a summary that no target gave a value to: each
/// reason with its targets, and what to do about a composite value.
fn no_value(target: &str, failed: usize, reasons: &[Value]) -> String {
    if reasons.is_empty() {
        return format!("{target}: no target gave a value to summarise (no MBean matched?)");
    }
    let mut text = format!("{target}: no usable value from any of the {failed} target(s):");
    for r in reasons {
        let count = r["count"].as_u64().unwrap_or(0);
        let mut names: Vec<&str> = r["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if count as usize > names.len() {
            names.push("…");
        }
        let kind = match (r["error_type"].as_str(), r["status"].as_u64()) {
            (Some(t), Some(s)) => format!(" ({t}, status {s})"),
            (Some(t), None) => format!(" ({t})"),
            (None, Some(s)) => format!(" (status {s})"),
            (None, None) => String::new(),
        };
        text.push_str(&format!(
            "\n- {count} target(s) ({}): {}{kind}",
            names.join(", "),
            r["error"].as_str().unwrap_or_default()
        ));
    }
    let composite = reasons.iter().any(|r| {
        r["error_type"] == "jmxgate.NotANumber"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("an object") || e.contains("a list"))
    });
    if composite {
        text.push_str(
            "\nThe attribute's value is composite, not a number: give `path` to pick a number \
             inside it (e.g. `used` for HeapMemoryUsage); describe_mbean or read_attributes \
             shows its parts.",
        );
    }
    text
}

/// One MBean's `list` entry as attributes and operations.
pub fn describe(target: &str, mbean: Option<&str>, info: &Value) -> Value {
    let text = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let attributes: Vec<Value> = info
        .get("attr")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, a)| {
            let mut entry = json!({
                "name": name,
                "type": text(a, "type"),
                "description": text(a, "desc"),
                "writable": a.get("rw").and_then(Value::as_bool).unwrap_or(false),
            });
            // 2.x marks write-only attributes `"r": false`.
            if a.get("r").and_then(Value::as_bool) == Some(false) {
                entry["readable"] = json!(false);
            }
            entry
        })
        .collect();
    let operation = |name: &str, op: &Value| {
        let arguments: Vec<Value> = op
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|arg| {
                json!({
                    "name": text(arg, "name"),
                    "type": text(arg, "type"),
                    "description": text(arg, "desc"),
                })
            })
            .collect();
        // What execute_operation takes for an overloaded name.
        let types: Vec<&str> = arguments
            .iter()
            .map(|a| a["type"].as_str().unwrap_or("?"))
            .collect();
        json!({
            "name": name,
            "signature": format!("{name}({})", types.join(",")),
            "description": text(op, "desc"),
            "returns": text(op, "ret"),
            "arguments": arguments,
        })
    };
    let mut operations = Vec::new();
    for (name, op) in info
        .get("op")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match op {
            // Overloads: one entry per signature.
            Value::Array(overloads) => {
                operations.extend(overloads.iter().map(|o| operation(name, o)));
            }
            one => operations.push(operation(name, one)),
        }
    }
    let mut out = Map::new();
    out.insert("target".into(), json!(target));
    out.insert("mbean".into(), json!(mbean));
    if let Some(class) = info.get("class") {
        out.insert("class".into(), class.clone());
    }
    out.insert("description".into(), text(info, "desc"));
    out.insert("attributes".into(), json!(attributes));
    out.insert("operations".into(), json!(operations));
    Value::Object(out)
}

/// What a caller may do with one MBean's members.
pub enum Use<'a> {
    Read(&'a str),
    Write(&'a str),
    /// An operation with its signature, `add(int,int)`.
    Execute(&'a str),
}

/// Marks each attribute and operation of a `describe` with what the
/// caller's own policies allow (`you_may_read`, `you_may_write`,
/// `you_may_execute`), so an assistant does not offer what would be
/// refused. A write needs a writable attribute too.
pub fn mark(described: &mut Value, may: impl Fn(Use<'_>) -> bool) {
    if let Some(attributes) = described["attributes"].as_array_mut() {
        for a in attributes {
            let name = a["name"].as_str().unwrap_or_default().to_string();
            let readable = a.get("readable").and_then(Value::as_bool).unwrap_or(true);
            let writable = a["writable"].as_bool().unwrap_or(false);
            a["you_may_read"] = json!(readable && may(Use::Read(&name)));
            a["you_may_write"] = json!(writable && may(Use::Write(&name)));
        }
    }
    if let Some(operations) = described["operations"].as_array_mut() {
        for o in operations {
            let signature = o["signature"].as_str().unwrap_or_default().to_string();
            o["you_may_execute"] = json!(may(Use::Execute(&signature)));
        }
    }
}

/// One attribute's error in a read answer, whichever generation wrote
/// it: 1.x's text `ERROR: <message> (class <type>)` (also the gateway's
/// own denial on 1.x targets) and protocol 8's `{"error", "error_type",
/// ".error"}` both become `{"error", "error_type"}`.
fn attribute_error(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => {
            let rest = s.strip_prefix("ERROR: ")?;
            let (message, class) = rest.strip_suffix(')')?.rsplit_once(" (class ")?;
            Some(json!({"error": message, "error_type": class}))
        }
        Value::Object(o) if o.get(".error") == Some(&Value::Bool(true)) => Some(json!({
            "error": o.get("error").cloned().unwrap_or(Value::Null),
            "error_type": o.get("error_type").cloned().unwrap_or(Value::Null),
        })),
        _ => None,
    }
}

/// A read's values with every attribute error in one shape: values by
/// attribute, or (a pattern read) by MBean and then attribute.
fn uniform_errors(values: Value, pattern: bool) -> Value {
    let Value::Object(map) = values else {
        return values;
    };
    let fix = |v: Value| attribute_error(&v).unwrap_or(v);
    Value::Object(
        map.into_iter()
            .map(|(k, v)| match (pattern, v) {
                (true, Value::Object(inner)) => {
                    let inner = inner.into_iter().map(|(a, v)| (a, fix(v))).collect();
                    (k, Value::Object(inner))
                }
                (_, v) => (k, fix(v)),
            })
            .collect(),
    )
}

/// Most attribute denials of one `read_attributes` answer whose rule is
/// looked up (a pattern read may hold thousands of pairs).
const MAX_ATTRIBUTE_RULES: usize = 256;

/// Names the deciding rule beside each attribute a policy denied in a
/// `read_attributes` answer (`denied_by`, as a tool error names it), so
/// an assistant needs no second `explain` call: `rule_of(target, mbean,
/// attribute)` is the caller's own refusing rule, `None` where the
/// gateway's policies allowed the read (the agent's own refusal). `mbean`
/// is the read's; a pattern read's values are keyed by MBean first.
pub fn name_attribute_denials(
    out: &mut Value,
    mbean: &str,
    pattern: bool,
    rule_of: impl Fn(&str, &str, &str) -> Option<String>,
) {
    let mut looked_up = 0;
    let mut name = |target: &str, mbean: &str, attribute: &str, v: &mut Value| {
        let denied =
            v.get("error_type").and_then(Value::as_str) == Some("java.lang.SecurityException");
        if !denied || looked_up >= MAX_ATTRIBUTE_RULES {
            return;
        }
        looked_up += 1;
        if let Some(rule) = rule_of(target, mbean, attribute) {
            v["denied_by"] = json!(rule);
        }
    };
    let Some(results) = out["results"].as_array_mut() else {
        return;
    };
    for result in results {
        let target = result["target"].as_str().unwrap_or_default().to_string();
        let Some(values) = result.get_mut("values").and_then(Value::as_object_mut) else {
            continue;
        };
        for (key, v) in values {
            match (pattern, v) {
                (true, Value::Object(by_attribute)) => {
                    for (attribute, v) in by_attribute {
                        name(&target, key, attribute, v);
                    }
                }
                (false, v) => name(&target, mbean, key, v),
                (true, _) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_attribute_names_its_rule_in_place() {
        let rule_of = |t: &str, m: &str, a: &str| {
            (a != "Agents").then(|| format!("role v: <deny> {m} {a} on {t}"))
        };
        let denied = json!({"error": "Reading attribute S is forbidden", "error_type": "java.lang.SecurityException"});
        let missing = json!({"error": "No such attribute N", "error_type": "javax.management.AttributeNotFoundException"});
        let mut out = json!({"results": [
            {"target": "a", "values": {"Name": "a", "S": denied, "N": missing, "Agents": denied}},
            {"target": "b", "error": "down"}
        ]});
        name_attribute_denials(&mut out, "m:t=x", false, rule_of);
        let values = &out["results"][0]["values"];
        assert_eq!(values["S"]["denied_by"], "role v: <deny> m:t=x S on a");
        assert_eq!(values["N"], missing, "only a policy's refusal has a rule");
        assert_eq!(
            values["Agents"], denied,
            "the agent's own refusal has none of ours"
        );
        assert_eq!(values["Name"], "a");
        // A pattern read: by MBean, then attribute.
        let mut out =
            json!({"results": [{"target": "a", "values": {"m:t=y": {"S": denied, "Name": "y"}}}]});
        name_attribute_denials(&mut out, "m:*", true, rule_of);
        assert_eq!(
            out["results"][0]["values"]["m:t=y"]["S"]["denied_by"],
            "role v: <deny> m:t=y S on a"
        );
    }

    fn answered(tool: ToolName, fan_out: bool, answer: Value) -> Outcome {
        shape(Answered {
            tool,
            target: "a",
            fan_out,
            item: &json!({"mbean": "m:t=x", "attribute": "X", "operation": "op"}),
            mbean: None,
            answer,
        })
    }

    #[test]
    fn a_denied_item_is_a_tool_error_with_the_gateways_wording() {
        let out = answered(
            ToolName::ExecuteOperation,
            false,
            json!({"status": 403, "error": "Operation op forbidden for m:t=x", "error_type": "java.lang.SecurityException"}),
        );
        assert_eq!(
            out,
            Outcome::Failed(
                "a: Operation op forbidden for m:t=x (java.lang.SecurityException)".into()
            )
        );
    }

    #[test]
    fn denials_name_their_rule_in_the_error_and_per_target() {
        let rule = |t: &str, r: &str| DeniedBy {
            target: Some(t.into()),
            rule: r.into(),
        };
        let out = name_denials(
            Outcome::Failed("a: Operation op forbidden".into()),
            &[rule("a", "role ops: <deny> <mbean> m:t=x operation op")],
        );
        assert_eq!(
            out,
            Outcome::Failed(
                "a: Operation op forbidden; denied by role ops: <deny> <mbean> m:t=x operation op"
                    .into()
            )
        );
        let summary = name_denials(
            Outcome::Failed("g: no usable value:\n- 2 target(s) (a, b): no".into()),
            &[rule("a", "role v: r"), rule("b", "role v: r")],
        );
        assert_eq!(
            summary,
            Outcome::Failed(
                "g: no usable value:\n- 2 target(s) (a, b): no\nDenied by role v: r".into()
            )
        );
        let group = Outcome::Done(json!({"results": [
            {"target": "a", "values": {}},
            {"target": "b", "status": 403, "error": "no"},
            {"target": "c", "status": 503, "error": "down"}
        ], "errors": [{"error": "no", "count": 1, "targets": ["b"]}]}));
        let Outcome::Done(out) = name_denials(group, &[rule("b", "role v: r")]) else {
            panic!()
        };
        assert_eq!(out["results"][1]["denied_by"], "role v: r");
        assert!(out["results"][0].get("denied_by").is_none(), "{out}");
        assert!(out["results"][2].get("denied_by").is_none(), "{out}");
        assert_eq!(out["errors"][0]["denied_by"], "role v: r");
    }

    #[test]
    fn an_unknown_target_points_at_list_targets() {
        let out = answered(
            ToolName::ReadAttributes,
            false,
            json!({"status": 404, "error_type": "jmxgate.UnknownTarget", "error": "No target \"a\" … (GET …/targets)"}),
        );
        let Outcome::Failed(text) = out else { panic!() };
        assert!(
            text.starts_with("a: no such target") && text.contains("list_targets"),
            "{text}"
        );
    }

    #[test]
    fn a_fan_out_keeps_each_targets_error_in_its_place() {
        let out = answered(
            ToolName::ReadAttributes,
            true,
            json!({"status": 200, "value": {
                "a": {"X": 1},
                "b": {"error": "no", "error_type": "java.lang.SecurityException", "status": 403}
            }}),
        );
        assert_eq!(
            out,
            Outcome::Done(json!({"results": [
                {"target": "a", "values": {"X": 1}},
                {"target": "b", "status": 403, "error": "no", "error_type": "java.lang.SecurityException"}
            ]}))
        );
    }

    fn summary(answer: Value) -> Outcome {
        shape(Answered {
            tool: ToolName::FleetSummary,
            target: "env=prod",
            fan_out: true,
            item: &json!({"mbean": "m:t=x", "attribute": "X", "reduce": {"op": "sum"}}),
            mbean: None,
            answer,
        })
    }

    fn denied(n: usize) -> Map<String, Value> {
        (0..n)
            .map(|i| {
                (
                    format!("t{i:02}"),
                    json!({"status": 403, "error_type": "java.lang.SecurityException",
                           "error": "Reading attribute X is forbidden for MBean m:t=x"}),
                )
            })
            .collect()
    }

    #[test]
    fn a_summary_without_any_value_is_a_tool_error_naming_a_few_targets_per_reason() {
        let mut errors = denied(7);
        errors.insert(
            "u".into(),
            json!({"status": 503, "error_type": "jmxgate.TargetUnavailable", "error": "Target \"u\": down"}),
        );
        let out =
            summary(json!({"status": 200, "value": {"result": 0, "count": 0, "errors": errors}}));
        let Outcome::Failed(text) = out else {
            panic!("{out:?}")
        };
        assert!(
            text.starts_with("env=prod: no usable value from any of the 8 target(s):"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n- 7 target(s) (t00, t01, t02, t03, t04, …): Reading attribute X is forbidden \
                 for MBean m:t=x (java.lang.SecurityException, status 403)"
            ),
            "{text}"
        );
        assert!(
            text.contains("\n- 1 target(s) (u): Target \"u\": down"),
            "{text}"
        );
        assert!(!text.contains("t05") && !text.contains("path"), "{text}");
    }

    #[test]
    fn a_composite_value_without_path_says_how_to_pick_one() {
        let e = json!({"status": 400, "error_type": "jmxgate.NotANumber",
                       "error": "Not a number: an object with keys committed, init, max, used; a path picks one (e.g. \"committed\")"});
        let out = summary(json!({"status": 200, "value": {"result": null, "count": 0,
                                 "errors": {"a": e, "b": e}}}));
        let Outcome::Failed(text) = out else {
            panic!("{out:?}")
        };
        assert!(
            text.contains("2 target(s) (a, b): Not a number: an object"),
            "{text}"
        );
        assert!(text.contains("give `path`"), "{text}");
    }

    #[test]
    fn a_partial_summary_keeps_its_result_with_the_errors_by_reason() {
        let out = summary(
            json!({"status": 200, "value": {"result": 42, "count": 2, "errors": denied(6)}}),
        );
        let Outcome::Done(done) = out else {
            panic!("{out:?}")
        };
        assert_eq!(done["result"], 42);
        assert_eq!(done["count"], 2);
        assert_eq!(done["failed"], 6);
        assert_eq!(
            done["errors"],
            json!([{"error_type": "java.lang.SecurityException", "status": 403,
                    "error": "Reading attribute X is forbidden for MBean m:t=x", "count": 6,
                    "targets": ["t00", "t01", "t02", "t03", "t04"]}])
        );
        // Per attribute (a pattern): one attribute with values is a result.
        let out = summary(json!({"status": 200, "value": {"result": {"A": 1, "B": 0},
                                 "count": {"A": 1, "B": 0}, "errors": {}}}));
        assert!(matches!(out, Outcome::Done(_)), "{out:?}");
        let out =
            summary(json!({"status": 200, "value": {"result": {}, "count": {}, "errors": {}}}));
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
    }

    #[test]
    fn attribute_errors_look_the_same_from_every_generation() {
        let one = json!({"status": 200, "value": {
            "Uptime": 5,
            "A": "ERROR: Reading attribute A is forbidden for MBean m:t=x (class java.lang.SecurityException)",
            "B": {"error": "No such attribute B", "error_type": "javax.management.AttributeNotFoundException", ".error": true},
            "C": "ERROR: but not in that form"
        }});
        let Outcome::Done(out) = answered(ToolName::ReadAttributes, false, one) else {
            panic!()
        };
        let values = &out["results"][0]["values"];
        assert_eq!(values["Uptime"], 5);
        assert_eq!(
            values["A"],
            json!({"error": "Reading attribute A is forbidden for MBean m:t=x", "error_type": "java.lang.SecurityException"})
        );
        assert_eq!(
            values["B"],
            json!({"error": "No such attribute B", "error_type": "javax.management.AttributeNotFoundException"})
        );
        assert_eq!(values["C"], "ERROR: but not in that form");
    }

    #[test]
    fn describe_gives_signatures_and_marks_what_the_caller_may_do() {
        let info = json!({
            "attr": {"Int": {"type": "int", "rw": true}, "Name": {"type": "java.lang.String", "rw": true}},
            "op": {"add": [
                {"args": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}], "ret": "int"},
                {"args": [], "ret": "long"}
            ]}
        });
        let mut d = describe("a", Some("m:t=x"), &info);
        mark(&mut d, |u| match u {
            Use::Read(a) => a == "Int",
            Use::Write(_) => true,
            Use::Execute(s) => s == "add(int,int)",
        });
        let attrs = &d["attributes"];
        assert_eq!(attrs[0]["name"], "Int");
        assert_eq!(attrs[0]["you_may_read"], true);
        assert_eq!(attrs[1]["you_may_read"], false);
        assert_eq!(d["operations"][0]["signature"], "add(int,int)");
        assert_eq!(d["operations"][0]["you_may_execute"], true);
        assert_eq!(d["operations"][1]["signature"], "add()");
        assert_eq!(d["operations"][1]["you_may_execute"], false);
    }

    #[test]
    fn describe_lists_overloads_as_separate_operations() {
        let info = json!({
            "desc": "ops",
            "attr": {"Int": {"type": "int", "desc": "an int", "rw": true}},
            "op": {
                "add": [
                    {"args": [{"name": "a", "type": "int", "desc": "a"}, {"name": "b", "type": "int", "desc": "b"}], "ret": "int", "desc": "sum"},
                    {"args": [], "ret": "long", "desc": "none"}
                ],
                "echo": {"args": [{"name": "s", "type": "java.lang.String", "desc": "s"}], "ret": "java.lang.String", "desc": "echo"}
            }
        });
        let d = describe("a", Some("m:t=x"), &info);
        assert_eq!(d["attributes"][0]["writable"], true);
        let ops: Vec<&str> = d["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        assert_eq!(ops, ["add", "add", "echo"]);
        assert_eq!(d["operations"][0]["arguments"][1]["type"], "int");
    }
}
