//! Step 9, respond: one HTTP answer for the whole request, always HTTP 200
//! with protocol statuses inside (as agents answer), except when the HTTP
//! exchange itself failed. Also the CORS headers Jolokia agents send.

use axum::body::Body;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response as HttpResponse, StatusCode};

use crate::protocol::{Params, Response};

use super::HttpError;

/// The JSON text of the answer: an array for a bulk request, else the one
/// response object.
pub fn body(answers: &[Response], bulk: bool) -> Vec<u8> {
    if bulk {
        serde_json::to_vec(answers).expect("raw JSON serialises")
    } else {
        answers
            .first()
            .map(Response::to_json_bytes)
            .unwrap_or_else(|| b"{}".to_vec())
    }
}

/// Wraps a JSON body as the client asked: `callback` gives JSONP,
/// `mimeType` picks `text/plain`, and JSON is the default (jolokia.js only
/// parses answers typed `application/json`).
pub fn http_response(
    json: Vec<u8>,
    params: &Params,
    request_headers: &HeaderMap,
    cors: bool,
) -> HttpResponse<Body> {
    let (content_type, payload) = match params.get("callback") {
        Some(cb) => {
            let mut out = Vec::with_capacity(json.len() + cb.len() + 3);
            out.extend_from_slice(cb.as_bytes());
            out.push(b'(');
            out.extend_from_slice(&json);
            out.extend_from_slice(b");");
            ("text/javascript; charset=utf-8", out)
        }
        None => match params.get("mimeType") {
            Some("text/plain") => ("text/plain; charset=utf-8", json),
            _ => ("application/json; charset=utf-8", json),
        },
    };
    let mut resp = HttpResponse::new(Body::from(payload));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
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
    if e.status == 405 {
        headers.insert(
            header::ALLOW,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
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
    let mut resp = http_error(&e, request_headers, cors);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
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
pub fn cors_headers(request_headers: &HeaderMap, out: &mut HeaderMap) {
    let Some(origin) = request_headers.get(header::ORIGIN) else {
        return;
    };
    let allow = if origin.as_bytes() == b"null" {
        HeaderValue::from_static("*")
    } else {
        origin.clone()
    };
    out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
    out.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    out.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// A header name constant for request ids, so operators can correlate.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[cfg(test)]
mod tests {
    use super::*;

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
}
