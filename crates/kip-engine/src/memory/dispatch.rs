//! Tool calls by name with the memory server's JSON arguments (what MCP, HTTP and the
//! processes sharing a directory send): arguments parsed into the typed inputs, each
//! call one transaction, and the text form of results.

use super::*;

/// The names of the memory tools that only read.
pub const READ_ONLY_TOOLS: [&str; 3] = ["read_graph", "search_nodes", "open_nodes"];

/// The names of every memory tool.
pub const TOOLS: [&str; 11] = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "update_entities",
    "update_relations",
];

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
/// snapshot. Returns the structured result.
pub fn call(nexus: &crate::Nexus, name: &str, args: &Value) -> Result<Value, KipError> {
    let now = now();
    // The reading tools answer at most the response limit of a KIP request.
    let max = nexus.limits().max_response_bytes;
    match name {
        "read_graph" => nexus.read(|r| read_graph_within(r, max)),
        "search_nodes" => {
            let q: String = arg(args, "query")?;
            nexus.read(|r| search_nodes_within(r, &q, max))
        }
        "open_nodes" => {
            let names: Vec<String> = arg(args, "names")?;
            nexus.read(|r| open_nodes_within(r, &names, max))
        }
        "create_entities" => {
            let v: Vec<EntityInput> = arg(args, "entities")?;
            nexus.write(|w| create_entities(w, &v, &now), false)
        }
        "create_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| create_relations(w, &v, &now), false)
        }
        "add_observations" => {
            let v: Vec<ObservationItem> = arg(args, "observations")?;
            let items: Vec<(String, Vec<String>)> =
                v.into_iter().map(|o| (o.entity_name, o.contents)).collect();
            nexus.write(|w| add_observations(w, &items, &now), false)
        }
        "delete_entities" => {
            let v: Vec<String> = arg(args, "entityNames")?;
            nexus.write(|w| delete_entities(w, &v), false)
        }
        "delete_observations" => {
            let v: Vec<ObservationItem> = arg(args, "deletions")?;
            let items: Vec<(String, Vec<String>)> = v
                .into_iter()
                .map(|o| (o.entity_name, o.observations))
                .collect();
            nexus.write(|w| delete_observations(w, &items, &now), false)
        }
        "delete_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| delete_relations(w, &v), false)
        }
        "update_entities" => {
            let v: Vec<EntityUpdate> = arg(args, "entities")?;
            nexus.write(|w| update_entities(w, &v, &now), false)
        }
        "update_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| update_relations(w, &v, &now), false)
        }
        other => Err(KipError::new(
            ErrorCode::InvalidSyntax,
            format!("unknown memory tool {other}"),
        )),
    }
}

/// The text content the official server returns for a tool's result.
pub fn result_text(name: &str, result: &Value) -> String {
    let inner = match name {
        "create_entities" | "update_entities" => &result["entities"],
        "create_relations" | "update_relations" => &result["relations"],
        "add_observations" => &result["results"],
        "delete_entities" | "delete_observations" | "delete_relations" => {
            return result["message"].as_str().unwrap_or_default().to_string();
        }
        _ => result,
    };
    serde_json::to_string_pretty(inner).unwrap_or_default()
}
