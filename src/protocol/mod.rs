//! The Jolokia protocol as typed values, shared by the gateway and the
//! client: requests ([`Request`] = a [`Command`] plus its processing
//! [`Params`]), responses, and the wire forms of both.

mod command;
mod json_text;
pub mod object_name;
pub mod params;
pub mod path;
pub mod reduce;
mod response;

pub use command::{
    raw_kind, Attributes, Command, Exec, Fields, List, Read, Search, Version, Write,
};
pub use json_text::{without_lone_surrogates, JsonText};
pub use object_name::ObjectName;
pub use params::Params;
pub use response::{parse_bulk_answer, parse_json_answers, Raw, Response};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::secret::Secret;

/// The protocol version the gateway speaks to its clients.
pub const PROTOCOL_VERSION: &str = "8.2";

/// A per-item error: becomes a response with this status, type and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub status: u16,
    pub error_type: String,
    pub message: String,
}

impl ProtocolError {
    pub fn new(status: u16, error_type: &str, message: impl Into<String>) -> Self {
        ProtocolError {
            status,
            error_type: error_type.to_string(),
            message: message.into(),
        }
    }

    /// A malformed request, typed as the agents type it.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "java.lang.IllegalArgumentException", message)
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (status {})", self.message, self.status)
    }
}

impl std::error::Error for ProtocolError {}

/// A proxy-mode `target`: which agent a request is meant for.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyTarget {
    pub url: String,
    pub user: Option<String>,
    pub password: Option<Secret>,
}

impl ProxyTarget {
    fn from_raw(raw: &RawValue) -> Result<ProxyTarget, ProtocolError> {
        #[derive(serde::Deserialize)]
        struct TargetFields<'a> {
            #[serde(borrow)]
            url: Option<&'a RawValue>,
            #[serde(borrow)]
            user: Option<&'a RawValue>,
            #[serde(borrow)]
            password: Option<&'a RawValue>,
        }
        if !raw.get().starts_with('{') {
            return Err(ProtocolError::bad_request(
                "\"target\" must be an object with a \"url\"",
            ));
        }
        let fields: TargetFields = serde_json::from_str(raw.get())
            .map_err(|e| ProtocolError::bad_request(format!("Invalid \"target\": {e}")))?;
        let text = |key: &str, v: Option<&RawValue>| -> Result<Option<String>, ProtocolError> {
            v.map(|raw| {
                command::string_field(raw, &format!("target.{key}")).map(|s| s.into_owned())
            })
            .transpose()
        };
        Ok(ProxyTarget {
            url: text("url", fields.url)?.ok_or_else(|| {
                ProtocolError::bad_request(
                    "No service url given for the target (\"target\":{\"url\":…})",
                )
            })?,
            user: text("user", fields.user)?,
            password: text("password", fields.password)?.map(Secret::new),
        })
    }

    /// Whether the client put credentials in it (as fields or in the URL).
    pub fn carries_credentials(&self) -> bool {
        self.user.is_some() || self.password.is_some() || url_has_userinfo(&self.url)
    }
}

/// `scheme://user:password@host…`: where `user:password@` is, if there is
/// an `@` before the path.
pub fn userinfo_range(url: &str) -> Option<std::ops::Range<usize>> {
    let after = url.find("://")? + 3;
    let rest = &url[after..];
    let at = rest[..rest.find('/').unwrap_or(rest.len())].find('@')?;
    Some(after..after + at + 1)
}

/// `scheme://user:password@host…` with the part before `@` replaced by
/// `***`, so a URL can be echoed or logged.
pub fn redact_userinfo(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(userinfo) = userinfo_range(url) {
        shown.replace_range(userinfo, "***@");
    }
    shown
}

pub fn url_has_userinfo(url: &str) -> bool {
    userinfo_range(url).is_some()
}

/// One typed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub command: Command,
    /// Processing parameters, the query's merged with the request's own.
    pub params: Params,
}

impl Request {
    pub fn new(command: Command) -> Request {
        Request {
            command,
            params: Params::default(),
        }
    }

    /// `read` of one attribute, or of all with `attribute` `None`.
    pub fn read(mbean: &str, attribute: Option<&str>) -> Result<Request, ProtocolError> {
        Ok(Request::new(Command::Read(Read {
            mbean: command::object_name(mbean)?,
            attribute: attribute.map_or(Attributes::All, |a| Attributes::One(a.into())),
            path: None,
        })))
    }

    /// `read` of several attributes (the value is keyed by attribute).
    pub fn read_many(mbean: &str, attributes: &[&str]) -> Result<Request, ProtocolError> {
        Ok(Request::new(Command::Read(Read {
            mbean: command::object_name(mbean)?,
            attribute: Attributes::Many(attributes.iter().map(|a| a.to_string()).collect()),
            path: None,
        })))
    }

    pub fn write(mbean: &str, attribute: &str, value: Value) -> Result<Request, ProtocolError> {
        Ok(Request::new(Command::Write(Write {
            mbean: command::object_name(mbean)?,
            attribute: attribute.into(),
            value: JsonText::from_value(&value),
            path: None,
        })))
    }

    /// `exec`; `operation` may carry a signature: `add(int,int)`.
    pub fn exec(
        mbean: &str,
        operation: &str,
        arguments: Vec<Value>,
    ) -> Result<Request, ProtocolError> {
        Ok(Request::new(Command::Exec(Exec {
            mbean: command::object_name(mbean)?,
            operation: operation.into(),
            arguments: arguments.iter().map(JsonText::from_value).collect(),
        })))
    }

    pub fn search(pattern: &str) -> Result<Request, ProtocolError> {
        Ok(Request::new(Command::Search(Search {
            mbean: command::object_name(pattern)?,
        })))
    }

    /// `list`, below an inner path (`java.lang/type=Memory`) if given.
    pub fn list(path: Option<&str>) -> Request {
        Request::new(Command::List(List {
            path: path.filter(|p| !p.is_empty()).map(str::to_string),
        }))
    }

    pub fn version() -> Request {
        Request::new(Command::Version(Version))
    }

    /// A read of the inner path `path` of its attribute's value (`time`
    /// of a `Date`); other commands are returned as they are.
    pub fn at_path(mut self, path: &str) -> Request {
        if let Command::Read(read) = &mut self.command {
            read.path = Some(path.to_string());
        }
        self
    }

    /// Sets a processing parameter (`maxDepth`, `ignoreErrors`, …),
    /// checked as the gateway checks a client's: an unknown name or a bad
    /// value is an error.
    pub fn with_param(mut self, key: &str, value: &str) -> Result<Request, ProtocolError> {
        self.params.try_set(key, value)?;
        Ok(self)
    }

    /// Parses one POST item, read from the body without building a JSON
    /// tree. `query` holds the query string's parameters, which the item's
    /// own `config` overrides.
    pub fn from_item(
        item: &RawValue,
        query: &Params,
    ) -> Result<(Request, Option<ProxyTarget>), ProtocolError> {
        Self::from_fields(&Fields::of_item(item)?, query)
    }

    /// [`Request::from_item`] for fields already read.
    pub fn from_fields(
        fields: &Fields,
        query: &Params,
    ) -> Result<(Request, Option<ProxyTarget>), ProtocolError> {
        let command = Command::from_fields(fields)?;
        let own = match fields.config {
            None => Params::default(),
            Some(raw) => Params::from_raw(raw)?,
        };
        let target = fields.target.map(ProxyTarget::from_raw).transpose()?;
        Ok((
            Request {
                command,
                params: query.merged_with(&own),
            },
            target,
        ))
    }

    /// [`Request::from_item`] for a JSON value (tests, the CLI).
    pub fn from_json(
        value: &Value,
        query: &Params,
    ) -> Result<(Request, Option<ProxyTarget>), ProtocolError> {
        let raw = serde_json::value::to_raw_value(value).expect("JSON values serialise");
        Self::from_item(&raw, query)
    }

    /// Parses a GET path (the part after the agent URL).
    pub fn from_get_path(path: &str, query: &Params) -> Result<Request, ProtocolError> {
        Ok(Request {
            command: Command::from_get_path(path)?,
            params: query.clone(),
        })
    }

    /// The request as the agent receives it: type fields plus `config`.
    pub fn to_agent_json(&self) -> Value {
        serde_json::to_value(AgentForm(self)).expect("requests serialise")
    }

    /// The request as a GET path (`read/java.lang:type=Memory/HeapMemoryUsage`,
    /// segments escaped, not yet percent-encoded), or `None` when only POST
    /// can carry it: several attributes, non-scalar values or arguments.
    pub fn to_get_path(&self) -> Option<String> {
        fn scalar(v: &JsonText) -> Option<String> {
            match v.to_value()? {
                Value::String(s) if !s.is_empty() => Some(s),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }
        }
        let mut segments: Vec<String> = vec![self.command.type_name().to_string()];
        let inner = |p: &Option<String>| p.iter().flat_map(|p| path::split(p)).collect::<Vec<_>>();
        match &self.command {
            Command::Read(r) => {
                segments.push(r.mbean.as_str().to_string());
                match &r.attribute {
                    Attributes::All if r.path.is_none() => {}
                    Attributes::One(a) => segments.push(a.clone()),
                    _ => return None,
                }
                segments.extend(inner(&r.path));
            }
            Command::Write(w) => {
                segments.push(w.mbean.as_str().to_string());
                segments.push(w.attribute.clone());
                segments.push(scalar(&w.value)?);
                segments.extend(inner(&w.path));
            }
            Command::Exec(e) => {
                segments.push(e.mbean.as_str().to_string());
                segments.push(e.operation.clone());
                for a in &e.arguments {
                    segments.push(scalar(a)?);
                }
            }
            Command::Search(s) => segments.push(s.mbean.as_str().to_string()),
            Command::List(l) => segments.extend(inner(&l.path)),
            Command::Version(_) | Command::Config(_) => {}
        }
        Some(
            segments
                .iter()
                .map(|s| path::escape_segment(s))
                .collect::<Vec<_>>()
                .join("/"),
        )
    }
}

/// A request in the form an agent receives it: the command's fields plus
/// `config` with the parameters meant for the agent. Serialised straight
/// to text, without building a JSON tree.
pub struct AgentForm<'a>(pub &'a Request);

impl Serialize for AgentForm<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        self.write_fields(&mut out)?;
        out.end()
    }
}

impl AgentForm<'_> {
    fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        self.0.command.write_fields(out)?;
        let config = self.0.params.agent_config();
        if config.clone().next().is_some() {
            out.serialize_entry("config", &MapOf(config))?;
        }
        Ok(())
    }
}

/// A request for a Jolokia proxy (the gateway, or an agent in proxy
/// mode): the agent's form plus the `target` to send it on to, with the
/// target's credentials when given. Only a client sends this; the gateway
/// never forwards a `target`.
pub struct ProxyForm<'a>(pub &'a Request, pub &'a ProxyTarget);

impl Serialize for ProxyForm<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Target<'t>(&'t ProxyTarget);
        impl Serialize for Target<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut out = serializer.serialize_map(None)?;
                out.serialize_entry("url", &self.0.url)?;
                if let Some(user) = &self.0.user {
                    out.serialize_entry("user", user)?;
                }
                if let Some(password) = &self.0.password {
                    out.serialize_entry("password", password.expose())?;
                }
                out.end()
            }
        }
        let mut out = serializer.serialize_map(None)?;
        AgentForm(self.0).write_fields(&mut out)?;
        out.serialize_entry("target", &Target(self.1))?;
        out.end()
    }
}

/// A command as agents echo it in `request`.
pub struct Echo<'a>(pub &'a Command);

impl Serialize for Echo<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        self.0.write_fields(&mut out)?;
        out.end()
    }
}

/// Key-value pairs serialised as a JSON object.
struct MapOf<I>(I);

impl<'a, I: Iterator<Item = (&'a str, &'a str)> + Clone> Serialize for MapOf<I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.clone())
    }
}

/// The body of a bulk POST to an agent.
pub fn serialize_bulk<R: std::borrow::Borrow<Request>>(requests: &[R]) -> Vec<u8> {
    let mut body = Vec::with_capacity(requests.len() * 128);
    let items = requests.iter().map(|r| AgentForm(r.borrow()));
    serde_json::to_writer(&mut body, &SeqOf(items)).expect("requests serialise");
    body
}

/// The body of a bulk POST to a Jolokia proxy, every request for `target`.
pub fn serialize_proxy_bulk(requests: &[Request], target: &ProxyTarget) -> Vec<u8> {
    let mut body = Vec::with_capacity(requests.len() * 160);
    let items = requests.iter().map(|r| ProxyForm(r, target));
    serde_json::to_writer(&mut body, &SeqOf(items)).expect("requests serialise");
    body
}

/// Items serialised as a JSON array.
struct SeqOf<I>(I);

impl<T: Serialize, I: Iterator<Item = T> + Clone> Serialize for SeqOf<I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn forwarded_form_strips_target_options_and_unknown_fields() {
        let query = Params::from_query([("maxDepth", "2")]).unwrap();
        let item = json!({
            "type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
            "target": {"url": "orders-1", "user": "u", "password": "p"},
            "options": {"x": 1}, "config": {"ignoreErrors": "true", "mimeType": "text/plain"}
        });
        let (req, target) = Request::from_json(&item, &query).unwrap();
        assert_eq!(
            req.to_agent_json(),
            json!({"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage",
                   "config":{"ignoreErrors":"true","maxDepth":"2"}})
        );
        let target = target.unwrap();
        assert_eq!(target.url, "orders-1");
        assert_eq!(target.password.unwrap().expose(), "p");
    }

    #[test]
    fn bad_items_are_named() {
        let q = Params::default();
        for (item, msg) in [
            (json!(42), "found a number"),
            (
                json!({"type":"version","config":[1]}),
                "\"config\" must be an object",
            ),
            (
                json!({"type":"version","target":"x"}),
                "\"target\" must be an object",
            ),
            (json!({"type":"version","target":{}}), "No service url"),
            (
                json!({"type":"version","config":{"maxDepth":"deep"}}),
                "Invalid value of maxDepth",
            ),
        ] {
            let e = Request::from_json(&item, &q).unwrap_err();
            assert!(e.message.contains(msg), "{item}: {}", e.message);
        }
    }

    #[test]
    fn proxy_requests_carry_their_target() {
        let target = ProxyTarget {
            url: "kafka-1".into(),
            user: Some("u".into()),
            password: Some(Secret::new("p")),
        };
        let reqs = vec![Request::version().with_param("maxDepth", "2").unwrap()];
        let v: Value = serde_json::from_slice(&serialize_proxy_bulk(&reqs, &target)).unwrap();
        assert_eq!(
            v,
            json!([{"type":"version","config":{"maxDepth":"2"},
                    "target":{"url":"kafka-1","user":"u","password":"p"}}])
        );
        let bare = ProxyTarget {
            url: "kafka-1".into(),
            user: None,
            password: None,
        };
        let v: Value = serde_json::from_slice(&serialize_proxy_bulk(&reqs, &bare)).unwrap();
        assert_eq!(v[0]["target"], json!({"url":"kafka-1"}));
    }

    #[test]
    fn bulk_serialisation() {
        let reqs = vec![
            Request::new(Command::Version(Version)),
            Request::from_get_path("list/java.lang", &Params::default()).unwrap(),
        ];
        let v: Value = serde_json::from_slice(&serialize_bulk(&reqs)).unwrap();
        assert_eq!(
            v,
            json!([{"type":"version"},{"type":"list","path":"java.lang"}])
        );
    }
}
