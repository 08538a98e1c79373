//! `kip serve`: MCP over stdio, or MCP + the HTTP JSON API.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::ExitCode;

/// How long engine work still running when the server stops may take to end before
/// the directory is closed.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// How much of the database file `kip serve` reads at start to warm the OS page cache.
const PREWARM_BYTES: u64 = 8 << 30;

/// Arguments of `kip serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
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
    /// Time budget of one request (HTTP /kip, an MCP tool call), in seconds: the work
    /// stops when it is up, and commands not yet started are not run.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// Let web pages from this origin (e.g. http://localhost:5173) call the HTTP server;
    /// repeat for several, `*` for any. Other cross-origin requests are refused.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// Most HTTP connections served at once.
    #[arg(long, default_value_t = 512)]
    max_connections: usize,
    /// Tool sets to serve: `kip`, `memory` (the Knowledge Graph Memory Server tools),
    /// `brain` (`remember` and `recall_memory`, listed only with --llm).
    #[arg(long, value_delimiter = ',', default_value = "kip,memory,brain")]
    tools: Vec<ToolSet>,
    /// Do not read the database file into the OS page cache in the background at start.
    #[arg(long)]
    no_prewarm: bool,
    /// Run the deterministic sleep cycle (decay, TTL reclamation, maintenance log; see
    /// `kip sleep`) in the background every DURATION (e.g. `12h`), and sooner, at most
    /// hourly, when a threshold trigger fires (Unsorted > 20, orphans > 10, stale
    /// Events > 30). Off by default: a cycle deletes expired data.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "read_only")]
    sleep_every: Option<std::time::Duration>,
    /// The KIP version the MCP tools speak to agents: `1.x` (default) or `2.0` (the
    /// 2.0 `execute_kip` definitions, instructions and documents). HTTP `/kip` takes
    /// both, by the request's `"kip"`.
    #[arg(long, value_name = "VERSION", default_value = "1.x")]
    kip: kip_engine::v2::Dialect,
    /// With --http: print the explorer's address (the web page at `/`) on stdout, and
    /// open it in a browser when run from a terminal.
    #[arg(long, requires = "http")]
    open: bool,
}

impl ServeArgs {
    /// `kip open`: HTTP on 127.0.0.1:8080 unless --http says otherwise, with --open.
    pub fn for_open(mut self) -> ServeArgs {
        if self.http.is_none() {
            self.http = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 8080)));
        }
        self.open = true;
        self
    }
}

pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 30m, 12h, 1d)"))?;
    if d < std::time::Duration::from_secs(1) {
        return Err("a sleep interval must be at least 1s".into());
    }
    Ok(d)
}

/// A tool set of `kip serve --tools`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSet {
    /// execute_kip, execute_kip_readonly
    Kip,
    /// create_entities, search_nodes, ... (Knowledge Graph Memory Server)
    Memory,
    /// remember, recall_memory (the brain's Formation and Recall; needs --llm)
    Brain,
}

/// Runs the server until the client disconnects (stdio) or ctrl-c (HTTP).
///
/// Long (about 150 lines): the start-up order (open or share the directory, embedder,
/// sleeper, transport, signals, close) is read top to bottom here.
pub fn run(data: &Path, args: ServeArgs, llm: Option<String>) -> Result<ExitCode> {
    // Logs go to stderr: stdout carries the MCP stdio transport. KIP_LOG sets the filter.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KIP_LOG")
                // Our own progress at info; the libraries' (rmcp logs each peer's
                // whole info on every connection) only from warnings on.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new(
                        "warn,kip=info,kip_server=info,kip_engine=info",
                    )
                }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    // The first process on a directory owns it; later ones forward their requests to
    // it and take over when it exits (kip_server::shared).
    let hook: Option<kip_server::shared::OwnerHook> = if args.read_only {
        // A read-only server writes nothing, ever: not even a first import.
        if std::env::var_os("MEMORY_FILE_PATH").is_some() {
            tracing::info!("MEMORY_FILE_PATH is ignored by a --read-only server (it would write the import); import it with `kip import --memory-jsonl FILE`");
        }
        None
    } else {
        Some(Box::new(|nexus: &kip_engine::Nexus| {
            import_memory_file(nexus).map_err(|e| kip_lang::KipError::internal(format!("{e:#}")))
        }))
    };
    let shared = kip_server::SharedNexus::open_with_embedder(data, hook, crate::embedder()?)
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    let _close_on_return = CloseOnReturn(shared.clone());
    let backend = kip_server::Backend::from(shared.clone());
    if args.read_only {
        // "Writes nothing, ever": not even the audit log.
        if let Some(n) = shared.local() {
            n.admin().audit().disable();
        }
    }
    if let (false, Some(n)) = (args.no_prewarm, shared.local()) {
        let _ = std::thread::Builder::new()
            .name("kip-prewarm".into())
            .spawn(move || match n.admin().prewarm(PREWARM_BYTES) {
                Ok(b) => tracing::debug!("prewarmed {b} bytes of the database file"),
                Err(e) => tracing::debug!("prewarm stopped: {e}"),
            });
    }
    let llm = crate::llm_phases(llm.as_deref(), kip_brain::LoopLimits::default())?
        .map(std::sync::Arc::new);
    let sleeper = match args.sleep_every {
        Some(every) => Some(
            kip_server::sleeper::Sleeper::start(
                backend.clone(),
                kip_server::sleeper::SleepSchedule::every(every),
                llm.clone(),
            )
            .context("starting the sleep-cycle thread")?,
        ),
        None => None,
    };
    let tools = kip_server::mcp::ToolSets {
        kip: args.tools.contains(&ToolSet::Kip),
        memory: args.tools.contains(&ToolSet::Memory),
        brain: args.tools.contains(&ToolSet::Brain),
        read_only: args.read_only,
        kip2: args.kip == kip_engine::v2::Dialect::Kip2,
    };
    let stdio = args.http.is_none();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(kip_engine::WORKER_STACK_BYTES)
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(async move {
        let stop = stop_signal(stdio);
        let serving = async move {
            match args.http {
            Some(addr) => {
                let config = kip_server::http::HttpConfig {
                    api_key: args.api_key,
                    read_only: args.read_only,
                    tools,
                    max_body_bytes: args.max_body_bytes,
                    request_timeout: std::time::Duration::from_secs(args.timeout_secs),
                    loopback_hosts_only: true,
                    allowed_origins: args.allow_origin,
                    max_connections: args.max_connections,
                    llm: llm.clone(),
                    ..kip_server::http::HttpConfig::default()
                };
                let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
                    format!("listening on {addr} (another address: --http 127.0.0.1:0 picks a free port)")
                })?;
                let bound = listener.local_addr().context("the listening address")?;
                let url = format!("http://{bound}/");
                tracing::info!("the memory explorer is at {url}");
                if args.open {
                    announce(&url, config.api_key.is_some());
                }
                kip_server::http::serve_bound(backend, listener, config)
                    .await
                    .with_context(|| format!("serving HTTP on {bound}"))
            }
            None => kip_server::serve_stdio_full(
                backend,
                tools,
                std::time::Duration::from_secs(args.timeout_secs),
                llm.clone(),
            )
            .await
            .map_err(|e| anyhow::anyhow!("MCP stdio server: {e}")),
            }
        };
        // SIGTERM (a service manager, `docker stop`, an MCP client ending its server)
        // and, on stdio, SIGINT end the server like the end of its input: the
        // directory is closed below (final checkpoint, `kip.sock` removed), instead of
        // the process dying with the socket file left behind. (HTTP answers SIGINT
        // itself, letting open requests finish.)
        tokio::select! {
            r = serving => r,
            signal = stop => {
                tracing::info!("{signal}: stopping");
                Ok(())
            }
        }
    });
    // Engine work still under way (a call cut off by a signal) gets a moment to end;
    // a thread still blocked reading stdin (a client that stopped the server without
    // closing it) does not hold the exit (dropping the runtime would wait for it).
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // A cycle under way finishes before the directory closes.
    if let Some(s) = sleeper {
        s.stop();
    }
    // The directory is closed however serving ended (a client that went away before
    // `initialize` ends it with an error): the final checkpoint, said out loud (a
    // failure, a full disk, loses nothing: the write-ahead log holds every
    // acknowledged write and is replayed at the next start, but it must not look like
    // a clean stop), and `kip.sock` removed. Other processes forwarding to this one
    // take the directory over from here.
    let closed = shared.close();
    if let Err(e) = &closed {
        eprintln!(
            "kip: the final checkpoint failed: {}. Nothing acknowledged is lost: the write-ahead log is replayed at the next start.",
            e.message.trim_end_matches('.')
        );
    }
    served?;
    Ok(if closed.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Closes the shared directory when `kip serve` returns early with an error after
/// opening it (the normal end closes it explicitly, reporting a failed checkpoint;
/// closing twice is harmless), so an orderly exit never leaves `kip.sock` behind.
struct CloseOnReturn(std::sync::Arc<kip_server::SharedNexus>);

impl Drop for CloseOnReturn {
    fn drop(&mut self) {
        if let Err(e) = self.0.close() {
            tracing::warn!("closing the data directory: {}", e.message);
        }
    }
}

/// A future that resolves when the process is asked to stop: SIGTERM, or SIGINT when
/// `sigint` (the HTTP server handles SIGINT itself). It names the signal. The handlers
/// are installed now (call it inside the runtime, before serving), so a signal that
/// comes as soon as the server answers is not missed; when they cannot be installed the
/// future never resolves (the default actions stay).
fn stop_signal(sigint: bool) -> impl std::future::Future<Output = &'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        async move {
            let (Ok(mut term), Ok(mut int)) = handlers else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv(), if sigint => "SIGINT",
            }
        }
    }
    #[cfg(not(unix))]
    {
        async move {
            if sigint {
                let _ = tokio::signal::ctrl_c().await;
                return "ctrl-c";
            }
            std::future::pending().await
        }
    }
}

/// `--open`: the explorer's address on stdout (one line a script can read), and a
/// browser opened on it when stdout is a terminal and the platform has an opener.
fn announce(url: &str, keyed: bool) {
    use std::io::{IsTerminal, Write};
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{url}");
    let _ = out.flush();
    if keyed {
        eprintln!("kip: the explorer asks for the API key (--api-key / KIP_API_KEY) the server was started with");
    }
    eprintln!("kip: serving the memory explorer at {url} (MCP at {url}mcp); ctrl-c stops");
    if !out.is_terminal() {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!("kip: could not start a browser ({opener}: {e}); open {url} yourself");
    }
}

/// `MEMORY_FILE_PATH`: when it names an existing `.jsonl` file that this nexus has not
/// imported yet, import it once (entities and relations, lossless: relation ends the
/// file does not define become placeholder entities). The import is recorded in the
/// store under the file's canonical path, so later starts (and later edits of that
/// file) are ignored: from then on the nexus is the memory. A file that cannot be
/// imported (malformed lines, unreadable) stops the server with the reason: serving an
/// empty memory instead would look like the user's memory was lost.
fn import_memory_file(nexus: &kip_engine::Nexus) -> Result<()> {
    let Some(path) = std::env::var_os("MEMORY_FILE_PATH") else {
        return Ok(());
    };
    let path = std::path::PathBuf::from(path);
    if path.extension().and_then(|e| e.to_str()) != Some("jsonl") || !path.is_file() {
        tracing::info!(path = %path.display(), "MEMORY_FILE_PATH is not an existing .jsonl file; nothing to import");
        return Ok(());
    }
    let canonical = path.canonicalize().unwrap_or(path.clone());
    let key = format!("memory_import:{}", canonical.display());
    let done = nexus
        .read(|r| Ok(kip_engine::store::GraphRead::meta(r, &key)?))
        .map_err(|e| anyhow::anyhow!("cannot check the memory import record: {}", e.message))?;
    if done.is_some() {
        tracing::info!(path = %canonical.display(), "memory file already imported");
        return Ok(());
    }
    let text = std::fs::read_to_string(&canonical).with_context(|| {
        format!(
            "reading the memory file {} (MEMORY_FILE_PATH)",
            canonical.display()
        )
    })?;
    let (report, _) = nexus.memory().import_jsonl(&text, false).map_err(|e| {
        anyhow::anyhow!(
            "the memory file {} (MEMORY_FILE_PATH) was not imported: {}\nhint: fix it, or import it by hand with `kip import --memory-jsonl {} --skip-bad-lines` (which reports each line it leaves out), then start the server again",
            canonical.display(),
            e.message,
            canonical.display()
        )
    })?;
    let record = serde_json::json!({"imported_at": kip_engine::memory::now(), "entities": report.entities, "relations": report.relations, "placeholders": report.placeholders}).to_string();
    nexus
        .write(
            |w| {
                Ok(kip_engine::store::GraphWrite::set_meta(
                    w,
                    &key,
                    record.as_bytes(),
                )?)
            },
            false,
        )
        .map_err(|e| anyhow::anyhow!("cannot record the memory import: {}", e.message))?;
    tracing::info!(
        path = %canonical.display(),
        entities = report.entities,
        relations = report.relations,
        placeholders = report.placeholders.len(),
        "imported the memory file"
    );
    Ok(())
}
