//! Running an operation and writing an attribute from a target's page:
//! the forms' fields made into a typed Jolokia item, each argument (or
//! the value) converted by the type the MBean's own list gives it, with
//! an error in words for one that doesn't fit. The item then goes
//! through the shared phases as the viewer (`target::console_item`,
//! method POST): authorized by the viewer's roles, four-eyes where a
//! role asks for it (the answer names the access request; sent again
//! once approved, it runs), audited. Pure but for that.

use serde_json::{json, Map, Value};

use crate::protocol::Request;

/// What a target page's form asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    Exec {
        mbean: String,
        /// As sent to the agent: the bare name, or `name(types)` for an
        /// overloaded operation (Jolokia needs the signature only then,
        /// and policies name operations as clients send them).
        operation: String,
        arguments: Vec<Value>,
    },
    Write {
        mbean: String,
        attribute: String,
        value: Value,
    },
}

impl Asked {
    /// The item to run.
    pub fn request(&self) -> Result<Request, String> {
        match self {
            Asked::Exec {
                mbean,
                operation,
                arguments,
            } => Request::exec(mbean, operation, arguments.clone()),
            Asked::Write {
                mbean,
                attribute,
                value,
            } => Request::write(mbean, attribute, value.clone()),
        }
        .map_err(|e| e.message)
    }

    /// What was asked, in words: `gc()` on …, `Verbose` set to `true`.
    pub fn describe(&self) -> String {
        match self {
            Asked::Exec {
                operation,
                arguments,
                ..
            } => {
                let shown: Vec<String> = arguments.iter().map(Value::to_string).collect();
                let name = operation.split('(').next().unwrap_or(operation);
                format!("{name}({})", shown.join(", "))
            }
            Asked::Write {
                attribute, value, ..
            } => format!("{attribute} = {value}"),
        }
    }
}

/// The overloads of an operation as the list gives it (one object, or an
/// array of them).
pub fn overloads(meta: &Value) -> Vec<&Value> {
    match meta {
        Value::Array(all) => all.iter().collect(),
        one => vec![one],
    }
}

/// The argument types of one overload.
pub fn argument_types(overload: &Value) -> Vec<&str> {
    overload["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["type"].as_str().unwrap_or("java.lang.String"))
        .collect()
}

/// `text` as a value of Java type `java_type`, as a person typed it:
/// numbers and booleans checked and sent as JSON numbers and booleans;
/// an array as a JSON array (`[1,2]`) or comma-separated items; anything
/// else as text, which Jolokia converts for the MBean (an `ObjectName`,
/// a `Date`) or refuses in its own words. Empty is `null` but for a
/// `String`.
pub fn typed(java_type: &str, text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    let whole = [
        "int",
        "long",
        "short",
        "byte",
        "java.lang.Integer",
        "java.lang.Long",
        "java.lang.Short",
        "java.lang.Byte",
    ];
    let real = ["double", "float", "java.lang.Double", "java.lang.Float"];
    let primitive = java_type
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase())
        && !java_type.contains('.');
    if trimmed.is_empty() && java_type != "java.lang.String" {
        return if primitive {
            Err(format!("a value is needed ({java_type})"))
        } else {
            Ok(Value::Null)
        };
    }
    if whole.contains(&java_type) {
        return trimmed
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("\"{}\" is not a whole number ({java_type})", cut(text)));
    }
    if real.contains(&java_type) {
        return match trimmed.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(json!(n)),
            _ => Err(format!("\"{}\" is not a number ({java_type})", cut(text))),
        };
    }
    if java_type == "boolean" || java_type == "java.lang.Boolean" {
        return match trimmed.to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("\"{}\" is not true or false", cut(text))),
        };
    }
    if java_type.starts_with('[') {
        if trimmed.starts_with('[') {
            return serde_json::from_str::<Value>(trimmed)
                .ok()
                .filter(Value::is_array)
                .ok_or_else(|| format!("\"{}\" is not a JSON array", cut(text)));
        }
        return Ok(Value::Array(
            trimmed.split(',').map(|s| json!(s.trim())).collect(),
        ));
    }
    Ok(Value::String(text.to_string()))
}

fn cut(text: &str) -> String {
    text.chars().take(80).collect()
}

/// The form field of argument `i`.
pub fn argument_field(i: usize) -> String {
    format!("arg{i}")
}

/// What the posted `fields` ask, typed by the MBean's `info` (its entry
/// in the target's list: `attr`, `op`). `Err` says what is wrong, for the
/// person who sent it.
pub fn asked(fields: &[(String, String)], info: &Value) -> Result<Asked, String> {
    let field = |name: &str| super::forms::field(fields, name);
    let mbean = field("mbean").to_string();
    if mbean.is_empty() {
        return Err("the form names no MBean".into());
    }
    match field("action") {
        "exec" => {
            let name = field("operation");
            let Some(meta) = info["op"].get(name) else {
                return Err(format!("the MBean has no operation \"{}\"", cut(name)));
            };
            let all = overloads(meta);
            let index: usize = field("overload").parse().unwrap_or(0);
            let Some(overload) = all.get(index) else {
                return Err(format!("operation {name} has no overload {index}"));
            };
            let types = argument_types(overload);
            let mut arguments = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                let value = typed(t, field(&argument_field(i)))
                    .map_err(|why| format!("argument {} of {name}: {why}", i + 1))?;
                arguments.push(value);
            }
            let operation = if all.len() > 1 {
                format!("{name}({})", types.join(","))
            } else {
                name.to_string()
            };
            Ok(Asked::Exec {
                mbean,
                operation,
                arguments,
            })
        }
        "write" => {
            let attribute = field("attribute");
            let Some(meta) = info["attr"].get(attribute) else {
                return Err(format!("the MBean has no attribute \"{}\"", cut(attribute)));
            };
            if meta["rw"] != true {
                return Err(format!("attribute {attribute} is read-only"));
            }
            let java_type = meta["type"].as_str().unwrap_or("java.lang.String");
            let value =
                typed(java_type, field("value")).map_err(|why| format!("{attribute}: {why}"))?;
            Ok(Asked::Write {
                mbean,
                attribute: attribute.to_string(),
                value,
            })
        }
        other => Err(format!("no such action \"{}\"", cut(other))),
    }
}

/// The fields a person typed, to fill the same form again after an
/// answer (kept by the form's key: `exec:<operation>:<overload>` or
/// `write:<attribute>`).
pub fn kept(fields: &[(String, String)]) -> (String, Map<String, Value>) {
    let field = |name: &str| super::forms::field(fields, name);
    let key = match field("action") {
        "exec" => {
            let overload = match field("overload") {
                "" => "0",
                given => given,
            };
            format!("exec:{}:{overload}", field("operation"))
        }
        _ => format!("write:{}", field("attribute")),
    };
    let typed = fields
        .iter()
        .filter(|(k, _)| k == "value" || k.starts_with("arg"))
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    (key, typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn info() -> Value {
        json!({
            "attr": {"Verbose": {"type": "boolean", "rw": true}, "Name": {"type": "java.lang.String", "rw": false}},
            "op": {
                "gc": {"args": [], "ret": "void"},
                "add": [
                    {"args": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}], "ret": "int"},
                    {"args": [{"name": "a", "type": "double"}], "ret": "double"}
                ],
                "tag": {"args": [{"name": "t", "type": "java.lang.String"}, {"name": "n", "type": "[Ljava.lang.String;"}], "ret": "void"}
            }
        })
    }

    #[test]
    fn arguments_are_typed_by_the_signature() {
        let asked_for = |pairs: &[(&str, &str)]| asked(&fields(pairs), &info());
        assert_eq!(
            asked_for(&[("action", "exec"), ("mbean", "m:t=x"), ("operation", "gc")]),
            Ok(Asked::Exec {
                mbean: "m:t=x".into(),
                operation: "gc".into(),
                arguments: vec![]
            })
        );
        // An overloaded operation is sent with its signature.
        let add = asked_for(&[
            ("action", "exec"),
            ("mbean", "m:t=x"),
            ("operation", "add"),
            ("overload", "0"),
            ("arg0", " 2 "),
            ("arg1", "-3"),
        ])
        .unwrap();
        assert_eq!(
            add,
            Asked::Exec {
                mbean: "m:t=x".into(),
                operation: "add(int,int)".into(),
                arguments: vec![json!(2), json!(-3)]
            }
        );
        assert_eq!(add.describe(), "add(2, -3)");
        let e = asked_for(&[
            ("action", "exec"),
            ("mbean", "m:t=x"),
            ("operation", "add"),
            ("overload", "0"),
            ("arg0", "two"),
            ("arg1", "1"),
        ])
        .unwrap_err();
        assert_eq!(e, "argument 1 of add: \"two\" is not a whole number (int)");
        let tag = asked_for(&[
            ("action", "exec"),
            ("mbean", "m:t=x"),
            ("operation", "tag"),
            ("arg0", ""),
            ("arg1", "a, b"),
        ])
        .unwrap();
        assert_eq!(
            tag,
            Asked::Exec {
                mbean: "m:t=x".into(),
                operation: "tag".into(),
                arguments: vec![json!(""), json!(["a", "b"])]
            }
        );
        for (pairs, says) in [
            (
                vec![
                    ("action", "exec"),
                    ("mbean", "m:t=x"),
                    ("operation", "nope"),
                ],
                "no operation",
            ),
            (
                vec![
                    ("action", "exec"),
                    ("mbean", "m:t=x"),
                    ("operation", "add"),
                    ("overload", "7"),
                ],
                "no overload",
            ),
            (
                vec![
                    ("action", "write"),
                    ("mbean", "m:t=x"),
                    ("attribute", "Name"),
                    ("value", "x"),
                ],
                "read-only",
            ),
            (
                vec![
                    ("action", "write"),
                    ("mbean", "m:t=x"),
                    ("attribute", "Verbose"),
                    ("value", "yes"),
                ],
                "not true or false",
            ),
            (
                vec![("action", "drop"), ("mbean", "m:t=x")],
                "no such action",
            ),
            (vec![("action", "exec")], "no MBean"),
        ] {
            let e = asked_for(&pairs).unwrap_err();
            assert!(e.contains(says), "{pairs:?}: {e}");
        }
        let write = asked_for(&[
            ("action", "write"),
            ("mbean", "m:t=x"),
            ("attribute", "Verbose"),
            ("value", "TRUE"),
        ])
        .unwrap();
        assert_eq!(write.describe(), "Verbose = true");
        assert!(write.request().is_ok());
    }

    #[test]
    fn values_are_converted_or_refused_in_words() {
        assert_eq!(
            typed("long", "9223372036854775807"),
            Ok(json!(9223372036854775807i64))
        );
        assert_eq!(typed("double", "1.5"), Ok(json!(1.5)));
        assert!(typed("double", "NaN").is_err());
        assert_eq!(typed("int", ""), Err("a value is needed (int)".into()));
        assert_eq!(typed("java.lang.Integer", ""), Ok(Value::Null));
        assert_eq!(typed("java.lang.String", ""), Ok(json!("")));
        assert_eq!(typed("[I", "[1,2]"), Ok(json!([1, 2])));
        assert!(typed("[I", "[1,").is_err());
        assert_eq!(
            typed("javax.management.ObjectName", "d:k=v"),
            Ok(json!("d:k=v"))
        );
    }

    #[test]
    fn a_form_is_kept_by_its_key() {
        let (key, values) = kept(&fields(&[
            ("action", "exec"),
            ("operation", "add"),
            ("overload", "1"),
            ("arg0", "2"),
            ("csrf", "t"),
        ]));
        assert_eq!(key, "exec:add:1");
        assert_eq!(Value::Object(values), json!({"arg0": "2"}));
    }
}
