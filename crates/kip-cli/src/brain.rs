//! `kip health` and `kip sleep`: the brain's deterministic maintenance from the command
//! line (docs/brain.md). Both work while a `kip serve` has the directory open: the
//! request is then forwarded to that process.

use crate::{out, print_json};
use anyhow::Result;
use serde_json::Value;
use std::path::Path;
use std::process::ExitCode;

/// Opens the directory shared with any process that has it open (no embedder: the
/// cycle's writes are marked for embedding and the next process with one embeds them).
fn backend(data: &Path, what: &str) -> Result<std::sync::Arc<kip_server::SharedNexus>> {
    if !crate::store_exists(data) {
        return Err(crate::no_store(data, what));
    }
    kip_server::SharedNexus::open(data, None)
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))
}

fn finish(shared: &kip_server::SharedNexus) {
    if let Err(e) = shared.close() {
        eprintln!(
            "kip: the final checkpoint failed: {}. Nothing acknowledged is lost: the write-ahead log is replayed at the next start.",
            e.message.trim_end_matches('.')
        );
    }
}

/// `kip health`.
pub fn health(data: &Path, json: bool) -> Result<ExitCode> {
    let shared = backend(data, "report on")?;
    let report = kip_server::Backend::from(shared.clone()).health();
    finish(&shared);
    let report = report.map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    if json {
        print_json(&report);
    } else {
        out(kip_engine::brain::health::table(&report).trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

/// `kip sleep` (with the language-model phases first when `llm` is given).
pub fn sleep(
    data: &Path,
    dry_run: bool,
    trigger: &str,
    json: bool,
    llm: Result<Option<kip_server::sleeper::LlmPhases>>,
) -> Result<ExitCode> {
    let llm = llm?;
    let shared = backend(data, "maintain")?;
    let report = kip_server::sleeper::run_cycle(
        &kip_server::Backend::from(shared.clone()),
        dry_run,
        trigger,
        llm.as_ref(),
    );
    finish(&shared);
    let r = report.map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    if json {
        print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| match x {
                Value::String(s) => crate::render::printable(s).into_owned(),
                o => format!(
                    "{} {:?} ({})",
                    o["type"].as_str().unwrap_or("?"),
                    o["name"].as_str().unwrap_or("?"),
                    o["id"].as_str().unwrap_or("?")
                ),
            })
            .collect()
    };
    let verb = if dry_run { "would be " } else { "" };
    out(&format!(
        "sleep cycle {} ({}){}",
        r["cycle_start"].as_str().unwrap_or("?"),
        r["trigger"].as_str().unwrap_or("?"),
        if dry_run {
            ", dry run: nothing was changed"
        } else {
            ""
        }
    ));
    out(&format!(
        "memory strength {verb}decayed on {} links",
        r["decayed_links"].as_u64().unwrap_or(0)
    ));
    let deleted = list(&r["deleted_concepts"]);
    out(&format!(
        "{} expired concepts {verb}deleted, {} propositions with them or on their own",
        deleted.len(),
        r["deleted_propositions"].as_u64().unwrap_or(0)
    ));
    for d in &deleted {
        out(&format!("  - {d}"));
    }
    for (key, label) in [
        (
            "extended",
            "expires_at extended (pending Event or sole evidence)",
        ),
        ("review_tasks", "review SleepTasks created"),
        ("issues", "issues"),
    ] {
        let items = list(&r[key]);
        if !items.is_empty() {
            out(&format!("{label}: {}", items.len()));
            for i in items {
                out(&format!("  - {i}"));
            }
        }
    }
    let l = &r["llm_phase"];
    if !l.is_null() {
        out(&format!(
            "language model {}: {} turns, {} KML statements {verb}applied, ended: {}",
            l["model"].as_str().unwrap_or("?"),
            l["turns"],
            l["writes"],
            l["stop"].as_str().unwrap_or("?")
        ));
        for s in l["statements"].as_array().into_iter().flatten() {
            if s["write"] == Value::Bool(true) {
                out(&format!(
                    "  [{}] {}",
                    s["outcome"].as_str().unwrap_or("?"),
                    crate::render::printable(
                        &s["command"].as_str().unwrap_or("").replace('\n', " ")
                    )
                ));
            }
        }
        if let Some(summary) = l["summary"].as_str() {
            out(&format!("  summary: {summary}"));
        }
    }
    if r["cap_reached"].as_bool() == Some(true) {
        out("the per-cycle deletion cap was reached: the rest waits for the next cycle");
    }
    if dry_run {
        out("\nstatements it would run:");
        for s in r["statements"].as_array().into_iter().flatten() {
            out(&format!(
                "\n// {} {}\n{}",
                s["phase"].as_str().unwrap_or(""),
                s["parameters"],
                s["command"].as_str().unwrap_or("")
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn need_llm(
    llm: Result<Option<kip_server::sleeper::LlmPhases>>,
    what: &str,
) -> Result<kip_server::sleeper::LlmPhases> {
    llm?.ok_or_else(|| {
        anyhow::anyhow!(
            "kip {what} needs a language model: pass --llm URL#MODEL (or set KIP_LLM), e.g. --llm http://localhost:11434/v1#qwen2.5:14b"
        )
    })
}

/// Opens the directory (created on first use, like `kip exec`) shared with any process
/// that has it open.
fn open_or_create(data: &Path) -> Result<std::sync::Arc<kip_server::SharedNexus>> {
    kip_server::SharedNexus::open(data, None)
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))
}

/// `kip remember`.
pub fn remember(
    data: &Path,
    file: &str,
    text: Option<String>,
    json: bool,
    llm: Result<Option<kip_server::sleeper::LlmPhases>>,
) -> Result<ExitCode> {
    let llm = need_llm(llm, "remember")?;
    let input: Value = match text {
        Some(t) => serde_json::json!({"messages": [{"role": "user", "content": t}]}),
        None => {
            let bytes = crate::read_input(file)?;
            serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("the input is not a JSON object: {e}"))?
        }
    };
    let shared = open_or_create(data)?;
    let r = kip_server::brain::remember(&kip_server::Backend::from(shared.clone()), &llm, &input);
    finish(&shared);
    show_brain_result(r, json, &|r| {
        for w in r["warnings"].as_array().into_iter().flatten() {
            out(&format!("warning: {}", w.as_str().unwrap_or_default()));
        }
    })
}

/// Prints a `remember` / `recall` result (JSON, or its text then `details`); exit 1
/// when the model could not be reached.
fn show_brain_result(
    r: Result<Value, kip_lang::KipError>,
    json: bool,
    details: &dyn Fn(&Value),
) -> Result<ExitCode> {
    let r = r.map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    if json {
        print_json(&r);
    } else {
        out(&kip_server::brain::result_text(&r));
        details(&r);
    }
    Ok(if r["status"] == "failed" {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `kip recall`.
pub fn recall(
    data: &Path,
    query: &str,
    context: Option<&str>,
    json: bool,
    llm: Result<Option<kip_server::sleeper::LlmPhases>>,
) -> Result<ExitCode> {
    let llm = need_llm(llm, "recall")?;
    let mut input = serde_json::json!({ "query": query });
    if let Some(c) = context {
        input["context"] = serde_json::from_str(c)
            .map_err(|e| anyhow::anyhow!("--context is not a JSON object: {e}"))?;
    }
    let shared = backend(data, "recall from")?;
    let r = kip_server::brain::recall(&kip_server::Backend::from(shared.clone()), &llm, &input);
    finish(&shared);
    show_brain_result(r, json, &|r| {
        for s in r["sources"].as_array().into_iter().flatten() {
            out(&format!(
                "  source {}: {} {}",
                crate::render::printable(s["id"].as_str().unwrap_or("?")),
                crate::render::printable(s["type"].as_str().unwrap_or("")),
                crate::render::printable(s["name"].as_str().unwrap_or(""))
            ));
        }
    })
}

/// One audit record as a table line: time, interface, method, outcome, duration, command.
/// Every text from the record is escaped ([`crate::render::printable`]): a client can
/// put anything in a command text, and the line must show it, not act on the terminal.
fn log_line(r: &Value) -> String {
    use crate::render::printable;
    let command = r["command"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            r["commands"].as_array().map(|c| {
                format!(
                    "[{} commands] {}",
                    c.len(),
                    c.first().and_then(Value::as_str).unwrap_or("")
                )
            })
        })
        .or_else(|| r.get("arguments").map(Value::to_string))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let command: String = printable(&command).chars().take(100).collect();
    let outcome = match r["error_code"].as_str() {
        Some(c) => c.to_string(),
        None => r["outcome"].as_str().unwrap_or("?").to_string(),
    };
    let text = |k: &str| printable(r[k].as_str().unwrap_or("?")).into_owned();
    format!(
        "{:<24} {:<6} {:<22} {:<9} {:>9.1}ms  {}",
        text("timestamp"),
        text("interface"),
        text("method"),
        printable(&outcome),
        r["duration_ms"].as_f64().unwrap_or(0.0),
        command
    )
}

/// `kip logs`.
pub fn logs(data: &Path, limit: usize, json: bool, follow: bool) -> Result<ExitCode> {
    let shared = backend(data, "list the audit log of")?;
    let b = kip_server::Backend::from(shared.clone());
    let page = |cursor: Option<String>, n: usize| {
        b.list_logs(cursor, n.clamp(1, 100))
            .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))
    };
    let show = |records: &[Value]| {
        for r in records {
            if json {
                out(&r.to_string());
            } else {
                out(&log_line(r));
            }
        }
    };
    // The newest `limit`, printed oldest first.
    let mut records: Vec<Value> = Vec::new();
    let mut cursor = None;
    while records.len() < limit {
        let p = match page(cursor.clone(), limit - records.len()) {
            Ok(p) => p,
            Err(e) => {
                finish(&shared);
                return Err(e);
            }
        };
        records.extend(p["result"].as_array().cloned().unwrap_or_default());
        match p["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    records.reverse();
    show(&records);
    if follow {
        let mut last: u64 = records
            .last()
            .and_then(|r| r["id"].as_str())
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            let mut fresh: Vec<Value> = Vec::new();
            let mut cursor = None;
            'pages: loop {
                let p = page(cursor.clone(), 100)?;
                for r in p["result"].as_array().into_iter().flatten() {
                    let id: u64 = r["id"].as_str().and_then(|i| i.parse().ok()).unwrap_or(0);
                    if id <= last {
                        break 'pages;
                    }
                    fresh.push(r.clone());
                }
                match p["next_cursor"].as_str() {
                    Some(c) => cursor = Some(c.to_string()),
                    None => break,
                }
            }
            fresh.reverse();
            if let Some(id) = fresh
                .last()
                .and_then(|r| r["id"].as_str())
                .and_then(|i| i.parse().ok())
            {
                last = id;
            }
            show(&fresh);
        }
    }
    finish(&shared);
    Ok(ExitCode::SUCCESS)
}
