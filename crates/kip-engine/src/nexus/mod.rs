//! The Cognitive Nexus: a storage [`Backend`] (opened by the composition root,
//! `kip-open`: a data directory, a PostgreSQL database, or memory), executing KIP
//! commands with one write transaction per KML statement (concurrent
//! statements are combined into one transaction by the write combiner here).
//!
//! [`Nexus`] itself holds execution: the constructors, the `execute*` family,
//! `execute_command`, `explain`, `load_capsule*` (`capsule.rs`), raw `read`/`write`
//! transactions and its configuration (`limits`/`set_limits`, `set_embedder`). Every
//! other concern is reached through a borrowed handle, one module each:
//!
//! - [`Nexus::admin`] -> [`Admin`] (`admin.rs`): the backend, checkpoints, the log,
//!   storage usage (`usage.rs`), the integrity check (`check.rs`), reindexing, the audit
//!   log, export and dumps.
//! - [`Nexus::memory`] -> [`MemoryTools`] (`memory.rs`): the Knowledge Graph Memory
//!   Server tools and their JSONL files.
//! - [`Nexus::brain`] -> [`Brain`] (`brain.rs`): the health report and the sleep cycle.
//! - [`Nexus::recall`] -> [`Recall`] (`recall.rs`): semantic recall's state, waiting
//!   for embeddings, re-embedding stale vectors.
//! - `Nexus::testing` -> `Testing` (`testing.rs`, feature `testing` only): test knobs.
//!
//! Kept in one file (about 750 lines): opening, the write combiner and command
//! execution share the `Nexus` fields and the combiner's queue, and the order of a
//! statement's steps (prepare, combine, commit, answer) is read top to bottom here.
//! `requests.rs` is the exactly-once request log a statement's transaction consults.

use crate::bootstrap::bootstrap;
mod admin;
mod brain;
mod capsule;
mod check;
mod memory;
mod recall;
mod requests;
pub(crate) mod scrub;
#[cfg(feature = "testing")]
mod testing;
mod usage;
pub use admin::Admin;
pub use brain::{Brain, SleepGuard};
pub use memory::MemoryTools;
pub use recall::Recall;
pub use requests::WINDOW as REQUEST_LOG_WINDOW;
#[cfg(feature = "testing")]
pub use testing::Testing;
pub use usage::UsageReport;

use crate::cancel::Interrupt;
use crate::envelope::{self, Access, ExecuteRequest, Outcome, Response};
use crate::kml::{delete, upsert};
use crate::kql::{self, QueryLimits};
pub use crate::store::backend::{Backend, LocalLog};
use crate::store::{GraphRead, GraphWrite};
use kip_lang::{Command, KipError};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// An open Cognitive Nexus. Its own methods execute KIP; administration, the memory
/// tools, the brain and semantic recall are reached through the handles it lends
/// ([`Nexus::admin`], [`Nexus::memory`], [`Nexus::brain`], [`Nexus::recall`]).
pub struct Nexus {
    store: Arc<dyn Backend>,
    limits: QueryLimits,
    combiner: Combiner,
    /// The embedder, its vectors and worker, when semantic recall is on.
    semantic: Option<Arc<crate::semantic::Semantic>>,
    /// Set by the first write through this handle (KML or a memory tool).
    wrote: std::sync::atomic::AtomicBool,
    /// Held while a sleep cycle runs: never two at once.
    sleeping: Mutex<()>,
    /// The log of the calls made through the interfaces.
    audit: Arc<crate::audit::Audit>,
    /// When the request log was last pruned.
    requests: requests::Pruner,
    /// The open KIP 2.0 KQL cursors (`v2/cursors.rs`).
    cursors: crate::v2::cursors::Cursors,
    /// The memory's snapshot-token key, once read (`v2/tokens.rs`).
    token_key: std::sync::OnceLock<Vec<u8>>,
}

impl Drop for Nexus {
    /// Stops the embedding worker (which holds the store) before the store closes.
    fn drop(&mut self) {
        if let Some(s) = &self.semantic {
            s.shutdown();
        }
        self.audit.shutdown();
    }
}

/// Write combining for KML statements: concurrent statements queue up; one caller at a
/// time (the leader) runs everything queued in one transaction and one log append.
/// If any statement of a batch fails, the batch is rolled back and its statements run
/// again one transaction each, so every statement stays atomic and the failing one
/// changes nothing. Statements see each other's effects in queue order, as if serial.
#[derive(Default)]
struct Combiner {
    state: Mutex<CombinerState>,
}

#[derive(Default)]
struct CombinerState {
    jobs: Vec<KmlJob>,
    leader: bool,
}

struct KmlJob {
    cmd: Command,
    /// The statement's request log key, when its request has an id.
    key: Option<String>,
    reply: std::sync::Arc<Reply>,
}

/// Where the write leader puts a queued statement's result (a one-shot slot: a channel
/// per statement allocated a 4 KiB block).
#[derive(Default)]
struct Reply {
    result: Mutex<Option<Result<Value, KipError>>>,
    ready: std::sync::Condvar,
}

impl Reply {
    fn send(&self, r: Result<Value, KipError>) {
        let mut slot = lock(&self.result);
        if slot.is_none() {
            *slot = Some(r);
        }
        self.ready.notify_one();
    }

    fn wait(&self) -> Result<Value, KipError> {
        let mut slot = lock(&self.result);
        loop {
            if let Some(r) = slot.take() {
                return r;
            }
            slot = self.ready.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for KmlJob {
    /// A job dropped unanswered (the leader panicked) still wakes its writer.
    fn drop(&mut self) {
        self.reply
            .send(Err(KipError::internal("the write leader stopped")));
    }
}

impl std::fmt::Debug for Nexus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nexus")
            .field("path", &self.store.path())
            .finish()
    }
}

/// The budget of one request: the interface that received it sets a deadline and keeps
/// the [`Interrupt`] to cancel it (on timeout, or when the client goes away).
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// When the request must end.
    pub deadline: Option<std::time::Instant>,
    /// Set to stop the request.
    pub interrupt: Option<Interrupt>,
    /// The whole length of the budget, when it is known (named in `KIP_4001` messages;
    /// without it the time left as the request starts is named).
    pub length: Option<std::time::Duration>,
}

impl Budget {
    /// A budget ending `timeout` from now, with a fresh interrupt flag.
    pub fn with_timeout(timeout: std::time::Duration) -> Budget {
        Budget {
            deadline: std::time::Instant::now().checked_add(timeout),
            interrupt: Some(Interrupt::new()),
            length: Some(timeout),
        }
    }
}

impl Nexus {
    /// A nexus over any storage [`Backend`] (the composition root, `kip-open`, opens
    /// one from a data directory, a database URL or memory): bootstraps it when it is
    /// new, in one transaction.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Result<Nexus, KipError> {
        Nexus::with_backend_booted(backend, &mut |w| bootstrap(w))
    }

    /// [`Nexus::with_backend`], bootstrapping an empty store with `boot` (e.g.
    /// [`crate::bootstrap::bootstrap_with`] and fewer capsules, for tests).
    pub fn with_backend_booted(
        backend: Arc<dyn Backend>,
        boot: &mut dyn FnMut(&mut dyn GraphWrite) -> Result<(), KipError>,
    ) -> Result<Nexus, KipError> {
        // Checked with a read first: a backend shared by many processes (PostgreSQL)
        // then opens without waiting for its writers' lock.
        if backend.read(crate::bootstrap::bootstrap_needed)? {
            backend.write(|w| boot(w), false)?;
        }
        let nexus = Nexus {
            audit: crate::audit::Audit::start(backend.clone()),
            store: backend,
            limits: QueryLimits::default(),
            combiner: Combiner::default(),
            semantic: None,
            wrote: Default::default(),
            sleeping: Mutex::new(()),
            requests: requests::Pruner::from_env(),
            cursors: Default::default(),
            token_key: Default::default(),
        };
        // A purge's audit scrub that a crash interrupted is finished before anything
        // else reads the log.
        nexus.finish_purge_scrub();
        Ok(nexus)
    }

    /// Storage administration: the backend, checkpoints, usage, the integrity check,
    /// reindexing, the audit log, exports (see [`Admin`]).
    pub fn admin(&self) -> Admin<'_> {
        Admin { nexus: self }
    }

    /// The Knowledge Graph Memory Server tools and their JSONL files (see
    /// [`MemoryTools`]).
    pub fn memory(&self) -> MemoryTools<'_> {
        MemoryTools { nexus: self }
    }

    /// The health report and the sleep cycle (see [`Brain`]).
    pub fn brain(&self) -> Brain<'_> {
        Brain { nexus: self }
    }

    /// Semantic recall: its state, waiting for embeddings, stale vectors (see
    /// [`Recall`]; turning it on is [`Nexus::set_embedder`]).
    pub fn recall(&self) -> Recall<'_> {
        Recall { nexus: self }
    }

    /// Test knobs (see [`Testing`]; feature `testing`).
    #[cfg(feature = "testing")]
    pub fn testing(&self) -> Testing<'_> {
        Testing { nexus: self }
    }

    /// Runs `f` in a write transaction: commits on `Ok` (unless `dry_run`), aborts on
    /// `Err`, so a failed statement leaves nothing behind. Durable on return.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut dyn GraphWrite) -> Result<T, KipError>,
        dry_run: bool,
    ) -> Result<T, KipError> {
        self.store.write(f, dry_run)
    }

    /// Runs `f` on a consistent read snapshot.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&dyn GraphRead) -> Result<T, KipError>,
    ) -> Result<T, KipError> {
        self.store.read(f)
    }

    /// After a committed write outside the 1.x statement path (the KIP 2.0 runtime):
    /// what a 1.x write does after it, once (the write flag, the embedding worker).
    pub(crate) fn after_write(&self) {
        self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(s) = &self.semantic {
            s.nudge();
        }
    }

    /// The query limits in force.
    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// The open KIP 2.0 KQL cursors of this memory.
    pub(crate) fn cursors(&self) -> &crate::v2::cursors::Cursors {
        &self.cursors
    }

    /// The request log's and history's upkeep inside a write transaction (when due).
    pub(crate) fn prune_logs(&self, w: &mut dyn GraphWrite) -> Result<(), KipError> {
        self.requests.maybe_prune(w)
    }

    /// Where the memory's snapshot-token key is kept once read (`v2/tokens.rs`).
    pub(crate) fn token_key(&self) -> &std::sync::OnceLock<Vec<u8>> {
        &self.token_key
    }

    /// Replaces the query limits.
    pub fn set_limits(&mut self, limits: QueryLimits) {
        self.limits = limits;
    }

    /// Turns semantic recall on with `embedder` (see [`crate::semantic`]): SEARCH gets
    /// `MODE "semantic"` and `"hybrid"` (the default mode from then on), and a worker
    /// thread embeds new and changed concepts in the background. Opening with another
    /// model than the stored vectors' drops them and embeds everything again. On `Nexus`,
    /// not on [`Recall`]: it replaces the embedder and its worker, so it needs
    /// `&mut self`, which a handle borrowed from a shared nexus cannot give.
    pub fn set_embedder(&mut self, embedder: Arc<dyn kip_embed::Embedder>) -> Result<(), KipError> {
        if let Some(old) = self.semantic.take() {
            old.shutdown();
        }
        self.semantic = Some(crate::semantic::Semantic::start(&self.store, embedder)?);
        Ok(())
    }

    /// Executes an `execute_kip` (or `execute_kip_readonly`) arguments object.
    pub fn execute_json(&self, args: &Value, access: Access) -> Response {
        self.execute_json_with(args, access, &Budget::default())
    }

    /// [`Nexus::execute_json`] within a request [`Budget`] (deadline, cancellation).
    /// A request with `"kip"` is KIP 2.0 and gets a 2.0 response envelope
    /// ([`crate::v2`], DECISIONS.md item 38).
    pub fn execute_json_with(&self, args: &Value, access: Access, budget: &Budget) -> Response {
        if crate::v2::is_kip2(args) {
            return Response::Kip2(crate::v2::execute(self, args, access, budget));
        }
        match ExecuteRequest::from_json(args) {
            Ok(req) => self.execute_with(&req, access, budget),
            Err(e) => envelope::envelope_failure(e),
        }
    }

    /// [`Nexus::execute_json_with`], recorded in the audit log as a call through
    /// `interface` (`method` is `execute_kip` or `execute_kip_readonly`).
    pub fn execute_audited(
        &self,
        args: &Value,
        access: Access,
        budget: &Budget,
        interface: &str,
    ) -> Value {
        let start = std::time::Instant::now();
        let response = self.execute_json_with(args, access, budget).to_json();
        let method = if access == Access::ReadOnly {
            "execute_kip_readonly"
        } else {
            "execute_kip"
        };
        self.audit.record(crate::audit::kip_entry(
            interface,
            method,
            args,
            &response,
            start.elapsed(),
        ));
        response
    }

    /// Executes a parsed request with the spec's batch semantics.
    pub fn execute(&self, req: &ExecuteRequest, access: Access) -> Response {
        self.execute_with(req, access, &Budget::default())
    }

    /// Executes a parsed request within `budget`: a cancelled or late request starts
    /// no further command (`KIP_4001`), a running query stops at its next check; a
    /// write that has started runs to its end and is reported as it ended (committed or
    /// not), never the other way round. Batch size and response size are bounded by
    /// [`QueryLimits::max_batch`] and [`QueryLimits::max_response_bytes`].
    pub fn execute_with(&self, req: &ExecuteRequest, access: Access, budget: &Budget) -> Response {
        let mut limits = self.limits.clone();
        limits.deadline = budget.deadline;
        // The budget's length, for messages (what is left of it as the request starts
        // when the interface did not say).
        limits.request_budget = budget.deadline.map(|d| {
            budget
                .length
                .unwrap_or_else(|| d.saturating_duration_since(std::time::Instant::now()))
        });
        limits.interrupt = budget.interrupt.clone();
        let batch = envelope::BatchLimits {
            max_commands: limits.max_batch,
            max_response_bytes: limits.max_response_bytes,
            deadline: budget.deadline,
            interrupt: budget.interrupt.clone(),
        };
        if req.dry_run && req.batch {
            return self.validate_batch(req, access, &batch, &limits);
        }
        let id = req.request_id.as_deref();
        envelope::run_with(req, access, &batch, |index, cmd, dry_run| {
            let key = id.map(|id| requests::key(id, index));
            self.execute_command_within(cmd, dry_run, &limits.for_command(), key)
        })
    }

    /// Executes one bound command. KML runs in one write transaction, committed only on
    /// success and never under `dry_run`; reads run on a consistent snapshot.
    pub fn execute_command(&self, cmd: &Command, dry_run: bool) -> Outcome {
        self.execute_command_within(cmd, dry_run, &self.limits.for_command(), None)
    }

    /// One command; `key` is its request log key (a write is applied once per key).
    fn execute_command_within(
        &self,
        cmd: &Command,
        dry_run: bool,
        limits: &QueryLimits,
        key: Option<String>,
    ) -> Outcome {
        if dry_run {
            return match self.validate(cmd, limits) {
                Ok(v) => Outcome::ok(v),
                Err(e) => Outcome::Err(e),
            };
        }
        let r = match cmd {
            Command::Upsert(_) | Command::Delete(_) | Command::Update(_) | Command::Merge(_) => {
                let r = self.write_kml(cmd, key).map(Outcome::ok);
                self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
                if let Some(s) = &self.semantic {
                    s.nudge();
                }
                r
            }
            Command::Export(e) => self.read(|r| crate::meta::export::export_command(r, e, limits)),
            Command::Find(q) => self.read(|r| kql::find(r, q, limits)),
            Command::Describe(d) => self
                .read(|r| crate::meta::describe::describe(r, d, limits))
                .map(|o| self.advertise_search_modes(d, o)),
            Command::Search(s) => self.search(s, limits),
        };
        match r {
            Ok(o) => o,
            Err(e) => Outcome::Err(e),
        }
    }

    /// `dry_run`: full validation, nothing written. KML runs in a transaction that is
    /// then aborted, so schema, reference and protection errors surface exactly as they
    /// would, and `effect` shows the result the command would have had. KQL is compiled
    /// (schema and id checks) without being run.
    fn validate(&self, cmd: &Command, limits: &QueryLimits) -> Result<Value, KipError> {
        match cmd {
            Command::Upsert(_) | Command::Delete(_) | Command::Update(_) | Command::Merge(_) => {
                self.write(|w| validate_in(w, cmd, limits), true)
            }
            Command::Find(_) | Command::Export(_) | Command::Describe(_) | Command::Search(_) => {
                self.read(|r| validate_in_read(r, cmd, limits))
            }
        }
    }

    /// A `dry_run` batch holding writes is validated cumulatively: every command runs in
    /// one write transaction that is aborted at the end, so a command sees the effects
    /// of the earlier ones (a concept created by command 1 can be linked by command 2)
    /// exactly as when the batch runs for real; nothing is written.
    fn validate_batch(
        &self,
        req: &ExecuteRequest,
        access: Access,
        batch: &envelope::BatchLimits,
        limits: &QueryLimits,
    ) -> Response {
        let out = self.write(
            |w| {
                Ok(envelope::run_with(
                    req,
                    access,
                    batch,
                    |_, cmd, _| match validate_in(w, cmd, &limits.for_command()) {
                        Ok(v) => Outcome::ok(v),
                        Err(e) => Outcome::Err(e),
                    },
                ))
            },
            true,
        );
        out.unwrap_or_else(envelope::envelope_failure)
    }

    /// Runs one KML statement through the write combiner (durable on return). A caller
    /// that finds no leader becomes it and runs its own statement (first, by reference)
    /// with whatever is queued; the others queue a copy and wait for their result.
    fn write_kml(&self, cmd: &Command, key: Option<String>) -> Result<Value, KipError> {
        {
            let mut st = self.lock_combiner();
            if st.leader {
                let reply = std::sync::Arc::new(Reply::default());
                st.jobs.push(KmlJob {
                    cmd: cmd.clone(),
                    key,
                    reply: reply.clone(),
                });
                drop(st);
                return reply.wait();
            }
            st.leader = true;
        }
        // Hands leadership back even if a batch panics, so later writers never wait on
        // a leader that is gone.
        struct Resign<'a>(&'a Nexus);
        impl Drop for Resign<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.lock_combiner().leader = false;
                }
            }
        }
        let _resign = Resign(self);
        let queued = std::mem::take(&mut self.lock_combiner().jobs);
        let own = self.run_batch(Some((cmd, key.as_deref())), queued);
        loop {
            let batch = {
                let mut st = self.lock_combiner();
                if st.jobs.is_empty() {
                    st.leader = false;
                    break;
                }
                std::mem::take(&mut st.jobs)
            };
            self.run_batch(None, batch);
        }
        own.unwrap_or_else(|| Err(KipError::internal("the write leader lost its statement")))
    }

    fn lock_combiner(&self) -> MutexGuard<'_, CombinerState> {
        lock(&self.combiner.state)
    }

    fn run_kml(&self, w: &mut dyn GraphWrite, cmd: &Command) -> Result<Value, KipError> {
        match cmd {
            Command::Upsert(u) => upsert::upsert(w, u, upsert::Privilege::Agent),
            Command::Delete(d) => delete::delete(w, d, &self.limits),
            Command::Update(u) => crate::kml::update::update(w, u, &self.limits),
            Command::Merge(m) => crate::kml::merge::merge(w, m, &self.limits),
            Command::Find(_) | Command::Export(_) | Command::Describe(_) | Command::Search(_) => {
                Err(KipError::internal("not a KML statement"))
            }
        }
    }

    /// [`Nexus::run_kml`] once per request log key (see `requests.rs`).
    fn run_kml_once(
        &self,
        w: &mut dyn GraphWrite,
        cmd: &Command,
        key: Option<&str>,
    ) -> Result<Value, KipError> {
        requests::once(w, key, |w| self.run_kml(w, cmd))
    }

    /// One statement, one durable transaction.
    fn run_single(&self, cmd: &Command, key: Option<&str>) -> Result<Value, KipError> {
        self.write(
            |w| {
                let v = self.run_kml_once(w, cmd, key)?;
                self.requests.maybe_prune(w)?;
                Ok(v)
            },
            false,
        )
    }

    /// Runs `own` (the leader's statement, if any) and the queued jobs: all in one
    /// transaction when there are several, else (or when one of them fails) each in its
    /// own. Replies to the jobs; returns the result of `own`.
    fn run_batch(
        &self,
        own: Option<(&Command, Option<&str>)>,
        jobs: Vec<KmlJob>,
    ) -> Option<Result<Value, KipError>> {
        let results: Vec<Result<Value, KipError>> = {
            let cmds: Vec<(&Command, Option<&str>)> = own
                .into_iter()
                .chain(jobs.iter().map(|j| (&j.cmd, j.key.as_deref())))
                .collect();
            let combined = if cmds.len() > 1 {
                self.run_combined(&cmds).ok().flatten()
            } else {
                None
            };
            match combined {
                Some(values) => values.into_iter().map(Ok).collect(),
                // One statement, or a batch with a failure: each on its own.
                None => cmds.iter().map(|(c, k)| self.run_single(c, *k)).collect(),
            }
        };
        let mut results = results.into_iter();
        let own_result = if own.is_some() { results.next() } else { None };
        for (job, r) in jobs.into_iter().zip(results) {
            job.reply.send(r);
        }
        own_result
    }

    /// Runs statements in one transaction; `None` (rolled back) if any of them fails.
    fn run_combined(
        &self,
        cmds: &[(&Command, Option<&str>)],
    ) -> Result<Option<Vec<Value>>, KipError> {
        self.store.write_keep(|w| {
            let mut out = Vec::with_capacity(cmds.len());
            for (cmd, key) in cmds {
                if self
                    .run_kml_once(w, cmd, *key)
                    .map(|v| out.push(v))
                    .is_err()
                {
                    return Ok((None, false));
                }
            }
            self.requests.maybe_prune(w)?;
            Ok((Some(out), true))
        })
    }

    /// The plan chosen for a FIND query, one line per step.
    pub fn explain(&self, query: &str) -> Result<Vec<String>, KipError> {
        let cmd = kip_lang::parse_command(query)?;
        let Command::Find(q) = kip_lang::bind(&cmd, &serde_json::Map::new())? else {
            return Err(KipError::syntax("explain takes a FIND query")
                .with_hint("write FIND(...) WHERE { ... }"));
        };
        self.read(|r| kql::explain(r, &q, &self.limits))
    }

    /// DESCRIBE PRIMER with an embedder: `search_modes` lists all three modes and
    /// `embedding_model` names the model (DECISIONS.md item 32).
    fn advertise_search_modes(&self, d: &kip_lang::ast::Describe, o: Outcome) -> Outcome {
        fn patch(v: &mut Value, model: &str, depth: u8) -> bool {
            let Value::Object(m) = v else { return false };
            if m.contains_key("search_modes") {
                m.insert(
                    "search_modes".into(),
                    serde_json::json!(["keyword", "semantic", "hybrid"]),
                );
                m.insert("embedding_model".into(), Value::String(model.to_string()));
                return true;
            }
            depth > 0 && m.values_mut().any(|x| patch(x, model, depth - 1))
        }
        let (Some(sem), kip_lang::ast::DescribeTarget::Primer) = (&self.semantic, &d.target) else {
            return o;
        };
        match o {
            Outcome::Ok {
                mut result,
                next_cursor,
            } => {
                patch(&mut result, sem.model_id(), 3);
                Outcome::Ok {
                    result,
                    next_cursor,
                }
            }
            other => other,
        }
    }

    /// SEARCH: when the mode asks for vectors and an embedder is set, the query text is
    /// embedded (outside any transaction) on a thread of its own while the keyword side
    /// reads its postings; the search waits for it only where it needs the vector. A
    /// text embedded recently comes from the query cache.
    fn search(&self, s: &kip_lang::ast::Search, limits: &QueryLimits) -> Result<Outcome, KipError> {
        use crate::meta::search::{effective_mode, search_pending, Semantic as Sem};
        use kip_lang::ast::SearchMode;
        let mode = effective_mode(s, self.semantic.is_some())?;
        let sem = match (&self.semantic, mode) {
            (Some(sem), SearchMode::Semantic | SearchMode::Hybrid) => sem,
            _ => return self.read(|r| search_pending(r, s, limits, mode, &|| None)),
        };
        let term = crate::kml::text(&s.term)?;
        // Degraded recall, never an error (as without a model): keyword.
        let ready = |v: Result<Vec<f32>, KipError>| match v {
            Ok(query) => Some(Sem {
                vectors: sem.as_ref(),
                query,
            }),
            Err(e) => {
                tracing::warn!("SEARCH runs as keyword search: {}", e.message);
                None
            }
        };
        if let Some(query) = sem.cached_query(term) {
            let q = ready(Ok(query));
            return self.read(|r| search_pending(r, s, limits, mode, &|| q.as_ref()));
        }
        std::thread::scope(|scope| {
            let pending = std::thread::Builder::new()
                .name("kip-query-embed".into())
                .spawn_scoped(scope, || sem.embed_query(term));
            let (handle, now) = match pending {
                Ok(h) => (Some(h), None),
                // No thread to be had: embed here, before reading.
                Err(_) => (None, Some(ready(sem.embed_query(term)))),
            };
            let handle = Mutex::new(handle);
            let done: std::sync::OnceLock<Option<Sem<'_>>> = std::sync::OnceLock::new();
            if let Some(q) = now {
                let _ = done.set(q);
            }
            let resolve = || {
                done.get_or_init(|| {
                    let h = lock(&handle).take();
                    match h.map(|h| h.join()) {
                        Some(Ok(v)) => ready(v),
                        Some(Err(_)) => ready(Err(KipError::internal(
                            "the query embedding thread panicked",
                        ))),
                        None => None,
                    }
                })
                .as_ref()
            };
            self.read(|r| search_pending(r, s, limits, mode, &resolve))
        })
    }
}

/// Locks a mutex, also after a panic in another holder (the guarded state stays valid:
/// the log is cut back on every failed append).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn validation_shape(cmd: &Command) -> Value {
    let kind = match cmd.kind() {
        kip_lang::CommandKind::Kql => "KQL",
        kip_lang::CommandKind::Kml => "KML",
        kip_lang::CommandKind::Meta => "META",
    };
    serde_json::json!({"dry_run": true, "valid": true, "kind": kind})
}

/// `dry_run` of one command inside a write transaction (aborted by the caller): KML
/// runs for real there, so schema, reference and protection errors surface exactly as
/// they would, and `effect` shows the result; KQL is compiled against the
/// transaction's view.
fn validate_in(
    w: &mut dyn GraphWrite,
    cmd: &Command,
    limits: &QueryLimits,
) -> Result<Value, KipError> {
    let mut out = validation_shape(cmd);
    match cmd {
        Command::Upsert(u) => {
            let mut effect = upsert::upsert(w, u, upsert::Privilege::Agent)?;
            // RC11 §6.2.2: under dry_run the ID arrays are empty (the ids of an aborted
            // transaction are handed out again by the next real write).
            for key in ["upsert_concept_nodes", "upsert_proposition_links"] {
                effect[key] = Value::Array(Vec::new());
            }
            out["effect"] = effect;
        }
        Command::Delete(d) => out["effect"] = delete::delete(w, d, limits)?,
        Command::Update(u) => out["effect"] = crate::kml::update::update(w, u, limits)?,
        Command::Merge(m) => out["effect"] = crate::kml::merge::merge(w, m, limits)?,
        Command::Find(_) | Command::Export(_) | Command::Describe(_) | Command::Search(_) => {
            return validate_in_read(&*w, cmd, limits)
        }
    }
    Ok(out)
}

/// `dry_run` of a read: FIND is compiled (schema and id checks) without being run.
fn validate_in_read(
    r: &dyn crate::store::GraphRead,
    cmd: &Command,
    limits: &QueryLimits,
) -> Result<Value, KipError> {
    if let Command::Find(q) = cmd {
        kql::validate(r, q, limits)?;
    }
    Ok(validation_shape(cmd))
}
