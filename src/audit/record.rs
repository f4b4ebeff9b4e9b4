//! One audit record. Fields appear in this order in every line; absent
//! ones are left out. Written values and exec arguments are hashed by
//! default, never credentials.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// Position in the whole log, across files; set by the writer.
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `item`, `auth_failure`, `target_list`, `log_opened`, `log_closed`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbean: Option<String>,
    /// A name, or a list of names for multi-attribute reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// A write's value, as configured: `sha256:<hex>`, `redacted`, or JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Exec arguments, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// `allowed` or `denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// The policy rule that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The answer's protocol status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Free text: why authentication failed, which file came before, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Hash of the previous record; set by the writer.
    pub prev: String,
}

/// Records serialised before the writer's lock is taken: for each, the
/// JSON text between `seq` (first) and `prev` (last), which only the
/// writer knows. [`super::chain::seal_records`] puts them around it.
#[derive(Debug, Default)]
pub struct Encoded {
    text: Vec<u8>,
    ends: Vec<usize>,
}

const SEQ_PLACEHOLDER: &[u8] = b"{\"seq\":0,";
const PREV_PLACEHOLDER: &[u8] = b",\"prev\":\"\"}";

impl Encoded {
    /// Serialises `entries`; their `seq` and `prev` are ignored.
    pub fn new(entries: Vec<Entry>) -> Encoded {
        let mut text = Vec::with_capacity(entries.len() * 320);
        let mut ends = Vec::with_capacity(entries.len());
        let mut scratch = Vec::with_capacity(512);
        for mut e in entries {
            e.seq = 0;
            e.prev.clear();
            scratch.clear();
            serde_json::to_writer(&mut scratch, &e).expect("records serialise");
            // Field order is the struct's: `seq` first, `prev` last.
            let body = scratch
                .strip_prefix(SEQ_PLACEHOLDER)
                .and_then(|b| b.strip_suffix(PREV_PLACEHOLDER))
                .expect("a record starts with seq and ends with prev");
            text.extend_from_slice(body);
            ends.push(text.len());
        }
        Encoded { text, ends }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all bodies together.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Each record's fields between `seq` and `prev`, without the commas.
    pub fn bodies(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.text[s..e])
    }
}

/// How written values and exec arguments are recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueMode {
    /// `sha256:<hex>` of the JSON text: provable later, not readable.
    #[default]
    Hash,
    /// `redacted`.
    Redact,
    /// The JSON text itself.
    Plain,
}

impl ValueMode {
    pub fn render(self, value: &Value) -> String {
        let text = value.to_string();
        match self {
            ValueMode::Hash => {
                let digest = Sha256::digest(text.as_bytes());
                let hex = super::chain::hex(&digest);
                format!("sha256:{hex}")
            }
            ValueMode::Redact => "redacted".into(),
            ValueMode::Plain => text,
        }
    }
}

/// Now, as records write it.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_hashed_by_default() {
        let v = json!({"password": "x"});
        let h = ValueMode::default().render(&v);
        assert!(h.starts_with("sha256:") && h.len() == 71, "{h}");
        assert!(!h.contains('x') || !h.contains("password"));
        assert_eq!(ValueMode::Redact.render(&v), "redacted");
        assert_eq!(ValueMode::Plain.render(&json!(5)), "5");
    }

    #[test]
    fn absent_fields_are_left_out() {
        let e = Entry {
            event: "item".into(),
            prev: "p".into(),
            ..Entry::default()
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"seq":0,"time":"","event":"item","prev":"p"}"#
        );
    }
}
