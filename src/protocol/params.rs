//! Processing parameters (Jolokia's request-level `ConfigKey`s): accepted
//! from the query string and from each request's `config`, validated the
//! way Jolokia 2.x validates query parameters, and normalised so 1.x and
//! 2.x agents read them alike.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::ProtocolError;

/// What values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    /// `true`/`false` or `runtime`.
    StackTrace,
    /// `number` or `string`.
    SerializeLong,
    MimeType,
    Callback,
}

/// Where a parameter takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Forwarded to the agent.
    Agent,
    /// Shapes the gateway's HTTP response only (never forwarded).
    Response,
}

const PARAMS: &[(&str, Kind, Scope)] = &[
    ("maxDepth", Kind::Int, Scope::Agent),
    ("maxCollectionSize", Kind::Int, Scope::Agent),
    ("maxObjects", Kind::Int, Scope::Agent),
    ("serializeLong", Kind::SerializeLong, Scope::Agent),
    ("ignoreErrors", Kind::Bool, Scope::Agent),
    ("canonicalNaming", Kind::Bool, Scope::Agent),
    ("includeRequest", Kind::Bool, Scope::Agent),
    ("listKeys", Kind::Bool, Scope::Agent),
    ("listCache", Kind::Bool, Scope::Agent),
    ("listInterfaces", Kind::Bool, Scope::Agent),
    ("openTypes", Kind::Bool, Scope::Agent),
    ("serializeException", Kind::Bool, Scope::Agent),
    ("includeStackTrace", Kind::StackTrace, Scope::Agent),
    ("ifModifiedSince", Kind::Int, Scope::Agent),
    ("mimeType", Kind::MimeType, Scope::Response),
    ("callback", Kind::Callback, Scope::Response),
];

const ENABLED: &[&str] = &["true", "on", "yes", "y", "1"];
const DISABLED: &[&str] = &["false", "off", "no", "n", "0"];

fn spec(key: &str) -> Option<(&'static str, Kind, Scope)> {
    PARAMS.iter().find(|(k, _, _)| *k == key).copied()
}

/// Validated parameters, values in normal form (`true`/`false` for
/// booleans, decimal integers). Unknown keys are dropped, as agents do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<&'static str, String>);

impl Params {
    /// Parses the query string's parameters. `p` (the path parameter) is
    /// not a processing parameter and is ignored here.
    pub fn from_query<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Params, ProtocolError> {
        let mut params = Params::default();
        for (key, value) in pairs {
            // Like a servlet's getParameter: the first value counts.
            if let Some((name, kind, _)) = spec(key) {
                if !params.0.contains_key(name) {
                    params.0.insert(name, normalise(name, kind, value)?);
                }
            }
        }
        Ok(params)
    }

    /// Parses a request's `config` as it appears in the body (JSON
    /// strings, numbers or booleans).
    pub fn from_raw(raw: &RawValue) -> Result<Params, ProtocolError> {
        if !raw.get().starts_with('{') {
            return Err(ProtocolError::bad_request("\"config\" must be an object"));
        }
        let config: IndexMap<String, &RawValue> = serde_json::from_str(raw.get())
            .map_err(|e| ProtocolError::bad_request(format!("Invalid \"config\": {e}")))?;
        let mut params = Params::default();
        for (key, value) in config {
            let Some((name, kind, _)) = spec(&key) else {
                continue;
            };
            let text = match value.get().as_bytes().first() {
                Some(b'"') => {
                    serde_json::from_str::<String>(value.get()).map_err(|_| invalid(name))?
                }
                Some(b'n') => continue,
                Some(b'{' | b'[') | None => return Err(invalid(name)),
                _ => value.get().to_string(),
            };
            params.0.insert(name, normalise(name, kind, &text)?);
        }
        Ok(params)
    }

    /// `self` overridden by `over` (a request's `config` beats the query).
    pub fn merged_with(&self, over: &Params) -> Params {
        let mut merged = self.clone();
        merged.0.extend(over.0.iter().map(|(k, v)| (*k, v.clone())));
        merged
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v == "true")
    }

    /// Sets a parameter from outside (a client library's caller): an
    /// unknown key or a bad value is an error, not silently dropped.
    pub fn try_set(&mut self, key: &str, value: &str) -> Result<(), ProtocolError> {
        let (name, kind, _) = spec(key).ok_or_else(|| {
            ProtocolError::bad_request(format!(
                "{key:?} is not a processing parameter (known: {})",
                PARAMS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
            ))
        })?;
        self.0.insert(name, normalise(name, kind, value)?);
        Ok(())
    }

    /// Sets a parameter the gateway itself decides (already normal form).
    pub fn set(&mut self, key: &'static str, value: &str) {
        assert!(spec(key).is_some(), "{key} is not a processing parameter");
        self.0.insert(key, value.to_string());
    }

    pub fn remove(&mut self, key: &str) {
        self.0.remove(key);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The parameters an agent should see (its `config` object).
    pub fn agent_config(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.0
            .iter()
            .filter(|(k, _)| matches!(spec(k), Some((_, _, Scope::Agent))))
            .map(|(k, v)| (*k, v.as_str()))
    }

    /// [`Params::agent_config`] as a JSON object.
    pub fn to_agent_config(&self) -> Map<String, Value> {
        self.agent_config()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect()
    }
}

fn invalid(key: &str) -> ProtocolError {
    ProtocolError::bad_request(format!("Invalid value of {key} parameter"))
}

fn normalise(key: &'static str, kind: Kind, value: &str) -> Result<String, ProtocolError> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    let ok = match kind {
        Kind::Bool | Kind::StackTrace if ENABLED.contains(&lower.as_str()) => "true".to_string(),
        Kind::Bool | Kind::StackTrace if DISABLED.contains(&lower.as_str()) => "false".to_string(),
        Kind::StackTrace if lower == "runtime" => lower,
        Kind::Int => v.parse::<i32>().map_err(|_| invalid(key))?.to_string(),
        Kind::SerializeLong if lower == "number" || lower == "string" => lower,
        Kind::MimeType if lower == "application/json" || lower == "text/plain" => lower,
        Kind::Callback if is_js_identifier(v) => v.to_string(),
        _ => return Err(invalid(key)),
    };
    Ok(ok)
}

/// Jolokia's rule for JSONP callbacks: `^[$A-Z_][0-9A-Z_$]*$`, any case.
fn is_js_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '$' || c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '$' || c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn query_values_are_validated_and_normalised() {
        let p = Params::from_query([
            ("maxDepth", " 3 "),
            ("ignoreErrors", "YES"),
            ("includeStackTrace", "runtime"),
            ("unknown", "x"),
            ("p", "/read/x"),
        ])
        .unwrap();
        assert_eq!(p.get("maxDepth"), Some("3"));
        assert_eq!(p.get("ignoreErrors"), Some("true"));
        assert_eq!(p.get("includeStackTrace"), Some("runtime"));
        assert_eq!(p.get("unknown"), None);
        assert_eq!(p.get("p"), None);
    }

    #[test]
    fn bad_values_name_the_parameter() {
        for (k, v) in [
            ("maxDepth", "abc"),
            ("maxDepth", "14/2"),
            ("maxObjects", "99999999999"),
            ("ignoreErrors", "maybe"),
            ("serializeLong", "hex"),
            ("mimeType", "text/html"),
            ("callback", "alert(1)"),
            ("includeStackTrace", "sometimes"),
        ] {
            let e = Params::from_query([(k, v)]).unwrap_err();
            assert_eq!(e.message, format!("Invalid value of {k} parameter"));
            assert_eq!(e.status, 400);
        }
    }

    #[test]
    fn config_object_beats_query_and_accepts_json_types() {
        let q = Params::from_query([("maxDepth", "1"), ("ignoreErrors", "false")]).unwrap();
        let raw = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
        let c = Params::from_raw(&raw(json!({"maxDepth": 5, "ignoreErrors": true}))).unwrap();
        let m = q.merged_with(&c);
        assert_eq!(m.get("maxDepth"), Some("5"));
        assert_eq!(m.flag("ignoreErrors"), Some(true));
        assert!(Params::from_raw(&raw(json!({"maxDepth": [1]}))).is_err());
        assert!(Params::from_raw(&raw(json!([1]))).is_err(), "not an object");
    }

    #[test]
    fn response_parameters_are_not_forwarded() {
        let p = Params::from_query([
            ("mimeType", "text/plain"),
            ("callback", "cb"),
            ("maxDepth", "2"),
        ])
        .unwrap();
        let cfg = p.to_agent_config();
        assert_eq!(cfg.len(), 1);
        assert_eq!(cfg["maxDepth"], "2");
    }
}
