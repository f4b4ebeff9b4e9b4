//! MCP over HTTP: the Streamable HTTP service (stateless, JSON answers),
//! JSON-RPC batches bounded as a Jolokia bulk, and the audit records of
//! requests that are not tool calls.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
pub(crate) use http::{HeaderMap, Request as HttpRequest, Response as HttpResponse};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tower::ServiceExt as _;

use crate::doors::DoorSections;
use crate::pipeline::{audit, respond, Gateway, HttpError};

use super::*;

/// The JSON-RPC methods a request body names (several for a batch), at
/// most 16, each cut to 64 characters; none when it is not JSON-RPC.
fn rpc_methods(message: Option<&Value>) -> Vec<String> {
    let messages = match message {
        Some(Value::Array(batch)) => batch.as_slice(),
        Some(one) => std::slice::from_ref(one),
        None => &[],
    };
    messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .take(16)
        .map(|m| m.chars().take(64).collect())
        .collect()
}

/// The MCP client a JSON-RPC message names, bounded and cleaned
/// (`audit::McpClient::new`): the `clientInfo` that protocol 2026-07-28
/// puts in every request's `_meta` (`io.modelcontextprotocol/clientInfo`,
/// SEP-2575), else an `initialize` request's own `clientInfo`. Earlier
/// protocols name the client in `initialize` only, and the door keeps no
/// session: their other requests carry no client, and none is recorded
/// (never a guess from HTTP headers). For a batch, the first element that
/// names one.
fn client_of(message: Option<&Value>) -> Option<audit::McpClient> {
    let named = |m: &Value| {
        let params = m.get("params")?;
        let info = params
            .get("_meta")
            .and_then(|meta| meta.get("io.modelcontextprotocol/clientInfo"))
            .filter(|i| i.is_object())
            .or_else(|| {
                (m.get("method")?.as_str()? == "initialize")
                    .then(|| params.get("clientInfo"))
                    .flatten()
            })?;
        audit::McpClient::new(
            info.get("name")?.as_str()?,
            info.get("version").and_then(Value::as_str),
        )
    };
    match message? {
        Value::Array(batch) => batch.iter().find_map(named),
        one => named(one),
    }
}

/// The JSON-RPC error message of an answer, if it is one; the answer comes
/// back whole (answers other than tool results are small).
async fn rpc_error_of(response: HttpResponse<Body>) -> (HttpResponse<Body>, Option<String>) {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (HttpResponse::from_parts(parts, Body::empty()), None);
    };
    let error = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| {
            let error = v.get("error")?;
            Some(format!(
                "JSON-RPC error {}: {}",
                error.get("code").and_then(Value::as_i64).unwrap_or(0),
                error.get("message").and_then(Value::as_str).unwrap_or("")
            ))
        })
        .map(|e| e.chars().take(200).collect());
    (HttpResponse::from_parts(parts, Body::from(bytes)), error)
}

/// A JSON body with `status`, never stored.
fn json_answer(status: u16, answer: &Value) -> HttpResponse<Body> {
    json_bytes(status, answer.to_string().into_bytes())
}

/// [`json_answer`] of JSON already written.
fn json_bytes(status: u16, answer: Vec<u8>) -> HttpResponse<Body> {
    let mut response = HttpResponse::new(Body::from(answer));
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    respond::no_store(response.headers_mut());
    response
}

/// A batch's answer, and what the audit record says of it.
struct Batched {
    response: HttpResponse<Body>,
    /// The first JSON-RPC error among the answers.
    error: Option<String>,
    /// How many elements were not run (or their answers not kept), and why.
    cut: Option<String>,
}

/// The JSON array of a batch's answers, written as they come.
struct Answers {
    bytes: Vec<u8>,
    count: usize,
    /// Bytes of answers of elements that ran (what the byte bound counts).
    ran_bytes: usize,
    first_error: Option<String>,
}

impl Answers {
    fn push(&mut self, answer: &[u8], ran: bool) {
        self.bytes.push(if self.count == 0 { b'[' } else { b',' });
        self.bytes.extend_from_slice(answer);
        self.count += 1;
        if ran {
            self.ran_bytes += answer.len();
        }
    }

    fn push_value(&mut self, answer: &Value, ran: bool) {
        if ran && self.first_error.is_none() {
            self.first_error = answer.get("error").map(|e| {
                let text = format!(
                    "JSON-RPC error {}: {}",
                    e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    e.get("message").and_then(Value::as_str).unwrap_or("")
                );
                text.chars().take(200).collect()
            });
        }
        self.push(answer.to_string().as_bytes(), ran);
    }
}

/// A batch (protocol 2025-03-26): each element checked and handed to the
/// SDK on its own, in order, within the bounds of a Jolokia bulk
/// (`State::mcp_batch`: elements, bytes of answers held, time); the
/// elements beyond a bound are answered with JSON-RPC errors with their
/// ids, never run. The answers to its requests come as one array (HTTP
/// 202 without a body when it held only notifications and responses).
async fn batch<S>(
    service: &S,
    parts: &http::request::Parts,
    elements: Vec<Value>,
    caller: &McpCaller,
) -> Batched
where
    S: tower::Service<
            HttpRequest<Body>,
            Response = HttpResponse<
                http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>,
            >,
            Error = std::convert::Infallible,
        > + Clone,
{
    let bounds = caller.state.mcp_batch();
    let started = Instant::now();
    let total = elements.len();
    let mut answers = Answers {
        bytes: Vec::new(),
        count: 0,
        ran_bytes: 0,
        first_error: None,
    };
    // The first bound reached, and from which element on.
    let mut stopped: Option<(jsonrpc::Bound, usize)> = None;
    let mut not_kept = 0;
    for (index, element) in elements.into_iter().enumerate() {
        let id = element.get("id").cloned();
        let reached = stopped
            .map(|(bound, _)| bound)
            .or_else(|| bounds.reached(index, answers.ran_bytes, started.elapsed()));
        if let Some(bound) = reached {
            stopped.get_or_insert((bound, index));
            // A request gets its error; notifications and responses none.
            if let (Some(id), true) = (id, element.get("method").is_some()) {
                let error =
                    jsonrpc::error(id, jsonrpc::BEYOND_BOUNDS, bounds.not_run(bound, total));
                answers.push_value(&error, false);
            }
            continue;
        }
        if let Some(problem) = jsonrpc::problem(&element) {
            if id.is_some() || problem.code != jsonrpc::INVALID_PARAMS {
                answers.push_value(&problem.answer(&element), true);
            }
            continue;
        }
        let mut request = HttpRequest::new(Body::from(element.to_string()));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts.uri.clone();
        *request.headers_mut() = parts.headers.clone();
        // Each element is recorded with the client it names, else the
        // one another element of the same HTTP request named.
        let mut element_caller = caller.clone();
        if let Some(named) = client_of(Some(&element)) {
            element_caller.mcp_client = Some(named);
        }
        request.extensions_mut().insert(element_caller);
        let Ok(response) = service.clone().oneshot(request).await;
        let status = response.status();
        // Never more than the room left is held.
        let room = bounds.max_bytes.saturating_sub(answers.ran_bytes);
        let Ok(bytes) = axum::body::to_bytes(Body::new(response.into_body()), room).await else {
            let error = jsonrpc::error(
                id.unwrap_or(Value::Null),
                jsonrpc::BEYOND_BOUNDS,
                bounds.not_kept(room),
            );
            answers.push_value(&error, false);
            not_kept += 1;
            stopped = Some((jsonrpc::Bound::Bytes, index + 1));
            continue;
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(answer) => {
                if answers.first_error.is_none() && answer.get("error").is_some() {
                    answers.push_value(&answer, true);
                } else {
                    answers.push(&bytes, true);
                }
            }
            Err(_) if status == http::StatusCode::ACCEPTED => {}
            Err(_) => answers.push_value(
                &jsonrpc::error(
                    id.unwrap_or(Value::Null),
                    -32603,
                    format!(
                        "Internal error: HTTP {status}: {}",
                        String::from_utf8_lossy(&bytes)
                            .chars()
                            .take(200)
                            .collect::<String>()
                    ),
                ),
                true,
            ),
        }
    }
    let cut = stopped.map(|(bound, from)| {
        let kept = if not_kept > 0 {
            format!(" ({not_kept} ran, answer not kept)")
        } else {
            String::new()
        };
        format!(
            "batch of {total}: {} element(s) from index {from} not run{kept}: {}",
            total - from,
            bounds.why(bound, total)
        )
    });
    let error = answers.first_error.take();
    let response = if answers.count == 0 {
        let mut accepted = HttpResponse::new(Body::empty());
        *accepted.status_mut() = http::StatusCode::ACCEPTED;
        accepted
    } else {
        answers.bytes.push(b']');
        json_bytes(200, answers.bytes)
    };
    Batched {
        response,
        error,
        cut,
    }
}

/// An authenticated MCP HTTP request: handed to the SDK's Streamable
/// HTTP service with the caller in its extensions, once its `Origin`,
/// if any, is admitted (`origin.rs`). Stateless (no
/// sessions to steal or keep), JSON answers, never cached. A request
/// that is not a tool call (`initialize`, `tools/list`, a
/// notification, an unknown method, a refusal) gets one audit record
/// of its own; tool calls are recorded as items.
pub(crate) async fn mcp_http(
    gateway: &Arc<Gateway>,
    state: Arc<State>,
    parts: http::request::Parts,
    body: Body,
    ctx: crate::pipeline::RequestContext,
) -> HttpResponse<Body> {
    let mut caller = McpCaller {
        ctx: Arc::new(ctx),
        state,
        page: None,
        mcp_client: None,
    };
    // A browser page gets no door to the caller's rights unless it is
    // one the configuration or the caller's own <cors> names.
    if let Some(origin) = caller.ctx.origin.as_deref() {
        let host = parts
            .uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| parts.headers.get(http::header::HOST)?.to_str().ok());
        let listed = |o: &str| caller.ctx.held.iter().any(|r| r.policy.origin_listed(o));
        match origin::admit(origin, host, &caller.state.mcp().allowed_origins, listed) {
            Some(page) => caller.page = Some(page),
            None => {
                let e = HttpError::new(
                    403,
                    "jmxgate.OriginNotAllowed",
                    "Origin not allowed for MCP: list it in mcp.allowed_origins, or in an \
                     <allow-origin> of your roles' <cors>",
                );
                return mcp_refused(gateway, &caller, &e, &parts.headers).await;
            }
        }
    }
    let body = if parts.method == http::Method::POST {
        match gateway.read_body(&caller.state, body).await {
            Ok(bytes) => bytes,
            Err(e) => return mcp_refused(gateway, &caller, &e, &parts.headers).await,
        }
    } else {
        bytes::Bytes::new()
    };
    // Parsed once here, for the framing check and the audit note.
    let message =
        (parts.method == http::Method::POST).then(|| serde_json::from_slice::<Value>(&body));
    let methods = rpc_methods(message.as_ref().and_then(|m| m.as_ref().ok()));
    caller.mcp_client = client_of(message.as_ref().and_then(|m| m.as_ref().ok()));
    let framing = match message {
        Some(message) => {
            let protocol = parts
                .headers
                .get("mcp-protocol-version")
                .and_then(|v| v.to_str().ok());
            match jsonrpc::check(message, protocol) {
                Ok(framing) => framing,
                Err(refusal) => return mcp_malformed(gateway, &caller, &methods, refusal).await,
            }
        }
        None => jsonrpc::Framing::One,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        // Every request is authenticated here; a browser's Origin was
        // checked against the caller's own CORS policy before this.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(caller.state.max_body_bytes);
    let door = Door {
        gateway: gateway.clone(),
    };
    let service = StreamableHttpService::new(
        move || Ok(door.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let http_method = parts.method.clone();
    // An admitted page reads the answer with the CORS headers.
    let mut request_origin = HeaderMap::new();
    if let Some(origin) = parts.headers.get(http::header::ORIGIN) {
        request_origin.insert(http::header::ORIGIN, origin.clone());
    }
    let (mut response, batched) = match framing {
        jsonrpc::Framing::One => {
            let mut request = HttpRequest::from_parts(parts, Body::from(body));
            request.extensions_mut().insert(caller.clone());
            match service.oneshot(request).await {
                Ok(response) => (response.map(Body::new), None),
                Err(never) => match never {},
            }
        }
        jsonrpc::Framing::Batch(elements) => {
            let Batched {
                response,
                error,
                cut,
            } = batch(&service, &parts, elements, &caller).await;
            (response, Some((error, cut)))
        }
    };
    respond::no_store(response.headers_mut());
    respond::cors_headers(&request_origin, response.headers_mut());
    let others: Vec<&str> = methods
        .iter()
        .map(String::as_str)
        .filter(|m| *m != "tools/call")
        .collect();
    // A batch cut at a bound is recorded even when it held tool calls
    // only (each call that ran has its own records).
    let cut = batched.as_ref().and_then(|(_, cut)| cut.clone());
    if methods.iter().any(|m| m == "subscriptions/listen") {
        return listening(gateway, &caller, response, &others.join(", ")).await;
    }
    if methods.is_empty() || !others.is_empty() || cut.is_some() {
        // A batch's answer was read as it was written; one answer is
        // small unless it is a tool result, which is not read here.
        let (response, error) = match batched {
            Some((error, _)) => (response, error),
            None => rpc_error_of(response).await,
        };
        let status = response.status().as_u16();
        let mut note = match (others.is_empty(), &error) {
            (true, _) if methods.is_empty() => {
                format!("{http_method} without a JSON-RPC method")
            }
            (true, _) => "tools/call".to_string(),
            (false, None) => others.join(", "),
            (false, Some(e)) => format!("{}: {e}", others.join(", ")),
        };
        if let Some(cut) = &cut {
            note = format!("{note}; {cut}");
        }
        let decision = if status < 300 && error.is_none() && cut.is_none() {
            "allowed"
        } else {
            "invalid"
        };
        let recorded = mcp_record(gateway, &caller, decision, status, None, &note).await;
        return match recorded {
            Ok(()) => response,
            Err(e) => respond::http_error(&e, &HeaderMap::new(), false),
        };
    }
    response
}

/// A subscription's answer is a stream that lasts: recorded as it
/// starts, never read here.
async fn listening(
    gateway: &Gateway,
    caller: &McpCaller,
    response: HttpResponse<Body>,
    note: &str,
) -> HttpResponse<Body> {
    let status = response.status().as_u16();
    let decision = if status < 300 { "allowed" } else { "invalid" };
    match mcp_record(gateway, caller, decision, status, None, note).await {
        Ok(()) => response,
        Err(e) => respond::http_error(&e, &HeaderMap::new(), false),
    }
}

/// A body whose JSON-RPC framing is unsound: its JSON-RPC error,
/// recorded.
async fn mcp_malformed(
    gateway: &Gateway,
    caller: &McpCaller,
    methods: &[String],
    refusal: jsonrpc::Refusal,
) -> HttpResponse<Body> {
    let error = &refusal.answer["error"];
    let mut note = format!(
        "JSON-RPC error {}: {}",
        error["code"],
        error["message"].as_str().unwrap_or_default()
    );
    note.truncate(200);
    if !methods.is_empty() {
        note = format!("{}: {note}", methods.join(", "));
    }
    let recorded = mcp_record(gateway, caller, "invalid", refusal.status, None, &note).await;
    if let Err(e) = recorded {
        return respond::http_error(&e, &HeaderMap::new(), false);
    }
    json_answer(refusal.status, &refusal.answer)
}

/// An MCP HTTP request refused before the SDK saw it, recorded.
async fn mcp_refused(
    gateway: &Gateway,
    caller: &McpCaller,
    e: &HttpError,
    headers: &HeaderMap,
) -> HttpResponse<Body> {
    let decision = if e.status == 403 { "denied" } else { "invalid" };
    let recorded = mcp_record(
        gateway,
        caller,
        decision,
        e.status,
        Some(&e.error_type),
        &e.message,
    )
    .await;
    let mut response = match recorded {
        Ok(()) => respond::http_error(e, headers, false),
        Err(unavailable) => respond::http_error(&unavailable, headers, false),
    };
    respond::no_store(response.headers_mut());
    response
}

/// One `mcp` audit record for the caller's HTTP request.
async fn mcp_record(
    gateway: &Gateway,
    caller: &McpCaller,
    decision: &'static str,
    status: u16,
    error_type: Option<&str>,
    note: &str,
) -> Result<(), HttpError> {
    let who = caller.who(None, caller.ctx.started.elapsed());
    let record = audit::RequestRecord {
        who: &who,
        event: "mcp",
        decision,
        status,
        error_type,
        target: None,
        note,
    };
    gateway.record(audit::Event::Request(record)).await
}
