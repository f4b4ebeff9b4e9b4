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
    /// The gateway that wrote it (`audit.replica_id`); set by the writer.
    /// Files written before replicas had ids lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `item`, `auth_failure`, `target_list`, `log_opened`, `log_closed`,
    /// `checkpoint`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// A bearer token's `iss`: with `auth` and `principal`, who this was
    /// (a subject is a name only within its issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// How the request came when not as a Jolokia request: `mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The MCP tool whose call made this record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The MCP client's own name (`clientInfo.name`) as the request
    /// carried it: attacker-controlled text, cut and without control
    /// characters (`pipeline::audit::McpClient`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_client: Option<String>,
    /// Its `clientInfo.version`, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_client_version: Option<String>,
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
    /// The access request a record is a step of (`access_*` events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_request: Option<String>,
    /// Who asked for that request (its steps are taken by others too: a
    /// reviewer, the gateway's expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
    /// A checkpoint's signing key (see `checkpoint::key_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The first record a checkpoint is the first to prove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    /// The last record a checkpoint proves (its own `seq` - 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// A checkpoint's base64 Ed25519 signature (see `checkpoint::message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    /// Hash of the previous record; set by the writer.
    pub prev: String,
}

/// A record borrowed from what it describes, so that the items of a bulk
/// don't each copy the request's caller fields. It serialises exactly like
/// the [`Entry`] it equals: the same fields in the same order, absent ones
/// left out (the tests compare the two).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EntryRef<'a> {
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<&'a str>,
    pub time: &'a str,
    pub event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_client: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_client_version: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub roles: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mbean: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<Names<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_request: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requester: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sig: Option<&'a str>,
    pub prev: &'a str,
}

/// An attribute name, or several, as [`Entry::attribute`] holds them.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum Names<'a> {
    One(&'a str),
    Many(&'a [String]),
    Json(&'a Value),
}

impl<'a> From<&'a Entry> for EntryRef<'a> {
    fn from(e: &'a Entry) -> EntryRef<'a> {
        EntryRef {
            seq: e.seq,
            replica: e.replica.as_deref(),
            time: &e.time,
            event: &e.event,
            request_id: e.request_id.as_deref(),
            index: e.index,
            principal: e.principal.as_deref(),
            auth: e.auth.as_deref(),
            issuer: e.issuer.as_deref(),
            certificate_sha256: e.certificate_sha256.as_deref(),
            client: e.client.as_deref(),
            channel: e.channel.as_deref(),
            tool: e.tool.as_deref(),
            mcp_client: e.mcp_client.as_deref(),
            mcp_client_version: e.mcp_client_version.as_deref(),
            roles: &e.roles,
            target: e.target.as_deref(),
            kind: e.kind.as_deref(),
            mbean: e.mbean.as_deref(),
            attribute: e.attribute.as_ref().map(Names::Json),
            operation: e.operation.as_deref(),
            value: e.value.as_deref(),
            arguments: e.arguments.as_deref(),
            decision: e.decision.as_deref(),
            rule: e.rule.as_deref(),
            status: e.status,
            error_type: e.error_type.as_deref(),
            latency_ms: e.latency_ms,
            note: e.note.as_deref(),
            access_request: e.access_request.as_deref(),
            requester: e.requester.as_deref(),
            key_id: e.key_id.as_deref(),
            first_seq: e.first_seq,
            last_seq: e.last_seq,
            sig: e.sig.as_deref(),
            prev: &e.prev,
        }
    }
}

/// Records serialised before the writer's lock is taken: for each, the
/// JSON text between `seq` and `replica` (first) and `prev` (last), which
/// only the writer knows. `chain::seal_records` puts them around it.
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
        let mut encoded = Encoded {
            text: Vec::with_capacity(entries.len() * 320),
            ends: Vec::with_capacity(entries.len()),
        };
        for e in &entries {
            encoded.push(&EntryRef::from(e));
        }
        encoded
    }

    /// Serialises one more record; its `seq`, `replica` and `prev` are
    /// ignored.
    pub fn push(&mut self, record: &EntryRef<'_>) {
        let start = self.text.len();
        let record = EntryRef {
            seq: 0,
            replica: None,
            prev: "",
            ..*record
        };
        serde_json::to_writer(&mut self.text, &record).expect("records serialise");
        // Field order is the struct's: `seq` first, `prev` last.
        let written = &self.text[start..];
        assert!(
            written.starts_with(SEQ_PLACEHOLDER) && written.ends_with(PREV_PLACEHOLDER),
            "a record starts with seq and ends with prev"
        );
        self.text.truncate(self.text.len() - PREV_PLACEHOLDER.len());
        self.text.drain(start..start + SEQ_PLACEHOLDER.len());
        self.ends.push(self.text.len());
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

    /// Each record's fields between `seq` (and `replica`) and `prev`,
    /// without the commas.
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
    /// `text` is the value's compact JSON, as forwarded to the agent.
    pub fn render(self, text: &str) -> String {
        match self {
            ValueMode::Hash => {
                let digest = Sha256::digest(text.as_bytes());
                let hex = hex(&digest);
                format!("sha256:{hex}")
            }
            ValueMode::Redact => "redacted".into(),
            ValueMode::Plain => text.to_string(),
        }
    }
}

/// Lower-case hex of a digest.
pub(crate) fn hex(bytes: &[u8]) -> String {
    // Per record on the hot path: no formatter per byte.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
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
        let v = json!({"password": "x"}).to_string();
        let h = ValueMode::default().render(&v);
        assert!(h.starts_with("sha256:") && h.len() == 71, "{h}");
        assert!(!h.contains('x') || !h.contains("password"));
        assert_eq!(ValueMode::Redact.render(&v), "redacted");
        assert_eq!(ValueMode::Plain.render("5"), "5");
    }

    fn every_field() -> Entry {
        Entry {
            seq: 7,
            replica: Some("gw-1".into()),
            time: "2026-11-22T10:00:00.000Z".into(),
            event: "item".into(),
            request_id: Some("r-1".into()),
            index: Some(3),
            principal: Some("alice \"the\" admin".into()),
            auth: Some("bearer".into()),
            issuer: Some("https://idp.example".into()),
            certificate_sha256: Some("ab".into()),
            client: Some("127.0.0.1:5".into()),
            channel: Some("mcp".into()),
            tool: Some("execute_operation".into()),
            mcp_client: Some("claude-code".into()),
            mcp_client_version: Some("2.1.0".into()),
            roles: vec!["ops".into(), "read".into()],
            target: Some("orders-1".into()),
            kind: Some("exec".into()),
            mbean: Some("java.lang:type=Memory".into()),
            attribute: Some(json!(["A", "B"])),
            operation: Some("gc".into()),
            value: Some("sha256:00".into()),
            arguments: Some("redacted".into()),
            decision: Some("allowed".into()),
            rule: Some("<allow> 2".into()),
            status: Some(200),
            error_type: Some("java.lang.Exception".into()),
            latency_ms: Some(1.25),
            note: Some("n\u{e9}".into()),
            access_request: Some("ar-00".into()),
            requester: Some("dev".into()),
            key_id: Some("0123456789abcdef".into()),
            first_seq: Some(1),
            last_seq: Some(6),
            sig: Some("c2ln".into()),
            prev: "p".into(),
        }
    }

    #[test]
    fn borrowed_records_serialise_like_entries() {
        let full = every_field();
        let minimal = Entry {
            event: "item".into(),
            ..Entry::default()
        };
        for e in [&full, &minimal] {
            assert_eq!(
                serde_json::to_string(&EntryRef::from(e)).unwrap(),
                serde_json::to_string(e).unwrap()
            );
        }
        // Attribute names given as text serialise as the JSON they equal.
        let names = ["A".to_string(), "B".to_string()];
        for (borrowed, owned) in [
            (Names::One("A"), json!("A")),
            (Names::Many(&names), json!(["A", "B"])),
        ] {
            let with = |attribute| EntryRef {
                attribute,
                ..EntryRef::from(&full)
            };
            let owned_entry = Entry {
                attribute: Some(owned),
                ..full.clone()
            };
            assert_eq!(
                serde_json::to_string(&with(Some(borrowed))).unwrap(),
                serde_json::to_string(&owned_entry).unwrap()
            );
        }
    }

    #[test]
    fn encoded_bodies_leave_seq_and_prev_to_the_writer() {
        let encoded = Encoded::new(vec![every_field(), every_field()]);
        let whole = serde_json::to_string(&every_field()).unwrap();
        let body = whole
            .strip_prefix("{\"seq\":7,\"replica\":\"gw-1\",")
            .and_then(|b| b.strip_suffix(",\"prev\":\"p\"}"))
            .unwrap();
        let bodies: Vec<&[u8]> = encoded.bodies().collect();
        assert_eq!(bodies, vec![body.as_bytes(), body.as_bytes()]);
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
