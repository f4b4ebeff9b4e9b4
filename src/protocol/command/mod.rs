//! The Jolokia request types (`notification` aside). Each type parses itself from a GET path
//! and from a POST object, and writes itself back as the JSON the agent
//! receives (after the model of mini-redis' `cmd/*.rs`). Only fields the
//! type knows survive: what the gateway checked is what the agent runs.

use std::collections::VecDeque;

use std::borrow::Cow;

use serde::ser::SerializeMap;
use serde::Deserialize;
use serde_json::value::RawValue;

mod config;
mod exec;
mod list;
mod read;
mod search;
mod version;
mod write;

pub use config::Config;
pub use exec::Exec;
pub use list::List;
pub use read::{Attributes, Read};
pub use search::Search;
pub use version::Version;
pub use write::Write;

use super::object_name::ObjectName;
use super::path::{self, Segment};
use super::ProtocolError;

/// One POST item's fields, borrowed from the request body (no JSON tree
/// is built). Unknown fields are skipped, so they are never forwarded; a
/// field given twice is an error, so what policy checks can't differ from
/// what an agent would pick. `null` counts as absent, except for `value`.
#[derive(Debug, Default, Deserialize)]
pub struct Fields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    mbean: Option<&'a RawValue>,
    #[serde(borrow)]
    attribute: Option<&'a RawValue>,
    #[serde(borrow)]
    path: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    value: Option<&'a RawValue>,
    #[serde(borrow)]
    operation: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    pub config: Option<&'a RawValue>,
    #[serde(borrow)]
    pub target: Option<&'a RawValue>,
    /// jmxgate's own: a selector item's reduction (`protocol::reduce`).
    #[serde(borrow)]
    pub reduce: Option<&'a RawValue>,
}

/// Keeps a present `null` (a write may set one).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

impl<'a> Fields<'a> {
    /// Reads an item's fields; `text` must be a JSON object.
    pub fn parse(text: &'a str) -> Result<Fields<'a>, ProtocolError> {
        serde_json::from_str(text)
            .map_err(|e| ProtocolError::bad_request(format!("Invalid request: {e}")))
    }

    /// Reads one POST item: it must be a JSON object.
    pub fn of_item(item: &'a RawValue) -> Result<Fields<'a>, ProtocolError> {
        if !item.get().starts_with('{') {
            return Err(ProtocolError::bad_request(format!(
                "Not a request: expected a JSON object, found {}",
                raw_kind(item)
            )));
        }
        Fields::parse(item.get())
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a RawValue> {
        match key {
            "type" => self.kind,
            "mbean" => self.mbean,
            "attribute" => self.attribute,
            "path" => self.path,
            "value" => self.value,
            "operation" => self.operation,
            "arguments" => self.arguments,
            "config" => self.config,
            "target" => self.target,
            _ => None,
        }
    }
}

/// What kind of JSON value a raw value is, for error messages.
pub fn raw_kind(raw: &RawValue) -> &'static str {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// A raw JSON string's text, borrowed unless it has escapes.
pub(super) fn string_of(raw: &RawValue) -> Option<Cow<'_, str>> {
    if !raw.get().starts_with('"') {
        return None;
    }
    match serde_json::from_str::<&str>(raw.get()) {
        Ok(s) => Some(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(Cow::Owned),
    }
}

/// GET path arguments after the type, wildcards as `None`.
pub type PathArgs = VecDeque<Segment>;

pub(super) fn required_str<'a>(
    obj: &Fields<'a>,
    key: &str,
    missing: &str,
) -> Result<Cow<'a, str>, ProtocolError> {
    optional_str(obj, key)?.ok_or_else(|| ProtocolError::bad_request(missing))
}

pub(super) fn optional_str<'a>(
    obj: &Fields<'a>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, ProtocolError> {
    match obj.get(key) {
        None => Ok(None),
        Some(raw) => string_field(raw, key).map(Some),
    }
}

/// A field that must be a string, with an error that says why it isn't.
pub(super) fn string_field<'a>(
    raw: &'a RawValue,
    key: &str,
) -> Result<Cow<'a, str>, ProtocolError> {
    string_of(raw).ok_or_else(|| {
        ProtocolError::bad_request(if raw.get().starts_with('"') {
            // Valid JSON whose text isn't Unicode: an unpaired \uD800-\uDFFF.
            format!("\"{key}\" is not a valid string: it holds a lone UTF-16 surrogate, which is no character")
        } else {
            format!("\"{key}\" must be a string")
        })
    })
}

pub(super) fn object_name(raw: &str) -> Result<ObjectName, ProtocolError> {
    ObjectName::parse(raw)
        .map_err(|e| ProtocolError::new(400, "javax.management.MalformedObjectNameException", e))
}

/// A GET mbean segment: `*` (or empty) means every MBean.
pub(super) fn object_name_from_get(seg: Segment) -> Result<ObjectName, ProtocolError> {
    match seg.as_deref() {
        None | Some("") => object_name("*:*"),
        Some(s) => object_name(s),
    }
}

/// An inner path, kept in Jolokia's escaped string form.
pub(super) fn inner_path(obj: &Fields) -> Result<Option<String>, ProtocolError> {
    Ok(optional_str(obj, "path")?
        .filter(|p| !p.is_empty() && p != "/")
        .map(Cow::into_owned))
}

pub(super) fn inner_path_from_get(args: PathArgs) -> Option<String> {
    let segments: Vec<Segment> = args.into_iter().collect();
    (!segments.is_empty()).then(|| path::join(&segments))
}

pub(super) fn put_path<M: SerializeMap>(out: &mut M, p: &Option<String>) -> Result<(), M::Error> {
    match p {
        Some(p) => out.serialize_entry("path", p),
        None => Ok(()),
    }
}

/// One Jolokia command.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Read(Read),
    Write(Write),
    Exec(Exec),
    Search(Search),
    List(List),
    Version(Version),
    Config(Config),
}

impl Command {
    pub fn type_name(&self) -> &'static str {
        match self {
            Command::Read(_) => "read",
            Command::Write(_) => "write",
            Command::Exec(_) => "exec",
            Command::Search(_) => "search",
            Command::List(_) => "list",
            Command::Version(_) => "version",
            Command::Config(_) => "config",
        }
    }

    /// Whether running it twice is the same as running it once (nothing
    /// on the agent changes), so identical requests may share an answer.
    pub fn is_read_only(&self) -> bool {
        !matches!(self, Command::Write(_) | Command::Exec(_))
    }

    /// The MBean (or pattern) the command addresses, if any.
    pub fn mbean(&self) -> Option<&ObjectName> {
        match self {
            Command::Read(r) => Some(&r.mbean),
            Command::Write(w) => Some(&w.mbean),
            Command::Exec(e) => Some(&e.mbean),
            Command::Search(s) => Some(&s.mbean),
            Command::List(_) | Command::Version(_) | Command::Config(_) => None,
        }
    }

    /// Parses `type` and the type's own fields from a POST item.
    pub fn from_fields(obj: &Fields) -> Result<Command, ProtocolError> {
        let kind = required_str(obj, "type", "No type given")?;
        match kind.to_ascii_lowercase().as_str() {
            "read" => Read::from_fields(obj).map(Command::Read),
            "write" => Write::from_fields(obj).map(Command::Write),
            "exec" => Exec::from_fields(obj).map(Command::Exec),
            "search" => Search::from_fields(obj).map(Command::Search),
            "list" => List::from_fields(obj).map(Command::List),
            "version" => Ok(Command::Version(Version)),
            "config" => Ok(Command::Config(Config)),
            other => Err(unsupported_type(other)),
        }
    }

    /// Parses a GET path after the agent prefix (`read/java.lang:type=Memory`).
    /// An empty path is `version`, as agents answer it.
    pub fn from_get_path(path: &str) -> Result<Command, ProtocolError> {
        let trimmed = path.strip_prefix('/').unwrap_or(path);
        if trimmed.is_empty() {
            return Ok(Command::Version(Version));
        }
        let mut args: PathArgs = path::split_segments(trimmed).into();
        let kind = args
            .pop_front()
            .flatten()
            .ok_or_else(|| ProtocolError::bad_request("No type given"))?;
        match kind.to_ascii_lowercase().as_str() {
            "read" => Read::from_get(args).map(Command::Read),
            "write" => Write::from_get(args).map(Command::Write),
            "exec" => Exec::from_get(args).map(Command::Exec),
            "search" => Search::from_get(args).map(Command::Search),
            "list" => List::from_get(args).map(Command::List),
            "version" => Ok(Command::Version(Version)),
            "config" => Ok(Command::Config(Config)),
            other => Err(unsupported_type(other)),
        }
    }

    /// Writes `type` and the type's fields into a JSON object being
    /// serialised (the agent's form and the echo share it).
    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        out.serialize_entry("type", self.type_name())?;
        match self {
            Command::Read(c) => c.write_fields(out),
            Command::Write(c) => c.write_fields(out),
            Command::Exec(c) => c.write_fields(out),
            Command::Search(c) => c.write_fields(out),
            Command::List(c) => c.write_fields(out),
            Command::Version(_) | Command::Config(_) => Ok(()),
        }
    }
}

fn unsupported_type(name: &str) -> ProtocolError {
    match name {
        "notification" => ProtocolError::bad_request(format!(
            "Request type '{name}' is not supported through jmxgate (supported: read, write, exec, search, list, version, config)"
        )),
        _ => ProtocolError::bad_request(format!("No type with name '{name}' exists")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn from_json(v: &Value) -> Result<Command, ProtocolError> {
        let text = v.to_string();
        Command::from_fields(&Fields::parse(&text)?)
    }

    fn roundtrip(c: &Command) -> Value {
        serde_json::to_value(crate::protocol::Echo(c)).unwrap()
    }

    #[test]
    fn get_read_forms() {
        let c = Command::from_get_path("read/java.lang:type=Memory/HeapMemoryUsage/used").unwrap();
        assert_eq!(
            roundtrip(&c),
            json!({"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage","path":"used"})
        );
        let c = Command::from_get_path("/read/java.lang:type=Memory/A,B").unwrap();
        assert_eq!(roundtrip(&c)["attribute"], json!(["A", "B"]));
        let c = Command::from_get_path("read/java.lang:type=Memory/*/x").unwrap();
        assert_eq!(
            roundtrip(&c),
            json!({"type":"read","mbean":"java.lang:type=Memory","path":"x"})
        );
        let c = Command::from_get_path("read/d:name=a!/b/Attr/a!/b/*/c").unwrap();
        assert_eq!(
            roundtrip(&c),
            json!({"type":"read","mbean":"d:name=a/b","attribute":"Attr","path":"a!/b/*/c"})
        );
        let c = Command::from_get_path("READ/*").unwrap();
        assert_eq!(roundtrip(&c)["mbean"], "*:*");
    }

    #[test]
    fn get_write_exec_values() {
        let c = Command::from_get_path("write/d:type=T/Name/[null]").unwrap();
        assert_eq!(roundtrip(&c)["value"], Value::Null);
        let c = Command::from_get_path("write/d:type=T/Name/\"\"/inner").unwrap();
        assert_eq!(roundtrip(&c)["value"], "");
        assert_eq!(roundtrip(&c)["path"], "inner");
        let c = Command::from_get_path("exec/d:type=O/add(int,int)/1/2").unwrap();
        assert_eq!(
            roundtrip(&c),
            json!({"type":"exec","mbean":"d:type=O","operation":"add(int,int)","arguments":["1","2"]})
        );
        let c = Command::from_get_path("exec/d:type=O/echo/[null]/*/\"\"/a!!b").unwrap();
        assert_eq!(roundtrip(&c)["arguments"], json!([null, null, "", "a!b"]));
        let c = Command::from_get_path("exec/d:type=O/noArgs").unwrap();
        assert!(roundtrip(&c).get("arguments").is_none());
    }

    #[test]
    fn get_search_list_version() {
        assert_eq!(
            roundtrip(&Command::from_get_path("").unwrap()),
            json!({"type":"version"})
        );
        assert_eq!(
            roundtrip(&Command::from_get_path("/").unwrap()),
            json!({"type":"version"})
        );
        assert_eq!(
            roundtrip(&Command::from_get_path("version/extra").unwrap()),
            json!({"type":"version"})
        );
        assert_eq!(
            roundtrip(&Command::from_get_path("search/java.lang:*").unwrap()),
            json!({"type":"search","mbean":"java.lang:*"})
        );
        assert_eq!(
            roundtrip(&Command::from_get_path("list/java.lang/type=Memory/").unwrap()),
            json!({"type":"list","path":"java.lang/type=Memory"})
        );
        assert_eq!(
            roundtrip(&Command::from_get_path("list").unwrap()),
            json!({"type":"list"})
        );
    }

    #[test]
    fn get_errors() {
        for (path, msg) in [
            ("read", "require at least 1 path element"),
            ("write/d:type=T/A", "at least three path elements"),
            ("exec/d:type=T", "at least two path elements"),
            ("frobnicate/x", "No type with name 'frobnicate' exists"),
            ("*/x", "No type given"),
            ("read/java.lang", "Invalid object name"),
            ("notification/open", "not supported"),
        ] {
            let e = Command::from_get_path(path).unwrap_err();
            assert_eq!(e.status, 400, "{path}");
            assert!(e.message.contains(msg), "{path}: {}", e.message);
        }
    }

    #[test]
    fn post_forms_drop_unknown_fields() {
        let obj = json!({"type":"READ","mbean":"d:type=T","attribute":["A",""," ",3,"B"],"path":"x","sneaky":"y"});
        let c = from_json(&obj).unwrap();
        assert_eq!(
            roundtrip(&c),
            json!({"type":"read","mbean":"d:type=T","attribute":["A","B"],"path":"x"})
        );
        let obj = json!({"type":"write","mbean":"d:type=T","attribute":"A","value":null});
        assert_eq!(roundtrip(&from_json(&obj).unwrap())["value"], Value::Null);
        let obj =
            json!({"type":"exec","mbean":"d:type=T","operation":"op","arguments":[1,[2],{"a":3}]});
        assert_eq!(
            roundtrip(&from_json(&obj).unwrap())["arguments"],
            json!([1, [2], {"a": 3}])
        );
        let obj = json!({"type":"search"});
        assert_eq!(roundtrip(&from_json(&obj).unwrap())["mbean"], "*:*");
    }

    #[test]
    fn post_errors_are_jolokias() {
        for (obj, msg) in [
            (json!({}), "No type given"),
            (json!({"type": 3}), "\"type\" must be a string"),
            (
                json!({"type":"read"}),
                "Read POST requests require an ObjectName",
            ),
            (
                json!({"type":"write","mbean":"d:t=1"}),
                "require an attribute name",
            ),
            (
                json!({"type":"write","mbean":"d:t=1","attribute":"A"}),
                "require a value",
            ),
            (
                json!({"type":"exec","mbean":"d:t=1"}),
                "require an operation name",
            ),
            (
                json!({"type":"exec","mbean":"d:t=1","operation":"o","arguments":"x"}),
                "must be an array",
            ),
            (json!({"type":"read","mbean":"bad"}), "Invalid object name"),
            (
                json!({"type":"read","mbean":"d:t=1","attribute":{}}),
                "Can't determine attribute names",
            ),
            (json!({"type":"bogus"}), "No type with name 'bogus'"),
        ] {
            let e = from_json(&obj).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(msg), "{obj}: {}", e.message);
        }
    }
}
