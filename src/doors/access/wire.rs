//! The access-requests API as it is written on the wire, pure: which
//! operation a path and method are, the bodies callers send (each field
//! bounded), and a stored request as the JSON callers read.

use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::store::{RequestKind, StoredRequest, Verdict};

use crate::pipeline::respond::HttpError;

/// Where the API lives.
pub const PATH: &str = "/jmxgate/access/requests";

/// Most characters of a reason or a comment.
pub const MAX_TEXT_CHARS: usize = 1000;
/// Most bytes of a request body.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Most requests one listing answers, and the default.
pub const MAX_LIST: i64 = 500;
pub const DEFAULT_LIST: i64 = 100;

/// What a request to the API asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    List,
    Create,
    Show(String),
    Review(String, Verdict),
    Revoke(String),
}

/// The operation of `method` on `path` (which starts with [`PATH`]).
pub fn operation(method: &http::Method, path: &str) -> Result<Operation, HttpError> {
    let rest = path
        .strip_prefix(PATH)
        .unwrap_or(path)
        .trim_end_matches('/');
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let get = *method == http::Method::GET;
    let post = *method == http::Method::POST;
    let not_allowed = |allowed: &str| {
        HttpError::new(
            405,
            "jmxgate.MethodNotAllowed",
            format!("{path}: use {allowed}"),
        )
    };
    match segments.as_slice() {
        [] if get => Ok(Operation::List),
        [] if post => Ok(Operation::Create),
        [] => Err(not_allowed("GET to list requests or POST to make one")),
        [id] if get => Ok(Operation::Show(checked_id(id)?)),
        [_] => Err(not_allowed("GET")),
        [id, action] => {
            if !post {
                return Err(not_allowed("POST"));
            }
            let id = checked_id(id)?;
            match *action {
                "approve" => Ok(Operation::Review(id, Verdict::Approve)),
                "deny" => Ok(Operation::Review(id, Verdict::Deny)),
                "revoke" => Ok(Operation::Revoke(id)),
                other => Err(HttpError::new(
                    404,
                    "jmxgate.NotFound",
                    format!(
                        "no action \"{}\": POST {PATH}/<id>/approve, /deny or /revoke",
                        shown(other, 40)
                    ),
                )),
            }
        }
        _ => Err(HttpError::new(
            404,
            "jmxgate.NotFound",
            format!("nothing at {}; see {PATH}", shown(path, 200)),
        )),
    }
}

/// Request ids are made by the gateway: `ar-` and 20 hex digits. Anything
/// else is no request (and is not looked up).
fn checked_id(id: &str) -> Result<String, HttpError> {
    let ok =
        id.len() <= 40 && id.starts_with("ar-") && id[3..].chars().all(|c| c.is_ascii_hexdigit());
    if ok {
        Ok(id.to_string())
    } else {
        Err(not_found(&shown(id, 40)))
    }
}

/// A new request id: 80 random bits.
pub fn new_id() -> String {
    format!("ar-{}", crate::random::hex(10))
}

pub fn not_found(id: &str) -> HttpError {
    HttpError::new(
        404,
        "jmxgate.NotFound",
        format!("no access request {id} that you may see"),
    )
}

/// Text from a caller, cut for messages.
fn shown(text: &str, chars: usize) -> String {
    let cut: String = text.chars().take(chars).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// `POST /jmxgate/access/requests`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    pub role: String,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    #[serde(default)]
    pub targets: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST …/{id}/approve|deny|revoke`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    #[serde(default)]
    pub comment: Option<String>,
}

/// A body the API reads: JSON (a browser form can't send that without a
/// preflight, so no other site can post one), within its bounds; an empty
/// body is `T::default()` where `empty` allows.
pub fn body<T: serde::de::DeserializeOwned>(
    content_type: Option<&str>,
    bytes: &[u8],
    empty: Option<T>,
) -> Result<T, HttpError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        if let Some(default) = empty {
            return Ok(default);
        }
        return Err(HttpError::bad_request(
            "the body is empty: send a JSON object, e.g. {\"role\": \"ops\", \"duration\": \"30m\", \"reason\": \"INC-1234\"}",
        ));
    }
    json_content_type(content_type)?;
    serde_json::from_slice(bytes).map_err(|e| HttpError::bad_request(format!("the body: {e}")))
}

/// A change is sent as `Content-Type: application/json`, whatever its
/// body (a browser form or beacon can't send that without a preflight).
pub fn json_content_type(content_type: Option<&str>) -> Result<(), HttpError> {
    let json = content_type
        .and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"));
    if json {
        Ok(())
    } else {
        Err(HttpError::new(
            415,
            "jmxgate.UnsupportedMediaType",
            "send the request as Content-Type: application/json (an empty body too)",
        ))
    }
}

/// The text a caller gave, trimmed and bounded; `None` when empty.
pub fn text(field: &str, value: Option<&str>) -> Result<Option<String>, HttpError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v.chars().count() > MAX_TEXT_CHARS {
        return Err(HttpError::bad_request(format!(
            "{field}: longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(HttpError::bad_request(format!(
            "{field}: holds control characters"
        )));
    }
    Ok(Some(v.to_string()))
}

/// `?state=…&limit=…` of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub state: Option<String>,
    pub limit: i64,
}

pub fn list_query(query: Option<&str>) -> Result<ListQuery, HttpError> {
    let mut q = ListQuery {
        state: None,
        limit: DEFAULT_LIST,
    };
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "state" => {
                const STATES: [&str; 5] = ["pending", "approved", "denied", "expired", "revoked"];
                if !STATES.contains(&v.as_ref()) {
                    return Err(HttpError::bad_request(format!(
                        "state={}: use one of {}",
                        shown(&v, 40),
                        STATES.join(", ")
                    )));
                }
                q.state = Some(v.into_owned());
            }
            "limit" => {
                q.limit = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=MAX_LIST).contains(n))
                    .ok_or_else(|| {
                        HttpError::bad_request(format!(
                            "limit={}: a number from 1 to {MAX_LIST}",
                            shown(&v, 20)
                        ))
                    })?;
            }
            other => {
                return Err(HttpError::bad_request(format!(
                    "unknown parameter {}: use state or limit",
                    shown(other, 40)
                )))
            }
        }
    }
    Ok(q)
}

/// A time of the store as RFC 3339.
pub fn time(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// A request as callers read it. `may_review`: whether this caller may
/// approve or deny it now.
pub fn view(r: &StoredRequest, may_review: bool) -> Value {
    let q = &r.request;
    let approvals = r
        .reviews
        .iter()
        .filter(|v| v.verdict == Verdict::Approve)
        .count();
    let mut v = json!({
        "id": q.id,
        "kind": q.kind.as_str(),
        "state": r.state.as_str(),
        "requester": q.shown_requester(),
        "role": q.role,
        "duration": humantime::format_duration(Duration::from_millis(q.duration_ms.max(0) as u64)).to_string(),
        "approvals_needed": q.approvals_needed,
        "approvals": approvals,
        "reviews": r.reviews.iter().map(|v| json!({
            "reviewer": v.reviewer,
            "verdict": v.verdict.as_str(),
            "comment": v.comment,
            "at": time(v.at_ms),
        })).collect::<Vec<_>>(),
        "created": time(r.created_ms),
        "may_review": may_review,
    });
    let o = v.as_object_mut().expect("an object");
    // Who asked, across methods: `basic:alice`, `bearer:<iss> alice`.
    if q.requester_name.is_some() {
        o.insert("requester_identity".into(), json!(q.requester));
    }
    if let Some(t) = &q.targets {
        o.insert("targets".into(), json!(t));
    }
    if let Some(t) = &q.reason {
        o.insert("reason".into(), json!(t));
    }
    if q.kind == RequestKind::Item {
        if let Some(text) = q.item.as_deref() {
            if let Ok(item) = serde_json::from_str::<Value>(text) {
                // A number a JSON tree can't hold digit for digit: the
                // exact item too, so a reviewer sees what would run.
                if serde_json::to_string(&item).ok().as_deref() != Some(text) {
                    o.insert("item_text".into(), json!(text));
                }
                o.insert("item".into(), item);
            }
        }
    }
    for (key, at) in [
        ("decided", r.decided_ms),
        ("expires", r.expires_ms),
        ("used", r.used_ms),
    ] {
        if let Some(ms) = at {
            o.insert(key.into(), json!(time(ms)));
        }
    }
    if let Some(by) = &r.ended_by {
        o.insert("ended_by".into(), json!(by));
    }
    v
}

/// An item in words: `exec java.lang:type=Memory gc` (the CLI's list,
/// the console's access page).
pub fn item_words(item: &Value) -> String {
    let s = |k: &str| item[k].as_str().unwrap_or("-");
    let member = item["operation"]
        .as_str()
        .or(item["attribute"].as_str())
        .unwrap_or("");
    format!("{} {} {member}", s("type"), s("mbean"))
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn paths_and_methods_name_one_operation_or_say_what_to_use() {
        let id = "ar-0123456789abcdef0123";
        assert_eq!(operation(&Method::GET, PATH).unwrap(), Operation::List);
        assert_eq!(
            operation(&Method::POST, "/jmxgate/access/requests/").unwrap(),
            Operation::Create
        );
        assert_eq!(
            operation(&Method::GET, &format!("{PATH}/{id}")).unwrap(),
            Operation::Show(id.into())
        );
        assert_eq!(
            operation(&Method::POST, &format!("{PATH}/{id}/deny")).unwrap(),
            Operation::Review(id.into(), Verdict::Deny)
        );
        assert_eq!(
            operation(&Method::GET, &format!("{PATH}/{id}/approve"))
                .unwrap_err()
                .status,
            405
        );
        assert_eq!(
            operation(&Method::POST, &format!("{PATH}/{id}/bless"))
                .unwrap_err()
                .status,
            404
        );
        // Ids are the gateway's own: anything else is not looked up.
        let e = operation(&Method::GET, &format!("{PATH}/x'%20OR%201=1")).unwrap_err();
        assert_eq!(e.status, 404);
        assert!(new_id().starts_with("ar-") && checked_id(&new_id()).is_ok());
    }

    #[test]
    fn bodies_are_json_bounded_and_say_what_is_wrong() {
        let ok: Create = body(
            Some("application/json; charset=utf-8"),
            br#"{"role":"ops","duration":"30m","targets":"orders-*","reason":"INC-1234"}"#,
            None,
        )
        .unwrap();
        assert_eq!(ok.duration, Duration::from_secs(1800));
        let form = body::<Create>(Some("application/x-www-form-urlencoded"), b"role=ops", None);
        assert_eq!(form.unwrap_err().status, 415);
        let unknown = body::<Create>(
            Some("application/json"),
            br#"{"role":"ops","duration":"1m","host":"evil"}"#,
            None,
        );
        assert!(unknown.unwrap_err().message.contains("host"));
        let review: Review = body(None, b"", Some(Review::default())).unwrap();
        assert!(review.comment.is_none());
        assert!(text("reason", Some(&"x".repeat(MAX_TEXT_CHARS + 1))).is_err());
        assert!(text("reason", Some("a\u{1b}[2J")).is_err());
        assert_eq!(text("reason", Some("  ")).unwrap(), None);
    }

    #[test]
    fn listing_parameters_are_checked() {
        assert_eq!(list_query(None).unwrap().limit, DEFAULT_LIST);
        assert_eq!(
            list_query(Some("state=pending&limit=5"))
                .unwrap()
                .state
                .as_deref(),
            Some("pending")
        );
        assert!(list_query(Some("limit=0")).is_err());
        assert!(list_query(Some("state=granted")).is_err());
        assert!(list_query(Some("order=x")).is_err());
    }
}
