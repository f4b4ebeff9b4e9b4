//! Output for people: values as two-column tables of flattened paths, the
//! MBean tree of a `list` answer as an indented tree.

use serde_json::Value;

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
