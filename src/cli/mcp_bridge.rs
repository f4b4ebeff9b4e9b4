//! `jmxgate mcp`: an MCP server on standard input and output that
//! forwards every request to a remote gateway's MCP endpoint, for desktop
//! assistants that only start local (stdio) servers. The tools, prompts
//! and completions, their answers and every decision are the remote
//! gateway's, made for the
//! credentials given here (as every client command takes them); nothing
//! is decided locally.

use std::collections::HashMap;
use std::process::ExitCode;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientConfig, ClientRequest,
    CompleteRequest, CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsRequest,
    ListPromptsResult, ListToolsRequest, ListToolsResult, PaginatedRequestParams,
    RequestMetaObject, ResultType, ServerCapabilities, ServerConfig, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext, RoleClient, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleServer, ServerHandler, ServiceExt as _};

use super::ConnectOpts;

/// The MCP URL for what the user gave: a gateway's base URL or its
/// Jolokia URL (`…/jolokia`, as `JMXGATE_URL` holds for the other
/// commands) means its `/mcp`; any other path is taken as the MCP
/// endpoint itself.
pub fn mcp_url(given: &str) -> Result<String, String> {
    let mut url = url::Url::parse(given).map_err(|e| format!("url {given:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "url {given:?}: only http:// and https:// are supported"
        ));
    }
    let path = url.path().trim_end_matches('/').to_string();
    let mcp = match path.rsplit_once('/') {
        _ if path.is_empty() => "/mcp".to_string(),
        Some((before, "jolokia")) => format!("{before}/mcp"),
        _ => path,
    };
    url.set_path(&mcp);
    Ok(url.to_string())
}

/// Forwards to the remote gateway; one per process.
struct Bridge {
    remote: Peer<RoleClient>,
    info: ServerConfig,
    /// The gateway's origin (scheme, host, port: never credentials), for
    /// errors.
    origin: String,
}

impl Bridge {
    /// A remote failure, said to the local client as an MCP error: the
    /// gateway's own JSON-RPC error as it sent it, else what failed in
    /// words.
    fn forwarded(&self, e: ServiceError) -> ErrorData {
        let cause = match e {
            ServiceError::McpError(error) => return error,
            ServiceError::TransportSend(e) => in_words(&*e.error),
            ServiceError::TransportClosed => "the connection to the gateway was closed".into(),
            ServiceError::UnexpectedResponse => "its answer was not of the kind asked for".into(),
            ServiceError::Timeout { timeout } => {
                format!("no answer within {} s", timeout.as_secs())
            }
            ServiceError::Cancelled { .. } => "the request was cancelled".into(),
            other => plain(other.to_string()),
        };
        ErrorData::internal_error(
            format!("the gateway at {} could not answer: {cause}", self.origin),
            None,
        )
    }
}

/// How the bridge names itself to the gateway when it connects, before
/// any local client has said who it is.
const BRIDGE_NAME: &str = "jmxgate-mcp";

/// The most characters of the local client's name passed on (the
/// gateway cuts longer names; this keeps the ` (via jmxgate mcp)`).
const MAX_LOCAL_NAME_CHARS: usize = 64;

/// The local client as the gateway is told it, in each request's `_meta`
/// (`io.modelcontextprotocol/clientInfo`, which the gateway audits):
/// its own name marked as coming through this bridge, its own version.
/// From the request's `_meta` (local protocol 2026-07-28), else from the
/// local `initialize`; `None` when the local client named none.
fn local_client(context: &RequestContext<RoleServer>) -> Option<Implementation> {
    let local = context.meta.client_info().or_else(|| {
        context
            .peer
            .peer_info()
            .map(|info| info.client_info.clone())
    })?;
    let name: String = local.name.chars().take(MAX_LOCAL_NAME_CHARS).collect();
    Some(Implementation::new(
        format!("{name} (via jmxgate mcp)"),
        local.version,
    ))
}

impl Bridge {
    /// One request to the gateway, naming the local client.
    async fn ask(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let mut options = PeerRequestOptions::no_options();
        if let Some(local) = local_client(context) {
            let mut meta = RequestMetaObject::new();
            meta.set_client_info(local);
            options = options.with_meta(meta);
        }
        let handle = self
            .remote
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.forwarded(e))?;
        handle.await_response().await.map_err(|e| self.forwarded(e))
    }
}

/// An answer of a type the request does not take.
fn unexpected() -> ErrorData {
    ErrorData::internal_error("the gateway's answer was not of the kind asked for", None)
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let asked = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        let ServerResult::ListToolsResult(mut listed) = self.ask(asked, &context).await? else {
            return Err(unexpected());
        };
        complete(&mut listed.result_type);
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let asked = ClientRequest::CallToolRequest(CallToolRequest::new(request));
        let mut answered = match self.ask(asked, &context).await? {
            ServerResult::CallToolResult(result) => CallToolResponse::Complete(result),
            ServerResult::InputRequiredResult(result) => CallToolResponse::InputRequired(result),
            ServerResult::CreateTaskResult(result) => CallToolResponse::Task(result),
            _ => return Err(unexpected()),
        };
        if let CallToolResponse::Complete(result) = &mut answered {
            complete(&mut result.result_type);
        }
        Ok(answered)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let asked = ClientRequest::ListPromptsRequest(ListPromptsRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        let ServerResult::ListPromptsResult(mut listed) = self.ask(asked, &context).await? else {
            return Err(unexpected());
        };
        complete(&mut listed.result_type);
        Ok(listed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let asked = ClientRequest::GetPromptRequest(GetPromptRequest::new(request));
        match self.ask(asked, &context).await? {
            ServerResult::GetPromptResult(mut result) => {
                complete(&mut result.result_type);
                Ok(GetPromptResponse::Complete(result))
            }
            ServerResult::InputRequiredResult(result) => {
                Ok(GetPromptResponse::InputRequired(result))
            }
            _ => Err(unexpected()),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let asked = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        let ServerResult::CompleteResult(mut completed) = self.ask(asked, &context).await? else {
            return Err(unexpected());
        };
        complete(&mut completed.result_type);
        Ok(completed)
    }
}

/// The local client may have negotiated a newer protocol than the remote
/// session (2026-07-28 requires `resultType`, older ones lack it): a
/// result the remote sent without one is complete (the spec's reading of
/// its absence). The SDK drops it again for local clients of older
/// protocols.
fn complete(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

/// What went wrong under an SDK or HTTP client error, in words: no Rust
/// type names, no `Debug` output. The HTTP client's own reasons (a refused
/// redirect, a refused connection) are found in the chain of sources.
fn in_words(e: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::service::ClientInitializeError as Init;
    use rmcp::transport::streamable_http_client::StreamableHttpError as Http;
    let mut current = Some(e);
    while let Some(error) = current {
        if let Some(init) = error.downcast_ref::<Init>() {
            return match init {
                Init::TransportError { error, .. } => in_words(&*error.error),
                // The answer to the older handshake, tried last, says most.
                Init::LegacyFallbackFailed { fallback, .. } => in_words(&**fallback),
                Init::ExpectedInitResponse(_) | Init::ExpectedInitResult(_) => {
                    "it did not answer as an MCP server (is this the gateway's MCP endpoint?)"
                        .into()
                }
                Init::ConnectionClosed(_) => {
                    "the connection closed during the MCP handshake".into()
                }
                Init::JsonRpcError(e) => format!("it refused the MCP handshake: {}", e.message),
                Init::NoCompatibleProtocolVersion { .. } => {
                    "it speaks no MCP protocol version this jmxgate knows".into()
                }
                Init::Cancelled => "the handshake was cancelled".into(),
                other => plain(other.to_string()),
            };
        }
        if let Some(http) = error.downcast_ref::<Http<reqwest::Error>>() {
            return match http {
                Http::Client(e) => in_words(e),
                Http::Io(e) => in_words(e),
                Http::HttpStatus(status) => status_words(status.status),
                Http::UnexpectedContentType(kind) => format!(
                    "its answer is not MCP (content type {}); \
                     is this the gateway's MCP endpoint?",
                    kind.as_deref().unwrap_or("none")
                ),
                Http::UnexpectedServerResponse(what) => {
                    format!("unexpected answer: {}", plain(what.to_string()))
                }
                Http::Deserialize(_) => "its answer is not JSON-RPC".into(),
                Http::UnexpectedEndOfStream | Http::TransportChannelClosed => {
                    "the connection closed before the answer was complete".into()
                }
                other => plain(other.to_string()),
            };
        }
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return tls_words(tls);
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if let Some(words) = io_words(io) {
                return words;
            }
            // The error an I/O error wraps (rustls's) is not its source.
            if let Some(inner) = io.get_ref() {
                current = Some(inner as &(dyn std::error::Error + 'static));
                continue;
            }
        }
        current = error.source();
    }
    plain(crate::client::innermost_cause(e))
}

fn io_words(e: &std::io::Error) -> Option<String> {
    use std::io::ErrorKind;
    let words = match e.kind() {
        ErrorKind::ConnectionRefused => {
            "the connection was refused: nothing listens at that address and port \
             (is the gateway running?)"
        }
        ErrorKind::TimedOut => "the connection timed out",
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => "the connection was reset",
        ErrorKind::UnexpectedEof => "the connection closed before the answer was complete",
        _ => return None,
    };
    Some(words.into())
}

fn tls_words(e: &rustls::Error) -> String {
    use rustls::{CertificateError, Error};
    match e {
        Error::InvalidCertificate(why) => format!(
            "its TLS certificate was not accepted: {}",
            match why {
                CertificateError::UnknownIssuer => {
                    "issued by an authority not trusted here (give its CA with --ca-file)"
                }
                CertificateError::Expired => "it has expired",
                CertificateError::NotValidForName => "it is not for this host name",
                _ => "it is not valid",
            }
        ),
        Error::InvalidMessage(_) => {
            "it does not speak TLS there (an http:// URL for a plain HTTP port?)".into()
        }
        Error::AlertReceived(_) => "it refused the TLS handshake".into(),
        _ => "the TLS handshake failed".into(),
    }
}

fn status_words(status: u16) -> String {
    let why = match status {
        404 | 405 | 501 => "; is this the gateway's MCP endpoint?",
        429 => ": it is busy",
        502..=504 => ": a proxy in front of it could not reach it, or it is overloaded",
        _ => "",
    };
    format!("it answered HTTP {status}{why}")
}

/// An error text the SDK made, as a safety net: one holding a Rust path
/// or a `Debug` rendering (`Some(…)`, `Foo { … }`) is not shown.
fn plain(text: String) -> String {
    let debug = text.contains("::")
        || text.contains("Some(")
        || text.contains(" { ")
        || text.contains("Error(");
    if debug {
        "an unexpected failure of the MCP exchange".into()
    } else {
        text
    }
}

/// Why connecting failed, in the user's terms (not the SDK's types).
fn why(e: rmcp::service::ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    if let rmcp::service::ClientInitializeError::TransportError { error, .. } = &e {
        match error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            Some(StreamableHttpError::AuthRequired(_)) => {
                return "it refused the credentials (HTTP 401); \
                    set JMXGATE_USER and JMXGATE_PASSWORD (or --password-file), or a bearer \
                    token in JMXGATE_TOKEN (or --token-file)"
                    .into()
            }
            Some(StreamableHttpError::InsufficientScope(_)) => {
                return "it refused the caller (HTTP 403)".into()
            }
            _ => {}
        }
    }
    in_words(&e)
}

/// Runs the bridge until standard input closes.
pub async fn run(conn: ConnectOpts) -> ExitCode {
    match serve(conn).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("jmxgate mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What the client commands take but the bridge cannot use: refused, so
/// nobody believes they act.
fn unused(conn: &ConnectOpts) -> Result<(), String> {
    if conn.json {
        return Err(
            "--json is not for `jmxgate mcp`: it speaks MCP (JSON-RPC) on \
             standard output already"
                .into(),
        );
    }
    if conn.target.is_some() {
        return Err(
            "--target (or JMXGATE_TARGET) is not for `jmxgate mcp`: the assistant \
             names a target in each tool call, and list_targets shows which it may use; \
             unset it for this command"
                .into(),
        );
    }
    Ok(())
}

async fn serve(conn: ConnectOpts) -> Result<(), String> {
    unused(&conn)?;
    // Flags, environment and client config file, as for every command;
    // the URL given is mapped to the gateway's MCP endpoint. A redirect
    // to another origin is never followed: the JSON-RPC body (and the
    // assistant's tool arguments) would be re-sent to another host.
    let client = conn
        .builder()?
        .same_origin_redirects_only()
        .build()
        .map_err(|e| e.to_string())?;
    let url = mcp_url(client.url().as_str())?;
    let parsed = url::Url::parse(&url).map_err(|e| format!("url {url:?}: {e}"))?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().to_string();
    let (http, authorization) = client.http_and_authorization();
    let mut headers = HashMap::new();
    if let Some(value) = authorization {
        headers.insert(http::header::AUTHORIZATION, value);
    }
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers),
    );
    let mut bridge_info = ClientConfig::default();
    bridge_info.client_info = Implementation::new(BRIDGE_NAME, env!("CARGO_PKG_VERSION"));
    let remote = bridge_info.serve(transport).await.map_err(|e| {
        format!(
            "cannot connect to the gateway at {origin} (MCP endpoint {path}): {}",
            why(e)
        )
    })?;
    let peer = remote.peer().clone();
    let remote_info = peer.peer_info();
    let server_info = remote_info
        .as_ref()
        .and_then(|i| i.server_info.clone())
        .unwrap_or_else(|| Implementation::new("jmxgate", env!("CARGO_PKG_VERSION")));
    // What the bridge forwards, as far as the gateway offers it (an older
    // gateway has tools only).
    let offered = remote_info.as_ref().map(|i| &i.capabilities);
    let mut capabilities = ServerCapabilities::builder().enable_tools().build();
    capabilities.prompts = offered.and_then(|c| c.prompts.clone());
    capabilities.completions = offered.and_then(|c| c.completions.clone());
    let mut info = ServerConfig::new(capabilities).with_server_info(server_info);
    if let Some(instructions) = remote_info.as_ref().and_then(|i| i.instructions.clone()) {
        info = info.with_instructions(instructions);
    }
    eprintln!("jmxgate mcp: forwarding standard input and output to {url}");
    let local = Bridge {
        remote: peer,
        info,
        origin,
    }
    .serve(rmcp::transport::stdio())
    .await
    .map_err(|e| format!("standard input and output: {e}"))?;
    let ended = local.waiting().await;
    drop(remote);
    ended
        .map(|_| ())
        .map_err(|e| format!("the local MCP session ended with an error: {e}"))
}

#[cfg(test)]
mod tests {
    use super::{in_words, mcp_url, plain, status_words};

    #[test]
    fn failures_are_said_in_words() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(in_words(&refused).starts_with("the connection was refused"));
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        );
        assert!(
            in_words(&tls).contains("does not speak TLS"),
            "{}",
            in_words(&tls)
        );
        assert!(status_words(502).contains("HTTP 502: a proxy"));
        assert_eq!(
            plain("a redirect; not followed".into()),
            "a redirect; not followed"
        );
        for debug in ["Some(\"text/html\")", "rmcp::Error", "Kind(Io) { x }"] {
            assert!(!plain(debug.into()).contains(debug), "{debug}");
        }
    }

    #[test]
    fn the_gateways_base_or_jolokia_url_means_its_mcp_endpoint() {
        for (given, expected) in [
            ("http://gw:8080", "http://gw:8080/mcp"),
            ("http://gw:8080/", "http://gw:8080/mcp"),
            ("https://gw/jolokia", "https://gw/mcp"),
            ("https://gw/ops/jolokia/", "https://gw/ops/mcp"),
            ("https://gw/mcp", "https://gw/mcp"),
            ("https://gw/assistants", "https://gw/assistants"),
        ] {
            assert_eq!(mcp_url(given).unwrap(), expected, "{given}");
        }
        assert!(mcp_url("ftp://gw/").unwrap_err().contains("only http"));
    }
}
