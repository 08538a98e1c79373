//! The protocol documents the server hands to agents (MCP resources and prompt).

/// `(uri, name, description, text)` of every document resource.
pub const DOCS: [(&str, &str, &str, &str); 5] = [
    (
        "kip://docs/syntax",
        "KIP syntax reference",
        "The compact KIP syntax reference (KQL, KML, META, errors): read it before writing KIP.",
        include_str!("../../../spec/rc11/KIPSyntax.md"),
    ),
    (
        "kip://docs/specification",
        "KIP specification",
        "The full KIP v1.0-RC11 specification (the protocol this server speaks; see docs/semantics.md for what of RC11 is not there yet).",
        include_str!("../../../spec/rc11/SPECIFICATION.md"),
    ),
    (
        "kip://docs/system-instructions",
        "KIP system instructions",
        "System instructions for an agent whose memory is this Cognitive Nexus.",
        include_str!("../../../spec/rc11/SystemInstructions.md"),
    ),
    (
        "kip://docs/self-instructions",
        "KIP self instructions",
        "Instructions for the agent's sleeping mind ($system) maintaining the nexus.",
        include_str!("../../../spec/rc11/SelfInstructions.md"),
    ),
    (
        "kip://docs/responses",
        "Reading KIP responses",
        "How to read what execute_kip answers: FIND results are columns (one array per FIND expression), not rows; batches, cursors, errors.",
        include_str!("../assets/responses.md"),
    ),
];

/// `(uri, name, description, text)` of every document resource of a server speaking KIP
/// 2.0 to its agents (`kip serve --kip 2.0`); the system instructions are third, as
/// in [`DOCS`].
pub const DOCS_V2: [(&str, &str, &str, &str); 4] = [
    (
        "kip://docs/syntax",
        "KIP 2.0 syntax reference",
        "The compact KIP 2.0 syntax reference (KQL, KML, META, the envelope, errors): read it before writing KIP.",
        include_str!("../../../spec/kip2/KIPSyntax.md"),
    ),
    (
        "kip://docs/specification",
        "KIP 2.0 specification",
        "The KIP 2.0 specification (2.0-draft). DESCRIBE CAPABILITIES says which parts this server runs.",
        include_str!("../../../spec/kip2/KIP-2.0-SPECIFICATION.md"),
    ),
    (
        "kip://docs/system-instructions",
        "KIP 2.0 system instructions",
        "System instructions for an agent whose memory is this Cognitive Nexus, in KIP 2.0.",
        include_str!("../../../spec/kip2/SystemInstructions.md"),
    ),
    (
        "kip://docs/self-instructions",
        "KIP 2.0 self instructions",
        "Instructions for the agent's sleeping mind maintaining the nexus, in KIP 2.0.",
        include_str!("../../../spec/kip2/SelfInstructions.md"),
    ),
];

/// The `execute_kip` tool definition of KIP 2.0.
pub const FUNCTION_DEFINITION_V2: &str = include_str!("../../../spec/kip2/FunctionDefinition.json");
/// The `execute_kip_readonly` tool definition of KIP 2.0.
pub const FUNCTION_DEFINITION_READONLY_V2: &str =
    include_str!("../../../spec/kip2/FunctionDefinitionReadonly.json");

/// Server instructions of a server speaking KIP 2.0 to its agents.
pub const SERVER_INSTRUCTIONS_V2: &str = "This server is a KIP 2.0 Cognitive Nexus: your persistent memory. \
Start every session with execute_kip_readonly {\"command\": \"DESCRIBE PRIMER\"}, and read DESCRIBE CAPABILITIES: it lists \
exactly which KIP 2.0 statements this server runs today (the others answer UnsupportedCapability). Answers are KIP 2.0 \
response envelopes: a top-level status, and one result per operation with its own status and, on failure, an error \
with a code, a hint and a retry class. The syntax reference is the resource kip://docs/syntax.";

/// Appended to the KIP tools' descriptions: the one thing about responses agents most
/// often get wrong.
pub const RESPONSE_NOTE: &str = "\n\nResponses: a FIND result is COLUMNAR, one array per FIND expression in FIND order, not a list of rows. FIND(?d.name, ?s.name) answers {\"result\": [[\"Aspirin\", \"Ibuprofen\"], [\"Headache\", \"Fever\"]]}: rows are (Aspirin, Headache) and (Ibuprofen, Fever). With one FIND expression the result is that column itself. Details: the resource kip://docs/responses.";

/// The `execute_kip` tool definition shipped with the protocol.
pub const FUNCTION_DEFINITION: &str = include_str!("../../../spec/rc11/FunctionDefinition.json");
/// The `execute_kip_readonly` tool definition shipped with the protocol.
pub const FUNCTION_DEFINITION_READONLY: &str =
    include_str!("../../../spec/rc11/FunctionDefinitionReadonly.json");

/// Server instructions sent at MCP initialization.
pub const SERVER_INSTRUCTIONS: &str = "This server is a KIP Cognitive Nexus: your persistent knowledge-graph memory. \
Start every session with execute_kip_readonly {\"command\": \"DESCRIBE PRIMER\"} to learn who you are and what you know, \
ground names with SEARCH and DESCRIBE before writing FIND or UPSERT, and attach provenance (source, author, confidence) \
with WITH METADATA when you write. The syntax reference is the resource kip://docs/syntax; FIND results are columns (one array per FIND expression), see kip://docs/responses; errors carry a code and a hint to fix and retry.";
