//! Step 3, parse: turns the HTTP request (GET path or POST body) into typed
//! items. Failures of the HTTP exchange itself (unreadable body, too many
//! items, bad query parameters) are [`HttpError`]s; a malformed *item* is
//! kept as an error at its index so the rest of a bulk still runs.

use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::protocol::reduce::Reduce;
use crate::protocol::{self, Params, ProtocolError, ProxyTarget, Request};

use super::HttpError;

/// One item of the client's request.
#[derive(Debug)]
pub struct Item {
    /// The request as the client sent it, credentials removed: what
    /// `includeRequest` echoes.
    pub echo: Box<RawValue>,
    pub parsed: Result<ParsedItem, ProtocolError>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParsedItem {
    pub request: Request,
    pub target: Option<ProxyTarget>,
    /// A reduction of a selector's answers (jmxgate's own field), checked
    /// to fit the command.
    pub reduce: Option<Reduce>,
}

/// The parsed HTTP request.
#[derive(Debug)]
pub struct Parsed {
    /// A JSON array was posted: answer with an array.
    pub bulk: bool,
    pub items: Vec<Item>,
    /// Query parameters; `mimeType` and `callback` shape the response.
    pub query: Params,
}

impl ParsedItem {
    /// An item the gateway composes itself (a scrape's read, a console
    /// page's list), for the target named `target`: typed from the
    /// protocol's constructors (`Request::read`, `Request::list` …),
    /// never written out as JSON to be parsed again.
    /// The item as its echo says it: the command's fields, the target's
    /// URL, the reduction (what a door shows of the request it ran).
    pub fn describe(&self) -> serde_json::Value {
        serde_json::to_value(TypedEcho(self)).expect("JSON values serialise")
    }

    pub fn to(target: &str, request: Request) -> ParsedItem {
        ParsedItem {
            request,
            target: Some(ProxyTarget {
                url: target.to_string(),
                user: None,
                password: None,
            }),
            reduce: None,
        }
    }
}

impl Parsed {
    /// A door's own typed items, as a bulk: each echoed as its typed
    /// request (what agents echo in `request`) with its target. An item
    /// that could not be made (an MBean name a page's query gave that is
    /// none) fails at its index, as a client's would.
    pub fn typed(items: Vec<Result<ParsedItem, ProtocolError>>) -> Parsed {
        let items = items
            .into_iter()
            .map(|parsed| Item {
                echo: match &parsed {
                    Ok(p) => to_raw(&TypedEcho(p)),
                    Err(_) => to_raw(&serde_json::Map::new()),
                },
                parsed,
            })
            .collect();
        Parsed {
            bulk: true,
            items,
            query: Params::default(),
        }
    }
}

/// A typed item as echoed: its command's fields, its target's URL, its
/// reduction.
struct TypedEcho<'a>(&'a ParsedItem);

impl serde::Serialize for TypedEcho<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut out = serializer.serialize_map(None)?;
        self.0.request.command.write_fields(&mut out)?;
        if let Some(target) = &self.0.target {
            out.serialize_entry("target", &serde_json::json!({ "url": target.url }))?;
        }
        if let Some(reduce) = &self.0.reduce {
            out.serialize_entry("reduce", &reduce.to_json())?;
        }
        out.end()
    }
}

/// Parses the query string into processing parameters and the `p` path.
pub fn parse_query(query: Option<&str>) -> Result<(Params, Option<String>), HttpError> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    let params = Params::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| HttpError::new(400, &e.error_type, e.message))?;
    let p = pairs.into_iter().find(|(k, _)| k == "p").map(|(_, v)| v);
    Ok((params, p))
}

/// Parses a GET: `path` is the percent-encoded part after the agent prefix.
pub fn parse_get(path: &str, query: Option<&str>) -> Result<Parsed, HttpError> {
    let (params, p) = parse_query(query)?;
    let decoded = percent_decode(path)?;
    // Like Jolokia: `p=` only counts when the path itself is empty.
    let effective = if decoded.trim_matches('/').is_empty() {
        p.unwrap_or_default()
    } else {
        decoded
    };
    let parsed = Request::from_get_path(&effective, &params).map(|request| ParsedItem {
        request,
        target: None,
        reduce: None,
    });
    let echo = match &parsed {
        Ok(item) => to_raw(&protocol::Echo(&item.request.command)),
        Err(_) => to_raw(&serde_json::json!({ "path": effective })),
    };
    Ok(Parsed {
        bulk: false,
        items: vec![Item { echo, parsed }],
        query: params,
    })
}

/// Parses a POST body: one request object or a bulk array.
pub fn parse_post(body: &[u8], query: Option<&str>, max_items: usize) -> Result<Parsed, HttpError> {
    let (params, _) = parse_query(query)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(HttpError::bad_request(
            "Empty request body: POST a Jolokia request object or an array of them",
        ));
    }
    // Items are read from the body as it is: no JSON tree is built.
    let text = std::str::from_utf8(body)
        .map_err(|_| HttpError::bad_request("Invalid JSON request: the body is not UTF-8"))?;
    let whole: &RawValue = serde_json::from_str(text)
        .map_err(|e| HttpError::bad_request(format!("Invalid JSON request: {e}")))?;
    let (bulk, values): (bool, Vec<&RawValue>) = match whole.get().as_bytes().first() {
        Some(b'[') => (
            true,
            serde_json::from_str(whole.get())
                .map_err(|e| HttpError::bad_request(format!("Invalid JSON request: {e}")))?,
        ),
        Some(b'{') => (false, vec![whole]),
        _ => {
            return Err(HttpError::bad_request(format!(
                "Invalid JSON request: expected an object or an array, found {}",
                protocol::raw_kind(whole)
            )))
        }
    };
    if values.len() > max_items {
        return Err(HttpError::bad_request(format!(
            "Bulk request has {} items; this gateway accepts at most {max_items} per request (server.max_bulk_items)",
            values.len()
        )));
    }
    let items = values.into_iter().map(|raw| item(raw, &params)).collect();
    Ok(Parsed {
        bulk,
        items,
        query: params,
    })
}

/// One POST item, parsed from its text; echoed as sent unless the client
/// put credentials in its target (or it is too malformed to tell).
fn item(raw: &RawValue, params: &Params) -> Item {
    let fields = protocol::Fields::of_item(raw);
    let parsed = fields.as_ref().map_err(Clone::clone).and_then(|f| {
        let (request, target) = Request::from_fields(f, params)?;
        let reduce = f.reduce.map(Reduce::from_raw).transpose()?;
        if let Some(r) = &reduce {
            r.check(&request.command)?;
        }
        Ok(ParsedItem {
            request,
            target,
            reduce,
        })
    });
    // Echoed text strict parsers can read: lone surrogates become U+FFFD.
    let readable = protocol::without_lone_surrogates(raw.get());
    let readable = match &readable {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(text) => RawValue::from_string(text.clone()).ok(),
    };
    let raw = readable.as_deref().unwrap_or(raw);
    let plain = match (&fields, &parsed) {
        (Ok(f), _) if f.target.is_none() => true,
        (_, Ok(p)) => !p
            .target
            .as_ref()
            .is_some_and(ProxyTarget::carries_credentials),
        _ => !raw.get().contains("target") && !raw.get().contains('\\'),
    };
    let echo = if plain {
        raw.to_owned()
    } else {
        // Keys it can't read (a lone surrogate in one): the typed request,
        // which holds no credentials, or nothing.
        without_credentials(raw).unwrap_or_else(|| match &parsed {
            Ok(p) => to_raw(&protocol::Echo(&p.request.command)),
            Err(_) => to_raw(&serde_json::Map::new()),
        })
    };
    Item { echo, parsed }
}

/// The item as sent, with `target.user`, `target.password` and the
/// credentials inside `target.url` removed; a `target` that is not an
/// object is removed whole. Works on the text (values stay raw), so any
/// item the body parser took can be echoed; `None` when a key is no valid
/// string.
fn without_credentials(raw: &RawValue) -> Option<Box<RawValue>> {
    type Object<'a> = IndexMap<String, &'a RawValue>;
    let mut item: Object = serde_json::from_str(raw.get()).ok()?;
    let Some(target) = item.get("target").copied() else {
        return serde_json::value::to_raw_value(&item).ok();
    };
    let mut fields: Object = match serde_json::from_str(target.get()) {
        Ok(fields) => fields,
        Err(_) => {
            item.shift_remove("target");
            return serde_json::value::to_raw_value(&item).ok();
        }
    };
    fields.shift_remove("user");
    fields.shift_remove("password");
    let url = fields
        .shift_remove("url")
        .and_then(|u| serde_json::from_str::<String>(u.get()).ok())
        .map(|u| to_raw(&protocol::redact_userinfo(&u)));
    if let Some(url) = &url {
        fields.insert("url".into(), url);
    }
    let target = serde_json::value::to_raw_value(&fields).ok()?;
    item.insert("target".into(), &target);
    serde_json::value::to_raw_value(&item).ok()
}

/// JSON text of a string, a map with string keys or a typed request:
/// their serialisation can't fail.
fn to_raw(value: &impl serde::Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("strings and typed requests serialise")
}

fn percent_decode(path: &str) -> Result<String, HttpError> {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| {
            HttpError::bad_request("The request path is not valid UTF-8 after percent-decoding")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn echo(p: &Parsed) -> Value {
        serde_json::from_str(p.items[0].echo.get()).unwrap()
    }

    #[test]
    fn a_doors_typed_items_are_the_ones_its_json_would_have_parsed_to() {
        let typed = Request::list(None)
            .with_param("canonicalNaming", "false")
            .and_then(|r| r.with_param("openTypes", "true"))
            .map(|r| ParsedItem::to("orders-1", r));
        let read = Request::read("java.lang:type=Runtime", None)
            .and_then(|r| r.with_param("ignoreErrors", "true"))
            .map(|r| ParsedItem::to("orders-1", r));
        let bad = Request::read("no colon", None).map(|r| ParsedItem::to("orders-1", r));
        let typed = Parsed::typed(vec![typed, read, bad]);
        let wire = parse_post(
            br#"[{"type":"list","target":{"url":"orders-1"},
                  "config":{"canonicalNaming":false,"openTypes":true}},
                 {"type":"read","mbean":"java.lang:type=Runtime","target":{"url":"orders-1"},
                  "config":{"ignoreErrors":true}},
                 {"type":"read","mbean":"no colon","target":{"url":"orders-1"}}]"#,
            None,
            3,
        )
        .unwrap();
        assert!(typed.bulk);
        for (t, w) in typed.items.iter().zip(&wire.items) {
            match (&t.parsed, &w.parsed) {
                (Ok(t), Ok(w)) => {
                    assert_eq!(t.request, w.request);
                    assert_eq!(
                        t.target.as_ref().map(|t| &t.url),
                        w.target.as_ref().map(|t| &t.url)
                    );
                }
                (Err(t), Err(w)) => assert_eq!(t.status, w.status),
                other => panic!("typed and parsed differ: {other:?}"),
            }
        }
        // Echoed as agents echo the command, with its target.
        assert_eq!(
            echo(&typed),
            json!({"type": "list", "target": {"url": "orders-1"}})
        );
    }

    #[test]
    fn get_decodes_and_uses_p_only_for_empty_paths() {
        let p = parse_get("/read/java.lang%3Atype%3DMemory/HeapMemoryUsage", None).unwrap();
        assert_eq!(echo(&p)["mbean"], "java.lang:type=Memory");
        let p = parse_get("/", Some("p=/read/java.lang:type=Memory/Verbose")).unwrap();
        assert_eq!(echo(&p)["attribute"], "Verbose");
        let p = parse_get("/version", Some("p=/read/x:y=z/A")).unwrap();
        assert_eq!(echo(&p)["type"], "version");
    }

    #[test]
    fn bad_query_parameters_fail_the_request() {
        let e = parse_get("/version", Some("maxDepth=deep")).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.message, "Invalid value of maxDepth parameter");
    }

    #[test]
    fn a_bad_item_stays_at_its_index() {
        let body = br#"[{"type":"version"},{"type":"read","mbean":"nope"},42,{"type":"list"}]"#;
        let p = parse_post(body, None, 10).unwrap();
        assert!(p.bulk);
        let ok: Vec<bool> = p.items.iter().map(|i| i.parsed.is_ok()).collect();
        assert_eq!(ok, vec![true, false, false, true]);
    }

    #[test]
    fn http_level_failures() {
        assert_eq!(parse_post(b"{oops", None, 10).unwrap_err().status, 400);
        assert_eq!(parse_post(b"  ", None, 10).unwrap_err().status, 400);
        assert_eq!(parse_post(b"\"read\"", None, 10).unwrap_err().status, 400);
        let e = parse_post(b"[{},{},{}]", None, 2).unwrap_err();
        assert!(e.message.contains("at most 2"), "{}", e.message);
    }

    #[test]
    fn echo_drops_target_credentials() {
        let body = br#"{"type":"version","target":{"url":"a","user":"u","password":"p"}}"#;
        let p = parse_post(body, None, 10).unwrap();
        assert!(!p.bulk);
        assert_eq!(echo(&p), json!({"type":"version","target":{"url":"a"}}));
    }

    #[test]
    fn a_field_given_twice_fails_its_item_only() {
        let body = br#"[{"type":"read","mbean":"a:b=c","mbean":"java.lang:type=Runtime"},{"type":"version"}]"#;
        let p = parse_post(body, None, 10).unwrap();
        let e = p.items[0].parsed.as_ref().unwrap_err();
        assert!(
            e.message.contains("duplicate field `mbean`"),
            "{}",
            e.message
        );
        assert!(p.items[1].parsed.is_ok());
    }

    /// Values no agent would receive as sent fail their own item, with a
    /// message naming the field; the rest of the bulk is read.
    #[test]
    fn hostile_values_fail_their_item_only() {
        let big = "9".repeat(400);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let items = [
            (
                r#"{"type":"write","mbean":"a:b=c","attribute":"A","value":"\ud800"}"#.to_string(),
                "\"value\" can't be forwarded: a string holds a lone UTF-16 surrogate",
            ),
            (
                format!(r#"{{"type":"write","mbean":"a:b=c","attribute":"A","value":{big}}}"#),
                "outside the range of a Java long",
            ),
            (
                r#"{"type":"write","mbean":"a:b=c","attribute":"A","value":1e400}"#.into(),
                "outside the range of a Java double",
            ),
            (
                format!(r#"{{"type":"write","mbean":"a:b=c","attribute":"A","value":{deep}}}"#),
                "deeper than 64 levels",
            ),
            (
                r#"{"type":"exec","mbean":"a:b=c","operation":"o","arguments":[1,-1e400]}"#.into(),
                "\"arguments[1]\" can't be forwarded",
            ),
            (
                format!(
                    r#"{{"type":"exec","mbean":"a:b=c","operation":"o","arguments":[{deep}]}}"#
                ),
                "\"arguments[0]\"",
            ),
            (
                r#"{"type":"read","mbean":"a:b=\udc00"}"#.into(),
                "\"mbean\" is not a valid string: it holds a lone UTF-16 surrogate",
            ),
            (
                r#"{"type":"read","mbean":"a:b=c","attribute":["A","\ud800"]}"#.into(),
                "\"attribute\" is not a valid string",
            ),
            (
                r#"{"type":"version","config":{"maxDepth":1e400}}"#.into(),
                "Invalid value of maxDepth",
            ),
            (
                format!(r#"{{"type":"version","config":{{"maxDepth":{big}}}}}"#),
                "Invalid value of maxDepth",
            ),
            (
                r#"{"type":"version","config":{"maxDepth":"\ud800"}}"#.into(),
                "Invalid value of maxDepth",
            ),
            (
                r#"{"type":"version","target":{"url":"\ud800"}}"#.into(),
                "\"target.url\" is not a valid string",
            ),
            (r#"{"type\ud800":"version"}"#.into(), "Invalid request"),
        ];
        let body = format!(
            "[{},{{\"type\":\"version\"}}]",
            items
                .iter()
                .map(|(i, _)| i.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        let p = parse_post(body.as_bytes(), None, 100).unwrap();
        for ((item, says), parsed) in items.iter().zip(&p.items) {
            let e = parsed.parsed.as_ref().unwrap_err();
            assert_eq!(e.status, 400, "{item}");
            assert!(e.message.contains(says), "{item}: {}", e.message);
        }
        assert!(p.items.last().unwrap().parsed.is_ok());
    }

    #[test]
    fn values_agents_take_pass_verbatim() {
        let body = br#"{"type":"exec","mbean":"a:b=c","operation":"o","arguments":[ 9223372036854775807, 1.5e300, "\ud83d\ude00", [[{"k" : null}]] ]}"#;
        let p = parse_post(body, None, 10).unwrap();
        let request = &p.items[0].parsed.as_ref().unwrap().request;
        let forwarded = serde_json::to_string(&protocol::AgentForm(request)).unwrap();
        assert!(
            forwarded.contains(
                r#""arguments":[9223372036854775807,1.5e300,"\ud83d\ude00",[[{"k":null}]]]"#
            ),
            "{forwarded}"
        );
    }

    /// Items echoed with their target's credentials removed, whatever else
    /// they hold: values too big or deep for a JSON tree, bad targets.
    #[test]
    fn echoes_of_hostile_items() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        for (body, kept) in [
            (r#"{"type":"write","mbean":"a:b=c","attribute":"A","value":1e400,"target":{"url":"t","password":"pw"}}"#.to_string(), "1e400"),
            (format!(r#"{{"type":"write","mbean":"a:b=c","attribute":"A","value":{deep},"target":{{"url":"t","password":"pw"}}}}"#), "[[["),
            (r#"{"type":"read","mbean":"a:b=\ud800","target":{"url":"http://u:pw@h/","user":"u"}}"#.into(), "***@h"),
            (r#"{"type":"version","target":"http://u:pw@h/"}"#.into(), "version"),
            (r#"{"type":"version","target":{"url":{"password":"pw"}}}"#.into(), "version"),
            (r#"{"type":"version","target":{"url":"t","password":"pw"},"k\ud800":1}"#.into(), r#"{"url":"t"}"#),
        ] {
            let p = parse_post(body.as_bytes(), None, 10).unwrap();
            let echo = p.items[0].echo.get();
            assert!(!echo.contains("pw"), "{body} -> {echo}");
            assert!(echo.contains(kept), "{body} -> {echo}");
        }
    }

    #[test]
    fn credentials_are_dropped_however_the_key_is_spelled() {
        for body in [
            r#"{"type":"version","t\u0061rget":{"url":"a","password":"p"}}"#,
            r#"{"type":"version","target":{"url":"a","password":"p"},"target":{"url":"a","password":"p"}}"#,
            r#"{"type":"version","target":{"url":"http://u:p@a/","user":"u"}}"#,
        ] {
            let p = parse_post(body.as_bytes(), None, 10).unwrap();
            let echoed = p.items[0].echo.get();
            assert!(
                !echoed.contains("\"p\"") && !echoed.contains(":p@"),
                "{body} -> {echoed}"
            );
            assert!(!echoed.contains("\"user\""), "{body} -> {echoed}");
        }
        // Without a target the item is echoed as sent.
        let body = br#"{ "type" : "read", "mbean":"a:b=c", "extra": [1] }"#;
        let p = parse_post(body, None, 10).unwrap();
        assert_eq!(p.items[0].echo.get(), std::str::from_utf8(body).unwrap());
    }
}
