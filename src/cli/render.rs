//! Output for people: values as two-column tables of flattened paths, the
//! MBean tree of a `list` answer as an indented tree.

use serde_json::Value;

use crate::protocol::reduce::Op;

/// One value as text: strings bare, everything else as JSON.
pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Flattens nested objects and arrays into `(path, value)` rows:
/// `{"a":{"b":1},"c":[2]}` gives `a.b 1` and `c[0] 2`.
pub fn flatten(value: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&p, child, out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, child) in a.iter().enumerate() {
                    walk(&format!("{prefix}[{i}]"), child, out);
                }
            }
            other => out.push((prefix.to_string(), scalar(other))),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

/// A value for a terminal: a scalar on its own line, anything nested as a
/// table with aligned columns.
pub fn table(value: &Value) -> String {
    if !value.is_object() && !value.is_array() {
        return format!("{}\n", scalar(value));
    }
    let rows = flatten(value);
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

/// A `list` answer as a tree: domains, MBeans, then attributes (type,
/// `rw` when writable) and operations (arguments and return type).
/// `depth` is how many levels the answer starts below the root (1 for
/// `list java.lang`, 2 for one MBean); deeper answers (`…/attr`,
/// `…/op/gc`) are plain maps and print as a table.
pub fn tree(value: &Value, depth: usize) -> String {
    let mut out = String::new();
    match depth {
        0 => domains(value, &mut out),
        1 => mbeans(value, "", &mut out),
        2 => mbean(value, "", &mut out),
        _ => return table(value),
    }
    out
}

fn domains(value: &Value, out: &mut String) {
    let Value::Object(domains) = value else {
        out.push_str(&format!("{}\n", scalar(value)));
        return;
    };
    for (domain, beans) in domains {
        out.push_str(&format!("{domain}\n"));
        mbeans(beans, "  ", out);
    }
}

fn mbeans(value: &Value, indent: &str, out: &mut String) {
    let Value::Object(beans) = value else {
        return;
    };
    for (props, info) in beans {
        out.push_str(&format!("{indent}{props}\n"));
        mbean(info, &format!("{indent}  "), out);
    }
}

fn mbean(info: &Value, indent: &str, out: &mut String) {
    let Value::Object(info) = info else {
        return;
    };
    if let Some(desc) = info.get("desc").and_then(Value::as_str) {
        out.push_str(&format!("{indent}{desc}\n"));
    }
    if let Some(Value::Object(attrs)) = info.get("attr") {
        for (name, a) in attrs {
            let ty = a.get("type").map(scalar).unwrap_or_default();
            let rw = if a.get("rw") == Some(&Value::Bool(true)) {
                " rw"
            } else {
                ""
            };
            out.push_str(&format!("{indent}attr {name}: {ty}{rw}\n"));
        }
    }
    if let Some(Value::Object(ops)) = info.get("op") {
        for (name, op) in ops {
            // Overloaded operations come as an array of signatures.
            let signatures = match op {
                Value::Array(list) => list.iter().collect(),
                one => vec![one],
            };
            for sig in signatures {
                let args = sig
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|args| {
                        args.iter()
                            .map(|a| {
                                format!(
                                    "{}: {}",
                                    a.get("name").map(scalar).unwrap_or_default(),
                                    a.get("type").map(scalar).unwrap_or_default()
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let ret = sig.get("ret").map(scalar).unwrap_or_default();
                out.push_str(&format!("{indent}op   {name}({args}) -> {ret}\n"));
            }
        }
    }
}

/// A command-line argument as a JSON value: numbers, booleans, `null`,
/// objects and arrays as JSON, anything else as a string (`'"42"'` for the
/// string 42).
pub fn parse_arg(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(_) => Value::String(text.to_string()),
    }
}

/// A reduced answer: a number with how many values made it; ranked
/// entries as `target  value` rows (`target  mbean  value` for a pattern
/// read); groups as `value  targets`. Per attribute, one block each.
pub fn reduced(answer: &crate::protocol::reduce::Reduced, op: Op) -> String {
    match (&answer.count, &answer.result) {
        (Value::Object(counts), Value::Object(results)) => {
            let mut out = String::new();
            for (attribute, result) in results {
                let count = counts.get(attribute).cloned().unwrap_or(Value::Null);
                out.push_str(&format!("{attribute}:\n"));
                for line in one_reduced(result, &count, op).lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
            out
        }
        _ => one_reduced(&answer.result, &answer.count, op),
    }
}

fn one_reduced(result: &Value, count: &Value, op: Op) -> String {
    let rows: Vec<Vec<String>> = match (op, result) {
        (Op::Sum | Op::Avg | Op::Count, v) => {
            return format!("{}  ({} values)\n", scalar(v), scalar(count));
        }
        (Op::Group, Value::Array(groups)) => groups
            .iter()
            .map(|g| {
                let targets: Vec<String> = g["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| match t {
                        Value::Object(o) => format!(
                            "{} {}",
                            o.get("target").map(scalar).unwrap_or_default(),
                            o.get("mbean").map(scalar).unwrap_or_default()
                        ),
                        other => scalar(other),
                    })
                    .collect();
                vec![scalar(&g["value"]), targets.join(", ")]
            })
            .collect(),
        (_, Value::Object(entry)) => vec![entry_row(entry)],
        (_, Value::Array(entries)) => entries
            .iter()
            .filter_map(Value::as_object)
            .map(entry_row)
            .collect(),
        (_, Value::Null) => return "(no values)\n".into(),
        (_, other) => return format!("{}\n", scalar(other)),
    };
    if rows.is_empty() {
        return "(no values)\n".into();
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(c, s)| {
                    if c + 1 == r.len() {
                        s.clone()
                    } else {
                        format!("{s:<w$}", w = widths[c])
                    }
                })
                .collect();
            format!("{}\n", cells.join("  "))
        })
        .collect()
}

fn entry_row(entry: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut row = vec![entry.get("target").map(scalar).unwrap_or_default()];
    if let Some(m) = entry.get("mbean") {
        row.push(scalar(m));
    }
    row.push(entry.get("value").map(scalar).unwrap_or_default());
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_values_flatten_into_aligned_rows() {
        let v = json!({"used": 10, "pools": ["eden", "old"], "name": "heap", "empty": {}});
        assert_eq!(
            table(&v),
            "used      10\npools[0]  eden\npools[1]  old\nname      heap\nempty     {}\n"
        );
        assert_eq!(table(&json!(42)), "42\n");
        assert_eq!(table(&json!("text")), "text\n");
    }

    #[test]
    fn lists_render_as_a_tree() {
        let v = json!({"java.lang": {"type=Memory": {
            "desc": "Memory",
            "attr": {"Verbose": {"type": "boolean", "rw": true}, "HeapMemoryUsage": {"type": "CompositeData", "rw": false}},
            "op": {"gc": {"args": [], "ret": "void"},
                   "add": [{"args": [{"name": "a", "type": "int"}], "ret": "int"}, {"args": [], "ret": "int"}]}
        }}});
        assert_eq!(
            tree(&v, 0),
            "java.lang\n  type=Memory\n    Memory\n    attr Verbose: boolean rw\n    attr HeapMemoryUsage: CompositeData\n    op   gc() -> void\n    op   add(a: int) -> int\n    op   add() -> int\n"
        );
        assert!(tree(&v["java.lang"], 1).starts_with("type=Memory\n  Memory\n"));
        // Below an MBean (`java.lang/type=Memory/attr`): the map itself.
        let attrs = &v["java.lang"]["type=Memory"]["attr"];
        assert_eq!(
            tree(attrs, 3),
            "Verbose.type          boolean\nVerbose.rw            true\nHeapMemoryUsage.type  CompositeData\nHeapMemoryUsage.rw    false\n"
        );
        assert_eq!(
            tree(&v["java.lang"]["type=Memory"]["op"]["gc"]["ret"], 4),
            "void\n"
        );
    }

    #[test]
    fn arguments_are_json_when_they_parse() {
        assert_eq!(parse_arg("42"), json!(42));
        assert_eq!(parse_arg("true"), json!(true));
        assert_eq!(parse_arg("[1,2]"), json!([1, 2]));
        assert_eq!(parse_arg("\"42\""), json!("42"));
        assert_eq!(parse_arg("hello world"), json!("hello world"));
    }
}
