//! The MCP server (official Rust SDK, `rmcp`): the `execute_kip` and
//! `execute_kip_readonly` tools with the protocol's own schemas, the protocol documents
//! as resources, and a prompt that bootstraps an agent.
//!
//! A KIP error is a tool result with `isError: true` carrying the response object, never
//! a protocol error. Engine work runs on the blocking pool, so one slow query never
//! stalls the transport.

use crate::docs::{
    DOCS, DOCS_V2, FUNCTION_DEFINITION, FUNCTION_DEFINITION_READONLY,
    FUNCTION_DEFINITION_READONLY_V2, FUNCTION_DEFINITION_V2, SERVER_INSTRUCTIONS,
    SERVER_INSTRUCTIONS_V2,
};
use crate::Backend;
use kip_engine::Access;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The name of the bootstrap prompt.
pub const PROMPT_NAME: &str = "kip_system_instructions";

/// Which tool sets a server exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSets {
    /// `execute_kip` / `execute_kip_readonly`.
    pub kip: bool,
    /// The Knowledge Graph Memory Server tools (`create_entities`, ...).
    pub memory: bool,
    /// Serve only read-only tools.
    pub read_only: bool,
    /// `remember` and `recall_memory` (the brain's Formation and Recall; listed only
    /// when a language model is configured, `remember` not on a read-only server).
    pub brain: bool,
    /// The KIP tools speak KIP 2.0 (its function definitions, instructions, documents
    /// and response envelopes; DECISIONS.md item 39) instead of 1.x.
    pub kip2: bool,
}

impl Default for ToolSets {
    fn default() -> Self {
        ToolSets {
            kip: true,
            memory: true,
            read_only: false,
            brain: true,
            kip2: false,
        }
    }
}

/// The URI of the memory-server resource.
pub const MEMORY_RESOURCE: &str = "memory://knowledge-graph";

/// The URI of the memory's health report resource.
pub const HEALTH_RESOURCE: &str = "kip://memory/health";

/// The memory tools as MCP tools, derived from the registry
/// ([`kip_engine::memory::MemoryTool`]: its order, its read-only flag and its
/// definitions with the official schemas and annotations).
pub fn memory_tools(read_only: bool) -> Vec<Tool> {
    kip_engine::memory::tool_definitions(read_only)
        .into_iter()
        .filter_map(|d| serde_json::from_value::<Tool>(d).ok())
        .collect()
}

/// The streamable HTTP service with a session's end answered as the clients expect:
/// rmcp answers a `DELETE` that closed the session `202 Accepted`, which the official
/// Python client reports as `Session termination failed: 202` after every session (it
/// takes 200 or 204); the session is closed when the answer is sent, so the answer is
/// `204 No Content`. Other answers pass unchanged. Mount it as the `/mcp` service.
pub fn session_delete_no_content(
    service: rmcp::transport::streamable_http_server::StreamableHttpService<
        KipMcp,
        rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    >,
) -> axum::Router {
    axum::Router::new()
        .fallback_service(service)
        .layer(axum::middleware::from_fn(delete_answers_no_content))
}

async fn delete_answers_no_content(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let response = next.run(request).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        let (mut parts, _) = response.into_parts();
        parts.status = axum::http::StatusCode::NO_CONTENT;
        parts.headers.remove(axum::http::header::CONTENT_TYPE);
        parts.headers.remove(axum::http::header::CONTENT_LENGTH);
        return axum::response::Response::from_parts(parts, axum::body::Body::empty());
    }
    response
}

/// The MCP handler over one nexus.
#[derive(Clone)]
pub struct KipMcp {
    backend: Backend,
    tools: ToolSets,
    timeout: std::time::Duration,
    llm: Option<Arc<crate::brain::Llm>>,
}

/// A tool definition's name, description (with the note on 1.x's columnar results for
/// a 1.x tool) and input schema.
fn definition(text: &str, kip2: bool) -> (String, String, Map<String, Value>) {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let name = v["name"].as_str().unwrap_or_default().to_string();
    let note = if kip2 { "" } else { crate::docs::RESPONSE_NOTE };
    let description = format!("{}{note}", v["description"].as_str().unwrap_or_default());
    let schema = v["parameters"].as_object().cloned().unwrap_or_default();
    (name, description, schema)
}

/// The brain's tools: `recall_memory` (its KIP function definition) and, unless
/// `read_only`, `remember` (Formation).
pub fn brain_tools(read_only: bool) -> Vec<Tool> {
    let mut out = Vec::new();
    if !read_only {
        let schema = kip_brain::memory::remember_schema();
        out.push(
            Tool::new(
                "remember",
                "Store a conversation or a structured trace in the assistant's long-term memory: the memory system extracts the durable knowledge (events, facts, preferences, commitments, experiences) and writes it into the Cognitive Nexus owned by $self. Send the messages as they were; you do not need to summarize them.",
                Arc::new(schema.as_object().cloned().unwrap_or_default()),
            )
            .with_annotations(
                ToolAnnotations::with_title("Remember")
                    .read_only(false)
                    .destructive(false)
                    .idempotent(false)
                    .open_world(true),
            ),
        );
    }
    let v: Value = serde_json::from_str(kip_brain::memory::RECALL_FUNCTION).unwrap_or(Value::Null);
    out.push(
        Tool::new(
            "recall_memory",
            v["description"].as_str().unwrap_or_default().to_string(),
            Arc::new(v["parameters"].as_object().cloned().unwrap_or_default()),
        )
        .with_annotations(
            ToolAnnotations::with_title("Recall memory")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(true),
        ),
    );
    out
}

/// The KIP tools, from the protocol's function definitions (KIP 2.0's with `kip2`).
pub fn kip_tools(read_only: bool, kip2: bool) -> Vec<Tool> {
    let (rw, ro) = if kip2 {
        (FUNCTION_DEFINITION_V2, FUNCTION_DEFINITION_READONLY_V2)
    } else {
        (FUNCTION_DEFINITION, FUNCTION_DEFINITION_READONLY)
    };
    let mut out = Vec::new();
    if !read_only {
        let (name, description, schema) = definition(rw, kip2);
        out.push(
            Tool::new(name, description, Arc::new(schema)).with_annotations(
                ToolAnnotations::with_title("Execute KIP (read/write)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false)
                    .open_world(false),
            ),
        );
    }
    let (name, description, schema) = definition(ro, kip2);
    out.push(
        Tool::new(name, description, Arc::new(schema)).with_annotations(
            ToolAnnotations::with_title("Execute KIP (read-only)")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    );
    out.push(list_logs_tool());
    out
}

/// `list_logs`: pages of the audit log, newest first.
pub fn list_logs_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "cursor": {"type": "string", "description": "The next_cursor of the previous page; omit for the newest calls."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10, "description": "Calls per page."}
        }
    });
    Tool::new(
        "list_logs",
        "List the audit log of the memory: every call made to it (execute_kip, execute_kip_readonly, memory tools, sleep cycles), newest first, with its interface, command, parameters, outcome or error code, counts and duration. Answers {result: [...], next_cursor}.",
        Arc::new(schema.as_object().cloned().unwrap_or_default()),
    )
    .with_annotations(
        ToolAnnotations::with_title("List the audit log")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

impl KipMcp {
    /// A handler serving `tools` over `nexus`.
    pub fn new(backend: impl Into<Backend>, tools: ToolSets) -> Self {
        KipMcp {
            backend: backend.into(),
            tools,
            timeout: crate::DEFAULT_REQUEST_TIMEOUT,
            llm: None,
        }
    }

    /// The language model behind `remember` and `recall_memory` (with `ToolSets::brain`).
    pub fn with_llm(mut self, llm: Option<Arc<crate::brain::Llm>>) -> Self {
        self.llm = llm;
        self
    }

    /// The time budget of one KIP tool call (the engine stops the work when it is up).
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The protocol documents served (the dialect's; the system instructions third).
    fn docs(&self) -> &'static [(&'static str, &'static str, &'static str, &'static str)] {
        if self.tools.kip2 {
            &DOCS_V2
        } else {
            &DOCS
        }
    }

    /// The tools listed to a client; `apps`: it renders MCP Apps (then `show_concept`
    /// is listed too).
    fn tools_for(&self, apps: bool) -> Vec<Tool> {
        let mut out = self.tool_list();
        if apps && self.tools.kip {
            out.push(crate::explorer::app::tool());
        }
        out
    }

    fn tool_list(&self) -> Vec<Tool> {
        let mut out = Vec::new();
        if self.tools.kip {
            out.extend(kip_tools(self.tools.read_only, self.tools.kip2));
        }
        if self.tools.memory {
            out.extend(memory_tools(self.tools.read_only));
        }
        if self.tools.brain && self.llm.is_some() {
            out.extend(brain_tools(self.tools.read_only));
        }
        out
    }

    /// Runs `remember` or `recall_memory` (a language-model conversation, bounded by its
    /// own limits rather than the request budget).
    async fn call_brain(&self, name: String, args: Value) -> CallToolResult {
        let Some(llm) = self.llm.clone() else {
            return CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                "no language model is configured (start the server with --llm URL#MODEL)",
            )]);
        };
        let backend = self.backend.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            if name == "remember" {
                crate::brain::remember(&backend, &llm, &args)
            } else {
                crate::brain::recall(&backend, &llm, &args)
            }
        })
        .await;
        match outcome {
            Ok(Ok(result)) => {
                let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    crate::brain::result_text(&result),
                )]);
                r.structured_content = Some(result);
                r
            }
            Ok(Err(e)) => CallToolResult::structured_error(json!({"error": e.to_json()})),
            Err(e) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "internal error: {e}"
            ))]),
        }
    }

    /// `show_concept`: a concept's page (the MCP App's data) as structured content.
    async fn show_concept(&self, args: Value) -> CallToolResult {
        let backend = self.backend.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let which = crate::explorer::view::ConceptRef::from_args(&args)?;
            let limit = crate::explorer::view::item_limit(&args)?;
            crate::explorer::view::concept_view(&backend, &which, limit)
        })
        .await;
        match outcome {
            Ok(Ok(view)) => {
                let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    crate::explorer::app::summary(&view),
                )]);
                r.structured_content = Some(view);
                r
            }
            Ok(Err(e)) => CallToolResult::structured_error(json!({"error": e.to_json()})),
            Err(e) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "internal error: {e}"
            ))]),
        }
    }

    /// Runs a memory tool; errors are tool results with `isError` and the message.
    async fn call_memory(&self, name: String, args: Value) -> CallToolResult {
        let backend = self.backend.clone();
        let tool = name.clone();
        let read_only = self.tools.read_only;
        let outcome = tokio::task::spawn_blocking(move || {
            backend.memory_tool_as(&tool, args, read_only, "mcp")
        })
        .await;
        match outcome {
            Ok(Ok(result)) => {
                let text = kip_engine::memory::result_text(&name, &result);
                let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]);
                r.structured_content = Some(result);
                r
            }
            Ok(Err(e)) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(e.message)]),
            Err(e) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "internal error: {e}"
            ))]),
        }
    }

    /// Runs a KIP tool; the response object becomes text and structured content. The
    /// call has the server's time budget, and a client's cancellation
    /// (`notifications/cancelled`, or the session closing) stops the engine's work.
    async fn call_kip(
        &self,
        access: Access,
        args: Value,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = if self.tools.kip2 {
            kip_engine::v2::tool_request(&args)
        } else {
            args
        };
        let request = self.tools.kip2.then(|| args.clone());
        let work = crate::run_budgeted(self.backend.clone(), args, access, self.timeout, "mcp");
        let response = tokio::select! {
            v = work => v,
            _ = context.ct.cancelled() => match &request {
                // KIP 2.0: the 2.0 envelope (§80.3: outcome_unknown when a write ran).
                Some(r) => kip_engine::v2::cancelled(r),
                None => json!({"error": {"code": "KIP_4001", "message": "the call was cancelled by the client; commands not yet started were not run", "hint": "a write that had started was either committed whole or not at all: check with FIND before sending it again"}}),
            }
        };
        let failed = if self.tools.kip2 {
            response["status"] != "succeeded"
        } else {
            response.get("error").is_some()
        };
        if failed {
            CallToolResult::structured_error(response)
        } else {
            CallToolResult::structured(response)
        }
    }
}

impl ServerHandler for KipMcp {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build();
        if self.tools.kip {
            // The MCP Apps extension: the concept view (explorer::app).
            let mut ext = rmcp::model::ExtensionCapabilities::new();
            let settings = json!({"mimeTypes": [crate::explorer::app::MIME_TYPE]});
            ext.insert(
                crate::explorer::app::EXTENSION.to_string(),
                settings.as_object().cloned().unwrap_or_default(),
            );
            caps.extensions = Some(ext);
        }
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("kip-nexus", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.tools.kip2 {
                SERVER_INSTRUCTIONS_V2
            } else {
                SERVER_INSTRUCTIONS
            })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let apps = crate::explorer::app::client_supports(context.peer.peer_info().as_deref());
        Ok(ListToolsResult::with_all_items(self.tools_for(apps)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools_for(true).into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let known = self.tools_for(true).iter().any(|t| t.name == request.name);
        if !known {
            return Err(McpError::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        }
        let result = match request.name.as_ref() {
            "execute_kip" => self.call_kip(Access::ReadWrite, args, &context).await,
            "execute_kip_readonly" => self.call_kip(Access::ReadOnly, args, &context).await,
            "remember" | "recall_memory" => self.call_brain(request.name.to_string(), args).await,
            crate::explorer::app::TOOL => self.show_concept(args).await,
            "list_logs" => {
                let backend = self.backend.clone();
                let page = match crate::list_logs_args(&args) {
                    Ok((cursor, limit)) => {
                        tokio::task::spawn_blocking(move || backend.list_logs(cursor, limit))
                            .await
                            .map_err(|e| kip_lang::KipError::internal(e.to_string()))
                            .and_then(|r| r)
                    }
                    Err(e) => Err(e),
                };
                match page {
                    Ok(p) => CallToolResult::structured(p),
                    Err(e) => CallToolResult::structured_error(json!({"error": e.to_json()})),
                }
            }
            name if kip_engine::memory::MemoryTool::from_name(name).is_some() => {
                self.call_memory(name.to_string(), args).await
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool '{other}'"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = self
            .docs()
            .iter()
            .map(|(uri, name, description, text)| {
                Resource::new(*uri, *name)
                    .with_description(*description)
                    .with_mime_type("text/markdown")
                    .with_size(text.len() as u64)
            })
            .collect::<Vec<_>>();
        let mut resources = resources;
        if self.tools.memory {
            resources.push(
                Resource::new(MEMORY_RESOURCE, "knowledge-graph")
                    .with_title("Knowledge Graph")
                    .with_description("The full knowledge graph with all entities and relations")
                    .with_mime_type("application/json"),
            );
        }
        resources.push(
            Resource::new(HEALTH_RESOURCE, "memory-health")
                .with_title("Memory health")
                .with_description("The health report of the memory (orphans, Unsorted backlog, stale Events, domain sizes, pending SleepTasks, expired items; SystemInstructions.md metrics) and whether a sleep cycle is due")
                .with_mime_type("application/json"),
        );
        if self.tools.kip
            && crate::explorer::app::client_supports(context.peer.peer_info().as_deref())
        {
            resources.push(
                Resource::new(crate::explorer::app::RESOURCE_URI, "concept-view")
                    .with_title("Concept view")
                    .with_description("An interactive page showing one concept of the memory (the show_concept tool's UI)")
                    .with_mime_type(crate::explorer::app::MIME_TYPE),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if self.tools.memory && request.uri == MEMORY_RESOURCE {
            let backend = self.backend.clone();
            let graph = tokio::task::spawn_blocking(move || {
                backend.memory_tool("read_graph", json!({}), true)
            })
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .map_err(|e| McpError::internal_error(e.message, None))?;
            let text = serde_json::to_string_pretty(&graph).unwrap_or_default();
            return Ok(ReadResourceResult::new(vec![ResourceContents::text(
                text,
                MEMORY_RESOURCE,
            )
            .with_mime_type("application/json")])
            .into());
        }
        if self.tools.kip && request.uri == crate::explorer::app::RESOURCE_URI {
            let contents = ResourceContents::text(crate::explorer::app::HTML, request.uri)
                .with_mime_type(crate::explorer::app::MIME_TYPE)
                .with_meta(crate::explorer::app::resource_meta());
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        if request.uri == HEALTH_RESOURCE {
            let backend = self.backend.clone();
            let report = tokio::task::spawn_blocking(move || backend.health())
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
                .map_err(|e| McpError::internal_error(e.message, None))?;
            let text = serde_json::to_string_pretty(&report).unwrap_or_default();
            return Ok(ReadResourceResult::new(vec![ResourceContents::text(
                text,
                HEALTH_RESOURCE,
            )
            .with_mime_type("application/json")])
            .into());
        }
        let docs = self.docs();
        match docs.iter().find(|d| d.0 == request.uri) {
            Some((uri, _, _, text)) => {
                Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(*text, *uri).with_mime_type("text/markdown")
                ])
                .into())
            }
            None => Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                Some(json!({"available": docs.iter().map(|d| d.0).collect::<Vec<_>>()})),
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            PROMPT_NAME,
            Some("System instructions that make an agent use this Cognitive Nexus as its memory through KIP."),
            None,
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != PROMPT_NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown prompt '{}'; the prompt is '{PROMPT_NAME}'",
                    request.name
                ),
                None,
            ));
        }
        let text = self.docs()[2].3;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description("KIP system instructions: start with DESCRIBE PRIMER.")
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kip_engine::memory::{MemoryTool, READ_ONLY_TOOLS, TOOLS};

    fn names(tools: &[Tool]) -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    }

    /// The MCP list, the read-only list and the dispatch come from one registry: every
    /// listed tool is one the dispatch knows, read-only servers list exactly the
    /// read-only tools, and each listed tool's annotation says what the registry says.
    #[test]
    fn the_mcp_memory_tool_lists_agree_with_the_registry() {
        let all = memory_tools(false);
        assert_eq!(names(&all), TOOLS.to_vec());
        assert_eq!(names(&memory_tools(true)), READ_ONLY_TOOLS.to_vec());
        for t in &all {
            let tool = MemoryTool::from_name(&t.name).expect("dispatched");
            let hint = t.annotations.as_ref().and_then(|a| a.read_only_hint);
            assert_eq!(hint, Some(tool.read_only()), "{}", t.name);
            assert!(t.output_schema.is_some(), "{}", t.name);
        }
    }
}
