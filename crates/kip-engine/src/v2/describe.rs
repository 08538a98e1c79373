//! `DESCRIBE PROTOCOL`, `DESCRIBE CAPABILITIES`, `DESCRIBE EXECUTION CONTEXT` and
//! `DESCRIBE PRIMER` (Specification §63-64, §67): what this runtime is, what it does
//! and does not do, where a request runs, and a compact bootstrapping primer.
//!
//! Capabilities are declared, not claimed (DECISIONS.md item 42): the conformance
//! profiles listed are exactly those whose suites pass, and every capability is listed
//! with whether it is implemented, so an agent learns a gap here instead of by error.

use super::request::DEFAULT_SPACE;
use crate::envelope::Access;
use crate::store::GraphRead;
use kip_lang::KipError;
use serde_json::{json, Map, Value};

/// The capabilities a request can require (`requires`), with whether this runtime
/// implements them. One list: `DESCRIBE CAPABILITIES` prints it and `requires` is
/// checked against it.
const CAPABILITIES: &[(&str, bool, &str)] = &[
    (
        "request_envelope",
        true,
        "kip-request.schema.json checked on every request",
    ),
    ("independent_execution", true, "operations run on their own"),
    (
        "sequence_execution",
        true,
        "operations run in order; on_error stop or continue",
    ),
    (
        "atomic_execution",
        true,
        "all operations or none (a failure skips the rest and rolls back the ones that ran)",
    ),
    (
        "readonly_runtime",
        true,
        "execute_kip_readonly refuses KML (ReadonlyViolation)",
    ),
    (
        "structural_parameter_binding",
        true,
        "parameters are values in complete value positions, never text",
    ),
    ("describe_protocol", true, "DESCRIBE PROTOCOL"),
    ("describe_capabilities", true, "DESCRIBE CAPABILITIES"),
    (
        "describe_execution_context",
        true,
        "DESCRIBE EXECUTION CONTEXT",
    ),
    (
        "describe_primer",
        true,
        "DESCRIBE PRIMER [MODE \"compact\" | \"full\"]",
    ),
    (
        "kql",
        true,
        "FIND over CONCEPT, PROPOSITION, ASSERTION, EVIDENCE, ACTIVITY and STRUCTURAL patterns, predicate alternatives and quantified paths; FILTER, NOT, OPTIONAL, UNION; aggregates with grouping; ORDER BY, LIMIT, CURSOR (server-mapped, snapshot-pinned pages: start with CURSOR null), AS OF SEQ | TX | TIME, FOR TIME (the projection's world-valid time)",
    ),
    (
        "kml",
        true,
        "MUTATE (one transaction, handles in any order), CREATE/UPSERT CONCEPT (CLIENT KEY, SET/UNSET STRUCTURAL), ENSURE PROPOSITION, ASSERT, CREATE ASSERTION/EVIDENCE/ACTIVITY, UPDATE, RETRACT, SUPERSEDE, CORRECT EVIDENCE, TRANSITION ACTIVITY, ARCHIVE, MERGE CONCEPT (not yet: PURGE reference policies other than deny_if_referenced)",
    ),
    (
        "belief",
        true,
        "BELIEF and BELIEF SLOT under kip:policy:baseline v1 (WITH EPISTEMIC policy, valid_at, include_hypothetical, explanation)",
    ),
    (
        "serializable_transactions",
        true,
        "a KML statement, and an atomic request, commit as one transaction; writers are serialized",
    ),
    (
        "idempotent_replay",
        true,
        "execution.idempotency_key and an operation's idempotency_key: the recorded outcome replayed, another request IdempotencyConflict; kept 15 minutes; DESCRIBE TRANSACTION BY IDEMPOTENCY KEY",
    ),
    (
        "keyword_search",
        true,
        "SEARCH CONCEPT | PROPOSITION, MODE \"keyword\" (BM25 over names and descriptive attributes; WITH TYPE, WITH PREDICATE, THRESHOLD, LIMIT; not yet: ASSERTION, EVIDENCE, ACTIVITY, COGNITION, AS OF SEQ, CURSOR)",
    ),
    (
        "semantic_search",
        true,
        "SEARCH ... MODE \"semantic\" when an embedder is configured (SearchModeUnsupported otherwise)",
    ),
    (
        "hybrid_search",
        true,
        "SEARCH ... MODE \"hybrid\" when an embedder is configured (then the default mode outside atomic requests)",
    ),
    (
        "schema_packages",
        true,
        "the Cognitive Memory Profile 2.0.0 active in every memory; owner install/activation (kip schema install), LIST SCHEMA PACKAGES, DESCRIBE SCHEMA ENVIRONMENT",
    ),
    (
        "historical_reads",
        true,
        "FIND ... AS OF SEQ | TX \"kip:space:default#n\" | TIME; SNAPSHOT [AS OF], DESCRIBE SNAPSHOT, HISTORY ELEMENT | SPACE [FROM SEQ] [TO SEQ] [LIMIT] [CURSOR], CHANGES AFTER SEQ | SINCE a change cursor; every commit has a space_seq and a receipt; a history horizon (KIP_HISTORY_KEEP_DAYS)",
    ),
    (
        "snapshot_tokens",
        true,
        "a response's snapshot.snapshot_token and SNAPSHOT's; read.snapshot_token reads every FIND of the request at that coordinate (authenticated: an edited token is refused; it grants nothing)",
    ),
    (
        "commit_preconditions",
        true,
        "preconditions.space_seq (PreconditionFailed) and schema_environment_version (SchemaEnvironmentChanged), checked in the transaction they bind",
    ),
    (
        "retention",
        true,
        "SET RETENTION (retention_class, expires_at), ARCHIVE, TOMBSTONE (content kept until history reads land), PURGE with deny_if_referenced and a digest stub; legal hold refused in KML (not yet: tombstone_reference, authorized_cascade)",
    ),
    ("memory_spaces", false, "spaces other than \"default\""),
    (
        "capsules",
        true,
        "EXPORT CAPSULE (snapshot capsules: one source snapshot, canonical JSON, sha256 content_digest, omitted references as external_refs), VERIFY / VALIDATE / DESCRIBE CAPSULE, PREVIEW IMPORT CAPSULE (not yet: import itself, delta capsules, signature checks, embedded packages)",
    ),
    (
        "ingestion_context",
        true,
        "ingest.evidence minted into Evidence in the request's one transaction, the payload as sent (content_digest of its bytes), each key bound as a parameter; client_key (or the request's idempotency key) makes it retry-safe (not yet: payload_artifact)",
    ),
    (
        "validate_preview",
        true,
        "options.dry_run (one aborted transaction), VALIDATE KQL / KML / SCHEMA PACKAGE, PREVIEW KML",
    ),
    ("streaming", false, "streamed responses"),
];

/// Whether this runtime implements the capability `name` (unknown names: no).
pub fn provides(name: &str) -> bool {
    CAPABILITIES.iter().any(|(n, on, _)| *n == name && *on)
}

fn implementation() -> Value {
    json!({"name": "kip-nexus", "version": env!("CARGO_PKG_VERSION")})
}

/// `DESCRIBE PROTOCOL` (KIP2-META-003): the version actually spoken.
pub fn protocol() -> Value {
    json!({
        "kip": "2.0",
        "specification": {"version": "2.0-draft", "source": "ldclabs/KIP v2 at 4116900"},
        "implementation": implementation(),
        "languages": ["KQL", "KML", "META"],
        "request_schema": "urn:kip:2.0:schema:request",
        "response_schema": "urn:kip:2.0:schema:response",
        "dialects": {
            "2.0": "a JSON request with \"kip\": \"2.0\"",
            "1.x": "a request without \"kip\" ({\"command\": ...} / {\"commands\": [...]}), KIP 1.x (RC11) on the same memory",
        },
    })
}

/// `DESCRIBE CAPABILITIES` (§67): what is supported, and what is available to this
/// caller (a read-only caller cannot write, whatever the runtime supports:
/// KIP2-META-011).
pub fn capabilities(access: Access) -> Value {
    let mut supported = Map::new();
    let mut available = Map::new();
    let mut not_supported = Map::new();
    for (name, on, what) in CAPABILITIES {
        if *on {
            supported.insert((*name).into(), json!(what));
            let writes = matches!(
                *name,
                "kml" | "retention" | "serializable_transactions" | "idempotent_replay"
            );
            if !(writes && access == Access::ReadOnly) {
                available.insert((*name).into(), json!(true));
            }
        } else {
            not_supported.insert((*name).into(), json!(what));
        }
    }
    json!({
        "kip": "2.0",
        "implementation": implementation(),
        // DECISIONS.md item 42: exactly the profiles of §89-101 whose suites pass.
        "conformance_profiles": [],
        "supported": supported,
        "available": available,
        "not_supported": not_supported,
        "execution_modes": ["independent", "sequence", "atomic"],
        "isolation": ["serializable", "snapshot"],
        "spaces": [DEFAULT_SPACE],
    })
}

/// `DESCRIBE EXECUTION CONTEXT` (KIP2-META-004): where this request runs.
pub fn execution_context(access: Access) -> Value {
    json!({
        "space": {"id": DEFAULT_SPACE, "uri": format!("kip:space:{DEFAULT_SPACE}")},
        "principal": principal(access),
        "self": {"concept": {"type": "Person", "name": "$self"}, "note": "the agent's semantic self, a concept of the memory; not the principal"},
        "protocol": "2.0",
    })
}

/// The caller as this runtime knows it: by the interface it came through. The
/// server authenticates API keys before a request reaches the engine; the principal
/// is never inferred from `$self` (§64.2).
fn principal(access: Access) -> Value {
    json!({
        "class": "interface_caller",
        "access": match access { Access::ReadWrite => "read_write", Access::ReadOnly => "read_only" },
    })
}

/// `DESCRIBE ERROR :code`: a registry code's category, section and retry class (§86-87);
/// `None` for a name the registry does not hold.
pub fn error(name: &str) -> Option<Value> {
    let code = super::error::Code::from_name(name)?;
    Some(json!({
        "code": code.name(),
        "category": code.category(),
        "registry_section": code.section(),
        "retry": {"class": code.retry_class()},
    }))
}

/// §64.3, the reminders every primer carries.
const SAFETY: &[&str] = &[
    "raw Proposition != accepted belief",
    "missing visible match != false",
    "SEARCH score != confidence",
    "confidence != trust",
    "confidence != memory_strength",
    "name != identity",
    "source self != destination self",
    "Evidence correction != overwrite",
    "cognitive content != authority",
];

/// The names of the concepts of `concept_type`, at most `max`, with their count.
fn names_of(g: &dyn GraphRead, concept_type: &str, max: usize) -> Result<Value, KipError> {
    let mut ids = Vec::new();
    let mut total = 0u64;
    g.scan_type(concept_type, &mut |id| {
        total += 1;
        if ids.len() < max {
            ids.push(id);
        }
        Ok(true)
    })?;
    let mut names = Vec::new();
    for id in ids {
        if let Some((_, name)) = g.concept_head(id)? {
            names.push(name);
        }
    }
    Ok(json!({"total": total, "names": names}))
}

/// `DESCRIBE PRIMER [MODE "compact" | "full"]` (§64, KIP2-META-001/002): protocol,
/// execution context, the agent's identity, the schema and domain maps, the
/// capability summary and the safety reminders. Compact lists at most 50 names per
/// map, full at most 1,000: a primer is not a memory dump (§64.1).
pub fn primer(g: &dyn GraphRead, access: Access, full: bool) -> Result<Value, KipError> {
    let max = if full { 1000 } else { 50 };
    let identity = match g.concept_by_key("Person", "$self")? {
        Some(id) => g.concept(id)?.map_or(Value::Null, |c| {
            let pick = |k: &str| c.attributes.get(k).cloned().unwrap_or(Value::Null);
            json!({"name": "$self", "display_name": pick("display_name"), "persona": pick("persona"), "description": pick("description")})
        }),
        None => Value::Null,
    };
    let available: Vec<&str> = CAPABILITIES
        .iter()
        .filter(|(_, on, _)| *on)
        .map(|(n, _, _)| *n)
        .collect();
    Ok(json!({
        "mode": if full { "full" } else { "compact" },
        "protocol": {"kip": "2.0", "implementation": implementation()},
        "execution_context": execution_context(access),
        "cognitive_identity": identity,
        "schema_map": {
            "concept_types": names_of(g, crate::schema::CONCEPT_TYPE, max)?,
            "predicates": names_of(g, crate::schema::PROPOSITION_TYPE, max)?,
        },
        "domain_map": names_of(g, "Domain", max)?,
        "capabilities": {"supported": available, "details": "DESCRIBE CAPABILITIES"},
        "safety": SAFETY,
    }))
}
