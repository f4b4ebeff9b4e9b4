//! `jmxgate mcp`: an MCP server on standard input and output that
//! forwards every request to a remote gateway's MCP endpoint, for desktop
//! assistants that only start local (stdio) servers. The tools, their
//! answers and every decision are the remote gateway's, made for the
//! credentials given here (as every client command takes them); nothing
//! is decided locally.

use std::collections::HashMap;
use std::process::ExitCode;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleClient, ServiceError};
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
}

/// A remote failure, said to the local client as an MCP error.
fn forwarded(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(
            format!("the gateway could not be reached: {}", cause(&other)),
            None,
        ),
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut listed = self.remote.list_tools(request).await.map_err(forwarded)?;
        complete(&mut listed.result_type);
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut answered = self
            .remote
            .call_tool_once(request)
            .await
            .map_err(forwarded)?;
        if let CallToolResponse::Complete(result) = &mut answered {
            complete(&mut result.result_type);
        }
        Ok(answered)
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

/// The HTTP client's own reason under an SDK error (a refused redirect,
/// a refused connection), which the SDK's wrapping does not chain; else
/// the innermost cause.
fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut current = Some(e);
    while let Some(error) = current {
        if let Some(StreamableHttpError::Client(client)) =
            error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return crate::client::innermost_cause(client);
        }
        current = error.source();
    }
    crate::client::innermost_cause(e)
}

/// Why connecting failed, in the user's terms (not the SDK's types).
fn why(e: rmcp::service::ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let rmcp::service::ClientInitializeError::TransportError { error, .. } = e else {
        return e.to_string();
    };
    match error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        Some(StreamableHttpError::AuthRequired(_)) => {
            "the gateway refused the credentials (HTTP 401); \
            set JMXGATE_USER and JMXGATE_PASSWORD (or --password-file), or a bearer token in \
            JMXGATE_TOKEN (or --token-file)"
                .into()
        }
        Some(StreamableHttpError::InsufficientScope(_)) => {
            "the gateway refused the caller (HTTP 403)".into()
        }
        Some(StreamableHttpError::Client(e)) => crate::client::innermost_cause(e),
        _ => error.error.to_string(),
    }
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
    let (http, authorization) = client.http_and_authorization();
    let mut headers = HashMap::new();
    if let Some(value) = authorization {
        headers.insert(http::header::AUTHORIZATION, value);
    }
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers),
    );
    let remote = ().serve(transport).await.map_err(|e| {
        format!(
            "cannot connect to the gateway's MCP endpoint {url}: {}",
            why(e)
        )
    })?;
    let peer = remote.peer().clone();
    let remote_info = peer.peer_info();
    let server_info = remote_info
        .as_ref()
        .and_then(|i| i.server_info.clone())
        .unwrap_or_else(|| Implementation::new("jmxgate", env!("CARGO_PKG_VERSION")));
    let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(server_info);
    if let Some(instructions) = remote_info.as_ref().and_then(|i| i.instructions.clone()) {
        info = info.with_instructions(instructions);
    }
    eprintln!("jmxgate mcp: forwarding standard input and output to {url}");
    let local = Bridge { remote: peer, info }
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
    use super::mcp_url;

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
