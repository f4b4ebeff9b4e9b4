//! Jolokia responses. An agent's answer is kept as raw JSON per top-level
//! field: the gateway only touches `request`, `status` and the error
//! fields, so `value` passes through byte for byte (no precision lost on
//! `Long.MAX_VALUE` or big decimals, no re-encoding cost).

use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::ProtocolError;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Response(FieldList);

/// An answer's few top-level fields, in order. A list, not a hash map:
/// there are four to six of them, looked up by comparing keys.
#[derive(Debug, Clone, Default)]
struct FieldList(Vec<(String, Raw)>);

impl FieldList {
    fn get(&self, key: &str) -> Option<&Raw> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn insert(&mut self, key: &str, value: Raw) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    fn shift_remove(&mut self, key: &str) -> Option<Raw> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(at).1)
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &Raw)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl Serialize for FieldList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for FieldList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<FieldList, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = FieldList;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FieldList, A::Error> {
                let mut fields = FieldList(Vec::with_capacity(map.size_hint().unwrap_or(4)));
                // A key given twice: the last one counts, as with a map.
                while let Some((key, value)) = map.next_entry::<String, Raw>()? {
                    fields.insert(&key, value);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// One field's JSON text: the answer's own, or shared (with the list
/// cache), so a large value reaches every client without a copy.
#[derive(Debug, Clone)]
pub enum Raw {
    Owned(Box<RawValue>),
    Shared(Arc<RawValue>),
}

impl Deref for Raw {
    type Target = RawValue;

    fn deref(&self) -> &RawValue {
        match self {
            Raw::Owned(b) => b,
            Raw::Shared(a) => a,
        }
    }
}

impl Raw {
    /// The text as a shared value (copied once if it was the answer's own).
    pub fn into_shared(self) -> Arc<RawValue> {
        match self {
            Raw::Owned(b) => Arc::from(b),
            Raw::Shared(a) => a,
        }
    }
}

impl Serialize for Raw {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Raw, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Raw::Owned)
    }
}

fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    // Serialising plain data (strings, numbers, JSON values) can't fail.
    serde_json::value::to_raw_value(value).expect("JSON value serialises")
}

impl Response {
    /// A successful answer with a value, as the gateway itself produces.
    pub fn value<T: Serialize + ?Sized>(value: &T, timestamp: u64) -> Response {
        let mut r = Response::default();
        r.set("value", value);
        r.set("timestamp", &timestamp);
        r.set("status", &200);
        r
    }

    /// An error answer in the protocol 8 shape.
    pub fn error(e: &ProtocolError) -> Response {
        let mut r = Response::default();
        r.set("error_type", e.error_type.as_str());
        r.set("error", &e.message);
        r.set("status", &e.status);
        r
    }

    pub fn status(&self) -> Option<u16> {
        self.0.get("status")?.get().trim().parse().ok()
    }

    /// The agent's clock when it answered, in seconds.
    pub fn timestamp(&self) -> Option<u64> {
        self.0.get("timestamp")?.get().trim().parse().ok()
    }

    pub fn is_error(&self) -> bool {
        self.status().is_none_or(|s| s != 200 && s != 304)
    }

    /// The `error` text of an error answer.
    pub fn error_text(&self) -> String {
        self.field("error")
            .unwrap_or_else(|| "no error message".into())
    }

    /// A field decoded as `T`; `None` when it is absent or not a `T`.
    pub fn field<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.get(key).map(|v| &**v)
    }

    pub fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.0.insert(key, Raw::Owned(raw(value)));
    }

    /// Sets a field to JSON text as it is.
    pub fn set_raw(&mut self, key: &str, value: Box<RawValue>) {
        self.0.insert(key, Raw::Owned(value));
    }

    /// Sets a field to JSON text others hold too (no copy).
    pub fn set_shared(&mut self, key: &str, value: Arc<RawValue>) {
        self.0.insert(key, Raw::Shared(value));
    }

    /// Puts `request` first, where agents put it.
    pub fn set_request(&mut self, request: &RawValue) {
        self.0.shift_remove("request");
        (self.0)
            .0
            .insert(0, ("request".to_string(), Raw::Owned(request.to_owned())));
    }

    pub fn remove(&mut self, key: &str) -> Option<Raw> {
        self.0.shift_remove(key)
    }

    /// The fields in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Raw)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Its fields, taken out (the HTTP body moves large values instead of
    /// copying them).
    pub fn into_fields(self) -> impl Iterator<Item = (String, Raw)> {
        self.0 .0.into_iter()
    }

    /// The answer as a JSON tree, each field's text read once. An agent's
    /// value may nest deeper than a tree is built (serde_json's 128
    /// levels): then the error, never a panic.
    pub fn into_value(self) -> Result<Value, serde_json::Error> {
        self.into_fields()
            .map(|(key, raw)| Ok((key, serde_json::from_str(raw.get())?)))
            .collect::<Result<serde_json::Map<String, Value>, _>>()
            .map(Value::Object)
    }

    /// A successful answer whose value is JSON text made elsewhere, taken
    /// as it is (a merged fan-out's: no copy of it).
    pub fn value_text(value: Box<RawValue>, timestamp: u64) -> Response {
        let mut r = Response::default();
        r.set_raw("value", value);
        r.set("timestamp", &timestamp);
        r.set("status", &200);
        r
    }
}

/// Parses an agent's answer to a bulk POST: a JSON array of responses, or
/// one object (an agent answers a bulk it cannot parse with one error).
///
/// An answer whose `status` is not an HTTP status number (a broken or
/// hostile agent's `"status":"200"`) becomes an error answer for its item:
/// clients, the audit and the metrics then agree on what happened.
pub fn parse_bulk_answer(bytes: &[u8]) -> Result<Vec<Response>, String> {
    let answers = parse_json_answers(bytes)?;
    Ok(answers
        .into_iter()
        .map(Response::with_valid_status)
        .collect())
}

/// The JSON objects of an answer as they are, statuses unchecked: for
/// telling whether an HTTP error page is Jolokia-shaped at all.
pub fn parse_json_answers(bytes: &[u8]) -> Result<Vec<Response>, String> {
    let trimmed = bytes.trim_ascii_start();
    if trimmed.first() == Some(&b'{') {
        let one = serde_json::from_slice::<Response>(trimmed).map_err(|e| e.to_string())?;
        return Ok(vec![one]);
    }
    serde_json::from_slice::<Vec<Response>>(trimmed).map_err(|e| {
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]).into_owned();
        format!("{e} (answer starts with {head:?})")
    })
}

impl Response {
    /// Itself when its `status` is a number from 100 to 599; else an
    /// error answer saying what the agent sent instead.
    fn with_valid_status(self) -> Response {
        if self.status().is_some_and(|s| (100..=599).contains(&s)) {
            return self;
        }
        let sent = match self.get("status") {
            None => "no status".to_string(),
            Some(raw) => {
                let text: String = raw.get().chars().take(40).collect();
                format!("status {text}")
            }
        };
        Response::error(&ProtocolError::new(
            502,
            "jmxgate.AgentBadAnswer",
            format!(
                "the agent's answer is not a Jolokia response: {sent}, not an HTTP status number"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_pass_through_verbatim() {
        let text = br#"[{"request":{"type":"read"},"value":9223372036854775807,"timestamp":1,"status":200},{"value":1.0E308,"status":200,"x":"a\/b"}]"#;
        let rs = parse_bulk_answer(text).unwrap();
        assert_eq!(rs[0].get("value").unwrap().get(), "9223372036854775807");
        assert_eq!(rs[1].get("value").unwrap().get(), "1.0E308");
        assert_eq!(rs[1].get("x").unwrap().get(), r#""a\/b""#);
        assert_eq!(rs[0].status(), Some(200));
        assert!(!rs[0].is_error());
    }

    #[test]
    fn request_goes_first() {
        let mut r = parse_bulk_answer(br#"[{"value":1,"status":200}]"#)
            .unwrap()
            .remove(0);
        r.set_request(&raw(&serde_json::json!({"type":"version"})));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"request":{"type":"version"},"value":1,"status":200}"#
        );
    }

    #[test]
    fn an_object_answer_is_one_response() {
        let rs = parse_bulk_answer(br#" {"error":"boom","status":400}"#).unwrap();
        assert_eq!(rs.len(), 1);
        assert!(rs[0].is_error());
        assert_eq!(rs[0].error_text(), "boom");
        assert!(parse_bulk_answer(b"<html>").is_err());
    }

    #[test]
    fn an_answer_without_a_numeric_status_is_an_error_for_its_item() {
        let rs = parse_bulk_answer(
            br#"[{"value":1,"status":"200"},{"value":2},{"value":3,"status":200},{"status":1e3}]"#,
        )
        .unwrap();
        assert_eq!(rs[0].status(), Some(502));
        assert!(
            rs[0].error_text().contains("status \"200\""),
            "{}",
            rs[0].error_text()
        );
        assert!(rs[0].get("value").is_none(), "the value is not passed on");
        assert!(rs[1].error_text().contains("no status"));
        assert_eq!(rs[2].status(), Some(200));
        assert_eq!(rs[3].status(), Some(502));
    }
}
