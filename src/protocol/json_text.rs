//! Write values and exec arguments as JSON text. They pass to the agent as
//! the client wrote them (white space removed): no JSON tree is built, so
//! no number is rounded and no nesting limit of ours applies while reading.
//! What no agent would receive as sent is refused at the item instead:
//! numbers beyond Java's `long` or `double`, lone UTF-16 surrogates, and
//! nesting deeper than [`MAX_DEPTH`].

use std::borrow::Cow;
use std::ops::Range;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::ProtocolError;

/// How deep a write value or an exec argument may nest. 1.x agents fail a
/// whole bulk with `StackOverflowError` on deep values; JMX open types are
/// rarely ten levels deep.
pub const MAX_DEPTH: usize = 64;

/// One JSON value as compact text, checked to be something every agent
/// generation receives as sent.
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// Checks and compacts a value from a client's body. `field` names it
    /// in errors (`value`, `arguments[2]`).
    pub fn from_raw(raw: &RawValue, field: &str) -> Result<JsonText, ProtocolError> {
        let compact = compact(raw.get()).map_err(|why| {
            ProtocolError::bad_request(format!("\"{field}\" can't be forwarded: {why}"))
        })?;
        // `compact` only removes white space from valid JSON.
        RawValue::from_string(compact)
            .map(JsonText)
            .map_err(|e| ProtocolError::bad_request(format!("\"{field}\": {e}")))
    }

    /// A value built in code (a client library's caller).
    pub fn from_value(value: &Value) -> JsonText {
        JsonText(serde_json::value::to_raw_value(value).expect("a JSON value serialises"))
    }

    /// `null`.
    pub fn null() -> JsonText {
        JsonText::from_value(&Value::Null)
    }

    /// A JSON string.
    pub fn string(s: &str) -> JsonText {
        JsonText::from_value(&Value::String(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The text as a raw JSON value, to serialise as it is.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// The value as a tree, when it fits one (`None` for numbers beyond
    /// `f64` or nesting beyond serde_json's limit).
    pub fn to_value(&self) -> Option<Value> {
        serde_json::from_str(self.0.get()).ok()
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &JsonText) -> bool {
        self.as_str() == other.as_str()
    }
}

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// `text` (valid JSON) without white space between tokens, or why it
/// can't be forwarded.
fn compact(text: &str) -> Result<String, String> {
    // Agents of both generations turn a lone surrogate into `?`.
    if let Some(escape) = lone_surrogates(text).first() {
        return Err(lone_surrogate(&text[escape.clone()]));
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => {
                let end = string_end(text, i)?;
                out.push_str(&text[i..end]);
                i = end;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "it nests deeper than {MAX_DEPTH} levels of arrays and objects"
                    ));
                }
                out.push(char::from(bytes[i]));
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                out.push(char::from(bytes[i]));
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let end = i + bytes[i..]
                    .iter()
                    .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(bytes.len() - i);
                check_number(&text[i..end])?;
                out.push_str(&text[i..end]);
                i = end;
            }
            _ => {
                // `,` `:` and the letters of true, false, null.
                let c = text[i..].chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    Ok(out)
}

/// The index after the string starting at `start` (its opening quote).
fn string_end(text: &str, start: usize) -> Result<usize, String> {
    let bytes = text.as_bytes();
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err("a string is not closed".into())
}

/// Where `text` (valid JSON) has `\uXXXX` escapes of UTF-16 surrogates
/// that are not part of a pair. Backslashes occur only in strings, so the
/// escapes can be found without telling strings from the rest.
pub fn lone_surrogates(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let unit_at = |i: usize| {
        (bytes.get(i) == Some(&b'\\') && bytes.get(i + 1) == Some(&b'u'))
            .then(|| text.get(i + 2..i + 6))
            .flatten()
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    let mut lone = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit_at(i) {
            Some(0xD800..=0xDBFF) if matches!(unit_at(i + 6), Some(0xDC00..=0xDFFF)) => i += 12,
            Some(0xD800..=0xDFFF) => {
                lone.push(i..i + 6);
                i += 6;
            }
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    lone
}

/// `text` (valid JSON) with each lone surrogate escape replaced by
/// `\ufffd`, so that strict parsers read it (echoes of refused items).
pub fn without_lone_surrogates(text: &str) -> Cow<'_, str> {
    let lone = lone_surrogates(text);
    if lone.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for range in lone {
        out.push_str(&text[from..range.start]);
        out.push_str("\\ufffd");
        from = range.end;
    }
    out.push_str(&text[from..]);
    Cow::Owned(out)
}

fn lone_surrogate(escape: &str) -> String {
    format!(
        "a string holds a lone UTF-16 surrogate ({escape}), which is no character; agents would receive '?'"
    )
}

/// Integers must fit Java's `long` and other numbers a `double`: 1.x agents
/// fail the whole bulk on a larger integer and read a larger double as
/// null; 2.x agents would take both, but which generation a target runs
/// is not known when a request is read.
fn check_number(token: &str) -> Result<(), String> {
    let shown = shorten(token);
    if !token.contains(['.', 'e', 'E']) {
        return token.parse::<i64>().map(|_| ()).map_err(|_| {
            format!(
                "the integer {shown} is outside the range of a Java long; send it as a string (\"{shown}\"), which the agent converts to the attribute's or parameter's type"
            )
        });
    }
    let parsed: f64 = token
        .parse()
        .map_err(|_| format!("{shown} is not a number"))?;
    if parsed.is_infinite() {
        return Err(format!(
            "the number {shown} is outside the range of a Java double; send it as a string, which the agent converts to the attribute's or parameter's type"
        ));
    }
    let mantissa = token.split(['e', 'E']).next().unwrap_or(token);
    if parsed == 0.0 && mantissa.bytes().any(|b| matches!(b, b'1'..=b'9')) {
        return Err(format!(
            "the number {shown} is too small for a Java double (it would arrive as 0); send it as a string"
        ));
    }
    Ok(())
}

/// A long number for an error message: its start and its length.
fn shorten(token: &str) -> String {
    if token.len() <= 24 {
        token.to_string()
    } else {
        format!("{}… ({} characters)", &token[..20], token.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<String, String> {
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        JsonText::from_raw(raw, "value")
            .map(|v| v.as_str().to_string())
            .map_err(|e| e.message)
    }

    #[test]
    fn values_pass_as_written_without_white_space() {
        assert_eq!(
            check(" { \"a b\" : [ 1 , -2.5e3 , true , null , \"x\\\"y\" ] } ").unwrap(),
            r#"{"a b":[1,-2.5e3,true,null,"x\"y"]}"#
        );
        // Escapes stay as written, a surrogate pair included.
        assert_eq!(
            check(r#""\u00e9\ud83d\ude00\/""#).unwrap(),
            r#""\u00e9\ud83d\ude00\/""#
        );
        assert_eq!(check("\"zoé ✓\"").unwrap(), "\"zoé ✓\"");
        assert_eq!(check("9223372036854775807").unwrap(), "9223372036854775807");
        assert_eq!(
            check("-9223372036854775808").unwrap(),
            "-9223372036854775808"
        );
        assert_eq!(
            check("1.7976931348623157e308").unwrap(),
            "1.7976931348623157e308"
        );
        assert_eq!(check("0.0e-999").unwrap(), "0.0e-999");
    }

    #[test]
    fn what_agents_would_not_receive_as_sent_is_refused() {
        for (text, says) in [
            ("9223372036854775808", "outside the range of a Java long"),
            (&"9".repeat(400), "(400 characters)"),
            ("1e400", "outside the range of a Java double"),
            ("-1e400", "outside the range of a Java double"),
            ("1e-400", "too small for a Java double"),
            (r#""\ud800""#, "lone UTF-16 surrogate (\\ud800)"),
            (r#""a\udc00b""#, "lone UTF-16 surrogate (\\udc00)"),
            (r#""\ud800x""#, "lone UTF-16 surrogate"),
            (r#""\ud800\u0041""#, "lone UTF-16 surrogate"),
            (r#"{"k":["\ud800"]}"#, "lone UTF-16 surrogate"),
        ] {
            let e = check(text).unwrap_err();
            assert!(e.starts_with("\"value\" can't be forwarded: "), "{e}");
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn lone_surrogates_are_found_and_replaced() {
        let text = r#"{"a\ud800":"\\ud800 \ud83d\ude00 \udc00\ud800x","b":"\ud800\u0041"}"#;
        let found: Vec<&str> = lone_surrogates(text)
            .into_iter()
            .map(|r| &text[r])
            .collect();
        assert_eq!(found, [r"\ud800", r"\udc00", r"\ud800", r"\ud800"]);
        assert_eq!(
            without_lone_surrogates(text),
            r#"{"a\ufffd":"\\ud800 \ud83d\ude00 \ufffd\ufffdx","b":"\ufffd\u0041"}"#
        );
        assert!(matches!(
            without_lone_surrogates(r#""\ud83d\ude00""#),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn nesting_is_bounded() {
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(check(&at_limit).is_ok());
        let deeper = format!("{}1{}", "[{\"k\":".repeat(100), "}]".repeat(100));
        let e = check(&deeper).unwrap_err();
        assert!(e.contains("deeper than 64 levels"), "{e}");
        // Far deeper than serde_json's own limit: refused, not a crash.
        let deepest = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(check(&deepest).is_err());
    }

    #[test]
    fn trees_where_they_fit() {
        let v = JsonText::from_value(&serde_json::json!({"a": [1, "b"]}));
        assert_eq!(v.as_str(), r#"{"a":[1,"b"]}"#);
        assert_eq!(v.to_value().unwrap()["a"][1], "b");
        assert_eq!(JsonText::null().as_str(), "null");
        assert_eq!(JsonText::string("x\"").as_str(), r#""x\"""#);
    }
}
