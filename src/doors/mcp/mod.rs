//! The MCP front door: AI assistants reach the fleet over the Model
//! Context Protocol (Streamable HTTP, stateless, at `[mcp] path`), as the
//! caller the listener authenticated, with that caller's roles.
//!
//! The HTTP request passes the same pre-phase and authentication as a
//! Jolokia request (`doors::router`), then the official SDK (`rmcp`)
//! speaks MCP. Each tool call becomes one ordinary Jolokia item
//! (`tools.rs`) that goes through parse, route, authorize, dispatch,
//! merge and audit ([`run_tool_item`]); its answer becomes
//! structured content (`answer.rs`), bounded for an assistant
//! (`bound.rs`). Audit records say `"channel":"mcp"`, the tool, and the
//! MCP client when the request names it (`client_of`).

pub mod answer;
pub mod bound;
pub mod call;
mod changes;
pub mod complete;
pub mod config;
mod explain;
pub mod jsonrpc;
pub mod logging;
pub mod origin;
pub mod page;
pub mod prompts;
pub mod resources;
pub(crate) mod service;
pub mod tools;

pub use config::McpConfig;

/// The most the MCP SDK (`rmcp`) may log: it logs every request at INFO,
/// tool arguments and results at DEBUG (values never go to the log), and
/// every JSON-RPC error it answers at WARN (a client's mistake, one line
/// per request: the audit log records those). Added to every log filter.
pub const SDK_LOG_CEILING: &str = "rmcp=error";

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
    CompleteResult, CompletionInfo, ContentBlock, DiscoverResult, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};

use crate::doors::access::{wire, AccessCall, Ask};
use crate::doors::DoorSections;
use crate::pipeline::state::State;
use crate::pipeline::{audit, authorize, parse, route, Caller, Gateway, HttpError};
use answer::{Answered, Outcome};
use call::Call;
use prompts::PromptName;
use tools::ToolName;

/// The authenticated caller of one MCP HTTP request, handed to the tool
/// handler through the request's extensions: the request's context, and
/// what the MCP door adds to it.
#[derive(Clone)]
pub(crate) struct McpCaller {
    pub ctx: Arc<crate::pipeline::RequestContext>,
    pub state: Arc<State>,
    /// The browser page the door admitted (set by `mcp_http` when the
    /// request has an `Origin` or `Referer`).
    pub page: Option<origin::Page>,
    /// The MCP client as this request (or, in a batch, this element)
    /// names itself (`client_of`), set by `mcp_http`.
    pub mcp_client: Option<audit::McpClient>,
}

impl McpCaller {
    fn role_names(&self) -> &[String] {
        self.ctx.held_names()
    }

    /// Who asked, for the audit records of one tool call (`tool`; `None`
    /// for the HTTP request's own records).
    fn who<'a>(&'a self, tool: Option<&'a str>, latency: std::time::Duration) -> audit::Who<'a> {
        let mut who = self.ctx.who();
        who.latency = latency;
        who.tool = tool;
        who.mcp_client = self.mcp_client.as_ref();
        who
    }

    /// Whether some role of the caller could allow `command` (write or
    /// exec) somewhere: then the tool is offered. Each call is still
    /// judged in full.
    fn may(&self, command: &str) -> bool {
        if self.ctx.held.is_empty() {
            return self.state.access.is_open();
        }
        self.ctx.held.iter().any(|r| r.policy.could_ever(command))
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
            || crate::pipeline::reaching(&self.ctx.held, Some(target)).any(|r| {
                page.admitted_by(
                    |o| r.policy.origin_listed(o),
                    |o| r.policy.origin_allowed(Some(o), false),
                )
            })
    }

    /// The caller of a tool call's item: a POST, and a denied attribute
    /// of a read answered in its place.
    fn judged_as(&self) -> Caller<'_> {
        self.ctx.caller("POST").reads_denied_in_place()
    }

    /// Who the caller is for the levels it sets (`logging`): the name it
    /// authenticated as, and by which method.
    fn log_key(&self) -> String {
        format!(
            "{}:{}",
            self.ctx.principal.method.as_str(),
            self.ctx.principal.name
        )
    }

    fn offered(&self) -> Vec<ToolName> {
        tools::offered(
            |command| self.may(command),
            self.state.access.may_request(&self.ctx.standing),
            self.ctx.held.iter().any(|r| !r.approval.rules.is_empty()),
        )
    }

    /// The targets the caller may name: those its roles reach, and from a
    /// page only those a call from it may use (as `list_targets`).
    fn visible_targets(&self) -> impl Iterator<Item = &Arc<crate::fleet::Target>> + '_ {
        self.state
            .fleet
            .iter()
            .filter(|t| self.state.access.reaches(&self.ctx.held, t))
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
        #[allow(deprecated)] // logging: SEP-2577 deprecates it; clients use it still.
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("jmxgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // The handshake's revisions send resource updates and list changes
        // on a session's own stream later, and this door keeps no session:
        // it says so (changes are 2026-07-28's subscriptions/listen).
        if let Some(resources) = result.capabilities.resources.as_mut() {
            resources.subscribe = None;
            resources.list_changed = None;
        }
        Ok(result)
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
        let context_value = |key: &str| {
            request
                .context
                .as_ref()
                .and_then(|c| c.get_argument(key))
                .cloned()
        };
        let argument = &request.argument.name;
        let wanted = match &request.r#ref {
            Reference::Prompt(prompt) => complete::wanted(&prompt.name, argument, &context_value),
            Reference::Resource(template) => {
                complete::wanted_in_template(&template.uri, argument, &context_value)
            }
            _ => Err(complete::NotCompletable(
                "completion is for prompt and resource template arguments".into(),
            )),
        }
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
        let tool: String = request.name.chars().take(64).collect();
        let answer = std::panic::AssertUnwindSafe(self.call(request, caller.clone()))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!("an MCP tool call panicked; answered as an internal error");
                Err(ErrorData::internal_error(
                    "the gateway failed on this call; see its log",
                    None,
                ))
            });
        tell_of_call(&self.gateway, &caller, &context, &tool, &answer).await;
        answer
    }

    #[allow(deprecated)] // logging: SEP-2577 deprecates it; clients use it still.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = caller(&context)?;
        logging_levels(&self.gateway).set(&caller.log_key(), request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = caller(&context)?;
        let mut visible: Vec<&Arc<crate::fleet::Target>> = caller.visible_targets().collect();
        visible.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<&str> = visible.iter().map(|t| t.name.as_str()).collect();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (shown, next) =
            resources::page(&names, cursor).map_err(|e| ErrorData::invalid_params(e.0, None))?;
        let by_name: std::collections::HashMap<&str, &Arc<crate::fleet::Target>> =
            visible.iter().map(|t| (t.name.as_str(), *t)).collect();
        let listed = shown
            .into_iter()
            .filter_map(|name| by_name.get(name))
            .map(|t| {
                let labels: Vec<String> =
                    t.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                Resource::new(resources::target_uri(&t.name), t.name.clone())
                    .with_description(if labels.is_empty() {
                        "A JVM target (no labels)".to_string()
                    } else {
                        format!("A JVM target; labels {}", labels.join(", "))
                    })
                    .with_mime_type("application/json")
            })
            .collect();
        let mut page = ListResourcesResult::with_all_items(listed);
        page.next_cursor = next;
        Ok(match context.protocol_version() {
            Some(v) if has_cache_hints(&v) => page
                .with_ttl_ms(TOOLS_TTL_MS)
                .with_cache_scope(CacheScope::Private),
            _ => page,
        })
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions = requested
            .resource_subscriptions
            .as_deref()
            .map(resources::watchable);
        Some(accepted)
    }

    async fn listen(
        &self,
        subscription: rmcp::service::SubscriptionContext,
    ) -> Result<(), ErrorData> {
        let caller = caller(subscription.request_context())?;
        changes::listen(&self.gateway, &caller, subscription).await;
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        caller(&context)?;
        let templates = ListResourceTemplatesResult::with_all_items(resources::templates());
        Ok(match context.protocol_version() {
            Some(v) if has_cache_hints(&v) => templates
                .with_ttl_ms(TOOLS_TTL_MS)
                .with_cache_scope(CacheScope::Public),
            _ => templates,
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = caller(&context)?;
        let uri = request.uri;
        let resource =
            resources::parse(&uri).map_err(|e| ErrorData::resource_not_found(e.0, None))?;
        let text = match resource {
            resources::Resource::Target(target) => {
                let found = self
                    .as_tool(
                        &caller,
                        ToolName::SearchMbeans,
                        json!({"target": target, "pattern": "*:*"}),
                    )
                    .await?;
                changes::target_resource(&caller, &target, found)
            }
            resources::Resource::Mbean { target, mbean } => {
                self.as_tool(
                    &caller,
                    ToolName::DescribeMbean,
                    json!({"target": target, "mbean": mbean}),
                )
                .await?
            }
        };
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text.to_string(), uri).with_mime_type("application/json")
        ])
        .into())
    }
}

/// The level a caller asked for: its request's own (`_meta`, 2026-07-28),
/// else the one it set with `logging/setLevel`.
#[allow(deprecated)]
fn wanted_level(
    gateway: &Gateway,
    caller: &McpCaller,
    context: &RequestContext<RoleServer>,
) -> Option<rmcp::model::LoggingLevel> {
    context
        .meta
        .log_level()
        .or_else(|| logging_levels(gateway).get(&caller.log_key()))
}

/// The levels callers set: the MCP door's room, put in by `app`.
pub fn logging_levels(gateway: &Gateway) -> &logging::LogLevels {
    gateway.rooms.get()
}

/// The first text of a tool's result (a tool error's words).
fn text_of(result: &CallToolResult) -> Option<String> {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
}

/// Tells the caller, if it asked (`logging`), how its tool call ended.
#[allow(deprecated)] // logging: SEP-2577 deprecates it; clients use it still.
async fn tell_of_call(
    gateway: &Gateway,
    caller: &McpCaller,
    context: &RequestContext<RoleServer>,
    tool: &str,
    answer: &Result<CallToolResponse, ErrorData>,
) {
    let (ended, error) = match answer {
        Err(e) => (logging::Ended::Failed, Some(e.message.to_string())),
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
            (logging::Ended::Failed, text_of(r))
        }
        Ok(CallToolResponse::Complete(r)) => (
            r.structured_content
                .as_ref()
                .map_or(logging::Ended::Ok, logging::Ended::of_content),
            None,
        ),
        Ok(_) => (logging::Ended::Ok, None),
    };
    let request_id = caller.ctx.who().request_id;
    if let Some(told) = logging::of_call(
        wanted_level(gateway, caller, context),
        tool,
        request_id,
        ended,
        error.as_deref(),
    ) {
        // A client gone before the answer is no failure of the call's.
        let _ = context.peer.notify_logging_message(told).await;
    }
}

impl Door {
    /// A resource read as the tool call it stands for: the tool's
    /// structured content, or its refusal as a JSON-RPC error (a target
    /// the caller may not see is not found, as the tools say it).
    async fn as_tool(
        &self,
        caller: &McpCaller,
        tool: ToolName,
        arguments: Value,
    ) -> Result<Value, ErrorData> {
        let Value::Object(arguments) = arguments else {
            unreachable!("the arguments are an object")
        };
        let request = CallToolRequestParams::new(tool.as_str()).with_arguments(arguments);
        match self.call(request, caller.clone()).await? {
            CallToolResponse::Complete(r) if r.is_error != Some(true) => {
                Ok(r.structured_content.unwrap_or(Value::Null))
            }
            CallToolResponse::Complete(r) => {
                let text = text_of(&r).unwrap_or_default();
                Err(if text.contains("no such target that you may reach") {
                    ErrorData::resource_not_found(text, None)
                } else {
                    ErrorData::invalid_params(text, None)
                })
            }
            _ => Err(ErrorData::internal_error("the tool asked for input", None)),
        }
    }
}

impl Door {
    async fn call(
        &self,
        request: CallToolRequestParams,
        caller: McpCaller,
    ) -> Result<CallToolResponse, ErrorData> {
        let max = caller.state.mcp().max_result_bytes;
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
            let error = tool_not_allowed(tool, caller.role_names());
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
        let outcome = match call::parse_call(tool, request.arguments, &is_selector) {
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
                explain::explain_tool(&self.gateway, &caller, &target, &item).await
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
                            item: &item.describe(),
                            mbean: mbean.as_deref(),
                            answer,
                        }),
                        &denied_by,
                    );
                    match (shaped, mbean, page) {
                        (Outcome::Done(mut read), None, None)
                            if tool == ToolName::ReadAttributes =>
                        {
                            name_read_denials(&caller, &item, &mut read);
                            Outcome::Done(read)
                        }
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
fn mark_uses(
    caller: &McpCaller,
    target: &str,
    list: &parse::ParsedItem,
    mbean: &str,
    described: &mut Value,
) {
    let state = &caller.state;
    let (Some(t), Ok(name)) = (
        state.fleet.by_name(target),
        crate::protocol::ObjectName::parse(mbean),
    ) else {
        return;
    };
    let judged_as = caller.judged_as();
    let Ok(allowed) = authorize::authorize(
        &state.access,
        &caller.ctx.principal,
        &caller.ctx.held,
        &judged_as.facts,
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

/// Names the caller's refusing rule beside each attribute of a
/// `read_attributes` answer that a policy denied in place, decided as the
/// call was: by the caller's roles that reach each target.
fn name_read_denials(caller: &McpCaller, read: &parse::ParsedItem, answer: &mut Value) {
    let crate::protocol::Command::Read(r) = &read.request.command else {
        return;
    };
    let state = &caller.state;
    let judged_as = caller.judged_as();
    let grant_on = |target: &str| {
        let t = state.fleet.by_name(target)?;
        authorize::authorize(
            &state.access,
            &caller.ctx.principal,
            &caller.ctx.held,
            &judged_as.facts,
            &read.request,
            &route::Destination::Agent(t.clone()),
        )
        .ok()
        .map(|allowed| allowed.grant)
    };
    // One grant per target answered (a fan-out has many).
    let grants: std::collections::HashMap<String, _> = answer["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["target"].as_str())
        .map(|t| (t.to_string(), grant_on(t)))
        .collect();
    answer::name_attribute_denials(
        answer,
        r.mbean.as_str(),
        r.mbean.is_pattern(),
        |target, mbean, attribute| {
            let grant = grants.get(target)?.as_ref()?;
            let name = crate::protocol::ObjectName::parse(mbean).ok()?;
            let decision = grant.read(&name, attribute);
            (!decision.allowed).then_some(decision.rule)
        },
    );
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

/// `list_targets`: the targets the caller's roles reach (optionally
/// those a selector matches), as `GET /jolokia/targets` lists them,
/// audited as a target list.
/// `request_access` and `access_request_status`: the access-requests
/// API's operation for the caller, audited as its steps are.
async fn access_tool(gateway: &Gateway, caller: &McpCaller, tool: ToolName, ask: Ask) -> Outcome {
    let on = AccessCall {
        ctx: &caller.ctx,
        tool: Some(tool.as_str()),
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
        who: &caller.who(Some(ToolName::ListTargets.as_str()), started.elapsed()),
        what: "target_list",
        status: 200,
        listed: targets.len(),
    };
    if let Err(e) = gateway.record(audit::Event::Listing(record)).await {
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
            let Ok(Call::Item { item, .. }) = call::parse_call(
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
            }) = call::parse_call(
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
                item: &item.describe(),
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
    let who = caller.who(Some(tool), std::time::Duration::ZERO);
    let refused = audit::RefusedCall {
        who: &who,
        status,
        error_type,
        message,
    };
    let _ = gateway.record(audit::Event::RefusedCall(refused)).await;
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
    item: &parse::ParsedItem,
) -> Result<(Value, Vec<answer::DeniedBy>), HttpError> {
    let started = Instant::now();
    let state = &caller.state;
    let parsed = parse::Parsed::typed(vec![Ok(item.clone())]);
    let judged_as = caller.judged_as();
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let local = |command: &crate::protocol::Command| {
        gateway.answer_locally(state, &caller.ctx, command, None)
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
    let who = caller.who(Some(tool), started.elapsed());
    gateway
        .record(audit::Event::Items {
            who: &who,
            state,
            parsed: &parsed,
            merged: &merged,
        })
        .await?;
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
    let (answer, _) = merged.into_iter().next().expect("one item, one answer");
    // An agent's value may nest deeper than a JSON tree is built here
    // (serde_json's 128 levels): a tool error, never a panic.
    let answer = answer.into_value().map_err(|e| {
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
