//! The MCP front door: AI assistants reach the fleet over the Model
//! Context Protocol (Streamable HTTP, stateless, at `[mcp] path`), as the
//! caller the listener authenticated, with that caller's roles.
//!
//! The HTTP request passes the same pre-phase and authentication as a
//! Jolokia request (`Gateway::run`), then the official SDK (`rmcp`)
//! speaks MCP. Each tool call becomes one ordinary Jolokia item
//! (`tools.rs`) that goes through parse, route, authorize, dispatch,
//! merge and audit ([`Gateway::run_tool_item`]); its answer becomes
//! structured content (`answer.rs`), bounded for an assistant
//! (`bound.rs`). Audit records say `"channel":"mcp"`, the tool, and the
//! MCP client when the request names it (`client_of`).

pub mod answer;
pub mod bound;
pub mod complete;
pub mod config;
mod explain;
pub mod jsonrpc;
pub mod origin;
pub mod page;
pub mod prompts;
pub mod tools;

pub use config::McpConfig;

/// The most the MCP SDK (`rmcp`) may log: it logs every request at INFO,
/// tool arguments and results at DEBUG (values never go to the log), and
/// every JSON-RPC error it answers at WARN (a client's mistake, one line
/// per request: the audit log records those). Added to every log filter.
pub const SDK_LOG_CEILING: &str = "rmcp=error";

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use http::{HeaderMap, Request as HttpRequest, Response as HttpResponse};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
    CompleteResult, CompletionInfo, ContentBlock, DiscoverResult, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, Reference, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};
use tower::ServiceExt as _;

use crate::access::Role;
use crate::doors::access::{wire, AccessCaller, Ask};
use crate::pipeline::authenticate::Principal;
use crate::pipeline::state::State;
use crate::pipeline::{audit, authorize, parse, respond, route, Caller, Gateway, HttpError};
use answer::{Answered, Outcome};
use prompts::PromptName;
use tools::{Call, ToolName};

/// The authenticated caller of one MCP HTTP request, handed to the tool
/// handler through the request's extensions.
#[derive(Clone)]
pub(crate) struct McpCaller {
    pub state: Arc<State>,
    pub principal: Principal,
    /// Its standing roles (what it may ask for and review), and those
    /// with the roles its approved access requests grant now.
    pub standing: Vec<Arc<Role>>,
    pub held: Vec<Arc<Role>>,
    pub client: Option<SocketAddr>,
    pub chain: Vec<String>,
    pub origin: Option<String>,
    /// The browser page the door admitted (set by `mcp_http` when the
    /// request has an `Origin` or `Referer`).
    pub page: Option<origin::Page>,
    /// The MCP client as this request (or, in a batch, this element)
    /// names itself (`client_of`), set by `mcp_http`.
    pub mcp_client: Option<audit::McpClient>,
    pub request_id: String,
    pub scheme: &'static str,
    /// When the HTTP request arrived.
    pub started: Instant,
}

impl McpCaller {
    fn role_names(&self) -> Vec<String> {
        self.held.iter().map(|r| r.name.clone()).collect()
    }

    /// Whether some role of the caller could allow `command` (write or
    /// exec) somewhere: then the tool is offered. Each call is still
    /// judged in full.
    fn may(&self, command: &str) -> bool {
        if self.held.is_empty() {
            return self.state.access.is_open();
        }
        self.held.iter().any(|r| r.policy.could_ever(command))
    }

    /// Who asked, for the audit records of one tool call.
    fn who<'a>(
        &'a self,
        roles: &'a [String],
        tool: &'a str,
        latency: std::time::Duration,
    ) -> audit::Who<'a> {
        audit::Who {
            request_id: &self.request_id,
            principal: &self.principal,
            roles,
            client: self.client,
            latency,
            channel: Some(audit::Channel::Mcp),
            tool: Some(tool),
            mcp_client: self.mcp_client.as_ref(),
        }
    }

    /// Whether a call from the caller's page (if any) may run on `target`:
    /// some role of the caller's that reaches the target admits the page
    /// itself (`origin::Page::admitted_by`); every target on a gateway
    /// without roles (the door admitted the page by configuration).
    fn page_reaches(&self, target: &crate::fleet::Target) -> bool {
        let Some(page) = &self.page else {
            return true;
        };
        self.state.access.is_open()
            || crate::pipeline::reaching(&self.held, Some(target)).any(|r| {
                page.admitted_by(
                    |o| r.policy.origin_listed(o),
                    |o| r.policy.origin_allowed(Some(o), false),
                )
            })
    }

    /// The request facts a tool call's item is judged with: a POST, and
    /// a denied attribute of a read answered in its place.
    fn facts(&self) -> authorize::RequestFacts<'_> {
        authorize::RequestFacts {
            method: "POST",
            chain: &self.chain,
            origin: self.origin.as_deref(),
            scheme: self.scheme,
            denied_reads_in_place: true,
        }
    }

    fn offered(&self) -> Vec<ToolName> {
        tools::offered(
            |command| self.may(command),
            self.state.access.may_request(&self.standing),
            self.held.iter().any(|r| !r.approval.rules.is_empty()),
        )
    }

    /// The targets the caller may name: those its roles reach, and from a
    /// page only those a call from it may use (as `list_targets`).
    fn visible_targets(&self) -> impl Iterator<Item = &Arc<crate::fleet::Target>> + '_ {
        self.state
            .fleet
            .iter()
            .filter(|t| self.state.access.reaches(&self.held, t))
            .filter(|t| self.page_reaches(t))
    }
}

/// What a prompt may name: the caller's visible targets.
impl prompts::Visible for McpCaller {
    fn matching(&self, selector: &str) -> Result<usize, String> {
        let selector = crate::access::TargetSelector::parse(selector)?;
        Ok(self
            .visible_targets()
            .filter(|t| selector.matches(t))
            .count())
    }

    fn reaches(&self, name: &str) -> bool {
        self.visible_targets().any(|t| t.name == name)
    }
}

/// The rmcp server handler: one per HTTP request (stateless).
#[derive(Clone)]
struct Door {
    gateway: Arc<Gateway>,
}

const INSTRUCTIONS: &str = "Tools to inspect and manage Java applications (JVMs) through the \
jmxgate Jolokia gateway, under your own roles and policies; every call is audited. Start with \
list_targets, find MBeans with search_mbeans, see what one offers with describe_mbean, then \
read_attributes. write_attribute and execute_operation change running JVMs: confirm with the \
user first. When a call is refused, explain tells which of your roles and rules decided.";

/// How long (ms) a client may hold a caller's tool list (and the
/// `server/discover` answer) as fresh, from protocol 2026-07-28 on, where a
/// list must say (`ttlMs`; 0 would mean "stale at once", asking clients to
/// list again before every call). The list depends on the caller's roles,
/// which a reload may change, and the stateless door sends no
/// `list_changed`: a minute, after which a client lists again; a tool used
/// from a stale list is judged in full all the same. Private: it is the
/// caller's own list.
pub const TOOLS_TTL_MS: u64 = 60_000;

/// Whether a protocol revision carries caching hints (`ttlMs`,
/// `cacheScope`): 2026-07-28 and later (dates compare as text).
fn has_cache_hints(version: &ProtocolVersion) -> bool {
    version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
}

fn caller(context: &RequestContext<RoleServer>) -> Result<McpCaller, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<McpCaller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("no authenticated caller", None))
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool {name:?}; tools/list shows the tools you may use"),
        None,
    )
}

/// A real tool the caller's roles don't offer: said as such, so that it
/// doesn't read like a typo (the roles are the caller's own).
fn tool_not_allowed(tool: ToolName, roles: &[String]) -> ErrorData {
    let held = match roles {
        [] => "you hold no role".to_string(),
        [one] => format!("role {one}"),
        many => format!("roles {}", many.join(", ")),
    };
    ErrorData::invalid_params(
        format!(
            "tool {:?} is not allowed for your roles ({held}): none of their policies \
             allows {} anywhere; tools/list shows the tools you may use",
            tool.as_str(),
            match tool.changes() {
                Some("exec") => "an exec",
                Some("write") => "a write",
                _ => "it",
            }
        ),
        None,
    )
}

impl ServerHandler for Door {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_prompts()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("jmxgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        let tools = ListToolsResult::with_all_items(
            caller.offered().into_iter().map(ToolName::tool).collect(),
        );
        Ok(match context.protocol_version() {
            Some(v) if has_cache_hints(&v) => tools
                .with_ttl_ms(TOOLS_TTL_MS)
                .with_cache_scope(CacheScope::Private),
            _ => tools,
        })
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        caller(&context)?;
        let prompts = ListPromptsResult::with_all_items(
            PromptName::ALL
                .into_iter()
                .map(PromptName::prompt)
                .collect(),
        );
        // The same for every caller, and fixed for a gateway's version.
        Ok(match context.protocol_version() {
            Some(v) if has_cache_hints(&v) => prompts
                .with_ttl_ms(TOOLS_TTL_MS)
                .with_cache_scope(CacheScope::Public),
            _ => prompts,
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = caller(&context)?;
        let Some(prompt) = PromptName::parse(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt {:?}; prompts/list shows them",
                    request.name.chars().take(64).collect::<String>()
                ),
                None,
            ));
        };
        let rendered = prompts::render(
            prompt,
            request.arguments.as_ref(),
            &caller,
            std::time::SystemTime::now(),
        )
        .map_err(|bad| ErrorData::invalid_params(bad.0, None))?;
        Ok(GetPromptResult::new(vec![rendered.message()])
            .with_description(rendered.description)
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = caller(&context)?;
        let Reference::Prompt(prompt) = &request.r#ref else {
            return Err(ErrorData::invalid_params(
                "jmxgate offers no resources; completion is for prompt arguments",
                None,
            ));
        };
        let context_value = |key: &str| {
            request
                .context
                .as_ref()
                .and_then(|c| c.get_argument(key))
                .cloned()
        };
        let wanted = complete::wanted(&prompt.name, &request.argument.name, &context_value)
            .map_err(|e| ErrorData::invalid_params(e.0, None))?;
        let typed = &request.argument.value;
        let info = completion(&self.gateway, &caller, wanted, typed).await;
        Ok(CompleteResult::new(info))
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        )
        .with_ttl_ms(TOOLS_TTL_MS)
        .with_cache_scope(CacheScope::Private))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context)?;
        // The SDK runs this in a task of its own whose panic would leave
        // the HTTP request (and its slot) waiting: a bug must cost one
        // call, never the door.
        use futures::FutureExt as _;
        std::panic::AssertUnwindSafe(self.call(request, caller))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!("an MCP tool call panicked; answered as an internal error");
                Err(ErrorData::internal_error(
                    "the gateway failed on this call; see its log",
                    None,
                ))
            })
    }
}

impl Door {
    async fn call(
        &self,
        request: CallToolRequestParams,
        caller: McpCaller,
    ) -> Result<CallToolResponse, ErrorData> {
        let max = caller.state.mcp.max_result_bytes;
        let Some(tool) = ToolName::parse(&request.name) else {
            let error = unknown_tool(&request.name);
            let named: String = request.name.chars().take(64).collect();
            audit_refused_call(
                &self.gateway,
                &caller,
                &named,
                404,
                "jmxgate.UnknownTool",
                &error.message,
            )
            .await;
            count_tool_call(&self.gateway, "-", "refused");
            return Err(error);
        };
        if !caller.offered().contains(&tool) {
            let error = tool_not_allowed(tool, &caller.role_names());
            audit_refused_call(
                &self.gateway,
                &caller,
                tool.as_str(),
                403,
                "jmxgate.ToolNotAllowed",
                &error.message,
            )
            .await;
            count_tool_call(&self.gateway, tool.as_str(), "refused");
            return Err(error);
        }
        let is_selector = |t: &str| route::selector_of(t).is_some();
        let outcome = match tools::parse_call(tool, request.arguments, &is_selector) {
            Err(bad) => {
                audit_refused_call(
                    &self.gateway,
                    &caller,
                    tool.as_str(),
                    400,
                    "jmxgate.BadArguments",
                    &bad.0,
                )
                .await;
                Outcome::Failed(bad.0)
            }
            Ok(Call::ListTargets { selector }) => {
                list_targets_tool(&self.gateway, &caller, selector.as_deref()).await
            }
            Ok(Call::Explain { target, item }) => {
                crate::doors::mcp::explain::explain_tool(&self.gateway, &caller, &target, &item)
                    .await
            }
            Ok(Call::RequestAccess {
                role,
                duration,
                targets,
                reason,
            }) => {
                let ask = Ask::Create(wire::Create {
                    role,
                    duration,
                    targets,
                    reason,
                });
                access_tool(&self.gateway, &caller, tool, ask).await
            }
            Ok(Call::AccessStatus { id }) => {
                let ask = match id {
                    Some(id) => Ask::Show(id),
                    None => Ask::List(wire::ListQuery {
                        state: None,
                        limit: 20,
                    }),
                };
                access_tool(&self.gateway, &caller, tool, ask).await
            }
            Ok(Call::Item {
                tool,
                target,
                fan_out,
                item,
                mbean,
                page,
            }) => match run_tool_item(&self.gateway, &caller, tool.as_str(), &item).await {
                Ok((answer, denied_by)) => {
                    let shaped = answer::name_denials(
                        answer::shape(Answered {
                            tool,
                            target: &target,
                            fan_out,
                            item: &item,
                            mbean: mbean.as_deref(),
                            answer,
                        }),
                        &denied_by,
                    );
                    match (shaped, mbean, page) {
                        (Outcome::Done(mut described), Some(mbean), _) => {
                            mark_uses(&caller, &target, &item, &mbean, &mut described);
                            Outcome::Done(described)
                        }
                        (Outcome::Done(mut found), _, Some(page)) => {
                            page::apply(&mut found, &page);
                            count_tool_call(&self.gateway, tool.as_str(), "ok");
                            return Ok(paged(found, &page, max).into());
                        }
                        (shaped, _, _) => shaped,
                    }
                }
                Err(e) => Outcome::Failed(format!("{target}: {}", e.message)),
            },
        };
        let ended = match outcome {
            Outcome::Done(_) => "ok",
            Outcome::Failed(_) => "error",
        };
        count_tool_call(&self.gateway, tool.as_str(), ended);
        Ok(result(outcome, max).into())
    }
}

/// Marks a `describe_mbean` answer with what the caller may do, decided
/// as a call would be: by the caller's roles that reach the target.
fn mark_uses(caller: &McpCaller, target: &str, item: &Value, mbean: &str, described: &mut Value) {
    let state = &caller.state;
    let (Some(t), Ok(name)) = (
        state.fleet.by_name(target),
        crate::protocol::ObjectName::parse(mbean),
    ) else {
        return;
    };
    let Ok(body) = serde_json::to_vec(&[item]) else {
        return;
    };
    let Ok(parsed) = parse::parse_post(&body, None, 1) else {
        return;
    };
    let Some(Ok(list)) = parsed.items.first().map(|i| i.parsed.as_ref()) else {
        return;
    };
    let facts = caller.facts();
    let Ok(allowed) = authorize::authorize(
        &state.access,
        &caller.principal,
        &caller.held,
        &facts,
        &list.request,
        &route::Destination::Agent(t.clone()),
    ) else {
        return;
    };
    let grant = allowed.grant;
    answer::mark(described, |use_| match use_ {
        answer::Use::Read(a) => grant.read(&name, a).allowed,
        answer::Use::Write(a) => grant.write(&name, a).allowed,
        answer::Use::Execute(op) => grant.exec(&name, op).allowed,
    });
}

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
    let bounds = caller.state.mcp_batch;
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

/// A page of `search_mbeans` names, bounded, with the cursor for the
/// rest when some were left out.
fn paged(whole: Value, page: &page::Page, max: usize) -> CallToolResult {
    if bound::json_len(&whole) <= max {
        return CallToolResult::structured(whole);
    }
    // Cut, with room for the cursor (each target's name and a number, in
    // base64), so the whole stays within `max`.
    let cursor_room: usize = whole["results"].as_array().map_or(0, |r| {
        r.iter().map(|e| e["target"].to_string().len() + 24).sum()
    });
    let (mut shown, note) = bound::bound(whole.clone(), max.saturating_sub(cursor_room * 4 / 3));
    let next = page::next(&whole, &shown, page);
    if let Value::Object(o) = &mut shown {
        if let Some(note) = note {
            o.insert("truncated".into(), json!(note));
        }
        if let Some(next) = next {
            o.insert("next_cursor".into(), json!(next.encode()));
        }
    }
    CallToolResult::structured(shown)
}

/// Structured content, bounded; or an error text.
fn result(outcome: Outcome, max: usize) -> CallToolResult {
    match outcome {
        Outcome::Failed(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        Outcome::Done(value) => {
            let (mut value, note) = bound::bound(value, max);
            if let (Some(note), Value::Object(o)) = (note, &mut value) {
                o.insert("truncated".into(), json!(note));
            }
            // With the same JSON as text, for clients that show only text.
            CallToolResult::structured(value)
        }
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
    parts: http::request::Parts,
    body: Body,
    mut caller: McpCaller,
) -> HttpResponse<Body> {
    // A browser page gets no door to the caller's rights unless it is
    // one the configuration or the caller's own <cors> names.
    if let Some(origin) = caller.origin.as_deref() {
        let host = parts
            .uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| parts.headers.get(http::header::HOST)?.to_str().ok());
        let listed = |o: &str| caller.held.iter().any(|r| r.policy.origin_listed(o));
        match origin::admit(origin, host, &caller.state.mcp.allowed_origins, listed) {
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
    let roles = caller.role_names();
    let who = audit::Who {
        request_id: &caller.request_id,
        principal: &caller.principal,
        roles: &roles,
        client: caller.client,
        latency: caller.started.elapsed(),
        channel: Some(audit::Channel::Mcp),
        tool: None,
        mcp_client: caller.mcp_client.as_ref(),
    };
    let record = audit::RequestRecord {
        who: &who,
        event: "mcp",
        decision,
        status,
        error_type,
        target: None,
        note,
    };
    gateway.audit_request(&record).await
}

/// `list_targets`: the targets the caller's roles reach (optionally
/// those a selector matches), as `GET /jolokia/targets` lists them,
/// audited as a target list.
/// `request_access` and `access_request_status`: the access-requests
/// API's operation for the caller, audited as its steps are.
async fn access_tool(gateway: &Gateway, caller: &McpCaller, tool: ToolName, ask: Ask) -> Outcome {
    let on = AccessCaller {
        principal: &caller.principal,
        standing: &caller.standing,
        request_id: &caller.request_id,
        client: caller.client,
        started: caller.started,
        channel: Some(audit::Channel::Mcp),
        tool: Some(tool.as_str()),
        tls: caller.scheme == "https",
    };
    match crate::doors::access::access_operation(gateway, &caller.state, ask, &on).await {
        Ok((_, mut value)) => {
            if tool == ToolName::RequestAccess {
                value["next"] = json!(
                    "A person with an approver role must approve this request; \
                     check it with access_request_status."
                );
            }
            Outcome::Done(value)
        }
        Err((e, step)) => {
            let recorded =
                crate::doors::access::audit_access_refused(gateway, &on, &step, &e).await;
            Outcome::Failed(recorded.unwrap_or(e).message)
        }
    }
}

async fn list_targets_tool(
    gateway: &Gateway,
    caller: &McpCaller,
    selector: Option<&str>,
) -> Outcome {
    let started = Instant::now();
    let selector = match selector
        .map(crate::access::TargetSelector::parse)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(format!("list_targets: `selector` {e}")),
    };
    let targets: Vec<Value> = caller
        .visible_targets()
        .filter(|t| selector.as_ref().is_none_or(|s| s.matches(t)))
        .map(|t| {
            let mut d = t.describe();
            // An assistant needs the state, not the breaker's detail.
            let health = d["health"]["state"].clone();
            d["health"] = health;
            d
        })
        .collect();
    let record = audit::TargetListRecord {
        what: "target_list",
        request_id: &caller.request_id,
        principal: &caller.principal,
        roles: caller.role_names(),
        client: caller.client,
        status: 200,
        listed: targets.len(),
        latency: started.elapsed(),
        channel: Some(audit::Channel::Mcp),
        tool: Some(ToolName::ListTargets.as_str()),
        mcp_client: caller.mcp_client.as_ref(),
    };
    if let Err(e) = gateway.audit_listing(&record).await {
        return Outcome::Failed(e.message);
    }
    Outcome::Done(json!({ "count": targets.len(), "targets": targets }))
}

/// What a prompt argument's typed value completes to, from what the
/// caller may see. Targets come from the fleet; MBeans and attributes
/// from a `search` and a `list` run as the caller (authorized and
/// audited as `completion`). A target the caller can't reach, or one
/// that fails to answer, completes to nothing: completion is a hint
/// while typing, and the prompt itself says what is wrong.
async fn completion(
    gateway: &Gateway,
    caller: &McpCaller,
    wanted: complete::Wanted,
    typed: &str,
) -> CompletionInfo {
    use complete::Wanted;
    let nothing = || complete::complete(typed, std::iter::empty());
    let is_selector = |t: &str| route::selector_of(t).is_some();
    let arguments = |pairs: Value| match pairs {
        Value::Object(map) => Some(map),
        _ => None,
    };
    match wanted {
        Wanted::Nothing => nothing(),
        Wanted::Target { groups } => {
            let mut candidates: Vec<String> = Vec::new();
            for t in caller.visible_targets() {
                candidates.push(t.name.clone());
                if groups {
                    candidates.extend(t.labels.iter().map(|(k, v)| format!("{k}={v}")));
                }
            }
            if groups && !candidates.is_empty() {
                candidates.push("*".into());
            }
            complete::complete(typed, candidates.iter().map(String::as_str))
        }
        Wanted::Mbean { target } => {
            if is_selector(&target) || !prompts::Visible::reaches(caller, &target) {
                return nothing();
            }
            let pattern = complete::search_pattern(typed);
            let Ok(Call::Item { item, .. }) = tools::parse_call(
                ToolName::SearchMbeans,
                arguments(json!({"target": target, "pattern": pattern})),
                &is_selector,
            ) else {
                return nothing();
            };
            let Ok((answer, _)) = run_tool_item(gateway, caller, "completion", &item).await else {
                return nothing();
            };
            let names: Vec<&str> = answer["value"]
                .as_array()
                .filter(|_| answer["status"] == 200)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            complete::complete(typed, names)
        }
        Wanted::Attribute { target, mbean } => {
            if !prompts::Visible::reaches(caller, &target) {
                return nothing();
            }
            let Ok(Call::Item {
                tool,
                item,
                mbean: Some(described),
                ..
            }) = tools::parse_call(
                ToolName::DescribeMbean,
                arguments(json!({"target": target, "mbean": mbean})),
                &is_selector,
            )
            else {
                return nothing();
            };
            let Ok((answer, _)) = run_tool_item(gateway, caller, "completion", &item).await else {
                return nothing();
            };
            let shaped = answer::shape(Answered {
                tool,
                target: &target,
                fan_out: false,
                item: &item,
                mbean: Some(&described),
                answer,
            });
            let Outcome::Done(mut described_value) = shaped else {
                return nothing();
            };
            mark_uses(caller, &target, &item, &described, &mut described_value);
            let readable: Vec<&str> = described_value["attributes"]
                .as_array()
                .map(|attributes| {
                    attributes
                        .iter()
                        .filter(|a| a["you_may_read"] == true)
                        .filter_map(|a| a["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            complete::complete(typed, readable)
        }
    }
}

fn count_tool_call(gateway: &Gateway, tool: &str, result: &str) {
    gateway
        .metrics
        .mcp_tool_calls
        .get_or_create(&crate::metrics::ToolLabels {
            tool: tool.into(),
            result: result.into(),
        })
        .inc();
}

/// Audits a tool call that never became an item. The record is best
/// effort: the caller gets its error either way.
async fn audit_refused_call(
    gateway: &Gateway,
    caller: &McpCaller,
    tool: &str,
    status: u16,
    error_type: &str,
    message: &str,
) {
    let roles = caller.role_names();
    let who = caller.who(&roles, tool, std::time::Duration::ZERO);
    let refused = audit::RefusedCall {
        who: &who,
        status,
        error_type,
        message,
    };
    audit::record_refused_call(&refused);
    let entry = audit::refused_call_entry(&refused);
    let records = crate::audit::Encoded::new(vec![entry]);
    let _ = gateway
        .write_audit(&records, false, &caller.request_id)
        .await;
}

/// One tool call's Jolokia item through the phases after
/// authentication: parse (the item as JSON text, like any client's),
/// route and authorize for the caller, dispatch, merge, audit. Returns
/// the item's answer as JSON, with the rule of each policy denial.
/// `tool` names the call in the audit (a tool's name, or `completion`
/// for a completion's own reads).
pub(crate) async fn run_tool_item(
    gateway: &Gateway,
    caller: &McpCaller,
    tool: &str,
    item: &Value,
) -> Result<(Value, Vec<answer::DeniedBy>), HttpError> {
    let started = Instant::now();
    let state = &caller.state;
    let body = serde_json::to_vec(&[item]).expect("JSON values serialise");
    let parsed = parse::parse_post(&body, None, 1)?;
    let facts = caller.facts();
    let judged_as = Caller {
        access: &state.access,
        principal: &caller.principal,
        roles: &caller.held,
        facts: &facts,
    };
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let no_headers = http::HeaderMap::new();
    let local = |command: &crate::protocol::Command| {
        gateway.answer_locally(
            state,
            &caller.held,
            command,
            &no_headers,
            caller.scheme == "https",
        )
    };
    // A browser page's origin must be admitted by the roles that reach
    // the call's targets, not only by some role of the caller.
    let origin_check = |items: &crate::pipeline::items::Items| match &caller.page {
        Some(page) if !items.targets().all(|t| caller.page_reaches(t)) => Err(HttpError::new(
            403,
            "jmxgate.OriginNotAllowed",
            format!(
                "Origin {} is not admitted by the <cors> <allow-origin> of your roles \
                     that reach this target",
                page.origin
            ),
        )),
        _ => Ok(()),
    };
    let ran = gateway
        .run_items(state, &judged_as, addressing, &parsed, local, origin_check)
        .await;
    let merged = match ran {
        Ok(((), merged)) => merged,
        Err(e) => {
            audit_refused_call(gateway, caller, tool, 403, &e.error_type, &e.message).await;
            return Err(e);
        }
    };
    let roles = caller.role_names();
    let who = caller.who(&roles, tool, started.elapsed());
    gateway.audit_items(state, &who, &parsed, &merged).await?;
    // Only the policy's own refusals (a SecurityException): the rule
    // of a target no role reaches would tell that it exists.
    let denied_by: Vec<answer::DeniedBy> = merged
        .iter()
        .flat_map(|(_, rows)| rows)
        .filter(|row| {
            row.verdict.decision == "denied"
                && row.error_type.as_deref() == Some("java.lang.SecurityException")
        })
        .filter_map(|row| {
            Some(answer::DeniedBy {
                target: row.verdict.target.as_ref().map(|t| t.as_str().to_string()),
                rule: row.verdict.rule.as_deref()?.to_string(),
            })
        })
        .collect();
    let answers: Vec<_> = merged.into_iter().map(|(answer, _)| answer).collect();
    let body = respond::body(&answers, false).to_vec();
    // An agent's value may nest deeper than a JSON tree is built here
    // (serde_json's 128 levels): a tool error, never a panic.
    let answer = serde_json::from_slice(&body).map_err(|e| {
        HttpError::new(
            502,
            "jmxgate.AnswerTooDeep",
            format!(
                "the agent's answer could not be shaped for MCP ({e}); \
                 read a narrower path, or use the Jolokia endpoint"
            ),
        )
    })?;
    Ok((answer, denied_by))
}
