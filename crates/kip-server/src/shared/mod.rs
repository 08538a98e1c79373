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
//! may be one the old owner committed (in part) just before it died: every forwarded
//! `execute_kip` call carries a `request_id`, under which the owner records each write
//! statement's outcome in that statement's transaction, so the next owner answers what
//! was applied from the record (exactly once; the engine's request log); the memory
//! tools are idempotent by themselves (existing entities, relations and observations
//! are skipped).
//! A request whose owner died is acknowledged only once it has run on the new owner;
//! an acknowledged write is durable (it was synced to the log before the answer).
//!
//! Only the user who owns the directory stands at either end of the socket: a process
//! refuses to serve or forward through a directory (or a `kip.sock`) that another user
//! owns or can write, and both ends check the other's uid on every connection before
//! anything is sent (see `trust.rs`).
//!
//! The wire format is one JSON object per line each way, one request per connection:
//! the request is an [`Op`], the answer a [`Reply`]. A forwarding process that stops
//! waiting (cancelled, past its deadline) closes the connection, and the owner stops
//! the work as if its own client had gone away.

use kip_engine::{Budget, Interrupt, Nexus};
use kip_lang::{ErrorCode, KipError};
use kip_open::Open;
use kip_open::{OpenError, OpenMode};
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

mod backend;
mod protocol;
mod trust;

pub use backend::Backend;
use protocol::{cancelled, fail, run};
pub use protocol::{Op, Reply, WireError};

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

/// `op` with a `request_id` in its `execute_kip` arguments when it writes and has none
/// (the id names the request in the owner's request log; see docs/sharing.md).
fn with_request_id(op: &Op) -> Op {
    let mut op = op.clone();
    if let Op::Kip {
        args: serde_json::Value::Object(args),
        read_only: false,
        ..
    } = &mut op
    {
        if !args.contains_key("request_id") {
            args.insert(
                "request_id".into(),
                serde_json::Value::String(new_request_id()),
            );
        }
    }
    op
}

/// An id no other request of any process gets: this process's id, the time and a
/// counter.
fn new_request_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("fwd-{:x}-{nanos:x}-{n:x}", std::process::id())
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

    /// Runs `op` here (owner) or at the owner, re-routing when the owner goes away. A
    /// forwarded `execute_kip` call gets a `request_id` (unless its client sent one),
    /// kept through every re-send and a takeover: the owner that applied a statement
    /// recorded its outcome under that id in the same transaction, so the next owner
    /// answers it from the record instead of applying it again (exactly once).
    pub fn call(&self, op: &Op, budget: &Budget) -> Reply {
        let mut resends = 0;
        let mut stamped: Option<Op> = None;
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
                return run(&nexus, stamped.as_ref().unwrap_or(op), budget);
            }
            let sent = stamped.get_or_insert_with(|| with_request_id(op));
            match self.forward(sent, budget) {
                Sent::Answer(reply) => return reply,
                Sent::Lost => {
                    resends += 1;
                    if resends > MAX_RESENDS {
                        return fail(KipError::internal(format!(
                            "the process that owns {} stopped answering; the request was not acknowledged",
                            kip_open::shown_location(&self.dir)
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
        let mut stream = match self.connect_owner() {
            Ok(Some(s)) => s,
            Ok(None) => return Sent::Lost,
            Err(e) => return Sent::Answer(fail(e)),
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
                            kip_open::shown_location(&self.dir)
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

    /// Connects to the directory's owner: `None` when nobody answers on the socket; an
    /// error, before anything is sent, when the directory or the socket could be
    /// another user's, or the process answering runs as another user.
    fn connect_owner(&self) -> Result<Option<UnixStream>, KipError> {
        trust::check_dir(&self.dir)?;
        trust::check_socket(&self.socket)?;
        let Ok(stream) = UnixStream::connect(&self.socket) else {
            return Ok(None);
        };
        trust::check_peer(
            &stream,
            &format!("the process answering on {}", self.socket.display()),
        )?;
        Ok(Some(stream))
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
        let is_directory = !self.dir.to_str().is_some_and(kip_open::is_database_url);
        loop {
            if is_directory {
                trust::check_dir(&self.dir)?;
            }
            match Nexus::try_open(&self.dir, OpenMode::Normal) {
                Ok(mut nexus) => {
                    if let Some(e) = &self.embedder {
                        nexus.set_embedder(e.clone())?;
                    }
                    let nexus = Arc::new(nexus);
                    if let Err(e) = nexus.admin().start_idle_checkpoints() {
                        tracing::warn!("cannot start the idle checkpoint thread: {e}; the log is checkpointed at writes only");
                    }
                    if let Some(hook) = &self.hook {
                        if let Err(e) = hook(&nexus) {
                            if starting {
                                return Err(e);
                            }
                            tracing::error!(
                                "after taking over {}: {}",
                                kip_open::shown_location(&self.dir),
                                e.message
                            );
                        }
                    }
                    // A nexus in a database is opened by every process itself: no
                    // socket to forward through.
                    let listener = match nexus
                        .admin()
                        .path()
                        .map(|_| Listener::start(nexus.clone(), &self.dir, &self.socket))
                    {
                        None => None,
                        Some(Ok(l)) => Some(l),
                        Some(Err(e)) => {
                            tracing::warn!(
                                socket = %self.socket.display(),
                                "cannot answer other kip processes on this directory: {e}; they will fail to open it while this one runs"
                            );
                            None
                        }
                    };
                    if !starting {
                        tracing::info!(dir = %kip_open::shown_location(&self.dir), "the previous owner of the data directory exited: this process owns it now");
                    }
                    role.owner = Some(Owner { nexus, listener });
                    role.generation += 1;
                    return Ok(());
                }
                Err(OpenError::Failed(e)) => return Err(e),
                Err(OpenError::InUse(e)) => {
                    if self.connect_owner()?.is_some() {
                        if starting {
                            tracing::info!(dir = %kip_open::shown_location(&self.dir), "another kip process owns the data directory: forwarding requests to it");
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
        owner.nexus.admin().checkpoint()
    }
}

/// The owner's side: a thread accepting connections on the socket, one thread per
/// connection (at most [`MAX_FORWARDED`] at once).
///
/// Stopping does not go through the socket's path (which another process may have
/// replaced): the accept loop waits on the listener and on one end of a socket pair
/// together, and `stop` wakes it by closing the other end.
struct Listener {
    stop: Arc<AtomicBool>,
    /// Closing it wakes the accept loop.
    wake: Option<UnixStream>,
    active: Arc<(Mutex<usize>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The socket file this listener bound (device, inode): removed at stop only when
    /// the path still leads to it.
    bound: Option<(u64, u64)>,
}

impl Listener {
    fn start(nexus: Arc<Nexus>, dir: &Path, socket: &Path) -> std::io::Result<Listener> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let refused =
            |e: KipError| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.message);
        trust::check_dir(dir).map_err(refused)?;
        // Only the process holding the database lock gets here, so a socket file left
        // behind is a dead owner's.
        match std::fs::remove_file(socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(socket)?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
        let bound = std::fs::symlink_metadata(socket)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        // Non-blocking, so that a connection that goes away between the wake-up and the
        // accept cannot block the loop.
        listener.set_nonblocking(true)?;
        let (wake, woken) = UnixStream::pair()?;
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new((Mutex::new(0usize), Condvar::new()));
        let thread = {
            let stop = stop.clone();
            let active = active.clone();
            std::thread::Builder::new()
                .name("kip-share".into())
                .spawn(move || accept_loop(listener, woken, nexus, stop, active))?
        };
        Ok(Listener {
            stop,
            wake: Some(wake),
            active,
            thread: Some(thread),
            bound,
        })
    }

    fn stop(mut self, socket: &Path) {
        use std::os::unix::fs::MetadataExt;
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop through its own descriptors; then nobody new gets in.
        drop(self.wake.take());
        self.active.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let still_ours = std::fs::symlink_metadata(socket)
            .ok()
            .map(|m| (m.dev(), m.ino()))
            .is_some_and(|f| Some(f) == self.bound);
        if still_ours {
            let _ = std::fs::remove_file(socket);
        } else {
            tracing::warn!(
                socket = %socket.display(),
                "the socket of this data directory was replaced by another process's; it is left in place"
            );
        }
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

/// Waits until the listener has a connection to accept (true) or the loop is to stop
/// (false: `woken` was closed or written to, or polling failed).
fn wait_for_connection(listener: &UnixListener, woken: &UnixStream) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(woken.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {
                let woke = fds[1].revents().is_none_or(|r| !r.is_empty());
                if woke {
                    return false;
                }
                if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                    return true;
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                tracing::error!("cannot wait for connections on the data directory's socket: {e}; other kip processes will take the directory over");
                return false;
            }
        }
    }
}

fn accept_loop(
    listener: UnixListener,
    woken: UnixStream,
    nexus: Arc<Nexus>,
    stop: Arc<AtomicBool>,
    active: Arc<(Mutex<usize>, Condvar)>,
) {
    let peer_role = "a process connecting to this data directory's socket";
    while !stop.load(Ordering::SeqCst) && wait_for_connection(&listener, &woken) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                // Out of descriptors, say: wait a little instead of spinning.
                tracing::warn!("cannot accept a connection on the data directory's socket: {e}");
                std::thread::sleep(POLL);
                continue;
            }
        };
        if let Err(e) = trust::check_peer(&stream, peer_role) {
            tracing::warn!("{}", e.message);
            continue; // dropped unread and unanswered
        }
        // Accepted sockets inherit the listener's non-blocking mode on some systems.
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        {
            let (count, cv) = &*active;
            let mut n = lock(count);
            while *n >= MAX_FORWARDED {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                n = cv
                    .wait_timeout(n, POLL)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
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
            let length = match &op {
                Op::Kip {
                    timeout_ms: Some(ms),
                    ..
                } => Some(Duration::from_millis(*ms)),
                _ => None,
            };
            let budget = Budget {
                deadline: length.and_then(|l| Instant::now().checked_add(l)),
                interrupt: Some(interrupt.clone()),
                length,
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
