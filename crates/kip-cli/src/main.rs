//! The `kip` command-line interface for kip-nexus.
//!
//! Exit codes: 0 success, 1 a KIP error was returned, 2 usage error.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use kip_engine::envelope::{self, Access, ExecuteRequest, Response};
use kip_engine::Nexus;
use serde_json::{json, Value};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// kip-nexus: a durable knowledge-graph memory for LLM agents, spoken to in KIP.
#[derive(Parser, Debug)]
#[command(name = "kip", version, about)]
struct Cli {
    /// Data directory of the nexus (default: $KIP_DATA, else the platform data directory).
    #[arg(long, global = true, env = "KIP_DATA")]
    data: Option<PathBuf>,

    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,

    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum CapsuleCmd {
    /// Load a capsule file (one or more UPSERT/DELETE statements) in one transaction.
    Load {
        /// The capsule file, or `-` for stdin.
        file: String,
    },
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve MCP over stdio (default), or MCP + the HTTP JSON API with --http.
    Serve {
        /// Serve HTTP on this address instead of stdio (MCP at /mcp, JSON API at /kip).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
        http: Option<std::net::SocketAddr>,
        /// Require `Authorization: Bearer <KEY>` on every HTTP route.
        #[arg(long, env = "KIP_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Serve only the read-only tool (FIND, SEARCH, DESCRIBE).
        #[arg(long)]
        read_only: bool,
        /// Largest HTTP request body, in bytes.
        #[arg(long, default_value_t = 8 * 1024 * 1024)]
        max_body_bytes: usize,
        /// Time budget of one HTTP /kip request, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
    },
    /// Knowledge capsules.
    #[command(subcommand)]
    Capsule(CapsuleCmd),
    /// Rebuild the full-text index from the graph (with a progress bar).
    Reindex,
    /// Check the store's invariants (indexes, references, statistics, text index).
    Check,
    /// Print the plan the engine chooses for a FIND query.
    Explain {
        /// The FIND query text.
        query: String,
    },
    /// Check KIP text: prints {"result":"ok"} or the error object.
    Parse {
        /// A file of KIP commands (a capsule may hold several), or `-` for stdin.
        #[arg(default_value = "-")]
        file: String,
    },
    /// Execute an `execute_kip` request.
    Exec {
        /// Read the `execute_kip` arguments object ({command|commands, parameters,
        /// dry_run}) as JSON from FILE (`-` for stdin) and print the response JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<String>,
        /// Read one `execute_kip` arguments object per line from FILE (`-` for stdin)
        /// and print one response per line, flushed, all against one open nexus.
        #[arg(long, value_name = "FILE", conflicts_with = "json")]
        jsonl: Option<String>,
        /// Serve the request as `execute_kip_readonly` (FIND, SEARCH, DESCRIBE only).
        #[arg(long)]
        readonly: bool,
        /// Validate only (same as "dry_run": true).
        #[arg(long)]
        dry_run: bool,
        /// A KIP command given as text (instead of --json).
        command: Option<String>,
    },
}

fn read_input(file: &str) -> Result<Vec<u8>> {
    if file == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("reading standard input")?;
        Ok(buf)
    } else {
        std::fs::read(file).with_context(|| format!("reading {file}"))
    }
}

/// The data directory: `--data`, `$KIP_DATA`, or `<platform data dir>/kip-nexus`.
fn data_dir(cli: &Cli) -> PathBuf {
    cli.data.clone().unwrap_or_else(|| {
        dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("kip-nexus")
    })
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
    );
}

fn parse_cmd(file: &str) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    match kip_lang::parse_script_bytes(&bytes) {
        Ok(_) => {
            print_json(&json!({"result": "ok"}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

fn open_nexus(data: &PathBuf) -> Result<Nexus> {
    Nexus::open(data).map_err(|e| anyhow::anyhow!("{}", e.message))
}

fn exec_cmd(
    data: PathBuf,
    json_file: Option<String>,
    text: Option<String>,
    readonly: bool,
    dry_run: bool,
) -> Result<ExitCode> {
    let args: Value = match (json_file, text) {
        (Some(f), None) => {
            let bytes = read_input(&f)?;
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                Err(e) => {
                    let err = kip_lang::KipError::syntax(format!("the request is not valid JSON: {e}"))
                        .with_hint("send an execute_kip arguments object such as {\"command\": \"DESCRIBE PRIMER\"}");
                    print_json(&envelope::envelope_failure(err).to_json());
                    return Ok(ExitCode::from(1));
                }
            }
        }
        (None, Some(t)) => json!({"command": t}),
        (Some(_), Some(_)) => anyhow::bail!("give either --json FILE or a command text, not both"),
        (None, None) => anyhow::bail!("give --json FILE (or -) or a command text"),
    };
    let response = match ExecuteRequest::from_json(&args) {
        Ok(mut req) => {
            req.dry_run |= dry_run;
            let access = if readonly {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            let nexus = open_nexus(&data)?;
            nexus.execute(&req, access)
        }
        Err(e) => envelope::envelope_failure(e),
    };
    print_json(&response.to_json());
    Ok(exit_code(&response))
}

/// Executes one request per input line; an empty line is skipped. Exit code 1 when any
/// response carried an error.
fn exec_lines(data: PathBuf, file: &str, readonly: bool, dry_run: bool) -> Result<ExitCode> {
    use std::io::{BufRead, Write};
    let nexus = open_nexus(&data)?;
    let access = if readonly {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    };
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {file}"))?,
        ))
    };
    let mut out = std::io::stdout().lock();
    let mut any_error = false;
    for line in input.lines() {
        let line = line.context("reading a request line")?;
        if line.trim().is_empty() {
            continue;
        }
        let response = match serde_json::from_str::<Value>(&line) {
            Ok(args) => match ExecuteRequest::from_json(&args) {
                Ok(mut req) => {
                    req.dry_run |= dry_run;
                    nexus.execute(&req, access)
                }
                Err(e) => envelope::envelope_failure(e),
            },
            Err(e) => envelope::envelope_failure(
                kip_lang::KipError::syntax(format!("the request line is not valid JSON: {e}"))
                    .with_hint("send one execute_kip arguments object per line"),
            ),
        };
        any_error |= response.has_error();
        writeln!(
            out,
            "{}",
            serde_json::to_string(&response.to_json()).unwrap_or_else(|_| "{}".into())
        )?;
        out.flush()?;
    }
    Ok(if any_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn serve(
    data: PathBuf,
    http: Option<std::net::SocketAddr>,
    api_key: Option<String>,
    read_only: bool,
    max_body_bytes: usize,
    timeout_secs: u64,
) -> Result<ExitCode> {
    // Logs go to stderr: stdout carries the MCP stdio transport.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KIP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let nexus = std::sync::Arc::new(open_nexus(&data)?);
    let tools = kip_server::mcp::ToolSets {
        kip: true,
        read_only,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match http {
            Some(addr) => {
                let config = kip_server::http::HttpConfig {
                    api_key,
                    read_only,
                    tools,
                    max_body_bytes,
                    request_timeout: std::time::Duration::from_secs(timeout_secs),
                };
                kip_server::http::serve(nexus, addr, config)
                    .await
                    .with_context(|| format!("serving HTTP on {addr}"))
            }
            None => kip_server::serve_stdio(nexus, tools)
                .await
                .map_err(|e| anyhow::anyhow!("MCP stdio server: {e}")),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

fn capsule_load(data: PathBuf, file: &str) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    let nexus = open_nexus(&data)?;
    let outcome = kip_lang::utf8(&bytes).and_then(|text| nexus.load_capsule(text));
    match outcome {
        Ok(results) => {
            print_json(&json!({ "result": results }));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::from(1))
        }
    }
}

fn reindex(data: PathBuf, quiet: bool) -> Result<ExitCode> {
    let nexus = open_nexus(&data)?;
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("reindex {bar:40} {pos}/{len} elements ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = nexus.reindex(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    match r {
        Ok(()) => {
            print_json(&json!({"result": "ok"}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

fn check(data: PathBuf) -> Result<ExitCode> {
    let nexus = open_nexus(&data)?;
    let problems = nexus
        .check_integrity()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let ok = problems.is_empty();
    print_json(&json!({"result": {"ok": ok, "problems": problems}}));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn explain(data: PathBuf, query: &str) -> Result<ExitCode> {
    let nexus = open_nexus(&data)?;
    match nexus.explain(query) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::from(1))
        }
    }
}

fn exit_code(r: &Response) -> ExitCode {
    if r.has_error() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let data = data_dir(&cli);
    let result = match cli.command {
        Cmd::Serve {
            http,
            api_key,
            read_only,
            max_body_bytes,
            timeout_secs,
        } => serve(data, http, api_key, read_only, max_body_bytes, timeout_secs),
        Cmd::Capsule(CapsuleCmd::Load { file }) => capsule_load(data, &file),
        Cmd::Explain { query } => explain(data, &query),
        Cmd::Reindex => reindex(data, cli.quiet),
        Cmd::Check => check(data),
        Cmd::Parse { file } => parse_cmd(&file),
        Cmd::Exec {
            json,
            jsonl: Some(file),
            readonly,
            dry_run,
            command: None,
        } if json.is_none() => exec_lines(data, &file, readonly, dry_run),
        Cmd::Exec { jsonl: Some(_), .. } => Err(anyhow::anyhow!(
            "--jsonl takes the requests from its file; give no command text"
        )),
        Cmd::Exec {
            json,
            readonly,
            dry_run,
            command,
            ..
        } => exec_cmd(data, json, command, readonly, dry_run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kip: {e:#}");
            ExitCode::from(2)
        }
    }
}
