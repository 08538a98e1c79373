//! The KIP 2.0 runtime (Specification §70-87, DECISIONS.md items 37-46): a JSON request
//! with `"kip": "2.0"` is read against `kip-request.schema.json`, its operations are
//! parsed with the 2.0 grammars (`kip_lang::v2`), classified, checked and run in their
//! execution mode, and the answer is a response envelope (`kip-response.schema.json`)
//! with per-operation and top-level status. A request without `kip` is KIP 1.x,
//! answered by the 1.x envelope as before (item 38).
//!
//! What runs today: the envelope and its rules (modes, readonly, language labels,
//! parameters, isolation, capability requirements, critical extensions, idempotency
//! keys, dry runs), DESCRIBE and the schema META, KQL (with BELIEF), KML, SEARCH,
//! VALIDATE and PREVIEW, history (`history.rs`, `chronology.rs`) and capsules
//! (`capsule.rs`). Every other valid 2.0 statement is answered
//! `UnsupportedCapability`, and `DESCRIBE CAPABILITIES` says so (no silent
//! downgrade, KIP2-RT-020). ARCHITECTURE.md lists the executor modules.
//!
//! - `error.rs`: the §87 registry and the 2.0 error object, converted from 1.x errors
//!   once.
//! - `request.rs`: the request envelope and its checks.
//! - `runtime.rs`: modes, operations, the response envelope.
//! - `describe.rs`: the DESCRIBE answers and the capability list.
//! - `search.rs`: META SEARCH over the 1.x search index.

mod access;
mod belief;
mod capsule;
mod chronology;
mod client_keys;
mod concepts;
pub(crate) mod cursors;
mod describe;
pub mod error;
mod eval;
mod expr;
mod functions;
mod history;
mod idempotency;
mod ingest;
mod merge;
mod migration;
mod model;
mod mutate;
mod names;
pub mod packages;
mod paths;
mod plan;
mod preview;
mod propositions;
mod query;
mod records;
mod request;
mod retention;
mod runtime;
pub mod schema_env;
mod schema_meta;
mod search;
mod solve;
mod structural;
pub(crate) mod tokens;
mod tuples;
mod validate;

pub use error::{Code, V2Error};
pub use migration::report as migration_report;
pub use runtime::execute;

/// Whether a JSON request is a KIP 2.0 request (it names a protocol version with
/// `"kip"`); any other is KIP 1.x (DECISIONS.md item 38).
pub fn is_kip2(request: &serde_json::Value) -> bool {
    request.get("kip").is_some()
}

/// The KIP dialect an interface speaks to text commands and agents (DECISIONS.md items
/// 38-39): JSON requests always choose their own by `"kip"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// KIP 1.x (RC11), the default.
    #[default]
    Kip1,
    /// KIP 2.0.
    Kip2,
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Dialect, String> {
        match s {
            "1" | "1.x" | "1.0" => Ok(Dialect::Kip1),
            "2" | "2.0" => Ok(Dialect::Kip2),
            other => Err(format!("unknown KIP version {other:?}: write 1.x or 2.0")),
        }
    }
}

/// The answer to a KIP 2.0 call its client cancelled (§80.2-80.3): cancellation is not
/// an abort, so a request with a write answers `outcome_unknown`; one of reads only,
/// `failed`.
pub fn cancelled(request: &serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Value};
    // Whether any operation is a write (one that may have started, §80.3).
    let writes = request
        .get("operations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|op| op.get("command").and_then(Value::as_str))
        .any(|c| kip_lang::v2::parse(c).is_ok_and(|st| st.kind.language() == "KML"));
    let mut out = serde_json::Map::new();
    out.insert("kip".into(), json!("2.0"));
    if let Some(id) = request.get("request_id").filter(|v| v.is_string()) {
        out.insert("request_id".into(), id.clone());
    }
    let (status, error) = if writes {
        (
            "outcome_unknown",
            V2Error::new(
                Code::OutcomeUnknown,
                "the call was cancelled by the client while the request ran; a write that had started was committed whole or not at all",
            )
            .with_hint("read the state again (FIND) before resending, or resend with the same idempotency_key"),
        )
    } else {
        (
            "failed",
            V2Error::new(
                Code::ExecutionTimeout,
                "the call was cancelled by the client; the reads did not finish",
            )
            .with_hint("send the request again"),
        )
    };
    out.insert("status".into(), json!(status));
    out.insert("results".into(), json!([]));
    out.insert("error".into(), error.to_json());
    Value::Object(out)
}

/// The 2.0 request for `execute_kip` / `execute_kip_readonly` arguments as the 2.0
/// function definitions shape them (`spec/kip2/FunctionDefinition.json`: `command` or
/// `operations` of strings or `{op_id, command, parameters}`, `execution`,
/// `parameters`, `dry_run`). Arguments that already carry `"kip"` are a request as
/// they are. Anything else is passed on for the envelope check to name.
pub fn tool_request(args: &serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Value};
    let Some(obj) = args.as_object() else {
        return args.clone();
    };
    if obj.contains_key("kip") {
        return args.clone();
    }
    let mut out = serde_json::Map::new();
    out.insert("kip".into(), json!("2.0"));
    let mut extra = serde_json::Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "command" if !obj.contains_key("operations") => {
                out.insert("operations".into(), json!([{"command": v}]));
            }
            "operations" if !obj.contains_key("command") => {
                let ops: Vec<Value> = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|op| match op {
                                Value::String(s) => json!({"command": s}),
                                other => other.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert("operations".into(), Value::Array(ops));
            }
            "dry_run" => {
                extra.insert("dry_run".into(), v.clone());
            }
            // `command` beside `operations` is passed on as it is: the envelope
            // check refuses the unknown field.
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !extra.is_empty() {
        out.insert("options".into(), Value::Object(extra));
    }
    Value::Object(out)
}

/// The 2.0 request for command texts typed at the CLI or the REPL: one operation per
/// text (in `sequence` when there are several), the parameters request-wide.
pub fn text_request(
    texts: &[String],
    parameters: serde_json::Map<String, serde_json::Value>,
    dry_run: bool,
) -> serde_json::Value {
    use serde_json::json;
    let ops: Vec<serde_json::Value> = texts.iter().map(|t| json!({"command": t})).collect();
    let mut req = json!({"kip": "2.0", "operations": ops});
    if texts.len() > 1 {
        req["execution"] = json!({"mode": "sequence"});
    }
    if !parameters.is_empty() {
        req["parameters"] = serde_json::Value::Object(parameters);
    }
    if dry_run {
        req["options"] = json!({"dry_run": true});
    }
    req
}

/// Splits a text of several 2.0 statements (a file given to `kip exec --kip 2.0`) into
/// one text per statement; a text that does not parse is kept whole, so the runtime
/// reports where it breaks.
pub fn split_statements(text: &str) -> Vec<String> {
    match kip_lang::v2::parse_script(text) {
        Ok(sts) if !sts.is_empty() => sts
            .iter()
            .filter_map(|s| text.get(s.span.start..s.span.end))
            .map(|t| t.trim().to_string())
            .collect(),
        _ => vec![text.trim().to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kip2_rt_outcome_unknown_a_cancelled_write_is_not_an_abort() {
        let w = cancelled(&json!({"kip": "2.0", "request_id": "r1", "operations": [
            {"command": "FIND(?c) WHERE { ?c CONCEPT {} }"},
            {"command": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"X\" }"}]}));
        assert_eq!(w["status"], "outcome_unknown");
        assert_eq!(w["error"]["code"], "OutcomeUnknown");
        assert_eq!(w["error"]["retry"]["class"], "outcome_lookup_required");
        assert_eq!(w["request_id"], "r1");
        let r = cancelled(&json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PROTOCOL"}]}));
        assert_eq!(
            (r["status"].clone(), r["error"]["code"].clone()),
            (json!("failed"), json!("ExecutionTimeout"))
        );
    }

    #[test]
    fn tool_arguments_become_a_request_envelope() {
        assert_eq!(
            tool_request(
                &json!({"command": "DESCRIBE PRIMER", "parameters": {"a": 1}, "dry_run": true})
            ),
            json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PRIMER"}], "parameters": {"a": 1}, "options": {"dry_run": true}})
        );
        assert_eq!(
            tool_request(
                &json!({"operations": ["A", {"op_id": "b", "command": "B"}], "execution": {"mode": "sequence"}})
            ),
            json!({"kip": "2.0", "operations": [{"command": "A"}, {"op_id": "b", "command": "B"}], "execution": {"mode": "sequence"}})
        );
        let both = tool_request(&json!({"command": "A", "operations": ["B"]}));
        assert!(
            both.get("command").is_some(),
            "left for the envelope check to refuse"
        );
        let already = json!({"kip": "2.0", "operations": [{"command": "A"}]});
        assert_eq!(tool_request(&already), already);
    }

    #[test]
    fn a_file_of_statements_splits_by_statement() {
        let text = "DESCRIBE PROTOCOL\nDESCRIBE PRIMER MODE \"full\"\n";
        assert_eq!(
            split_statements(text),
            ["DESCRIBE PROTOCOL", "DESCRIBE PRIMER MODE \"full\""]
        );
        assert_eq!(split_statements("FIND(?x"), ["FIND(?x"]);
        assert_eq!("2.0".parse::<Dialect>(), Ok(Dialect::Kip2));
        assert!("3".parse::<Dialect>().is_err());
    }
}
