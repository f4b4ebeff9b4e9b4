//! The pure parts of guarded requests: the lookups to ask an agent, the
//! concrete requests that touch only allowed (MBean, attribute) pairs, and
//! the answer assembled back into the shape the client asked for. Dispatch
//! does the I/O in between.

use serde_json::{Map, Value};

use super::{exec_denied, read_denied, write_denied, Denied, Grant};
use crate::access::elevation::Guarded;
use crate::policy::Decision;
use crate::protocol::{
    path, Attributes, Command, List, ObjectName, ProtocolError, Read, Request, Response, Search,
};

/// `search <pattern>`, with the client's naming parameters.
pub fn search_request(pattern: &ObjectName, original: &Request) -> Request {
    let mut r = Request::new(Command::Search(Search {
        mbean: pattern.clone(),
    }));
    r.params = original.params.clone();
    r.params.remove("ignoreErrors");
    r
}

/// `list <domain>/<properties>`: one MBean's description.
pub fn list_request(name: &ObjectName) -> Request {
    let props = &name.as_str()[name.domain().len() + 1..];
    Request::new(Command::List(List {
        path: Some(path::join(&[
            Some(name.domain().to_string()),
            Some(props.to_string()),
        ])),
    }))
}

/// The names in a search answer, parsed; a failed search is the item's
/// error as the agent gave it.
pub fn names_from_search(answer: &Response) -> Result<Vec<ObjectName>, Response> {
    if answer.is_error() {
        return Err(answer.clone());
    }
    let names: Vec<String> = answer.field("value").unwrap_or_default();
    Ok(names
        .iter()
        .filter_map(|n| ObjectName::parse(n).ok())
        .collect())
}

/// The readable attribute names in a list answer for one MBean: a
/// write-only attribute (`"r": false`, protocol 8) is left out, as agents
/// leave it out of a read of all attributes.
pub fn attributes_from_list(answer: &Response) -> Vec<String> {
    answer
        .field::<Value>("value")
        .and_then(|v| {
            v.get("attr").and_then(Value::as_object).map(|m| {
                m.iter()
                    .filter(|(_, info)| info.get("r") != Some(&Value::Bool(false)))
                    .map(|(name, _)| name.clone())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// The attribute a read failed on for being write-only (Jolokia 1.x:
/// 404 `AttributeNotFoundException`, "Write-only attribute: X").
pub fn write_only_attribute(answer: &Response) -> Option<String> {
    if answer.status() != Some(404) {
        return None;
    }
    let error = answer.error_text();
    let (_, attribute) = error.split_once("Write-only attribute: ")?;
    Some(attribute.trim().to_string())
}

/// One MBean's share of a guarded read.
#[derive(Debug, Clone)]
pub struct Pairs {
    pub name: ObjectName,
    pub allowed: Vec<String>,
    /// Denied attributes, named by the client or among all of them.
    pub denied: Vec<(String, Decision)>,
}

/// Splits the attributes to read on `name` into allowed and denied.
/// `available` is the MBean's readable attributes, needed for a read of
/// all attributes. A denied attribute among all of them counts as if named,
/// as an agent's own restrictor has it: the read fails, or with
/// `ignoreErrors` the attribute's value is the error.
pub fn pairs(
    grant: &Grant,
    name: &ObjectName,
    requested: &Attributes,
    available: &[String],
) -> Pairs {
    let named: Vec<String> = match requested {
        Attributes::All => available.to_vec(),
        Attributes::One(a) => vec![a.clone()],
        Attributes::Many(list) => list.clone(),
    };
    let mut p = Pairs {
        name: name.clone(),
        allowed: Vec::new(),
        denied: Vec::new(),
    };
    for attribute in named {
        let d = grant.read(name, &attribute);
        if d.allowed {
            p.allowed.push(attribute);
        } else {
            p.denied.push((attribute, d));
        }
    }
    p
}

/// When denied pairs may not be answered as error values, the first one
/// refuses the whole item.
pub fn refuse_denied(all: &[Pairs], ignore_errors: bool) -> Result<(), Denied> {
    if ignore_errors {
        return Ok(());
    }
    match all.iter().find_map(|p| p.denied.first().map(|d| (p, d))) {
        Some((p, (attribute, d))) => Err(read_denied(attribute, &p.name, d.clone())),
        None => Ok(()),
    }
}

/// The read of the allowed attributes of one MBean, keyed by attribute.
pub fn concrete_read(original: &Request, read: &Read, p: &Pairs) -> Request {
    Request {
        command: Command::Read(Read {
            mbean: p.name.clone(),
            attribute: Attributes::Many(p.allowed.clone()),
            path: read.path.clone(),
        }),
        params: original.params.clone(),
    }
}

/// How an agent writes an attribute's error in place of its value
/// (`ignoreErrors`): 1.x as a string, protocol 8 as an error object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    Text,
    Object,
}

impl ErrorStyle {
    /// From the protocol the target's agent reported; 1.x's text when it
    /// is not known yet.
    pub fn of_protocol(protocol: Option<&str>) -> ErrorStyle {
        match protocol {
            Some(p) if !p.starts_with("7.") && !p.starts_with("6.") => ErrorStyle::Object,
            _ => ErrorStyle::Text,
        }
    }
}

fn error_value(attribute: &str, name: &ObjectName, style: ErrorStyle) -> Value {
    let message = format!("Reading attribute {attribute} is forbidden for MBean {name}");
    match style {
        ErrorStyle::Text => Value::String(format!(
            "ERROR: {message} (class java.lang.SecurityException)"
        )),
        ErrorStyle::Object => serde_json::json!({
            "error_type": "java.lang.SecurityException",
            ".error": true,
            "error": message,
        }),
    }
}

fn value_map(answer: &Response) -> Map<String, Value> {
    answer.field("value").unwrap_or_default()
}

fn answer_with(value: &Value, template: Option<&Response>) -> Response {
    let timestamp = template
        .and_then(|t| t.get("timestamp"))
        .and_then(|t| t.get().parse().ok())
        .unwrap_or_else(crate::clock::unix_seconds);
    Response::value(value, timestamp)
}

/// Assembles the answer to a guarded read of one (non-pattern) MBean from
/// the answer to its concrete read (`None` when nothing was allowed).
pub fn assemble_single(
    read: &Read,
    p: &Pairs,
    answer: Option<&Response>,
    style: ErrorStyle,
) -> Response {
    if let Some(a) = answer {
        if a.is_error() {
            return a.clone();
        }
    }
    let mut map = answer.map(value_map).unwrap_or_default();
    for (attribute, _) in &p.denied {
        map.insert(attribute.clone(), error_value(attribute, &p.name, style));
    }
    let value = match (&read.attribute, map.len()) {
        // One attribute asked for and allowed: its value, not a map.
        (Attributes::One(a), _) => map.remove(a).unwrap_or(Value::Null),
        _ => Value::Object(map),
    };
    answer_with(&value, answer)
}

/// Assembles a pattern read's answer, keyed by MBean name. MBeans whose
/// read failed with 404 (no such attribute there) are left out, as Jolokia
/// does for patterns; other failures fail the item unless `ignoreErrors`.
pub fn assemble_pattern(
    read: &Read,
    parts: &[(Pairs, Option<Response>)],
    ignore_errors: bool,
    style: ErrorStyle,
) -> Response {
    let mut out = Map::new();
    let mut template = None;
    for (p, answer) in parts {
        let mut map = Map::new();
        if let Some(a) = answer {
            match a.status() {
                Some(200) => {
                    map = value_map(a);
                    template.get_or_insert(a);
                }
                Some(404) => {}
                _ if ignore_errors => {
                    out.insert(
                        p.name.to_string(),
                        Value::String(format!("ERROR: {}", a.error_text())),
                    );
                    continue;
                }
                _ => return a.clone(),
            }
        }
        for (attribute, _) in &p.denied {
            map.insert(attribute.clone(), error_value(attribute, &p.name, style));
        }
        if !map.is_empty() {
            out.insert(p.name.to_string(), Value::Object(map));
        }
    }
    if out.is_empty() {
        return Response::error(&ProtocolError::new(
            404,
            "javax.management.InstanceNotFoundException",
            format!(
                "No matching MBean found for pattern {} with the requested attributes",
                read.mbean
            ),
        ));
    }
    answer_with(&Value::Object(out), template)
}

/// For a write or exec on a pattern: every matched MBean must be allowed,
/// and none may be one where the item waits for approval (four-eyes is
/// given per MBean's item; a pattern must not run it on a guarded one).
pub fn check_pattern_matches(
    grant: &Grant,
    command: &Command,
    names: &[ObjectName],
) -> Result<(), Denied> {
    let (kind, member) = match command {
        Command::Write(w) => (Guarded::Write, w.attribute.as_str()),
        Command::Exec(e) => (Guarded::Exec, e.operation.as_str()),
        _ => return Ok(()),
    };
    for name in names {
        let d = match kind {
            Guarded::Write => grant.write(name, member),
            Guarded::Exec => grant.exec(name, member),
        };
        if !d.allowed {
            return Err(match kind {
                Guarded::Write => write_denied(member, name, d),
                Guarded::Exec => exec_denied(member, name, d),
            });
        }
    }
    for name in names {
        if let Some(why) = grant.waits_for(kind, name, member) {
            return Err(Denied {
                error: super::approval::pattern_refused(&why, name),
                rule: format!("{why}; the pattern matches {name}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ObjectName {
        ObjectName::parse(s).unwrap()
    }

    #[test]
    fn list_request_escapes_its_path() {
        let r = list_request(&name("d/x:name=a/b,type=T"));
        assert_eq!(r.to_agent_json()["path"], "d!/x/name=a!/b,type=T");
    }

    #[test]
    fn single_answers_keep_their_shape() {
        let read = Read {
            mbean: name("d:type=T"),
            attribute: Attributes::Many(vec!["A".into(), "B".into()]),
            path: None,
        };
        let p = Pairs {
            name: name("d:type=T"),
            allowed: vec!["A".into()],
            denied: vec![("B".into(), Decision::deny("x"))],
        };
        let agent = Response::value(&serde_json::json!({"A": 1}), 7);
        let r = assemble_single(&read, &p, Some(&agent), ErrorStyle::Text);
        let v: Value = serde_json::from_str(r.get("value").unwrap().get()).unwrap();
        assert_eq!(v["A"], 1);
        assert!(v["B"]
            .as_str()
            .unwrap()
            .starts_with("ERROR: Reading attribute B is forbidden"));
        assert_eq!(r.get("timestamp").unwrap().get(), "7");
    }

    #[test]
    fn write_only_failures_name_their_attribute() {
        let failed = Response::error(&ProtocolError::new(
            404,
            "javax.management.AttributeNotFoundException",
            "javax.management.AttributeNotFoundException : Write-only attribute: Password",
        ));
        assert_eq!(write_only_attribute(&failed).as_deref(), Some("Password"));
        let other = Response::error(&ProtocolError::new(404, "x", "No such attribute: Y"));
        assert_eq!(write_only_attribute(&other), None);
        assert_eq!(write_only_attribute(&Response::value(&1, 0)), None);
    }

    #[test]
    fn a_pattern_with_nothing_left_is_not_found() {
        let read = Read {
            mbean: name("d:*"),
            attribute: Attributes::All,
            path: None,
        };
        let r = assemble_pattern(&read, &[], false, ErrorStyle::Object);
        assert_eq!(r.status(), Some(404));
    }
}
