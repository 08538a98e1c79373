//! The language-model brain as server features (docs/brain.md): `remember` (Formation)
//! and `recall_memory` (Recall) as MCP tools and HTTP routes, and the model of the sleep
//! cycle's judgement phases. Every KIP command the model sends goes through the
//! [`Backend`] like any client's (forwarded to the owning process when needed).

use crate::Backend;
use kip_lang::{ErrorCode, KipError};
use serde_json::Value;

/// A language model and the bounds of each conversation with it.
#[derive(Debug)]
pub struct Llm {
    /// The chat endpoint.
    pub client: kip_brain::ChatClient,
    /// The bounds of one loop (turns, commands, writes, wall clock).
    pub limits: kip_brain::LoopLimits,
}

impl Llm {
    /// The model and bounds as JSON, to send a cycle to the process that owns the
    /// directory (over its private local socket; the key included).
    pub fn to_wire(&self) -> Value {
        let s = self.client.spec();
        serde_json::json!({
            "url": s.url,
            "model": s.model,
            "key": self.client.key(),
            "max_turns": self.limits.max_turns,
            "max_statements": self.limits.max_statements,
            "max_writes": self.limits.max_writes,
            "budget_ms": u64::try_from(self.limits.budget.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// [`Llm::to_wire`] read back.
    pub fn from_wire(v: &Value) -> Result<Llm, KipError> {
        let url = v["url"].as_str().unwrap_or_default();
        let model = v["model"].as_str().unwrap_or_default();
        let spec = kip_brain::LlmSpec::parse(&format!("{url}#{model}"))
            .map_err(|e| KipError::internal(e.0))?;
        let n = |k: &str, d: usize| {
            v[k].as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .unwrap_or(d)
        };
        let d = kip_brain::LoopLimits::default();
        Ok(Llm {
            client: kip_brain::ChatClient::new(spec, v["key"].as_str().map(str::to_string)),
            limits: kip_brain::LoopLimits {
                max_turns: n("max_turns", d.max_turns),
                max_statements: n("max_statements", d.max_statements),
                max_writes: n("max_writes", d.max_writes),
                budget: v["budget_ms"]
                    .as_u64()
                    .map_or(d.budget, std::time::Duration::from_millis),
            },
        })
    }
}

/// A sleep cycle on a nexus this process has open: the language-model phases first
/// (when `llm` is given), then the deterministic ones, all under the nexus's cycle
/// claim, so no other cycle (from this process or a forwarded one) overlaps any of it.
pub fn sleep_cycle(
    nexus: &kip_engine::Nexus,
    dry_run: bool,
    trigger: &str,
    llm: Option<&Llm>,
) -> Result<kip_engine::brain::SleepReport, KipError> {
    let cycle = nexus.brain().begin_sleep()?;
    let llm_phase = match llm {
        None => None,
        Some(l) => {
            let health = serde_json::to_value(nexus.brain().health()?).unwrap_or(Value::Null);
            let context = serde_json::json!({
                "trigger": trigger,
                "scope": "full",
                "timestamp": kip_engine::brain::time::format(std::time::SystemTime::now()),
                "parameters": {
                    "stale_event_threshold_days": kip_engine::brain::health::STALE_EVENT_DAYS,
                    "memory_strength_decay_factor": 0.95,
                    "unsorted_max_backlog": kip_engine::brain::health::UNSORTED_TRIGGER,
                    "orphan_max_count": kip_engine::brain::health::ORPHAN_TRIGGER,
                },
                "health": health,
            });
            let mut exec = |args: &Value| {
                nexus.execute_audited(
                    args,
                    kip_engine::Access::ReadWrite,
                    &kip_engine::Budget::default(),
                    "sleep",
                )
            };
            let report = kip_brain::run_phases(&l.client, &mut exec, &context, &l.limits, dry_run);
            let mut j = report.to_json();
            j["model"] = serde_json::json!(l.client.spec().model);
            Some(j)
        }
    };
    let opts = kip_engine::brain::SleepOptions {
        dry_run,
        trigger: trigger.to_string(),
        llm_phase,
        ..Default::default()
    };
    nexus.brain().sleep_held(&cycle, &opts)
}

fn exec(backend: &Backend, access: kip_engine::Access) -> impl FnMut(&Value) -> Value + '_ {
    move |args: &Value| {
        backend.execute_json_as(
            args.clone(),
            access,
            &kip_engine::Budget::default(),
            "brain",
        )
    }
}

fn bad_input(message: String) -> KipError {
    KipError::new(ErrorCode::InvalidSyntax, message)
        .with_hint("see the tool's input schema (docs/brain.md)")
}

/// Formation: a conversation or trace in, `$self`'s memory written by the model.
pub fn remember(backend: &Backend, llm: &Llm, input: &Value) -> Result<Value, KipError> {
    let now = kip_engine::brain::time::format(std::time::SystemTime::now());
    kip_brain::remember(
        &llm.client,
        &mut exec(backend, kip_engine::Access::ReadWrite),
        input,
        &llm.limits,
        &now,
    )
    .map_err(bad_input)
}

/// Recall: a question in, an answer with the concepts it rests on out; reads only.
pub fn recall(backend: &Backend, llm: &Llm, input: &Value) -> Result<Value, KipError> {
    kip_brain::recall(
        &llm.client,
        &mut exec(backend, kip_engine::Access::ReadOnly),
        input,
        &llm.limits,
    )
    .map_err(bad_input)
}

/// The answer as text for a tool result: the answer (recall) or summary (remember),
/// then the status.
pub fn result_text(v: &Value) -> String {
    let body = v["answer"]
        .as_str()
        .or_else(|| v["summary"].as_str())
        .unwrap_or_default();
    format!("Status: {}\n\n{body}", v["status"].as_str().unwrap_or("?"))
}
