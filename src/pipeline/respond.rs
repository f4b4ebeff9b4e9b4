//! Step 9, respond: one HTTP answer for the whole request, always HTTP 200
//! with protocol statuses inside (as agents answer), except when the HTTP
//! exchange itself failed. Also the CORS headers Jolokia agents send.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response as HttpResponse, StatusCode};
use serde_json::value::RawValue;

use crate::protocol::{Params, Raw, Response};

/// A failure of the HTTP exchange itself (not of one item).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub error_type: String,
    pub message: String,
}

impl HttpError {
    pub fn new(status: u16, error_type: &str, message: impl Into<String>) -> HttpError {
        HttpError {
            status,
            error_type: error_type.to_string(),
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> HttpError {
        Self::new(400, "java.lang.IllegalArgumentException", message)
    }
}

/// Shared values at least this large are sent as their own chunk instead
/// of being copied into the answer's text.
const SHARE_FROM: usize = 64 * 1024;

/// An answer's JSON text as chunks: written pieces, and large values sent
/// straight from where they are shared (the list cache) without a copy.
#[derive(Debug, Default)]
pub struct JsonBody {
    chunks: Vec<Bytes>,
}

impl From<Vec<u8>> for JsonBody {
    fn from(text: Vec<u8>) -> JsonBody {
        JsonBody {
            chunks: vec![Bytes::from(text)],
        }
    }
}

impl JsonBody {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole text in one piece (tests, small answers).
    pub fn to_vec(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

/// Collects written text and shared chunks in order.
#[derive(Default)]
struct ChunkWriter {
    done: Vec<Bytes>,
    text: Vec<u8>,
}

impl ChunkWriter {
    /// Text written so far ends a chunk; `chunk` follows it as it is.
    fn chunk(&mut self, chunk: Bytes) {
        if !self.text.is_empty() {
            self.done.push(Bytes::from(std::mem::take(&mut self.text)));
        }
        self.done.push(chunk);
    }

    fn response<K: AsRef<str>>(&mut self, fields: impl Iterator<Item = (K, impl FieldValue)>) {
        self.text.push(b'{');
        for (i, (key, value)) in fields.enumerate() {
            if i > 0 {
                self.text.push(b',');
            }
            serde_json::to_writer(&mut self.text, key.as_ref()).expect("a key serialises");
            self.text.push(b':');
            value.write_to(self);
        }
        self.text.push(b'}');
    }

    fn finish(mut self) -> JsonBody {
        if !self.text.is_empty() || self.done.is_empty() {
            self.done.push(Bytes::from(self.text));
        }
        JsonBody { chunks: self.done }
    }
}

/// A field's value as the body takes it: borrowed (copied, or pointed
/// at when large and shared) or owned (moved in when large).
trait FieldValue {
    fn write_to(self, w: &mut ChunkWriter);
}

impl FieldValue for &Raw {
    fn write_to(self, w: &mut ChunkWriter) {
        match self {
            Raw::Shared(v) if v.get().len() >= SHARE_FROM => {
                w.chunk(Bytes::from_owner(SharedText(v.clone())))
            }
            other => w.text.extend_from_slice(other.get().as_bytes()),
        }
    }
}

impl FieldValue for Raw {
    fn write_to(self, w: &mut ChunkWriter) {
        match self {
            Raw::Owned(v) if v.get().len() >= SHARE_FROM => {
                let text: Box<str> = v.into();
                w.chunk(Bytes::from(text.into_boxed_bytes()))
            }
            other => (&other).write_to(w),
        }
    }
}

/// Lets a chunk of the HTTP body point into a shared JSON text.
struct SharedText(Arc<RawValue>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.get().as_bytes()
    }
}

/// The JSON text of the answer: an array for a bulk request, else the one
/// response object.
pub fn body(answers: &[Response], bulk: bool) -> JsonBody {
    written(answers, bulk, |w, r| w.response(r.fields()))
}

/// [`body`] for answers no longer needed: their large values become
/// chunks of the body as they are (a merged fan-out's answer is not
/// copied again).
pub fn body_of(answers: Vec<Response>, bulk: bool) -> JsonBody {
    written(answers, bulk, |w, r| w.response(r.into_fields()))
}

fn written<R>(
    answers: impl IntoIterator<Item = R>,
    bulk: bool,
    mut write: impl FnMut(&mut ChunkWriter, R),
) -> JsonBody {
    let mut w = ChunkWriter::default();
    let mut answers = answers.into_iter();
    if bulk {
        w.text.push(b'[');
        for (i, r) in answers.enumerate() {
            if i > 0 {
                w.text.push(b',');
            }
            write(&mut w, r);
        }
        w.text.push(b']');
    } else {
        match answers.next() {
            Some(r) => write(&mut w, r),
            None => w.text.extend_from_slice(b"{}"),
        }
    }
    w.finish()
}

/// An HTTP body of known chunks; its exact size lets hyper send
/// `Content-Length`, as agents do.
struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.chunks.pop_front().map(|chunk| {
            self.remaining -= chunk.len() as u64;
            Ok(http_body::Frame::data(chunk))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

fn http_body_of(mut chunks: Vec<Bytes>) -> Body {
    if chunks.len() == 1 {
        return Body::from(chunks.remove(0));
    }
    let remaining = chunks.iter().map(|c| c.len() as u64).sum();
    Body::new(Chunks {
        chunks: chunks.into(),
        remaining,
    })
}

/// Wraps a JSON body as the client asked: `callback` gives JSONP,
/// `mimeType` picks `text/plain`, and JSON is the default (jolokia.js only
/// parses answers typed `application/json`).
pub fn http_response(
    json: impl Into<JsonBody>,
    params: &Params,
    request_headers: &HeaderMap,
    cors: bool,
) -> HttpResponse<Body> {
    let mut chunks = json.into().chunks;
    let content_type = match params.get("callback") {
        Some(cb) => {
            chunks.insert(0, Bytes::from(format!("{cb}(")));
            chunks.push(Bytes::from_static(b");"));
            "text/javascript; charset=utf-8"
        }
        None => match params.get("mimeType") {
            Some("text/plain") => "text/plain; charset=utf-8",
            _ => "application/json; charset=utf-8",
        },
    };
    let mut resp = HttpResponse::new(http_body_of(chunks));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    no_store(headers);
    if cors {
        cors_headers(request_headers, headers);
    }
    resp
}

/// An HTTP-level failure: the status is the HTTP status and the JSON body
/// says what was wrong.
pub fn http_error(e: &HttpError, request_headers: &HeaderMap, cors: bool) -> HttpResponse<Body> {
    let body = serde_json::json!({
        "error_type": e.error_type,
        "error": e.message,
        "status": e.status,
    });
    let mut resp = HttpResponse::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    no_store(headers);
    if e.status == 405 {
        headers.insert(
            header::ALLOW,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
    }
    if e.status == 503 {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if cors {
        cors_headers(request_headers, headers);
    }
    resp
}

/// HTTP 503 when the gateway already works on as many requests as it may;
/// `Retry-After` tells well-behaved clients when to come back.
pub fn busy(request_headers: &HeaderMap, cors: bool, limit: usize) -> HttpResponse<Body> {
    let e = HttpError::new(
        503,
        "jmxgate.GatewayBusy",
        format!(
            "The gateway is already working on {limit} requests (server.max_concurrent_requests); retry in a moment"
        ),
    );
    http_error(&e, request_headers, cors)
}

/// The answer to a CORS preflight, as Jolokia's agent gives it; without
/// CORS headers when the origin is not admitted (the browser then refuses).
pub fn preflight(request_headers: &HeaderMap, cors: bool) -> HttpResponse<Body> {
    let mut resp = HttpResponse::new(Body::empty());
    if !cors {
        return resp;
    }
    let headers = resp.headers_mut();
    cors_headers(request_headers, headers);
    if let Some(h) = request_headers.get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, h.clone());
    }
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("31536000"),
    );
    resp
}

/// Echoes an admitted `Origin` with credentials allowed, as Jolokia does;
/// also for answers made elsewhere (a 401), so a browser page can read them.
/// `Origin: null` (sandboxed frames, local files: any page can make one)
/// gets `*` and never credentials.
pub fn cors_headers(request_headers: &HeaderMap, out: &mut HeaderMap) {
    let Some(origin) = request_headers.get(header::ORIGIN) else {
        return;
    };
    if origin.as_bytes() == b"null" {
        out.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    } else {
        out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        out.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
    out.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// Every answer: browsers must not guess another type than the one sent
/// (a JSON answer read as HTML or script).
/// Answers carry what one caller may see: never stored by a browser or
/// a proxy (Jolokia agents send `no-cache`, which still allows storing).
pub fn no_store(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

pub fn no_sniffing(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// A header name constant for request ids, so operators can correlate.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(text: String) -> Arc<RawValue> {
        Arc::from(RawValue::from_string(text).unwrap())
    }

    #[test]
    fn a_shared_value_is_sent_as_is_without_a_copy() {
        let big = shared(format!("{{\"k\":\"{}\"}}", "x".repeat(SHARE_FROM)));
        let mut r = Response::default();
        r.set_request(&RawValue::from_string(r#"{"type":"list"}"#.into()).unwrap());
        r.set_shared("value", big.clone());
        r.set("timestamp", &7);
        r.set("status", &200);
        let mut small = Response::value(&"q\"uote", 1);
        small.set_shared("extra", shared("[1,2]".into()));
        for (answers, bulk) in [
            (vec![r.clone()], false),
            (vec![small.clone(), r, small], true),
        ] {
            let body = body(&answers, bulk);
            let expected = if bulk {
                serde_json::to_vec(&answers).unwrap()
            } else {
                serde_json::to_vec(&answers[0]).unwrap()
            };
            assert_eq!(body.to_vec(), expected);
            // The big value is its own chunk, pointing at the shared text.
            let chunk = body
                .chunks
                .iter()
                .find(|c| c.len() == big.get().len())
                .expect("the shared value is a chunk of its own");
            assert_eq!(chunk.as_ptr(), big.get().as_ptr());
            // Taken by value, the same text; a big value of its own moves
            // into the body as it is.
            let mut owned = answers.clone();
            let own_big =
                RawValue::from_string(format!("[{}]", "7,".repeat(SHARE_FROM) + "7")).unwrap();
            let own_at = own_big.get().as_ptr();
            owned[0].set_raw("mine", own_big);
            let expected = if bulk {
                serde_json::to_vec(&owned).unwrap()
            } else {
                serde_json::to_vec(&owned[0]).unwrap()
            };
            let moved = body_of(owned, bulk);
            assert_eq!(moved.to_vec(), expected);
            assert!(moved.chunks.iter().any(|c| c.as_ptr() == own_at));
        }
    }

    #[tokio::test]
    async fn a_chunked_answer_has_its_length_and_jsonp_wraps_it() {
        let big = shared(format!("\"{}\"", "y".repeat(SHARE_FROM)));
        let mut r = Response::default();
        r.set_shared("value", big);
        r.set("status", &200);
        let json = body(&[r], false);
        let len = json.len();
        let p = Params::from_query([("callback", "cb")]).unwrap();
        let resp = http_response(json, &p, &HeaderMap::new(), false);
        use http_body::Body as _;
        assert_eq!(resp.body().size_hint().exact(), Some(len as u64 + 5));
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        assert!(bytes.starts_with(b"cb({\"value\":\"yyy"));
        assert!(bytes.ends_with(b"\"status\":200});"));
    }

    #[test]
    fn jsonp_and_mime_types() {
        let p = Params::from_query([("callback", "cb")]).unwrap();
        let r = http_response(b"{}".to_vec(), &p, &HeaderMap::new(), true);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        let p = Params::from_query([("mimeType", "text/plain")]).unwrap();
        let r = http_response(b"{}".to_vec(), &p, &HeaderMap::new(), true);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let r = http_response(b"{}".to_vec(), &Params::default(), &HeaderMap::new(), true);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "application/json; charset=utf-8"
        );
    }

    #[test]
    fn cors_echoes_the_origin() {
        let mut req = HeaderMap::new();
        req.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://ui.example"),
        );
        req.insert(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            HeaderValue::from_static("authorization,content-type"),
        );
        let r = preflight(&req, true);
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://ui.example"
        );
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_CREDENTIALS],
            "true"
        );
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS],
            "authorization,content-type"
        );
        let r = http_response(b"{}".to_vec(), &Params::default(), &HeaderMap::new(), true);
        assert!(r
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .is_none());
    }

    #[test]
    fn a_null_origin_never_gets_credentials() {
        let mut req = HeaderMap::new();
        req.insert(header::ORIGIN, HeaderValue::from_static("null"));
        let r = http_response(b"{}".to_vec(), &Params::default(), &req, true);
        assert_eq!(r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(r
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
            .is_none());
    }
}
