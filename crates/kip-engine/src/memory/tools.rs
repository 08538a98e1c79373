//! The memory tools, defined once: [`MemoryTool`] names each tool, says whether it only
//! reads, and carries its MCP definition (the official input schema, title,
//! description and annotations, from `tools.json`). The MCP tool list, the read-only
//! list ([`READ_ONLY_TOOLS`]) and the dispatch ([`call`](super::call), an exhaustive
//! match on the enum) are all derived from it, so a tool cannot be listed without being
//! dispatched, or be read-only in one list and not in another.

use serde_json::Value;

/// A Knowledge Graph Memory Server tool (the official nine and the fork's two updates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryTool {
    /// `create_entities`
    CreateEntities,
    /// `create_relations`
    CreateRelations,
    /// `add_observations`
    AddObservations,
    /// `delete_entities`
    DeleteEntities,
    /// `delete_observations`
    DeleteObservations,
    /// `delete_relations`
    DeleteRelations,
    /// `read_graph`
    ReadGraph,
    /// `search_nodes`
    SearchNodes,
    /// `open_nodes`
    OpenNodes,
    /// `update_entities` (the fork's)
    UpdateEntities,
    /// `update_relations` (the fork's)
    UpdateRelations,
}

impl MemoryTool {
    /// Every memory tool, in the order the tools are listed.
    pub const ALL: [MemoryTool; 11] = [
        MemoryTool::CreateEntities,
        MemoryTool::CreateRelations,
        MemoryTool::AddObservations,
        MemoryTool::DeleteEntities,
        MemoryTool::DeleteObservations,
        MemoryTool::DeleteRelations,
        MemoryTool::ReadGraph,
        MemoryTool::SearchNodes,
        MemoryTool::OpenNodes,
        MemoryTool::UpdateEntities,
        MemoryTool::UpdateRelations,
    ];

    /// The tool's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            MemoryTool::CreateEntities => "create_entities",
            MemoryTool::CreateRelations => "create_relations",
            MemoryTool::AddObservations => "add_observations",
            MemoryTool::DeleteEntities => "delete_entities",
            MemoryTool::DeleteObservations => "delete_observations",
            MemoryTool::DeleteRelations => "delete_relations",
            MemoryTool::ReadGraph => "read_graph",
            MemoryTool::SearchNodes => "search_nodes",
            MemoryTool::OpenNodes => "open_nodes",
            MemoryTool::UpdateEntities => "update_entities",
            MemoryTool::UpdateRelations => "update_relations",
        }
    }

    /// Whether the tool only reads (served by a `--read-only` server).
    pub const fn read_only(self) -> bool {
        matches!(
            self,
            MemoryTool::ReadGraph | MemoryTool::SearchNodes | MemoryTool::OpenNodes
        )
    }

    /// The tool with this name.
    pub fn from_name(name: &str) -> Option<MemoryTool> {
        MemoryTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tool's MCP definition (`name`, `title`, `description`, `inputSchema`,
    /// `outputSchema`, `annotations`): the official server's, with `createdAt` /
    /// `version` in the outputs. `Value::Null` only if `tools.json` lacked it, which
    /// a test rules out.
    pub fn definition(self) -> Value {
        definitions()
            .iter()
            .find(|d| d.get("name").and_then(Value::as_str) == Some(self.name()))
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// The definitions as shipped (`tools.json`), parsed once.
fn definitions() -> &'static [Value] {
    static DEFS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    DEFS.get_or_init(|| serde_json::from_str(include_str!("tools.json")).unwrap_or_default())
}

const fn names<const N: usize>(read_only_only: bool) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < MemoryTool::ALL.len() {
        let t = MemoryTool::ALL[i];
        if !read_only_only || t.read_only() {
            out[n] = t.name();
            n += 1;
        }
        i += 1;
    }
    out
}

const fn read_only_count() -> usize {
    let (mut i, mut n) = (0, 0);
    while i < MemoryTool::ALL.len() {
        if MemoryTool::ALL[i].read_only() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The names of every memory tool (from [`MemoryTool::ALL`]).
pub const TOOLS: [&str; MemoryTool::ALL.len()] = names(false);

/// The names of the memory tools that only read (from [`MemoryTool::read_only`]).
pub const READ_ONLY_TOOLS: [&str; read_only_count()] = names(true);

/// The MCP definitions of the tools a server lists: every tool, or the read-only ones.
pub fn tool_definitions(read_only: bool) -> Vec<Value> {
    MemoryTool::ALL
        .into_iter()
        .filter(|t| !read_only || t.read_only())
        .map(MemoryTool::definition)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_exactly_one_definition_and_every_definition_a_tool() {
        for t in MemoryTool::ALL {
            let d = t.definition();
            assert_eq!(d["name"], t.name(), "{t:?} has no definition");
            assert!(d["inputSchema"].is_object(), "{t:?}");
            assert!(d["description"].is_string(), "{t:?}");
        }
        let defined: Vec<&str> = definitions()
            .iter()
            .filter_map(|d| d["name"].as_str())
            .collect();
        let mut sorted = defined.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), defined.len(), "a tool is defined twice");
        assert_eq!(defined, TOOLS, "the definitions and the tools differ");
    }

    #[test]
    fn the_read_only_annotation_of_each_definition_agrees_with_the_registry() {
        for t in MemoryTool::ALL {
            assert_eq!(
                t.definition()["annotations"]["readOnlyHint"].as_bool(),
                Some(t.read_only()),
                "{t:?}"
            );
        }
    }

    #[test]
    fn the_name_lists_are_derived_from_the_registry() {
        assert_eq!(TOOLS.len(), MemoryTool::ALL.len());
        for (t, name) in MemoryTool::ALL.into_iter().zip(TOOLS) {
            assert_eq!(t.name(), name);
            assert_eq!(MemoryTool::from_name(name), Some(t));
            assert_eq!(READ_ONLY_TOOLS.contains(&name), t.read_only());
        }
        assert_eq!(
            READ_ONLY_TOOLS,
            ["read_graph", "search_nodes", "open_nodes"]
        );
        assert_eq!(MemoryTool::from_name("drop_database"), None);
        let listed: Vec<Value> = tool_definitions(true);
        assert_eq!(
            listed.iter().map(|d| d["name"].clone()).collect::<Vec<_>>(),
            READ_ONLY_TOOLS.map(Value::from).to_vec()
        );
    }
}
