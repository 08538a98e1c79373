//! Tool calls by name with the memory server's JSON arguments (what MCP, HTTP and the
//! processes sharing a directory send): arguments parsed into the typed inputs, each
//! call one transaction, and the text form of results.

use super::*;

fn arg<T: serde::de::DeserializeOwned>(args: &Value, key: &str) -> Result<T, KipError> {
    let v = args.get(key).cloned().ok_or_else(|| {
        KipError::new(
            ErrorCode::InvalidSyntax,
            format!("missing argument `{key}`"),
        )
        .with_hint("check the tool's input schema")
    })?;
    serde_json::from_value(v).map_err(|e| {
        KipError::new(
            ErrorCode::InvalidValueType,
            format!("invalid argument `{key}`: {e}"),
        )
        .with_hint("check the tool's input schema")
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObservationItem {
    entity_name: String,
    #[serde(default)]
    contents: Vec<String>,
    #[serde(default)]
    observations: Vec<String>,
}

/// Runs a memory tool by name against a nexus: writes in one transaction, reads on a
/// snapshot. Returns the structured result. An unknown name is a `KIP_1001` error.
pub fn call(nexus: &crate::Nexus, name: &str, args: &Value) -> Result<Value, KipError> {
    let tool = MemoryTool::from_name(name).ok_or_else(|| {
        KipError::new(
            ErrorCode::InvalidSyntax,
            format!("unknown memory tool {name}"),
        )
        .with_hint(format!("the memory tools are {}", TOOLS.join(", ")))
    })?;
    call_tool(nexus, tool, args)
}

/// Runs a memory tool (see [`call`]).
pub fn call_tool(nexus: &crate::Nexus, tool: MemoryTool, args: &Value) -> Result<Value, KipError> {
    let now = now();
    // The reading tools answer at most the response limit of a KIP request.
    let max = nexus.limits().max_response_bytes;
    match tool {
        MemoryTool::ReadGraph => nexus.read(|r| read_graph_within(r, max)),
        MemoryTool::SearchNodes => {
            let q: String = arg(args, "query")?;
            nexus.read(|r| search_nodes_within(r, &q, max))
        }
        MemoryTool::OpenNodes => {
            let names: Vec<String> = arg(args, "names")?;
            nexus.read(|r| open_nodes_within(r, &names, max))
        }
        MemoryTool::CreateEntities => {
            let v: Vec<EntityInput> = arg(args, "entities")?;
            nexus.write(|w| create_entities(w, &v, &now), false)
        }
        MemoryTool::CreateRelations => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| create_relations(w, &v, &now), false)
        }
        MemoryTool::AddObservations => {
            let v: Vec<ObservationItem> = arg(args, "observations")?;
            let items: Vec<(String, Vec<String>)> =
                v.into_iter().map(|o| (o.entity_name, o.contents)).collect();
            nexus.write(|w| add_observations(w, &items, &now), false)
        }
        MemoryTool::DeleteEntities => {
            let v: Vec<String> = arg(args, "entityNames")?;
            nexus.write(|w| delete_entities(w, &v), false)
        }
        MemoryTool::DeleteObservations => {
            let v: Vec<ObservationItem> = arg(args, "deletions")?;
            let items: Vec<(String, Vec<String>)> = v
                .into_iter()
                .map(|o| (o.entity_name, o.observations))
                .collect();
            nexus.write(|w| delete_observations(w, &items, &now), false)
        }
        MemoryTool::DeleteRelations => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| delete_relations(w, &v), false)
        }
        MemoryTool::UpdateEntities => {
            let v: Vec<EntityUpdate> = arg(args, "entities")?;
            nexus.write(|w| update_entities(w, &v, &now), false)
        }
        MemoryTool::UpdateRelations => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| update_relations(w, &v, &now), false)
        }
    }
}

/// The text content the official server returns for a tool's result.
pub fn result_text(name: &str, result: &Value) -> String {
    let inner = match MemoryTool::from_name(name) {
        Some(MemoryTool::CreateEntities | MemoryTool::UpdateEntities) => &result["entities"],
        Some(MemoryTool::CreateRelations | MemoryTool::UpdateRelations) => &result["relations"],
        Some(MemoryTool::AddObservations) => &result["results"],
        Some(
            MemoryTool::DeleteEntities
            | MemoryTool::DeleteObservations
            | MemoryTool::DeleteRelations,
        ) => {
            return result["message"].as_str().unwrap_or_default().to_string();
        }
        Some(MemoryTool::ReadGraph | MemoryTool::SearchNodes | MemoryTool::OpenNodes) | None => {
            result
        }
    };
    serde_json::to_string_pretty(inner).unwrap_or_default()
}
