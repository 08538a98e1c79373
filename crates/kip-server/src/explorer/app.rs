//! The concept view as an MCP App (the MCP Apps extension, SEP-1865): the tool
//! `show_concept` answers a concept's page as structured content and names the UI
//! resource [`RESOURCE_URI`] in `_meta.ui.resourceUri`; a host that renders MCP Apps
//! shows that page (self-contained HTML, `text/html;profile=mcp-app`) in the chat and
//! lets it call `show_concept` again to walk to a neighbour.
//!
//! Hosts that do not render MCP Apps are unaffected: the tool and the resource are
//! listed only to clients that declare the extension (`io.modelcontextprotocol/ui` in
//! their `initialize` capabilities). Both can be used by any client that asks for them
//! by name.

use rmcp::model::{MetaObject, Tool, ToolAnnotations};
use serde_json::json;
use std::sync::Arc;

/// The extension's identifier in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The URI of the concept view.
pub const RESOURCE_URI: &str = "ui://kip-nexus/concept.html";
/// The MIME type of an MCP App page.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The tool that opens the view.
pub const TOOL: &str = "show_concept";
/// The page.
pub const HTML: &str = include_str!("../../assets/explorer/mcp-app.html");

/// The `show_concept` tool: `{id}` or `{type, name}`, and `limit` (propositions per
/// direction, 1 to 200, default 50).
pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "description": "The concept's type, e.g. \"Person\"."},
            "name": {"type": "string", "description": "The concept's name."},
            "id": {"type": "string", "description": "The concept's id (\"C:42\"), instead of type and name."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50, "description": "Propositions listed per direction."}
        }
    });
    let mut t = Tool::new(
        TOOL,
        "Show one concept of the memory to the user: its attributes, metadata (provenance, confidence, version), domains, and its outgoing and incoming propositions with the concepts at their other ends. Hosts that render MCP Apps display it as an interactive page.",
        Arc::new(schema.as_object().cloned().unwrap_or_default()),
    )
    .with_annotations(
        ToolAnnotations::with_title("Show a concept")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    let meta = json!({
        "ui": {"resourceUri": RESOURCE_URI, "visibility": ["model", "app"]},
        // The key of the extension's earlier drafts, still read by some hosts.
        "ui/resourceUri": RESOURCE_URI,
    });
    t.meta = meta.as_object().cloned().map(MetaObject);
    t
}

/// The `_meta` of the resource's contents: a page that needs no network or other
/// origin (it gets its data through the host) and prefers a border.
pub fn resource_meta() -> MetaObject {
    let v = json!({"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": true}});
    MetaObject(v.as_object().cloned().unwrap_or_default())
}

/// Whether a client declared the MCP Apps extension in its `initialize` capabilities.
pub fn client_supports(info: Option<&rmcp::model::InitializeRequestParams>) -> bool {
    info.and_then(|i| i.capabilities.extensions.as_ref())
        .is_some_and(|e| e.contains_key(EXTENSION))
}

/// A one-paragraph text of a concept view, for hosts that show only text.
pub fn summary(view: &serde_json::Value) -> String {
    let c = &view["concept"];
    let name = c["name"].as_str().unwrap_or("?");
    let ty = c["type"].as_str().unwrap_or("?");
    let out = view["outgoing"]["total"].as_u64().unwrap_or(0);
    let inc = view["incoming"]["total"].as_u64().unwrap_or(0);
    format!(
        "{name} ({ty}, {}): {} attribute(s), {out} outgoing and {inc} incoming proposition(s). The full view is in the structured content.",
        c["id"].as_str().unwrap_or("?"),
        c["attributes"].as_object().map_or(0, |a| a.len())
    )
}
