//! The `$system` agent loop of a sleep cycle's judgement phases (SystemInstructions.md
//! Phases 2-6 and 8: SleepTasks, Unsorted reclassification, orphan resolution, Event
//! consolidation, duplicate merging, domain health).
//!
//! The model gets the shipped instructions as its system prompt, the cycle's input and
//! `DESCRIBE PRIMER` as the first user message, and one tool, `execute_kip` (the KIP
//! function definition), run as `$system`. The loop, not the model, enforces every
//! bound: [`LoopLimits::max_turns`] model calls, [`LoopLimits::max_statements`] KIP
//! commands, [`LoopLimits::max_writes`] KML statements (the per-cycle write cap) and a
//! wall-clock [`LoopLimits::budget`]. A call that would pass a bound is refused (the
//! model is told why) and the loop ends. A KIP error goes back to the model as the
//! error object, a malformed call (unknown tool, arguments that are not a JSON object,
//! no command) as a plain error message; nothing the model sends can crash the loop.
//! In a dry run every KML statement is validated (`dry_run: true`) and recorded as
//! proposed, never applied; reads run normally so the model sees the real graph.

use crate::llm::ChatClient;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The sleep-cycle instructions for `$system` (KIP RC11 `SystemInstructions.md`).
pub const SYSTEM_INSTRUCTIONS: &str = include_str!("../../../spec/rc11/SystemInstructions.md");
/// The `execute_kip` function definition (KIP RC11 `FunctionDefinition.json`).
pub const FUNCTION_DEFINITION: &str = include_str!("../../../spec/rc11/FunctionDefinition.json");
/// Longest tool result sent back to the model, in bytes (the rest is cut with a note).
pub const MAX_TOOL_RESULT: usize = 32 * 1024;

/// Bounds of one loop.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    /// Model calls at most.
    pub max_turns: usize,
    /// KIP commands (reads and writes) at most.
    pub max_statements: usize,
    /// KML statements (UPSERT, UPDATE, MERGE, DELETE) at most: the per-cycle write cap.
    pub max_writes: usize,
    /// Wall-clock budget (checked before each model call and each tool call).
    pub budget: Duration,
}

impl Default for LoopLimits {
    fn default() -> Self {
        LoopLimits {
            max_turns: 24,
            max_statements: 200,
            max_writes: 50,
            budget: Duration::from_secs(600),
        }
    }
}

/// One KIP command the loop ran (or, in a dry run, validated).
#[derive(Debug, Clone)]
pub struct Executed {
    /// The command text.
    pub command: String,
    /// Its parameters (shared and its own, merged).
    pub parameters: Value,
    /// Whether it is KML.
    pub write: bool,
    /// Whether it changed the graph (a write that succeeded outside a dry run).
    pub applied: bool,
    /// Its outcome object (`{"result": ...}` or `{"error": ...}`).
    pub outcome: Value,
}

/// What a loop did.
#[derive(Debug, Clone, Default)]
pub struct LoopReport {
    /// Model calls made.
    pub turns: usize,
    /// Every KIP command run, in order.
    pub statements: Vec<Executed>,
    /// KML statements run (applied, or validated in a dry run).
    pub writes: usize,
    /// Tool calls answered with an error (KIP errors and malformed calls).
    pub tool_errors: usize,
    /// Why it ended: `done`, `max_turns`, `max_statements`, `max_writes`,
    /// `time_budget` or `llm_error`.
    pub stop: String,
    /// The model's last text (its summary when it finished), or the endpoint's error.
    pub summary: Option<String>,
}

impl LoopReport {
    /// The report as JSON (for the cycle's report and `maintenance_log`): each statement
    /// with its command, parameters, whether it wrote and was applied, and its outcome
    /// (`ok` or the error code).
    pub fn to_json(&self) -> Value {
        json!({
            "turns": self.turns,
            "writes": self.writes,
            "tool_errors": self.tool_errors,
            "stop": self.stop,
            "summary": self.summary,
            "statements": self.statements.iter().map(|s| json!({
                "command": s.command,
                "parameters": s.parameters,
                "write": s.write,
                "applied": s.applied,
                "outcome": match s.outcome.pointer("/error/code") {
                    Some(c) => c.clone(),
                    None => json!("ok"),
                },
            })).collect::<Vec<_>>(),
        })
    }
}

/// The read-only `execute_kip_readonly` function definition (Recall's tool).
pub const FUNCTION_DEFINITION_READONLY: &str =
    include_str!("../../../spec/rc11/FunctionDefinitionReadonly.json");

/// A tool definition for the model, from a KIP function definition.
pub fn tool_from(definition: &str) -> Value {
    let f: Value = serde_json::from_str(definition).unwrap_or_else(|_| {
        json!({"name": "execute_kip", "description": "Executes KIP commands.", "parameters": {"type": "object"}})
    });
    json!({"type": "function", "function": f})
}

/// The `execute_kip` tool definition sent to the model.
pub fn tool() -> Value {
    tool_from(FUNCTION_DEFINITION)
}

/// One agent conversation: its prompts, its tool and the loop's bounds.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The system prompt.
    pub system: String,
    /// The first user message (the runtime injects `DESCRIBE PRIMER` after it).
    pub user: String,
    /// The tool definition (`execute_kip` or `execute_kip_readonly`).
    pub tool: Value,
    /// The bounds.
    pub limits: LoopLimits,
    /// Validate KML instead of applying it.
    pub dry_run: bool,
}

fn is_write(command: &str) -> bool {
    kip_lang::parse_command(command).is_ok_and(|c| c.is_write())
}

/// The commands of an `execute_kip` arguments object: `(text, merged parameters)`.
fn commands(args: &Value) -> Result<Vec<(String, Value)>, String> {
    let shared = match args.get("parameters") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("`parameters` must be an object".into()),
    };
    let with = |own: Option<&Value>| -> Result<Value, String> {
        let mut p = shared.clone();
        match own {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => p.extend(m.clone()),
            Some(_) => return Err("a command's `parameters` must be an object".into()),
        }
        Ok(Value::Object(p))
    };
    match (args.get("command"), args.get("commands")) {
        (Some(Value::String(c)), None) => Ok(vec![(c.clone(), with(None)?)]),
        (None, Some(Value::Array(cs))) if !cs.is_empty() => cs
            .iter()
            .map(|c| match c {
                Value::String(s) => Ok((s.clone(), with(None)?)),
                Value::Object(o) => match o.get("command") {
                    Some(Value::String(s)) => Ok((s.clone(), with(o.get("parameters"))?)),
                    _ => Err("each object in `commands` needs a `command` string".into()),
                },
                _ => Err("`commands` items are strings or {command, parameters} objects".into()),
            })
            .collect(),
        _ => Err("pass either `command` (a string) or `commands` (a non-empty array)".into()),
    }
}

fn tool_error(message: String) -> Value {
    json!({"error": {"code": "INVALID_TOOL_CALL", "message": message, "hint": "call execute_kip with {\"command\": \"...\"} or {\"commands\": [...]}, arguments as a JSON object"}})
}

fn clip(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= MAX_TOOL_RESULT {
        return s;
    }
    let mut end = MAX_TOOL_RESULT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... [cut: the result was {} bytes; ask for fewer rows with LIMIT]",
        &s[..end],
        s.len()
    )
}

/// The runtime part of the system prompt: what the engine does itself and the bounds.
fn runtime_note(limits: &LoopLimits, dry_run: bool) -> String {
    format!(
        "\n\n---\n\n## Runtime of this cycle\n\n\
- You act as `$system` through the `execute_kip` tool only. Writes carry `WITH METADATA {{ source: \"SleepCycle\", author: \"$system\" }}` (or the phase's source).\n\
- The engine runs Phase 7 (memory-strength decay), Phase 9 (TTL reclamation) and Phase 10 (finalization, `maintenance_log`) itself after you: do not run them. Your work is Phases 2-6 and 8.\n\
- Bounds, enforced: at most {} model turns, {} KIP commands, {} KML statements, {} seconds. A call past a bound is refused and the cycle ends.\n\
- {}\n\
- When you are done, answer with a short summary of what you did and no tool call.",
        limits.max_turns,
        limits.max_statements,
        limits.max_writes,
        limits.budget.as_secs(),
        if dry_run {
            "This is a DRY RUN: KML statements are validated and recorded as proposals, not applied; reads show the real graph."
        } else {
            "Every KML statement you send is applied at once, each atomically."
        }
    )
}

/// Runs the sleep cycle's judgement phases. `exec` runs an `execute_kip` arguments
/// object as `$system` and returns the response object; `context` is the cycle's input
/// (trigger, timestamp, parameters, the health report).
pub fn run_phases(
    client: &ChatClient,
    exec: &mut dyn FnMut(&Value) -> Value,
    context: &Value,
    limits: &LoopLimits,
    dry_run: bool,
) -> LoopReport {
    let agent = Agent {
        system: format!("{SYSTEM_INSTRUCTIONS}{}", runtime_note(limits, dry_run)),
        user: format!(
            "Sleep cycle input:\n{}\n\nRun the phases now.",
            serde_json::to_string_pretty(context).unwrap_or_default()
        ),
        tool: tool(),
        limits: *limits,
        dry_run,
    };
    run_agent(client, exec, &agent)
}

/// Runs one bounded tool-calling conversation (see the module docs): the system prompt,
/// the user message followed by `DESCRIBE PRIMER`, then model turns answering each tool
/// call through `exec` until the model answers without a tool call or a bound ends it.
pub fn run_agent(
    client: &ChatClient,
    exec: &mut dyn FnMut(&Value) -> Value,
    agent: &Agent,
) -> LoopReport {
    let start = Instant::now();
    let limits = &agent.limits;
    let dry_run = agent.dry_run;
    let tool_name = agent.tool["function"]["name"]
        .as_str()
        .unwrap_or("execute_kip")
        .to_string();
    let mut report = LoopReport::default();
    let primer = exec(&json!({"command": "DESCRIBE PRIMER"}));
    let mut messages = vec![
        json!({"role": "system", "content": agent.system}),
        json!({"role": "user", "content": format!("{}\n\nDESCRIBE PRIMER:\n{}", agent.user, clip(&primer))}),
    ];
    let tools = [agent.tool.clone()];
    loop {
        if start.elapsed() >= limits.budget {
            report.stop = "time_budget".into();
            break;
        }
        if report.turns >= limits.max_turns {
            report.stop = "max_turns".into();
            break;
        }
        report.turns += 1;
        let reply = match client.chat(&messages, &tools) {
            Ok(r) => r,
            Err(e) => {
                report.stop = "llm_error".into();
                report.summary = Some(e.0);
                break;
            }
        };
        if reply
            .content
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty())
        {
            report.summary = reply.content.clone();
        }
        let mut message = reply.message.clone();
        if message.get("role").is_none() {
            message["role"] = json!("assistant");
        }
        messages.push(message);
        if reply.tool_calls.is_empty() {
            report.stop = "done".into();
            break;
        }
        let mut stop: Option<&str> = None;
        for call in &reply.tool_calls {
            let answer = if stop.is_some() {
                tool_error("not run: the conversation ended at a bound".into())
            } else if start.elapsed() >= limits.budget {
                stop = Some("time_budget");
                tool_error("not run: the time budget is used up".into())
            } else {
                let (answer, ended) =
                    answer_call(call, &tool_name, exec, limits, dry_run, &mut report);
                stop = ended;
                answer
            };
            if answer.get("error").is_some() {
                report.tool_errors += 1;
            }
            messages
                .push(json!({"role": "tool", "tool_call_id": call.id, "content": clip(&answer)}));
        }
        if let Some(s) = stop {
            report.stop = s.into();
            break;
        }
    }
    report
}

/// Answers one tool call: the response object, and the bound that ends the loop, if one
/// was reached.
fn answer_call(
    call: &crate::llm::ToolCall,
    tool_name: &str,
    exec: &mut dyn FnMut(&Value) -> Value,
    limits: &LoopLimits,
    dry_run: bool,
    report: &mut LoopReport,
) -> (Value, Option<&'static str>) {
    if call.name != tool_name {
        return (
            tool_error(format!(
                "unknown tool {:?}: the only tool is {tool_name}",
                call.name
            )),
            None,
        );
    }
    let args: Value = match serde_json::from_str(&call.arguments) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return (
                tool_error("the arguments are not a JSON object".into()),
                None,
            )
        }
        Err(e) => {
            return (
                tool_error(format!("the arguments are not valid JSON ({e})")),
                None,
            )
        }
    };
    let cmds = match commands(&args) {
        Ok(c) => c,
        Err(m) => return (tool_error(m), None),
    };
    if report.statements.len() + cmds.len() > limits.max_statements {
        return (
            tool_error(format!(
                "refused: this call has {} commands and the cycle's budget of {} KIP commands has {} left",
                cmds.len(),
                limits.max_statements,
                limits.max_statements.saturating_sub(report.statements.len())
            )),
            Some("max_statements"),
        );
    }
    let writes = cmds.iter().filter(|(c, _)| is_write(c)).count();
    if report.writes + writes > limits.max_writes {
        return (
            tool_error(format!(
                "refused: this call has {writes} KML statements and the cycle's write cap of {} has {} left",
                limits.max_writes,
                limits.max_writes.saturating_sub(report.writes)
            )),
            Some("max_writes"),
        );
    }
    let mut outcomes: Vec<Value> = Vec::new();
    let single = args.get("command").is_some();
    if dry_run && writes > 0 {
        // Reads for real, writes validated only; a failing write stops the rest, as a
        // batch does.
        for (c, p) in &cmds {
            let w = is_write(c);
            let o = exec(&json!({"command": c, "parameters": p, "dry_run": w}));
            let failed = o.get("error").is_some();
            outcomes.push(o);
            if failed && w {
                break;
            }
        }
    } else {
        let resp = exec(&args);
        if single {
            outcomes.push(resp);
        } else {
            match resp.get("result") {
                Some(Value::Array(items)) => outcomes.extend(items.iter().cloned()),
                // An envelope error (the whole request refused): nothing ran.
                _ => return (resp, None),
            }
        }
    }
    for ((c, p), o) in cmds.iter().zip(&outcomes) {
        let w = is_write(c);
        if w {
            report.writes += 1;
        }
        report.statements.push(Executed {
            command: c.clone(),
            parameters: p.clone(),
            write: w,
            applied: w && !dry_run && o.get("error").is_none(),
            outcome: o.clone(),
        });
    }
    let answer = if single && !(dry_run && writes > 0) {
        outcomes.pop().unwrap_or(Value::Null)
    } else if single {
        let mut o = outcomes.pop().unwrap_or(Value::Null);
        if o.get("error").is_none() {
            o["note"] = json!("dry run: validated, not applied");
        }
        o
    } else {
        let mut v = json!({ "result": outcomes });
        if dry_run && writes > 0 {
            v["note"] = json!("dry run: KML validated, not applied");
        }
        v
    };
    (answer, None)
}
