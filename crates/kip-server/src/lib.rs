//! # kip-server
//!
//! The interfaces of kip-nexus over one shared [`kip_engine::Nexus`]:
//! - [`mcp`]: the MCP server (tools, resources, prompt) for stdio and streamable HTTP.
//! - [`http`]: the HTTP server: MCP at `/mcp`, the JSON API at `POST /kip`, `GET /health`,
//!   with optional bearer-token auth, body size limit, timeouts and request logs.
//!
//! Architecture invariant: async lives here and only here; engine calls run on the
//! blocking pool.

pub mod docs;
pub mod http;
pub mod mcp;

use kip_engine::Nexus;
use rmcp::ServiceExt;
use std::sync::Arc;

/// Serves MCP over stdin/stdout until the client disconnects.
pub async fn serve_stdio(
    nexus: Arc<Nexus>,
    tools: mcp::ToolSets,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let service = mcp::KipMcp::new(nexus, tools)
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
