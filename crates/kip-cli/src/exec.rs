//! `kip exec`: command text, a file of commands, an `execute_kip` request (`--json`), or
//! a stream of requests (`--jsonl`).

use crate::{print_json, read_input, render, Format};
use anyhow::{Context, Result};
use kip_engine::envelope::{self, Access};
use kip_server::{Backend, SharedNexus};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `kip exec`.
#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    /// A KIP command given as text.
    command: Option<String>,
    /// A file of KIP commands (several run as a batch); `-` for stdin.
    #[arg(long, short, value_name = "FILE", conflicts_with_all = ["command", "json", "jsonl"])]
    file: Option<String>,
    /// Read an `execute_kip` arguments object ({command|commands, parameters, dry_run})
    /// as JSON from FILE (`-` for stdin) and print the response JSON on one line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["command", "jsonl"])]
    json: Option<String>,
    /// Read one `execute_kip` arguments object per line from FILE (`-` for stdin) and
    /// print one response per line, flushed, all against one open nexus.
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    jsonl: Option<String>,
    /// A parameter `name=value`; the value is JSON when it parses as JSON, else a string.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// A JSON object file of parameters.
    #[arg(long = "params", value_name = "FILE")]
    params_file: Option<String>,
    /// Validate only, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Serve the request as `execute_kip_readonly` (FIND, SEARCH, DESCRIBE only).
    #[arg(long)]
    readonly: bool,
    /// Output for command text: a table for FIND, indented JSON otherwise; or `json`.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The KIP version of a command text or file: `1.x` (default) or `2.0` (answered
    /// with a 2.0 response envelope, as JSON). A JSON request chooses by its `"kip"`.
    #[arg(long, value_name = "VERSION", default_value = "1.x")]
    kip: kip_engine::v2::Dialect,
}

fn parameters(args: &ExecArgs) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    if let Some(f) = &args.params_file {
        let v: Value =
            serde_json::from_slice(&read_input(f)?).with_context(|| format!("{f} is not JSON"))?;
        match v {
            Value::Object(m) => out.extend(m),
            _ => anyhow::bail!("{f} must hold a JSON object of parameters"),
        }
    }
    for p in &args.params {
        let (k, v) = p
            .split_once('=')
            .with_context(|| format!("--param {p:?} is not NAME=VALUE"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

fn access(readonly: bool) -> Access {
    if readonly {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    }
}

/// True when a response (or, for a batch, any of its commands) is an error.
fn has_error(response: &Value) -> bool {
    response.get("error").is_some()
        || response["result"]
            .as_array()
            .is_some_and(|outcomes| outcomes.iter().any(|o| o.get("error").is_some()))
}

fn is_batch(request: &Value) -> bool {
    request.get("commands").is_some()
}

fn code(request: &Value, response: &Value) -> ExitCode {
    let failed = if kip_engine::v2::is_kip2(request) {
        response["status"] != "succeeded"
    } else if is_batch(request) {
        has_error(response)
    } else {
        response.get("error").is_some()
    };
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The data directory, shared with a `kip serve` (or another `kip exec`) that has it
/// open: the requests are then forwarded to that process.
fn open_shared(data: &Path) -> Result<Arc<SharedNexus>> {
    SharedNexus::open_with_embedder(data, None, crate::embedder()?)
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))
}

/// Ends the use of the directory: checkpoints when this process owns it (and lets a
/// waiting process take over). A failed checkpoint is only reported: the writes were
/// acknowledged from the write-ahead log, which the next open replays, so the
/// responses stand.
fn close(shared: &SharedNexus) {
    // With an embedder, a command that wrote waits until the marked concepts are
    // embedded before it exits, so a script can write and then search by meaning (the
    // worker stops with the process). A read does not wait.
    if let Some(n) = shared.local().filter(|n| n.recall().has_written()) {
        match n.recall().wait_for_embeddings(EMBED_WAIT, &mut |_| {}) {
            Ok(0) => {}
            Ok(left) => eprintln!(
                "kip: {left} concepts are not embedded yet (the next start goes on with them)"
            ),
            Err(e) => eprintln!("kip: {}", e.message),
        }
    }
    if let Err(e) = shared.close() {
        eprintln!(
            "kip: the final checkpoint failed: {}. Nothing acknowledged is lost: the write-ahead log is replayed at the next start.",
            e.message.trim_end_matches('.')
        );
    }
}

/// How long `kip exec` waits for the embeddings of what it wrote.
const EMBED_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `kip exec`.
pub fn run(data: &Path, args: ExecArgs) -> Result<ExitCode> {
    if let Some(file) = &args.jsonl {
        return lines(data, file, args.readonly, args.dry_run);
    }
    if let Some(file) = &args.json {
        let bytes = read_input(file)?;
        let (request, response) = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => (v.clone(), execute(data, v, &args)?),
            Err(e) => (Value::Null, envelope::envelope_failure(
                kip_lang::KipError::syntax(format!("the request is not valid JSON: {e}"))
                    .with_hint("send an execute_kip arguments object such as {\"command\": \"DESCRIBE PRIMER\"}"),
            ).to_json()),
        };
        print_json(&response);
        return Ok(code(&request, &response));
    }
    let params = parameters(&args)?;
    let kip2 = args.kip == kip_engine::v2::Dialect::Kip2;
    let texts: Vec<String> = match (&args.command, &args.file) {
        (Some(t), None) => vec![t.clone()],
        (None, Some(f)) => {
            let bytes = read_input(f)?;
            let text = String::from_utf8(bytes).context("the file is not UTF-8")?;
            if kip2 {
                kip_engine::v2::split_statements(&text)
            } else {
                split_commands(&text)
            }
        }
        _ => anyhow::bail!("give a command text, --file FILE, --json FILE or --jsonl FILE"),
    };
    if kip2 {
        let request = kip_engine::v2::text_request(&texts, params, args.dry_run);
        let response = execute(data, request.clone(), &args)?;
        print_json(&response);
        return Ok(code(&request, &response));
    }
    let request = if texts.len() == 1 {
        json!({"command": texts[0], "parameters": params, "dry_run": args.dry_run})
    } else {
        json!({"commands": texts, "parameters": params, "dry_run": args.dry_run})
    };
    let response = execute(data, request.clone(), &args)?;
    match args.format {
        Format::Json => print_json(&response),
        Format::Table => match response["result"].as_array() {
            Some(outcomes) if is_batch(&request) && response.get("error").is_none() => {
                for (i, o) in outcomes.iter().enumerate() {
                    crate::out(&format!(
                        "-- [{}] {}",
                        i + 1,
                        texts
                            .get(i)
                            .and_then(|t| t.lines().next())
                            .unwrap_or("")
                            .trim()
                    ));
                    crate::out(&render::render(texts.get(i).map_or("", String::as_str), o));
                }
            }
            _ => crate::out(&render::render(&texts[0], &response)),
        },
    }
    Ok(code(&request, &response))
}

/// Splits a file into its commands (by the parser's spans); text that does not parse
/// is sent whole so the error is reported with its position.
fn split_commands(text: &str) -> Vec<String> {
    match kip_lang::parse_script(text) {
        Ok(cmds) if cmds.len() > 1 => cmds
            .iter()
            .map(|c| {
                let s = c.span();
                text.get(s.start..s.end).unwrap_or_default().to_string()
            })
            .collect(),
        _ => vec![text.to_string()],
    }
}

/// `--dry-run` applies to every request.
fn with_dry_run(mut request: Value, dry_run: bool) -> Value {
    if let (true, Value::Object(m)) = (dry_run, &mut request) {
        m.insert("dry_run".into(), Value::Bool(true));
    }
    request
}

fn execute(data: &Path, request: Value, args: &ExecArgs) -> Result<Value> {
    let shared = open_shared(data)?;
    let response = Backend::from(shared.clone()).execute_json_as(
        with_dry_run(request, args.dry_run),
        access(args.readonly),
        &kip_engine::Budget::default(),
        "cli",
    );
    close(&shared);
    Ok(response)
}

/// One request per input line; empty lines are skipped.
fn lines(data: &Path, file: &str, readonly: bool, dry_run: bool) -> Result<ExitCode> {
    use std::io::BufRead;
    let shared = open_shared(data)?;
    let backend = Backend::from(shared.clone());
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {file}"))?,
        ))
    };
    let mut any_error = false;
    for line in input.lines() {
        let line = line.context("reading a request line")?;
        if line.trim().is_empty() {
            continue;
        }
        let (request, response) = match serde_json::from_str::<Value>(&line) {
            Ok(args) => (
                args.clone(),
                backend.execute_json_as(
                    with_dry_run(args, dry_run),
                    access(readonly),
                    &kip_engine::Budget::default(),
                    "cli",
                ),
            ),
            Err(e) => (
                Value::Null,
                envelope::envelope_failure(
                    kip_lang::KipError::syntax(format!("the request line is not valid JSON: {e}"))
                        .with_hint("send one execute_kip arguments object per line"),
                )
                .to_json(),
            ),
        };
        any_error |= code(&request, &response) != ExitCode::SUCCESS;
        if !crate::out_or_gone(&serde_json::to_string(&response).unwrap_or_else(|_| "{}".into())) {
            // The reader went away (`| head`): the rest is not wanted. Close the
            // directory as at the end (checkpoint, socket) and end quietly.
            close(&shared);
            return Ok(ExitCode::SUCCESS);
        }
    }
    close(&shared);
    Ok(if any_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
