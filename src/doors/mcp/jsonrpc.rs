//! JSON-RPC framing, checked before the MCP SDK sees a body, so that a
//! malformed message gets the error JSON-RPC defines for it (the SDK
//! answers some with HTTP 415 and plain text, and bad params of a known
//! method as an unknown method):
//! - a body that is not JSON: -32700 (HTTP 400);
//! - not a JSON-RPC message, or a batch where the negotiated protocol has
//!   none: -32600 (HTTP 400);
//! - a known method with params it cannot take: -32602, with the
//!   request's id (HTTP 200, as any answered request).
//!
//! Batches exist in protocol 2025-03-26 only; there each element is
//! checked and answered on its own, in order. Pure.

use serde_json::{json, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// The one protocol revision whose Streamable HTTP takes JSON-RPC batches.
pub const BATCH_PROTOCOL: &str = "2025-03-26";

/// The error of a batch element the gateway did not run (or whose answer
/// it did not keep) because the batch reached one of its bounds: in
/// JSON-RPC's range for server errors.
pub const BEYOND_BOUNDS: i64 = -32000;

/// The bounds of one batch, those of a Jolokia bulk request: elements
/// (`server.max_bulk_items`), bytes of answers held
/// (`target_defaults.max_response_bytes`, the bound on one agent answer)
/// and time (`target_defaults.request_timeout`, the deadline of one
/// agent exchange). Elements run in order; once a bound is reached, the
/// rest are answered with [`BEYOND_BOUNDS`] errors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchBounds {
    pub max_items: usize,
    pub max_bytes: usize,
    pub deadline: std::time::Duration,
}

/// Which bound a batch reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Items,
    Bytes,
    Time,
}

impl BatchBounds {
    /// Whether the element at `index` may still start, given the bytes of
    /// answers already held and the time the batch has run: the bound it
    /// would pass, if any.
    pub fn reached(
        &self,
        index: usize,
        used_bytes: usize,
        elapsed: std::time::Duration,
    ) -> Option<Bound> {
        if index >= self.max_items {
            Some(Bound::Items)
        } else if used_bytes >= self.max_bytes {
            Some(Bound::Bytes)
        } else if elapsed >= self.deadline {
            Some(Bound::Time)
        } else {
            None
        }
    }

    /// Why the elements from the bound on were not run, naming the bound,
    /// its value and its key.
    pub fn not_run(&self, bound: Bound, elements: usize) -> String {
        format!(
            "Not run: {}; send it in another request",
            self.why(bound, elements)
        )
    }

    /// The bound reached, its value and its key.
    pub fn why(&self, bound: Bound, elements: usize) -> String {
        match bound {
            Bound::Items => format!(
                "this batch has {elements} elements and the gateway runs at most {} per batch \
                 (server.max_bulk_items)",
                self.max_items
            ),
            Bound::Bytes => format!(
                "the batch's answers reached its bound of {} bytes \
                 (target_defaults.max_response_bytes)",
                self.max_bytes
            ),
            Bound::Time => format!(
                "the batch ran past its deadline of {} ms (target_defaults.request_timeout)",
                self.deadline.as_millis()
            ),
        }
    }

    /// Why the answer of an element that ran is not given: it would take
    /// the batch's answers past their byte bound.
    pub fn not_kept(&self, room: usize) -> String {
        format!(
            "Ran, but its answer is larger than the {room} bytes left of the batch's bound of {} \
             bytes (target_defaults.max_response_bytes); send it on its own to see the answer",
            self.max_bytes
        )
    }
}

/// What a POST body holds, once its framing is sound.
#[derive(Debug, PartialEq)]
pub enum Framing {
    /// One message: handed to the SDK as it is.
    One,
    /// A batch (protocol 2025-03-26): its elements, each to check and run.
    Batch(Vec<Value>),
}

/// A body refused before the SDK: the HTTP status and the JSON-RPC error
/// answer to send.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub answer: Value,
}

/// A JSON-RPC error answer.
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// Checks a POST body's framing, given as parsed (a batch's elements are
/// moved out, not copied); `protocol` is the request's
/// `MCP-Protocol-Version` header.
pub fn check(
    body: Result<Value, serde_json::Error>,
    protocol: Option<&str>,
) -> Result<Framing, Refusal> {
    let refused = |code, message: String| Refusal {
        status: 400,
        answer: error(Value::Null, code, message),
    };
    let value = body.map_err(|e| {
        refused(
            PARSE_ERROR,
            format!("Parse error: the body is not JSON ({e})"),
        )
    })?;
    match value {
        Value::Array(elements) if elements.is_empty() => Err(refused(
            INVALID_REQUEST,
            "Invalid Request: an empty batch".into(),
        )),
        Value::Array(elements) if protocol == Some(BATCH_PROTOCOL) => Ok(Framing::Batch(elements)),
        Value::Array(_) => Err(refused(
            INVALID_REQUEST,
            format!(
                "Invalid Request: JSON-RPC batches are part of MCP protocol {BATCH_PROTOCOL} only \
                 (this request says {}); send one message per request",
                protocol.unwrap_or("no MCP-Protocol-Version")
            ),
        )),
        message => match problem(&message) {
            None => Ok(Framing::One),
            Some(p) => Err(p.refusal(&message)),
        },
    }
}

/// What is wrong with one message, if anything the SDK would misreport.
#[derive(Debug, PartialEq)]
pub struct Problem {
    pub code: i64,
    pub message: String,
}

impl Problem {
    /// Bad params are an ordinary answer to the request; a message that
    /// is not JSON-RPC at all is a bad HTTP request.
    pub fn refusal(&self, message: &Value) -> Refusal {
        Refusal {
            status: if self.code == INVALID_PARAMS {
                200
            } else {
                400
            },
            answer: self.answer(message),
        }
    }

    pub fn answer(&self, message: &Value) -> Value {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        error(id, self.code, self.message.clone())
    }
}

pub fn problem(message: &Value) -> Option<Problem> {
    let invalid = |message: &str| {
        Some(Problem {
            code: INVALID_REQUEST,
            message: format!("Invalid Request: {message}"),
        })
    };
    let Some(o) = message.as_object() else {
        return invalid("a JSON-RPC message is an object");
    };
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    let Some(method) = o.get("method") else {
        // A response to the server: the SDK's to judge.
        return None;
    };
    let Some(method) = method.as_str() else {
        return invalid("\"method\" must be a string");
    };
    if let Some(id) = o.get("id") {
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return invalid("\"id\" must be a string or an integer");
        }
    }
    let bad = |message: String| {
        Some(Problem {
            code: INVALID_PARAMS,
            message: format!("Invalid params for {method}: {message}"),
        })
    };
    let params = o.get("params");
    if params.is_some_and(|p| !p.is_object()) {
        return bad("params must be an object".into());
    }
    let field = |key: &str| params.and_then(|p| p.get(key));
    let kind = |key: &str, ok: fn(&Value) -> bool, what: &str| match field(key) {
        None => Some(format!("params.{key} is missing ({what})")),
        Some(v) if !ok(v) => Some(format!("params.{key} must be {what}")),
        Some(_) => None,
    };
    let problems: Vec<String> = match method {
        "tools/call" => {
            let mut p: Vec<String> = kind("name", Value::is_string, "a string: the tool's name")
                .into_iter()
                .collect();
            if field("arguments").is_some_and(|a| !a.is_object()) {
                p.push("params.arguments must be an object of named arguments".into());
            }
            p
        }
        "initialize" => [
            kind("protocolVersion", Value::is_string, "a string"),
            kind("capabilities", Value::is_object, "an object"),
            kind(
                "clientInfo",
                Value::is_object,
                "an object with name and version",
            ),
        ]
        .into_iter()
        .flatten()
        .collect(),
        "tools/list" => field("cursor")
            .filter(|c| !c.is_string())
            .map(|_| "params.cursor must be a string".to_string())
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    if problems.is_empty() {
        None
    } else {
        bad(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` of a body as bytes, parsed as the door parses it.
    fn check(body: &[u8], protocol: Option<&str>) -> Result<Framing, Refusal> {
        super::check(serde_json::from_slice::<Value>(body), protocol)
    }

    fn code(r: &Refusal) -> i64 {
        r.answer["error"]["code"].as_i64().unwrap()
    }

    #[test]
    fn a_batch_stops_at_the_first_bound_it_reaches() {
        use std::time::Duration;
        let bounds = BatchBounds {
            max_items: 3,
            max_bytes: 1000,
            deadline: Duration::from_secs(15),
        };
        let fresh = Duration::ZERO;
        assert_eq!(bounds.reached(2, 999, fresh), None);
        assert_eq!(bounds.reached(3, 0, fresh), Some(Bound::Items));
        assert_eq!(bounds.reached(1, 1000, fresh), Some(Bound::Bytes));
        assert_eq!(
            bounds.reached(1, 0, Duration::from_secs(15)),
            Some(Bound::Time)
        );
        for (bound, says) in [
            (Bound::Items, "at most 3 per batch (server.max_bulk_items)"),
            (
                Bound::Bytes,
                "1000 bytes (target_defaults.max_response_bytes)",
            ),
            (Bound::Time, "15000 ms (target_defaults.request_timeout)"),
        ] {
            let text = bounds.not_run(bound, 7);
            assert!(
                text.starts_with("Not run: ") && text.contains(says),
                "{text}"
            );
        }
        assert!(bounds.not_kept(12).contains("12 bytes left"));
    }

    #[test]
    fn a_body_that_is_not_json_is_a_parse_error() {
        let r = check(b"{nope", None).unwrap_err();
        assert_eq!((r.status, code(&r)), (400, PARSE_ERROR));
        assert_eq!(r.answer["id"], Value::Null);
    }

    #[test]
    fn bad_params_of_known_methods_are_invalid_params_with_the_id() {
        for (message, says) in [
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}),
                "params.name is missing",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}),
                "params.name must be",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x", "arguments": [1]}}),
                "params.arguments",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "initialize"}),
                "params.protocolVersion is missing",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1]}),
                "params must be an object",
            ),
        ] {
            let r = check(message.to_string().as_bytes(), None).unwrap_err();
            assert_eq!((r.status, code(&r)), (200, INVALID_PARAMS), "{message}");
            assert_eq!(r.answer["id"], 7);
            let text = r.answer["error"]["message"].as_str().unwrap();
            assert!(text.contains(says), "{message}: {text}");
        }
    }

    #[test]
    fn sound_messages_pass_to_the_sdk() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}),
        ] {
            assert_eq!(
                check(message.to_string().as_bytes(), None),
                Ok(Framing::One)
            );
        }
    }

    #[test]
    fn batches_only_where_the_protocol_has_them() {
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
        let r = check(batch, Some("2025-06-18")).unwrap_err();
        assert_eq!((r.status, code(&r)), (400, INVALID_REQUEST));
        assert!(
            matches!(check(batch, Some(BATCH_PROTOCOL)), Ok(Framing::Batch(b)) if b.len() == 1)
        );
        let r = check(b"[]", Some(BATCH_PROTOCOL)).unwrap_err();
        assert_eq!(code(&r), INVALID_REQUEST);
    }

    #[test]
    fn what_is_not_json_rpc_is_an_invalid_request() {
        for body in [
            r#""text""#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
        ] {
            let r = check(body.as_bytes(), None).unwrap_err();
            assert_eq!((r.status, code(&r)), (400, INVALID_REQUEST), "{body}");
        }
    }
}
