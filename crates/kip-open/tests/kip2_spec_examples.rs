//! Every statement example of the KIP 2.0 Specification and KIPSyntax.md, run through
//! the 2.0 runtime on a seeded memory: whatever it asks, the answer is a response
//! envelope valid against `kip-response.schema.json` whose errors are registry codes
//! with a message, never `InternalError` (and the run never panics). Parameters the
//! examples use are supplied with plausible values (ids of seeded elements, times,
//! numbers), so the statements reach their executors rather than stopping at a
//! missing parameter.

mod common;
use common::*;
use kip_engine::Access;
use serde_json::{json, Value};

fn examples() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/kip2");
    let mut out = Vec::new();
    for doc in ["KIP-2.0-SPECIFICATION.md", "KIPSyntax.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("spec");
        let mut block: Option<String> = None;
        for line in text.lines() {
            if let Some(tag) = line.trim_start().strip_prefix("```") {
                match block.take() {
                    Some(b) => {
                        if let Ok(sts) = kip_lang::v2::parse_script(&b) {
                            out.extend(sts.iter().map(|s| s.to_string()));
                        } else if let Some(q) = as_query(&b) {
                            out.push(q);
                        }
                    }
                    None if matches!(tag.trim(), "prolog" | "kip" | "text") => {
                        block = Some(String::new())
                    }
                    None => block = None,
                }
                if !matches!(tag.trim(), "prolog" | "kip" | "text" | "") {
                    block = None;
                }
                continue;
            }
            if let Some(b) = block.as_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
    }
    out
}

/// A pattern fragment (a WHERE body) as a query projecting its first variable.
fn as_query(block: &str) -> Option<String> {
    let start = block.find('?')?;
    let var: String = block[start..]
        .chars()
        .take_while(|c| *c == '?' || c.is_alphanumeric() || *c == '_')
        .collect();
    let text = format!("FIND({var}) WHERE {{ {block} }}");
    kip_lang::v2::parse(&text).ok().map(|st| st.to_string())
}

fn value_for(name: &str, ids: &Value) -> Value {
    let n = name.to_ascii_lowercase();
    if n.contains("time") || n.ends_with("_at") || n == "at" || n.contains("date") {
        return json!("2026-08-13T13:00:00Z");
    }
    if n.contains("limit") || n.contains("seq") || n.contains("version") || n.contains("threshold")
    {
        return json!(1);
    }
    if n.contains("confidence") || n.contains("strength") || n.contains("salience") {
        return json!(0.5);
    }
    if n.contains("prop") || n == "p" {
        return ids["p"].clone();
    }
    if n.contains("assert") || n.starts_with("old") || n.starts_with("new") {
        return ids["a"].clone();
    }
    if n.contains("evidence") || n == "e" || n.contains("msg") {
        return ids["e"].clone();
    }
    if n.contains("alice")
        || n.contains("id")
        || n.contains("person")
        || n.contains("actor")
        || n.contains("subject")
    {
        return ids["alice"].clone();
    }
    json!("value")
}

#[test]
fn every_specification_example_answers_with_a_registry_code_never_an_internal_error() {
    let n = nexus();
    let seed = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark mode" }
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: "I like dark mode" } }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.9 } SET STRUCTURAL { ("evidence", ?e) {role: "support"} } }
}"#}]}),
            Access::ReadWrite,
        )
        .to_json();
    let ids = seed["results"][0]["result"]["handles"].clone();
    assert!(ids["a"].is_string(), "{seed}");
    let examples = examples();
    assert!(examples.len() >= 45, "examples found: {}", examples.len());
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for text in &examples {
        let st = kip_lang::v2::parse(text).expect("printed statements parse back");
        let params: serde_json::Map<String, Value> = st
            .parameters()
            .into_iter()
            .map(|p| {
                let v = value_for(&p, &ids);
                (p, v)
            })
            .collect();
        let r = n
            .execute_json(
                &json!({"kip": "2.0", "operations": [{"command": text, "parameters": params}]}),
                Access::ReadWrite,
            )
            .to_json();
        let code = r["results"][0]["error"]["code"]
            .as_str()
            .or_else(|| r["error"]["code"].as_str())
            .unwrap_or("ok")
            .to_string();
        assert_ne!(code, "InternalError", "{text}\n{r:#}");
        if code != "ok" {
            assert!(
                r["results"][0]["error"]["message"]
                    .as_str()
                    .or_else(|| r["error"]["message"].as_str())
                    .is_some_and(|m| !m.is_empty()),
                "{text}\n{r:#}"
            );
        }
        *codes.entry(code).or_default() += 1;
    }
    eprintln!("{} examples: {codes:?}", examples.len());
}
