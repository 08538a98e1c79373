//! Formation and Recall, the waking brain (`brain/BrainFormation.md`,
//! `brain/BrainRecall.md`): agents that do not speak KIP hand a conversation in
//! ([`remember`]) or ask a question in natural language ([`recall`]); a language model
//! acting for `$self` turns it into KIP through the same bounded loop as the sleep
//! cycle ([`crate::maintain::run_agent`]).

use crate::llm::ChatClient;
use crate::maintain::{
    run_agent, tool_from, Agent, LoopLimits, LoopReport, FUNCTION_DEFINITION,
    FUNCTION_DEFINITION_READONLY,
};
use serde_json::{json, Value};

/// The Formation instructions (KIP RC11 `brain/BrainFormation.md`).
pub const FORMATION_INSTRUCTIONS: &str = include_str!("../../../spec/rc11/brain/BrainFormation.md");
/// The Recall instructions (KIP RC11 `brain/BrainRecall.md`).
pub const RECALL_INSTRUCTIONS: &str = include_str!("../../../spec/rc11/brain/BrainRecall.md");
/// The `recall_memory` function definition (KIP RC11 `brain/RecallFunctionDefinition.json`).
pub const RECALL_FUNCTION: &str =
    include_str!("../../../spec/rc11/brain/RecallFunctionDefinition.json");

/// The `remember` tool's input schema: a conversation (`messages`) or a structured
/// trace (`trace`, `goal`, `outcome`), with optional `context` and `timestamp`
/// (BrainFormation.md, "Input Format").
pub fn remember_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "messages": {"type": "array", "description": "The conversation: objects with role, content, optional name (durable speaker id) and timestamp.", "items": {"type": "object", "properties": {"role": {"type": "string"}, "content": {"type": "string"}, "name": {"type": "string"}, "timestamp": {"type": "string"}}, "required": ["role", "content"]}},
            "trace": {"type": "array", "description": "A structured trace of a goal-directed process: items with kind (message, observation, decision, action, feedback), summary or content, optional tool and result_status.", "items": {"type": "object"}},
            "goal": {"type": "string", "description": "With trace: what the process tried to achieve."},
            "outcome": {"type": "object", "description": "With trace: e.g. {\"status\": \"success\"}."},
            "context": {"type": "object", "description": "Optional participant and scope hints: counterparty, agent, source, topic. They never change whose memory is written ($self's).", "properties": {"counterparty": {"type": "string"}, "agent": {"type": "string"}, "source": {"type": "string"}, "topic": {"type": "string"}}},
            "timestamp": {"type": "string", "description": "ISO-8601 time of the conversation (default: now)."}
        }
    })
}

fn nonempty_array(v: &Value, k: &str) -> bool {
    v.get(k)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// The `Key: value` line of a model's answer, and the bullet lines of a section.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim().trim_start_matches(['*', '#', ' ']);
        let (k, v) = l.split_once(':')?;
        (k.trim().trim_end_matches('*').eq_ignore_ascii_case(key))
            .then(|| v.trim().trim_matches('*').trim().to_string())
    })
}

/// The text of a section (`Summary:` ... up to the next `Word:` heading line).
fn section(text: &str, key: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim().trim_start_matches(['*', '#', ' ']);
        let heading = t
            .split_once(':')
            .filter(|(k, _)| {
                !k.is_empty()
                    && k.len() < 20
                    && !k.contains(' ')
                    && k.chars().next().is_some_and(char::is_uppercase)
            })
            .map(|(k, rest)| (k.trim_end_matches('*'), rest.trim()));
        match heading {
            Some((k, rest)) if k.eq_ignore_ascii_case(key) => {
                inside = true;
                if !rest.is_empty() {
                    out.push(rest);
                }
            }
            Some(_) if inside && !t.starts_with('-') => break,
            _ if inside => out.push(line),
            _ => {}
        }
    }
    let s = out.join("\n").trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn bullets(text: Option<String>) -> Vec<String> {
    text.map(|t| {
        t.lines()
            .map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string())
            .filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case("none"))
            .collect()
    })
    .unwrap_or_default()
}

fn bound_note(limits: &LoopLimits) -> String {
    format!(
        "Bounds, enforced: at most {} model turns, {} KIP commands, {} KML statements, {} seconds; a call past a bound is refused and the conversation ends.",
        limits.max_turns,
        limits.max_statements,
        limits.max_writes,
        limits.budget.as_secs()
    )
}

/// The KML statements of a loop, for a response: command, parameters, applied, outcome.
fn kml(report: &LoopReport) -> Vec<Value> {
    report.to_json()["statements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["write"] == json!(true))
        .cloned()
        .collect()
}

/// Formation: encodes a conversation or trace (`input`, see [`remember_schema`]) into
/// `$self`'s memory. `exec` runs `execute_kip` (read-write). Returns `{status,
/// summary, warnings, writes, statements, stop, turns}`; `Err` for an input that is
/// neither a conversation nor a trace.
pub fn remember(
    client: &ChatClient,
    exec: &mut dyn FnMut(&Value) -> Value,
    input: &Value,
    limits: &LoopLimits,
    now: &str,
) -> Result<Value, String> {
    if !input.is_object() || !(nonempty_array(input, "messages") || nonempty_array(input, "trace"))
    {
        return Err("remember takes {\"messages\": [...]} (a conversation) or {\"trace\": [...], \"goal\": ...} (a structured trace), with optional context and timestamp".into());
    }
    let mut input = input.clone();
    if input.get("timestamp").and_then(Value::as_str).is_none() {
        input["timestamp"] = json!(now);
    }
    let agent = Agent {
        system: format!(
            "{FORMATION_INSTRUCTIONS}\n\n---\n\n## Runtime\n\n- Your only tool is `execute_kip`; every KML statement is applied at once, each atomically. Author every write as `$self`.\n- {}\n- Finish with the Output Format (Status, Summary, Warnings) and no tool call.",
            bound_note(limits)
        ),
        user: format!(
            "Formation input:\n{}\n\nEncode it now.",
            serde_json::to_string_pretty(&input).unwrap_or_default()
        ),
        tool: tool_from(FUNCTION_DEFINITION),
        limits: *limits,
        dry_run: false,
    };
    let report = run_agent(client, exec, &agent);
    let text = report.summary.clone().unwrap_or_default();
    let status = match report.stop.as_str() {
        "done" => field(&text, "Status")
            .map(|s| s.split_whitespace().next().unwrap_or("").to_lowercase())
            .filter(|s| ["success", "partial", "skipped"].contains(&s.as_str()))
            .unwrap_or_else(|| "success".into()),
        "llm_error" => "failed".into(),
        _ => "partial".into(),
    };
    let applied = report.statements.iter().filter(|s| s.applied).count();
    let mut warnings = bullets(section(&text, "Warnings"));
    if report.stop != "done" {
        warnings.push(format!("the model's work ended early: {}", report.stop));
    }
    Ok(json!({
        "status": status,
        "summary": section(&text, "Summary").unwrap_or(text.clone()),
        "warnings": warnings,
        "writes": applied,
        "statements": kml(&report),
        "stop": report.stop,
        "turns": report.turns,
    }))
}

/// The element ids (`C:12`, `P:7`) named in a text, in order, without repeats.
pub fn cited_ids(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if boundary
            && (b[i] == b'C' || b[i] == b'P')
            && b[i + 1] == b':'
            && b[i + 2].is_ascii_digit()
        {
            let mut j = i + 2;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let id = &text[i..j];
            if !out.iter().any(|x| x == id) {
                out.push(id.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Recall: answers `input` (`{query, context?, action_context?}`, the `recall_memory`
/// function) from `$self`'s memory. `exec` runs `execute_kip_readonly`: recall never
/// writes. Returns `{status, answer, gaps, sources: [{id, type, name}], stop, turns}`,
/// the sources being the concepts and propositions the answer cites that exist.
pub fn recall(
    client: &ChatClient,
    exec: &mut dyn FnMut(&Value) -> Value,
    input: &Value,
    limits: &LoopLimits,
) -> Result<Value, String> {
    let query = input
        .get("query")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or("recall_memory takes {\"query\": \"a question\"} (and optional context, action_context)")?;
    let agent = Agent {
        system: format!(
            "{RECALL_INSTRUCTIONS}\n\n---\n\n## Runtime\n\n- Your only tool is `execute_kip_readonly`: recall reads, never writes.\n- {}\n- Finish with the Output Format (Status, Answer, Gaps) and no tool call, then a last line `Sources: ` listing the ids (`C:12`, `P:7`) of the concepts and propositions your answer rests on (`Sources: none` when nothing was found).",
            bound_note(limits)
        ),
        user: format!(
            "Recall input:\n{}\n\nAnswer the query: {query}",
            serde_json::to_string_pretty(input).unwrap_or_default()
        ),
        tool: tool_from(FUNCTION_DEFINITION_READONLY),
        limits: *limits,
        dry_run: false,
    };
    let report = run_agent(client, exec, &agent);
    let text = report.summary.clone().unwrap_or_default();
    let cited = cited_ids(&field(&text, "Sources").unwrap_or_else(|| text.clone()));
    let mut sources = Vec::new();
    for id in cited.into_iter().take(50) {
        let probe = if id.starts_with("C:") {
            json!({"command": "FIND(?c.type, ?c.name) WHERE { ?c {id: :id} }", "parameters": {"id": id}})
        } else {
            json!({"command": "FIND(?l) WHERE { ?l (id: :id) }", "parameters": {"id": id}})
        };
        let r = exec(&probe);
        let rows = &r["result"];
        if id.starts_with("C:") {
            if let (Some(t), Some(n)) = (rows[0][0].as_str(), rows[1][0].as_str()) {
                sources.push(json!({"id": id, "type": t, "name": n}));
            }
        } else if let Some(l) = rows.as_array().and_then(|a| a.first()) {
            sources.push(json!({"id": id, "subject": l["subject"], "predicate": l["predicate"], "object": l["object"]}));
        }
    }
    let status = match report.stop.as_str() {
        "done" => field(&text, "Status")
            .map(|s| s.split_whitespace().next().unwrap_or("").to_lowercase())
            .filter(|s| ["success", "partial", "not_found"].contains(&s.as_str()))
            .unwrap_or_else(|| {
                if sources.is_empty() {
                    "not_found".into()
                } else {
                    "success".into()
                }
            }),
        "llm_error" => "failed".into(),
        _ => "partial".into(),
    };
    let answer = section(&text, "Answer").unwrap_or_else(|| {
        text.lines()
            .filter(|l| {
                !l.trim_start().starts_with("Sources:") && !l.trim_start().starts_with("Status:")
            })
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string()
    });
    Ok(json!({
        "status": status,
        "answer": answer,
        "gaps": bullets(section(&text, "Gaps")),
        "sources": sources,
        "stop": report.stop,
        "turns": report.turns,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_output_format() {
        let t = "Status: partial\n\nAnswer:\nAlice likes **dark mode** (C:12).\n- and tea\n\nGaps:\n- No language preference.\n\nSources: C:12, P:3";
        assert_eq!(field(t, "Status").as_deref(), Some("partial"));
        assert_eq!(
            section(t, "Answer").as_deref(),
            Some("Alice likes **dark mode** (C:12).\n- and tea")
        );
        assert_eq!(bullets(section(t, "Gaps")), ["No language preference."]);
        assert_eq!(
            cited_ids(field(t, "Sources").as_deref().unwrap_or("")),
            ["C:12", "P:3"]
        );
        assert_eq!(cited_ids("xC:1 C:2 C:2 P: P:x C:33."), ["C:2", "C:33"]);
        let w = "Status: success\n\nSummary:\nStored it.\n\nWarnings:\n- None";
        assert_eq!(section(w, "Summary").as_deref(), Some("Stored it."));
        assert!(bullets(section(w, "Warnings")).is_empty());
    }
}
