//! Several processes, one memory.
//!
//! MCP hosts start one `kip serve` per window or per client, all on the same data
//! directory, and only one process can have the database open (redb locks its file).
//! So the first process that opens a directory **owns** it and answers on a Unix socket
//! inside it (`<dir>/kip.sock`, mode 0600 in a 0700 directory: its user only); a later
//! `kip serve` or `kip exec` on that directory finds the database locked, connects to
//! the socket and **forwards** every request (an `execute_kip` call, a memory tool, a
//! health count) to the owner, which runs it exactly as it runs its own. The answer is
//! the same JSON either way.
//!
//! When the owner exits (or is killed), its socket stops answering: a forwarding process
//! then opens the directory itself (the write-ahead log is replayed as after any crash),
//! starts answering on the socket, and re-sends the request that was cut off. Whoever
//! gets the lock first becomes the owner; the others connect to it. A re-sent request
//! may be one the old owner committed just before it died: KIP writes are idempotent
//! (UPSERT merges, DELETE of what is gone is a no-op) and so are the memory tools
//! (existing entities, relations and observations are skipped), so it is applied once.
//! A request whose owner died is acknowledged only once it has run on the new owner;
//! an acknowledged write is durable (it was synced to the log before the answer).
//!
//! The wire format is one JSON object per line each way, one request per connection:
//! the request is an [`Op`], the answer a [`Reply`]. A forwarding process that stops
//! waiting (cancelled, past its deadline) closes the connection, and the owner stops
//! the work as if its own client had gone away.

use kip_engine::{Access, Budget, Interrupt, Nexus, OpenError, OpenMode};
use kip_lang::{ErrorCode, KipError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The socket an owning process answers on, inside the data directory.
pub const SOCKET_FILE: &str = "kip.sock";

/// Largest request line the owner reads (a forwarded request was already limited by
/// the forwarding server's own body limit).
const MAX_REQUEST_BYTES: u64 = 256 << 20;
/// Most forwarded requests an owner runs at once; further connections wait.
const MAX_FORWARDED: usize = 256;
/// How long a process waits for a directory's owner to answer, or to exit so that it
/// can take over (the owner may be replaying a long log or checkpointing).
const ROUTE_WAIT: Duration = Duration::from_secs(30);
/// How often waiting loops look at their flags and deadlines.
const POLL: Duration = Duration::from_millis(25);
/// How often a request is re-sent after its owner went away before giving up.
const MAX_RESENDS: usize = 5;
/// How long past a forwarded request's deadline its sender still waits for the answer
/// (the owner stops the work by itself at the deadline).
const ANSWER_GRACE: Duration = Duration::from_secs(30);
/// How long a closing owner waits for the forwarded requests it is running.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// A request sent to the owner of a directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `execute_kip` (or `execute_kip_readonly` when `read_only`) with its arguments.
    Kip {
        /// The arguments object (`command`/`commands`, `parameters`, `dry_run`, ...).
        args: Value,
        /// Serve it as `execute_kip_readonly`.
        read_only: bool,
        /// Time budget in milliseconds (none: no deadline).
        timeout_ms: Option<u64>,
        /// The interface the call came through, recorded in the audit log (`None`: an
        /// internal read, not recorded).
        #[serde(default)]
        interface: Option<String>,
    },
    /// A Knowledge Graph Memory Server tool.
    Memory {
        /// The tool's name (`create_entities`, ...).
        tool: String,
        /// Its arguments object.
        args: Value,
        /// Refuse tools that write.
        read_only: bool,
        /// The interface the call came through (see `Op::Kip`).
        #[serde(default)]
        interface: Option<String>,
    },
    /// The number of concepts and propositions (`GET /health`).
    Totals,
    /// The memory's health report (`kip health`, `GET /memory/health`, the MCP resource).
    Health,
    /// One page of the audit log (`list_logs`, `kip logs`).
    ListLogs {
        /// The `next_cursor` of the previous page (none: the newest records).
        cursor: Option<String>,
        /// Records per page (1 to 100).
        limit: usize,
    },
    /// One deterministic sleep cycle (`kip sleep`).
    Sleep {
        /// List the writes instead of applying them.
        dry_run: bool,
        /// Why it runs (`on_demand`, `scheduled`, `threshold`).
        trigger: String,
        /// The language model of the judgement phases ([`crate::brain::Llm::to_wire`]),
        /// run by the owner before the deterministic phases, under the same cycle claim.
        #[serde(default)]
        llm: Option<Value>,
    },
}

/// The owner's answer to an [`Op`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The result (an `execute_kip` response object, a tool result, `[concepts,
    /// propositions]`).
    Ok(Value),
    /// The call failed (an `execute_kip` response carries its errors inside `Ok`).
    Err(WireError),
}

/// A [`KipError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireError {
    code: String,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

impl From<&KipError> for WireError {
    fn from(e: &KipError) -> Self {
        WireError {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            hint: e.hint.clone(),
        }
    }
}

impl From<WireError> for KipError {
    fn from(w: WireError) -> Self {
        let code = ErrorCode::from_code(&w.code).unwrap_or(ErrorCode::InternalError);
        let e = KipError::new(code, w.message);
        match w.hint {
            Some(h) => e.with_hint(h),
            None => e,
        }
    }
}

impl Reply {
    fn into_result(self) -> Result<Value, KipError> {
        match self {
            Reply::Ok(v) => Ok(v),
            Reply::Err(w) => Err(w.into()),
        }
    }
}

fn cancelled() -> Reply {
    fail(
        KipError::new(ErrorCode::ExecutionTimeout, "the request was cancelled")
            .with_hint("a write that had started was either committed whole or not at all: check with FIND before sending it again"),
    )
}

fn fail(e: KipError) -> Reply {
    Reply::Err(WireError::from(&e))
}

/// Runs `op` on a nexus this process has open (its own requests and forwarded ones).
fn run(nexus: &Nexus, op: &Op, budget: &Budget) -> Reply {
    match op {
        Op::Kip {
            args,
            read_only,
            interface,
            ..
        } => {
            let access = if *read_only {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            Reply::Ok(match interface {
                Some(i) => nexus.execute_audited(args, access, budget, i),
                None => nexus.execute_json_with(args, access, budget).to_json(),
            })
        }
        Op::Memory {
            tool,
            args,
            read_only,
            interface,
        } => {
            if *read_only && !kip_engine::memory::READ_ONLY_TOOLS.contains(&tool.as_str()) {
                return fail(
                    KipError::new(
                        ErrorCode::ImmutableTarget,
                        format!("'{tool}' writes, and this server is read-only"),
                    )
                    .with_hint("use the reading tools: read_graph, search_nodes, open_nodes"),
                );
            }
            let out = match interface {
                Some(i) => nexus.memory_tool_audited(tool, args, i),
                None => nexus.memory_tool(tool, args),
            };
            match out {
                Ok(v) => Reply::Ok(v),
                Err(e) => fail(e),
            }
        }
        Op::Totals => match nexus.totals() {
            Ok((c, p)) => Reply::Ok(serde_json::json!([c, p])),
            Err(e) => fail(e),
        },
        Op::ListLogs { cursor, limit } => match nexus.audit().list(cursor.as_deref(), *limit) {
            Ok((records, next)) => {
                Reply::Ok(serde_json::json!({"result": records, "next_cursor": next}))
            }
            Err(e) => fail(e),
        },
        Op::Health => match nexus.health() {
            Ok(h) => Reply::Ok(serde_json::to_value(h).unwrap_or(Value::Null)),
            Err(e) => fail(e),
        },
        Op::Sleep {
            dry_run,
            trigger,
            llm,
        } => {
            let llm = match llm.as_ref().map(crate::brain::Llm::from_wire).transpose() {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            match crate::brain::sleep_cycle(nexus, *dry_run, trigger, llm.as_ref()) {
                Ok(r) => Reply::Ok(serde_json::to_value(r).unwrap_or(Value::Null)),
                Err(e) => fail(e),
            }
        }
    }
}

/// What a server runs its engine calls on: a nexus this process has open, or a data
/// directory shared with other processes ([`SharedNexus`]). Every call blocks: run it
/// on the blocking pool.
#[derive(Clone)]
pub enum Backend {
    /// A nexus of this process alone (tests, embedding).
    Local(Arc<Nexus>),
    /// A data directory this process owns or forwards to.
    Shared(Arc<SharedNexus>),
}

impl From<Arc<Nexus>> for Backend {
    fn from(n: Arc<Nexus>) -> Self {
        Backend::Local(n)
    }
}

impl From<Arc<SharedNexus>> for Backend {
    fn from(s: Arc<SharedNexus>) -> Self {
        Backend::Shared(s)
    }
}

impl Backend {
    fn call(&self, op: &Op, budget: &Budget) -> Reply {
        match self {
            Backend::Local(n) => run(n, op, budget),
            Backend::Shared(s) => s.call(op, budget),
        }
    }

    /// Runs an `execute_kip` request (its arguments object) within `budget` and returns
    /// the response object. Not recorded in the audit log: for the server's own reads;
    /// calls made for a client go through [`Backend::execute_json_as`].
    pub fn execute_json(&self, args: Value, access: Access, budget: &Budget) -> Value {
        self.execute(args, access, budget, None)
    }

    /// [`Backend::execute_json`] for a client's call through `interface` (`mcp`,
    /// `http`, `cli`, `brain`), recorded in the audit log.
    pub fn execute_json_as(
        &self,
        args: Value,
        access: Access,
        budget: &Budget,
        interface: &str,
    ) -> Value {
        self.execute(args, access, budget, Some(interface.to_string()))
    }

    fn execute(
        &self,
        args: Value,
        access: Access,
        budget: &Budget,
        interface: Option<String>,
    ) -> Value {
        let timeout_ms = budget.deadline.map(|d| {
            u64::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(u64::MAX)
        });
        let op = Op::Kip {
            args,
            read_only: access == Access::ReadOnly,
            timeout_ms,
            interface,
        };
        match self.call(&op, budget) {
            Reply::Ok(v) => v,
            Reply::Err(w) => serde_json::json!({"error": KipError::from(w).to_json()}),
        }
    }

    /// Runs a memory-server tool; `read_only` refuses the tools that write. Not recorded
    /// in the audit log (see [`Backend::memory_tool_as`]).
    pub fn memory_tool(&self, tool: &str, args: Value, read_only: bool) -> Result<Value, KipError> {
        self.memory(tool, args, read_only, None)
    }

    /// [`Backend::memory_tool`] for a client's call through `interface`, recorded in
    /// the audit log.
    pub fn memory_tool_as(
        &self,
        tool: &str,
        args: Value,
        read_only: bool,
        interface: &str,
    ) -> Result<Value, KipError> {
        self.memory(tool, args, read_only, Some(interface.to_string()))
    }

    fn memory(
        &self,
        tool: &str,
        args: Value,
        read_only: bool,
        interface: Option<String>,
    ) -> Result<Value, KipError> {
        let op = Op::Memory {
            tool: tool.to_string(),
            args,
            read_only,
            interface,
        };
        self.call(&op, &Budget::default()).into_result()
    }

    /// The number of concepts and propositions.
    pub fn totals(&self) -> Result<(u64, u64), KipError> {
        let v = self.call(&Op::Totals, &Budget::default()).into_result()?;
        match (v[0].as_u64(), v[1].as_u64()) {
            (Some(c), Some(p)) => Ok((c, p)),
            _ => Err(KipError::internal(format!(
                "the owning process answered the totals with {v}"
            ))),
        }
    }

    /// One page of the audit log, newest first: `{"result": [record, ...],
    /// "next_cursor": "..." | null}` (see [`kip_engine::audit`]).
    pub fn list_logs(&self, cursor: Option<String>, limit: usize) -> Result<Value, KipError> {
        self.call(&Op::ListLogs { cursor, limit }, &Budget::default())
            .into_result()
    }

    /// The memory's health report as JSON ([`kip_engine::brain::Health`]).
    pub fn health(&self) -> Result<Value, KipError> {
        self.call(&Op::Health, &Budget::default()).into_result()
    }

    /// Runs one sleep cycle where the nexus is open (the language-model phases first
    /// when `llm` is given, see [`crate::brain::sleep_cycle`]); its report as JSON
    /// ([`kip_engine::brain::SleepReport`]).
    pub fn sleep(
        &self,
        dry_run: bool,
        trigger: &str,
        llm: Option<&crate::brain::Llm>,
    ) -> Result<Value, KipError> {
        let op = Op::Sleep {
            dry_run,
            trigger: trigger.to_string(),
            llm: llm.map(crate::brain::Llm::to_wire),
        };
        self.call(&op, &Budget::default()).into_result()
    }

    /// The nexus, when this process has it open.
    pub fn local(&self) -> Option<Arc<Nexus>> {
        match self {
            Backend::Local(n) => Some(n.clone()),
            Backend::Shared(s) => s.local(),
        }
    }
}

/// Work to do whenever this process becomes a directory's owner (at start or when it
/// takes over), e.g. the one-time `MEMORY_FILE_PATH` import.
pub type OwnerHook = Box<dyn Fn(&Nexus) -> Result<(), KipError> + Send + Sync>;

/// A data directory shared by every `kip serve`/`kip exec` process that uses it: this
/// process either owns it (has the nexus open and answers the others) or forwards to
/// the process that does, and takes over when that one exits. See the module docs.
pub struct SharedNexus {
    dir: PathBuf,
    socket: PathBuf,
    role: Mutex<Role>,
    hook: Option<OwnerHook>,
    /// Set on the nexus whenever this process becomes the owner (semantic recall).
    embedder: Option<Arc<dyn kip_embed::Embedder>>,
}

struct Role {
    /// Bumped on every change of route, so that threads that saw the same owner go
    /// away re-route once.
    generation: u64,
    owner: Option<Owner>,
    closed: bool,
}

struct Owner {
    nexus: Arc<Nexus>,
    listener: Option<Listener>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How one attempt to forward a request ended.
enum Sent {
    Answer(Reply),
    /// The owner went away before answering (or was not there): re-route, re-send.
    Lost,
}

impl SharedNexus {
    /// Opens the data directory `dir`: as its owner when no other process has it open,
    /// else as a client of the process that has. Waits (up to 30 s) for an owner that
    /// is starting or exiting. `hook` runs whenever this process becomes the owner.
    pub fn open(dir: impl AsRef<Path>, hook: Option<OwnerHook>) -> Result<Arc<Self>, KipError> {
        SharedNexus::open_with_embedder(dir, hook, None)
    }

    /// [`SharedNexus::open`] with an embedder, set on the nexus whenever this process
    /// owns the directory. (A process that forwards to another owner searches with the
    /// owner's embedder, or none.)
    pub fn open_with_embedder(
        dir: impl AsRef<Path>,
        hook: Option<OwnerHook>,
        embedder: Option<Arc<dyn kip_embed::Embedder>>,
    ) -> Result<Arc<Self>, KipError> {
        let dir = dir.as_ref().to_path_buf();
        let shared = Arc::new(SharedNexus {
            socket: dir.join(SOCKET_FILE),
            dir,
            role: Mutex::new(Role {
                generation: 0,
                owner: None,
                closed: false,
            }),
            hook,
            embedder,
        });
        shared.reroute(0, true)?;
        Ok(shared)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The nexus, when this process owns the directory.
    pub fn local(&self) -> Option<Arc<Nexus>> {
        lock(&self.role).owner.as_ref().map(|o| o.nexus.clone())
    }

    /// True when this process owns the directory.
    pub fn is_owner(&self) -> bool {
        lock(&self.role).owner.is_some()
    }

    /// Runs `op` here (owner) or at the owner, re-routing when the owner goes away.
    pub fn call(&self, op: &Op, budget: &Budget) -> Reply {
        let mut resends = 0;
        loop {
            let (generation, local) = {
                let role = lock(&self.role);
                if role.closed {
                    return fail(
                        KipError::internal("the server is shutting down")
                            .with_hint("start it again and re-send the request"),
                    );
                }
                (
                    role.generation,
                    role.owner.as_ref().map(|o| o.nexus.clone()),
                )
            };
            if let Some(nexus) = local {
                return run(&nexus, op, budget);
            }
            match self.forward(op, budget) {
                Sent::Answer(reply) => return reply,
                Sent::Lost => {
                    resends += 1;
                    if resends > MAX_RESENDS {
                        return fail(KipError::internal(format!(
                            "the process that owns {} stopped answering; the request was not acknowledged",
                            self.dir.display()
                        ))
                        .with_hint("check with FIND whether it was applied, then re-send it"));
                    }
                    if let Err(e) = self.reroute(generation, false) {
                        return fail(e);
                    }
                }
            }
        }
    }

    /// Sends `op` to the owner and waits for its answer (watching the budget's flag:
    /// a cancelled request closes the connection, which stops the owner's work).
    fn forward(&self, op: &Op, budget: &Budget) -> Sent {
        if budget.interrupt.as_ref().is_some_and(Interrupt::is_set) {
            return Sent::Answer(cancelled());
        }
        let Ok(mut stream) = UnixStream::connect(&self.socket) else {
            return Sent::Lost;
        };
        let mut line = match serde_json::to_vec(op) {
            Ok(l) => l,
            Err(e) => {
                return Sent::Answer(fail(KipError::internal(format!(
                    "cannot encode the request: {e}"
                ))))
            }
        };
        line.push(b'\n');
        if stream.write_all(&line).is_err() || stream.flush().is_err() {
            return Sent::Lost;
        }
        if stream.set_read_timeout(Some(POLL)).is_err() {
            return Sent::Lost;
        }
        let give_up = budget.deadline.and_then(|d| d.checked_add(ANSWER_GRACE));
        let mut answer = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Sent::Lost,
                Ok(n) => {
                    answer.extend_from_slice(&chunk[..n]);
                    if chunk[..n].contains(&b'\n') {
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    if budget.interrupt.as_ref().is_some_and(Interrupt::is_set) {
                        return Sent::Answer(cancelled());
                    }
                    if give_up.is_some_and(|g| Instant::now() > g) {
                        return Sent::Answer(fail(KipError::new(ErrorCode::ExecutionTimeout, format!(
                            "the process that owns {} did not answer within the request's time budget",
                            self.dir.display()
                        )).with_hint("check with FIND whether a write was applied before re-sending it")));
                    }
                }
                Err(_) => return Sent::Lost,
            }
        }
        match serde_json::from_slice::<Reply>(answer.trim_ascii_end()) {
            Ok(reply) => Sent::Answer(reply),
            Err(_) => Sent::Lost,
        }
    }

    /// Finds the directory's owner again after the one seen at `generation` went away:
    /// opens the directory (becoming its owner) when nobody has it, else waits until
    /// the process that has it answers on the socket.
    fn reroute(&self, generation: u64, starting: bool) -> Result<(), KipError> {
        let mut role = lock(&self.role);
        if role.generation != generation || role.owner.is_some() || role.closed {
            return Ok(()); // another thread of this process re-routed already
        }
        let deadline = Instant::now() + ROUTE_WAIT;
        loop {
            match Nexus::try_open(&self.dir, OpenMode::Normal) {
                Ok(mut nexus) => {
                    if let Some(e) = &self.embedder {
                        nexus.set_embedder(e.clone())?;
                    }
                    let nexus = Arc::new(nexus);
                    if let Err(e) = nexus.start_idle_checkpoints() {
                        tracing::warn!("cannot start the idle checkpoint thread: {e}; the log is checkpointed at writes only");
                    }
                    if let Some(hook) = &self.hook {
                        if let Err(e) = hook(&nexus) {
                            if starting {
                                return Err(e);
                            }
                            tracing::error!(
                                "after taking over {}: {}",
                                self.dir.display(),
                                e.message
                            );
                        }
                    }
                    let listener = match Listener::start(nexus.clone(), &self.socket) {
                        Ok(l) => Some(l),
                        Err(e) => {
                            tracing::warn!(
                                socket = %self.socket.display(),
                                "cannot answer other kip processes on this directory: {e}; they will fail to open it while this one runs"
                            );
                            None
                        }
                    };
                    if !starting {
                        tracing::info!(dir = %self.dir.display(), "the previous owner of the data directory exited: this process owns it now");
                    }
                    role.owner = Some(Owner { nexus, listener });
                    role.generation += 1;
                    return Ok(());
                }
                Err(OpenError::Failed(e)) => return Err(e),
                Err(OpenError::InUse(e)) => {
                    if UnixStream::connect(&self.socket).is_ok() {
                        if starting {
                            tracing::info!(dir = %self.dir.display(), "another kip process owns the data directory: forwarding requests to it");
                        }
                        role.generation += 1;
                        return Ok(());
                    }
                    if Instant::now() > deadline {
                        return Err(KipError::internal(format!(
                            "{}, and it does not answer on {}",
                            e.message,
                            self.socket.display()
                        ))
                        .with_hint("a `kip serve` or `kip exec` answers there; another command (import, export, check, recover, the REPL) has the directory to itself until it ends: wait for it, or stop it"));
                    }
                    std::thread::sleep(POLL);
                }
            }
        }
    }

    /// Stops answering other processes (they take over), waits for the forwarded
    /// requests being run, then checkpoints when this process owns the directory. Later
    /// calls fail with "shutting down".
    pub fn close(&self) -> Result<(), KipError> {
        let owner = {
            let mut role = lock(&self.role);
            role.closed = true;
            role.owner.take()
        };
        let Some(mut owner) = owner else {
            return Ok(());
        };
        if let Some(l) = owner.listener.take() {
            l.stop(&self.socket);
        }
        owner.nexus.checkpoint()
    }
}

/// The owner's side: a thread accepting connections on the socket, one thread per
/// connection (at most [`MAX_FORWARDED`] at once).
struct Listener {
    stop: Arc<AtomicBool>,
    active: Arc<(Mutex<usize>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    fn start(nexus: Arc<Nexus>, socket: &Path) -> std::io::Result<Listener> {
        // Only the process holding the database lock gets here, so a socket file left
        // behind is a dead owner's.
        match std::fs::remove_file(socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(socket)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new((Mutex::new(0usize), Condvar::new()));
        let thread = {
            let stop = stop.clone();
            let active = active.clone();
            std::thread::Builder::new()
                .name("kip-share".into())
                .spawn(move || accept_loop(listener, nexus, stop, active))?
        };
        Ok(Listener {
            stop,
            active,
            thread: Some(thread),
        })
    }

    fn stop(mut self, socket: &Path) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept call; then nobody new gets in.
        let _ = UnixStream::connect(socket);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(socket);
        let (count, cv) = &*self.active;
        let deadline = Instant::now() + CLOSE_WAIT;
        let mut n = lock(count);
        while *n > 0 && Instant::now() < deadline {
            n = cv
                .wait_timeout(n, POLL)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        if *n > 0 {
            tracing::warn!(
                "{} forwarded requests still running at close; their senders re-send them to the next owner",
                *n
            );
        }
    }
}

fn accept_loop(
    listener: UnixListener,
    nexus: Arc<Nexus>,
    stop: Arc<AtomicBool>,
    active: Arc<(Mutex<usize>, Condvar)>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        {
            let (count, cv) = &*active;
            let mut n = lock(count);
            while *n >= MAX_FORWARDED {
                n = cv.wait(n).unwrap_or_else(|p| p.into_inner());
            }
            *n += 1;
        }
        let nexus = nexus.clone();
        let done = active.clone();
        let spawned = std::thread::Builder::new()
            .name("kip-share-conn".into())
            .spawn(move || {
                serve_connection(stream, &nexus);
                let (count, cv) = &*done;
                *lock(count) -= 1;
                cv.notify_all();
            });
        if spawned.is_err() {
            let (count, cv) = &*active;
            *lock(count) -= 1;
            cv.notify_all();
        }
    }
}

/// Reads one request, runs it on a worker thread while watching for the sender to
/// hang up (which cancels the work), and writes the answer.
fn serve_connection(stream: UnixStream, nexus: &Arc<Nexus>) {
    let mut line = Vec::new();
    {
        let Ok(read_half) = stream.try_clone() else {
            return;
        };
        let mut reader = BufReader::new(read_half).take(MAX_REQUEST_BYTES);
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return, // a probe, or a sender that went away
            Ok(_) => {}
        }
    }
    let reply = match serde_json::from_slice::<Op>(line.trim_ascii_end()) {
        Err(e) => fail(KipError::syntax(format!("not a forwarded request: {e}"))),
        Ok(op) => {
            let interrupt = Interrupt::new();
            let deadline = match &op {
                Op::Kip {
                    timeout_ms: Some(ms),
                    ..
                } => Instant::now().checked_add(Duration::from_millis(*ms)),
                _ => None,
            };
            let budget = Budget {
                deadline,
                interrupt: Some(interrupt.clone()),
            };
            let (tx, rx) = std::sync::mpsc::channel();
            let worker_nexus = nexus.clone();
            let spawned = std::thread::Builder::new()
                .name("kip-share-work".into())
                .stack_size(kip_engine::WORKER_STACK_BYTES)
                .spawn(move || {
                    let _ = tx.send(run(&worker_nexus, &op, &budget));
                });
            match spawned {
                Err(e) => fail(KipError::internal(format!("cannot start the work: {e}"))),
                Ok(_) => loop {
                    match rx.recv_timeout(POLL) {
                        Ok(reply) => break reply,
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                            break fail(KipError::internal("the request failed inside the owner"))
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            if hung_up(&stream) {
                                interrupt.cancel();
                            }
                        }
                    }
                },
            }
        }
    };
    let Ok(mut text) = serde_json::to_vec(&reply) else {
        return;
    };
    text.push(b'\n');
    let mut stream = stream;
    let _ = stream.set_nonblocking(false);
    let _ = stream.write_all(&text);
}

/// True when the sender has closed its end (it sends nothing after its request).
fn hung_up(stream: &UnixStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let closed = matches!((&*stream).read(&mut byte), Ok(0));
    let _ = stream.set_nonblocking(false);
    closed
}
