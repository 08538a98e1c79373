//! Running a KIP 2.0 request (Specification §72-83): the operations in their execution
//! mode, each parsed, classified and checked before it runs, and the response
//! envelope with per-operation and top-level status.
//!
//! Kept in one file (about 840 lines) and two long functions, knowingly: `run` decides
//! the request's transactions (atomic write, shared read-only snapshot, one per
//! operation) and `run_op` routes each statement kind; both share the private
//! context keys that carry receipts out of an operation, and splitting them would pass
//! the same half-dozen borrowed values through every piece. The executors live
//! elsewhere (`chronology.rs` for the history META statements, `query.rs`,
//! `mutate.rs`, ...); what stays here is the routing.

use super::cursors;
use super::describe;
use super::error::{Code, V2Error};
use super::eval::Ctx;
use super::request::{self, Operation, Request, DEFAULT_SPACE};
use super::tokens;
use super::{
    capsule, chronology, history, idempotency, mutate, packages, preview, schema_meta, search,
};
use crate::envelope::Access;
use crate::nexus::{Budget, Nexus};
use crate::store::{GraphRead, GraphWrite};
use kip_lang::v2::ast::{Describe, Meta, Scalar, Statement, StatementKind};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// Answers a KIP 2.0 request (a JSON object with `"kip"`): always a response envelope
/// (`kip-response.schema.json`), whatever is wrong with the request.
pub fn execute(nexus: &Nexus, raw: &Value, access: Access, budget: &Budget) -> Value {
    let request_id = raw
        .get("request_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .map(str::to_string);
    match request::read(raw) {
        Ok(req) => run(nexus, &req, access, budget),
        Err(e) => failed_request(request_id, &e),
    }
}

/// A request refused before any operation ran.
fn failed_request(request_id: Option<String>, e: &V2Error) -> Value {
    let mut out = Map::new();
    out.insert("kip".into(), json!("2.0"));
    if let Some(id) = request_id {
        out.insert("request_id".into(), json!(id));
    }
    out.insert("status".into(), json!("failed"));
    out.insert("results".into(), json!([]));
    out.insert("error".into(), e.to_json());
    Value::Object(out)
}

/// What became of one operation.
enum Done {
    /// The result, and what the operation adds to its `context` (a SEARCH's `search`).
    Succeeded(Value, Map<String, Value>),
    Failed(V2Error),
    Skipped,
    RolledBack,
}

fn run(nexus: &Nexus, req: &Request, access: Access, budget: &Budget) -> Value {
    // The bounds a 1.x batch has (QueryLimits): operations per request, response size.
    let limits = nexus.limits();
    if req.operations.len() > limits.max_batch {
        return failed_request(
            req.request_id.clone(),
            &V2Error::new(
                Code::ResourceExhausted,
                format!(
                    "a request may hold at most {} operations; this one holds {}",
                    limits.max_batch,
                    req.operations.len()
                ),
            )
            .with_hint("send the operations in several requests"),
        );
    }
    let mut left = limits.max_response_bytes;
    let mode = req.mode();
    let keep_going = req.execution.as_ref().and_then(|e| e.on_error.as_deref()) == Some("continue");
    let deadline = match (budget.deadline, req.options.deadline_ms) {
        (d, Some(ms)) => {
            let mine = Instant::now().checked_add(Duration::from_millis(ms));
            match (d, mine) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        (d, None) => d,
    };
    let mut done: Vec<Done> = Vec::with_capacity(req.operations.len());
    let mut failed = false;
    let mut each = |tx: Option<&mut dyn GraphWrite>,
                    snap: Option<&dyn GraphRead>,
                    minted: &Map<String, Value>,
                    done: &mut Vec<Done>,
                    failed: &mut bool| {
        let mut tx = tx;
        for (index, op) in req.operations.iter().enumerate() {
            let stop = *failed && (mode == "atomic" || (mode == "sequence" && !keep_going));
            if stop {
                done.push(Done::Skipped);
                continue;
            }
            let late = deadline.is_some_and(|d| Instant::now() >= d)
                || budget.interrupt.as_ref().is_some_and(|i| i.is_set());
            let mut extra = Map::new();
            let outcome = if late {
                Err(V2Error::new(
                    Code::ExecutionTimeout,
                    "the request's deadline passed before this operation started; it did not run",
                )
                .with_hint("send it again with a longer options.deadline_ms"))
            } else {
                let at = (index, op);
                let on = (req, minted);
                match &mut tx {
                    Some(w) => run_op(nexus, on, at, access, Some(&mut **w), None, &mut extra),
                    None => run_op(nexus, on, at, access, None, snap, &mut extra),
                }
            };
            let outcome = outcome.and_then(|v| {
                let size = crate::outcome::json_size(&v);
                match left.checked_sub(size) {
                    Some(l) => {
                        left = l;
                        Ok(v)
                    }
                    None => {
                        let e = V2Error::new(
                            Code::ResultLimitExceeded,
                            format!(
                                "the response would pass {} bytes with this operation's result",
                                limits.max_response_bytes
                            ),
                        )
                        .with_hint("send fewer operations per request, or narrow this one");
                        // A write that committed in its own transaction stays committed:
                        // say so, with its receipt, so nobody sends it again.
                        Err(match extra.get(OP_RECEIPT) {
                            Some(r) if r["status"] == "committed" => {
                                let mut e = e.with_detail("receipt", r.clone());
                                e.message.push_str(
                                    "; its write committed all the same (details.receipt): do not send it again",
                                );
                                e
                            }
                            _ => e,
                        })
                    }
                }
            });
            match outcome {
                Ok(v) => done.push(Done::Succeeded(v, extra)),
                Err(e) => {
                    *failed = true;
                    done.push(Done::Failed(e));
                }
            }
        }
    };
    let dry_run = req.options.dry_run;
    // The request's transaction, when it is one: (its snapshot, its seq and time).
    let mut one_tx: Option<(u64, Option<(u64, u64)>)> = None;
    // The snapshot an atomic read-only batch shared.
    let mut shared: Option<u64> = None;
    if req.ingest.is_some() && access == Access::ReadOnly {
        // Minting Evidence is a write.
        let e = V2Error::new(
            Code::ReadonlyViolation,
            "execute_kip_readonly does not mint Evidence: the ingestion context is a write",
        )
        .with_hint("send the request through execute_kip");
        refuse_all(&mut done, &mut failed, (e, req.operations.len()));
    } else if mode == "atomic" && access == Access::ReadOnly {
        // KIP2-RT-013: an atomic read-only batch reads one shared snapshot and commits
        // nothing (no receipt).
        let r = nexus.read(|g| {
            let snapshot =
                history::snapshot_seq(g).map_err(|e| kip_lang::KipError::internal(e.message))?;
            shared = Some(snapshot);
            match history::check_preconditions(g, req.preconditions.as_ref()) {
                Ok(()) => each(None, Some(g), &Map::new(), &mut done, &mut failed),
                Err(e) => refuse_all(&mut done, &mut failed, (e, req.operations.len())),
            }
            Ok(())
        });
        if let Err(e) = r {
            let e = V2Error::from_kip(&e);
            done = req
                .operations
                .iter()
                .map(|_| Done::Failed(e.clone()))
                .collect();
            failed = true;
        }
    } else if (mode == "atomic" || dry_run || req.ingest.is_some()) && access != Access::ReadOnly {
        // All or none (§76): every operation in one write transaction, aborted when
        // one fails. A dry run runs the same way and is always aborted.
        let committed = nexus.write(
            |w| {
                let snapshot = history::snapshot_seq(w)
                    .map_err(|e| kip_lang::KipError::internal(e.message))?;
                // §35.4: checked in the transaction they bind, before anything runs
                // (a retry of a request that committed is answered from its records).
                // §71.1: ingested Evidence is minted first, in the same transaction.
                let pre = match idempotency::replays(w, req, access) {
                    Ok(true) => None,
                    Ok(false) => req.preconditions.as_ref(),
                    Err(e) => return Err(kip_lang::KipError::internal(e.message)),
                };
                match history::check_preconditions(w, pre)
                    .and_then(|()| super::ingest::mint(w, req))
                {
                    Ok(minted) => each(Some(w), None, &minted, &mut done, &mut failed),
                    Err(e) => refuse_all(&mut done, &mut failed, (e, req.operations.len())),
                }
                let h = w.txn_history();
                one_tx = Some((snapshot, h.seq().zip(h.at_ms())));
                if !failed && !dry_run {
                    nexus.prune_logs(w)?;
                }
                if failed {
                    Err(kip_lang::KipError::internal(
                        "an operation failed: the request is rolled back",
                    ))
                } else {
                    Ok(())
                }
            },
            dry_run,
        );
        match committed {
            Ok(()) if !dry_run => {
                nexus.after_write();
                nexus.finish_purge_scrub();
            }
            Ok(()) => {}
            Err(e) if !failed => {
                // The commit itself failed: nothing of the request is applied.
                let e = V2Error::from_kip(&e);
                for d in &mut done {
                    *d = Done::Failed(e.clone());
                }
                failed = true;
            }
            Err(_) => {}
        }
    } else {
        each(None, None, &Map::new(), &mut done, &mut failed);
    }
    let (snapshot, receipt) = receipt_and_snapshot(
        nexus,
        &mut done,
        Transaction {
            one_tx,
            shared,
            aborted: dry_run || failed,
        },
    );
    if mode == "atomic" && failed {
        for d in &mut done {
            if matches!(d, Done::Succeeded(..)) {
                *d = Done::RolledBack;
            }
        }
    }
    let succeeded = done
        .iter()
        .filter(|d| matches!(d, Done::Succeeded(..)))
        .count();
    let status = if succeeded == done.len() {
        "succeeded"
    } else if succeeded == 0 {
        "failed"
    } else {
        "partial"
    };
    let mut results = Vec::with_capacity(done.len());
    for (op, d) in req.operations.iter().zip(done) {
        let mut r = Map::new();
        if let Some(id) = &op.op_id {
            r.insert("op_id".into(), json!(id));
        }
        match d {
            Done::Succeeded(v, mut context) => {
                r.insert("status".into(), json!("succeeded"));
                r.insert("result".into(), v);
                if let Some(receipt) = context.remove(OP_RECEIPT) {
                    r.insert("extensions".into(), json!({ "kip-nexus/receipt": receipt }));
                }
                // A FIND's continuation is the operation's, not its context's (§50).
                if let Some(c) = context.remove("next_cursor") {
                    r.insert("next_cursor".into(), c);
                }
                context.insert("space_id".into(), json!(DEFAULT_SPACE));
                r.insert("context".into(), Value::Object(context));
            }
            Done::Failed(e) => {
                r.insert("status".into(), json!("failed"));
                r.insert("error".into(), e.to_json());
            }
            Done::Skipped => {
                r.insert("status".into(), json!("skipped"));
            }
            Done::RolledBack => {
                r.insert("status".into(), json!("rolled_back"));
            }
        }
        results.push(Value::Object(r));
    }
    let mut out = Map::new();
    out.insert("kip".into(), json!("2.0"));
    if let Some(id) = &req.request_id {
        out.insert("request_id".into(), json!(id));
    }
    out.insert("status".into(), json!(status));
    if let Some(e) = &req.execution {
        let mut x = Map::new();
        x.insert("mode".into(), json!(mode));
        if let Some(o) = &e.on_error {
            x.insert("on_error".into(), json!(o));
        }
        if let Some(i) = &e.isolation {
            x.insert("isolation".into(), json!(i));
        }
        out.insert("execution".into(), Value::Object(x));
    }
    out.insert("results".into(), Value::Array(results));
    out.insert("context".into(), json!({"space_id": DEFAULT_SPACE}));
    out.insert("snapshot".into(), snapshot);
    out.insert("receipt".into(), receipt);
    Value::Object(out)
}

/// What the request ran as: its one transaction (its snapshot, and the seq and time it
/// committed as), the snapshot an atomic read-only batch shared, and whether the
/// transaction was aborted (a failure or a dry run).
struct Transaction {
    one_tx: Option<(u64, Option<(u64, u64)>)>,
    shared: Option<u64>,
    aborted: bool,
}

/// The response's `snapshot` and `receipt` (§33.2, §78), taking the receipts the
/// operations carried out of `run_op` from their contexts.
fn receipt_and_snapshot(nexus: &Nexus, done: &mut [Done], tx_of: Transaction) -> (Value, Value) {
    // §33.2: one receipt per committed transaction; several transactions (a
    // sequence of writes) each put theirs in their operation's extensions.
    let mut receipts: Vec<Value> = Vec::new();
    // The snapshots the reads saw: one shared coordinate gets a top-level snapshot.
    let mut read_at: Vec<u64> = Vec::new();
    // The original transaction of a replayed atomic request.
    let mut replayed: Option<(u64, u64)> = None;
    for d in done.iter_mut() {
        if let Done::Succeeded(_, context) = d {
            if let Some(r) = context.remove(RECEIPT) {
                receipts.push(r);
            }
            if let Some(t) = context.remove(REPLAYED) {
                replayed = t
                    .as_array()
                    .and_then(|a| Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?)));
            }
            if let Some(seq) = context.get("snapshot_seq").and_then(Value::as_u64) {
                read_at.push(seq);
            }
        }
    }
    read_at.dedup();
    let (snapshot, receipt) = match tx_of.one_tx {
        Some((snap, tx)) => {
            let receipt = match tx.or(replayed) {
                _ if tx_of.aborted => Value::Null,
                Some((seq, at)) => history::receipt(seq, at),
                None => history::no_effect(snap),
            };
            (
                json!({"space_id": DEFAULT_SPACE, "snapshot_seq": snap}),
                receipt,
            )
        }
        None if tx_of.shared.is_some() => (
            json!({"space_id": DEFAULT_SPACE, "snapshot_seq": tx_of.shared}),
            Value::Null,
        ),
        None if receipts.len() == 1 => (Value::Null, receipts[0].clone()),
        None if receipts.is_empty() && read_at.len() == 1 => (
            json!({"space_id": DEFAULT_SPACE, "snapshot_seq": read_at[0]}),
            Value::Null,
        ),
        None => (Value::Null, Value::Null),
    };
    // §78: the snapshot's token, for reading that coordinate again.
    let mut snapshot = snapshot;
    if let Some(seq) = snapshot.get("snapshot_seq").and_then(Value::as_u64) {
        if let Ok(Some(t)) = tokens::issue_now(nexus, seq) {
            snapshot["snapshot_token"] = json!(t);
        }
    }
    (snapshot, receipt)
}

/// A request refused by its preconditions: the first operation fails with the reason,
/// the others do not run.
fn refuse_all(done: &mut Vec<Done>, failed: &mut bool, (e, n): (V2Error, usize)) {
    done.push(Done::Failed(e));
    done.extend((1..n).map(|_| Done::Skipped));
    *failed = true;
}

/// Context keys that carry a write's receipt out of `run_op` (never sent as context):
/// the receipt of the operation's own transaction, moved to the response's `receipt`
/// (one transaction) and to the operation's extensions (several).
const RECEIPT: &str = "\u{0}receipt";
const OP_RECEIPT: &str = "\u{0}op_receipt";
/// Context key: the seq and time of the transaction a replayed operation committed in.
const REPLAYED: &str = "\u{0}replayed";

/// Parses, classifies and runs one operation; `context` takes what the operation adds
/// to its result's `context`.
fn run_op(
    nexus: &Nexus,
    (req, minted): (&Request, &Map<String, Value>),
    (index, op): (usize, &Operation),
    access: Access,
    tx: Option<&mut dyn GraphWrite>,
    snap: Option<&dyn GraphRead>,
    context: &mut Map<String, Value>,
) -> Result<Value, V2Error> {
    let Some(text) = op.command.as_deref() else {
        return Err(V2Error::new(
            Code::UnsupportedCapability,
            "operations given as a structured AST are not supported by this runtime",
        )
        .with_hint("send the command text in \"command\""));
    };
    let st = kip_lang::v2::parse(text).map_err(|e| V2Error::from_kip(&e))?;
    let language = st.kind.language();
    // §73.1, KIP2-RT-007: the parsed command decides; a label cannot make a write
    // read-only, and a read-only endpoint refuses writes whatever they are labelled.
    if access == Access::ReadOnly && language == "KML" {
        return Err(V2Error::new(
            Code::ReadonlyViolation,
            "execute_kip_readonly runs KQL and META only; this command is KML (a write)",
        )
        .with_hint("send it through execute_kip"));
    }
    if let Some(label) = op.language.as_deref() {
        if label != language {
            return Err(V2Error::new(
                Code::LanguageMismatch,
                format!("the operation is labelled {label} but the command is {language}"),
            )
            .with_hint(format!(
                "label it \"{language}\", or leave \"language\" out"
            )));
        }
    }
    for name in st.parameters() {
        if !op.parameters.contains_key(&name)
            && !req.parameters.contains_key(&name)
            && !minted.contains_key(&name)
        {
            return Err(V2Error::new(
                Code::InvalidRequestEnvelope,
                format!("the command uses :{name}, which neither the operation nor the request supplies"),
            )
            .with_hint(format!("add \"{name}\" to \"parameters\""))
            .with_detail("parameter", name.as_str()));
        }
    }
    let param = |s: &Scalar| -> Option<Value> {
        match s {
            Scalar::Literal(v) => Some(v.clone()),
            Scalar::Param(p) => op
                .parameters
                .get(p)
                .or_else(|| req.parameters.get(p))
                .or_else(|| minted.get(p))
                .cloned(),
        }
    };
    if tx.is_none() && snap.is_none() && !matches!(st.kind, StatementKind::Mutation(_)) {
        // A read's preconditions (the request's only operation): the state it reads.
        if let Some(pre) = req.preconditions.as_ref() {
            read_v2(nexus, None, |g| {
                history::check_preconditions(g, Some(pre)).map(|()| Value::Null)
            })?;
        }
    }
    if let StatementKind::Meta(m) = &st.kind {
        if chronology::handles(m) {
            let on = |f: &dyn Fn(&dyn GraphRead) -> Result<Value, V2Error>| match &tx {
                Some(w) => f(&**w),
                None => read_v2(nexus, snap, |g| f(g)),
            };
            return chronology::run(nexus, m, &param, &on);
        }
        if capsule::handles(m) {
            let on = |f: &dyn Fn(&dyn GraphRead) -> Result<Value, V2Error>| match &tx {
                Some(w) => f(&**w),
                None => read_v2(nexus, snap, |g| f(g)),
            };
            return capsule::run(nexus, m, &param, &on);
        }
    }
    match &st.kind {
        StatementKind::Meta(m) => match m.as_ref() {
            Meta::Describe(Describe::Protocol) => Ok(describe::protocol()),
            Meta::Validate { .. } | Meta::PreviewKml(_) if tx.is_some() => Err(V2Error::new(
                Code::UnsupportedCapability,
                "VALIDATE and PREVIEW run on their own, not inside an atomic or dry-run request",
            )
            .with_hint(
                "send them in a request of their own (their writes are never committed anyway)",
            )),
            Meta::Validate { target, value, .. } => {
                let v = param(value).unwrap_or(Value::Null);
                let params = |n: &str| param(&Scalar::Param(n.to_string()));
                preview::validate(nexus, target, &v, &params)
            }
            Meta::PreviewKml(value) => {
                let v = param(value).unwrap_or(Value::Null);
                let params = |n: &str| param(&Scalar::Param(n.to_string()));
                preview::preview_kml(nexus, &v, &params)
            }
            Meta::Describe(Describe::TransactionByIdempotencyKey(k)) => {
                let k = match param(k) {
                    Some(Value::String(s)) => s,
                    other => {
                        return Err(V2Error::new(
                            Code::TypeMismatch,
                            format!(
                                "an idempotency key is a string, not {}",
                                other.unwrap_or(Value::Null)
                            ),
                        ))
                    }
                };
                match tx {
                    Some(w) => idempotency::describe(w, &k, access),
                    None => read_v2(nexus, snap, |g| idempotency::describe(g, &k, access)),
                }
            }
            Meta::Describe(Describe::SchemaEnvironment(None)) => match tx {
                Some(w) => packages::describe(w),
                None => read_v2(nexus, snap, packages::describe),
            },
            Meta::Describe(Describe::Named { what, value }) if schema_meta::describes(what) => {
                let v = value.as_ref().and_then(&param);
                let run = |g: &dyn crate::store::GraphRead| {
                    schema_meta::describe(g, what, v.as_ref())
                        .unwrap_or_else(|| Err(not_yet(&st, text)))
                };
                match tx {
                    Some(w) => run(w),
                    None => read_v2(nexus, snap, run),
                }
            }
            Meta::List { what, .. } if schema_meta::lists(what) => {
                let run = |g: &dyn crate::store::GraphRead| {
                    schema_meta::list(g, what).unwrap_or_else(|| Err(not_yet(&st, text)))
                };
                match tx {
                    Some(w) => run(w),
                    None => read_v2(nexus, snap, run),
                }
            }
            Meta::List { what, .. } if what == "SCHEMA PACKAGES" => match tx {
                Some(w) => packages::listing(w),
                None => read_v2(nexus, snap, packages::listing),
            },
            Meta::Describe(Describe::Capabilities) => Ok(describe::capabilities(access)),
            Meta::Describe(Describe::ExecutionContext) => Ok(describe::execution_context(access)),
            Meta::Describe(Describe::Primer(mode)) => {
                let full = match mode.as_ref().map(&param) {
                    None => false,
                    Some(Some(Value::String(m))) if m == "compact" => false,
                    Some(Some(Value::String(m))) if m == "full" => true,
                    Some(other) => {
                        return Err(V2Error::new(
                            Code::TypeMismatch,
                            format!(
                                "DESCRIBE PRIMER MODE is \"compact\" or \"full\", not {}",
                                other.unwrap_or(Value::Null)
                            ),
                        )
                        .with_hint("MODE \"compact\" (the default) or MODE \"full\""))
                    }
                };
                match tx {
                    Some(w) => describe::primer(w, access, full).map_err(|e| V2Error::from_kip(&e)),
                    None => nexus
                        .read(|g| describe::primer(g, access, full))
                        .map_err(|e| V2Error::from_kip(&e)),
                }
            }
            Meta::Describe(Describe::Named {
                what,
                value: Some(v),
            }) if what == "ERROR" => {
                let name = match param(v) {
                    Some(Value::String(s)) => s,
                    other => {
                        return Err(V2Error::new(
                            Code::TypeMismatch,
                            format!(
                                "DESCRIBE ERROR takes a code name as a string, not {}",
                                other.unwrap_or(Value::Null)
                            ),
                        )
                        .with_hint("DESCRIBE ERROR \"VersionConflict\""))
                    }
                };
                describe::error(&name).ok_or_else(|| {
                    V2Error::new(
                        Code::NotFoundOrNotVisible,
                        format!("\"{name}\" is not a code of the KIP 2.0 error registry (§87)"),
                    )
                    .with_hint("codes are names such as \"VersionConflict\" or \"SchemaSymbolNotFound\"; a 1.x KIP_xxxx code maps to one (docs/semantics.md)")
                })
            }
            Meta::Search(s) => {
                let (hits, found) = search::run(nexus, s, &param, tx, req.mode() == "atomic")?;
                context.insert("search".into(), found);
                Ok(hits)
            }
            _ => Err(not_yet(&st, text)),
        },
        StatementKind::Query(q) => {
            let max_rows = nexus.limits().max_rows;
            let params = |n: &str| param(&Scalar::Param(n.to_string()));
            // The query limits' timeout, or the request's deadline when it is sooner.
            let deadline = [
                Some(nexus.limits().timeout),
                req.options.deadline_ms.map(Duration::from_millis),
            ]
            .into_iter()
            .flatten()
            .min()
            .and_then(|t| Instant::now().checked_add(t));
            let mut all = req.parameters.clone();
            all.extend(op.parameters.clone());
            all.extend(minted.clone());
            let digest = cursors::digest(q, &all);
            let page = nexus.limits().default_page;
            let cursors = nexus.cursors();
            let token = req.snapshot_token();
            let mut run = |g: &dyn GraphRead, context: &mut Map<String, Value>| {
                let ctx = Ctx::new(g, &params, max_rows)
                    .with_deadline(deadline)
                    .reading_the_past(q.as_of.is_some());
                cursors::page(cursors, &ctx, q, &digest, page, context)
            };
            match tx {
                // A traversal pinned inside a transaction that may still roll back
                // would keep rows that never committed.
                Some(_) if q.cursor.is_some() => Err(V2Error::new(
                    Code::UnsupportedCapability,
                    "CURSOR inside an atomic request (or a dry run): its pages could outlive a rollback",
                )
                .with_hint("page the query in a request of its own")),
                Some(w) => query_at(nexus, w, (q, token), &param, context, &mut run),
                None => read_v2(nexus, snap, |g| {
                    query_at(nexus, g, (q, token), &param, context, &mut run)
                }),
            }
        }
        StatementKind::Mutation(m) => {
            let max_rows = nexus.limits().max_rows;
            let params = |n: &str| param(&Scalar::Param(n.to_string()));
            let key = idempotency::key_of(req, op, index, access);
            let key = key.as_ref();
            let dry = req.options.dry_run;
            let mark = |mut v: Value| {
                if dry {
                    v["dry_run"] = json!(true);
                }
                v
            };
            match tx {
                Some(w) => {
                    let done = idempotency::once(w, key, |w| mutate::run(w, &params, m, max_rows))?;
                    if let (true, Some(t)) = (done.replayed, done.tx) {
                        // A retried atomic request: its original transaction's receipt.
                        context.insert(REPLAYED.into(), json!([t.0, t.1]));
                    }
                    Ok(mark(done.value))
                }
                None => {
                    let mut failure = None;
                    let mut tx = (0, None);
                    let r = nexus.write(
                        |w| {
                            let snapshot = history::snapshot_seq(w)
                                .map_err(|e| kip_lang::KipError::internal(e.message))?;
                            // The preconditions bind the write when it runs; a retry of
                            // one that committed is answered from its record (§34.3).
                            let pre = req.preconditions.as_ref();
                            let done = idempotency::once(w, key, |w| {
                                history::check_preconditions(w, pre)?;
                                mutate::run(w, &params, m, max_rows)
                            })
                            .map_err(|e| {
                                failure = Some(e);
                                kip_lang::KipError::internal("the mutation failed: rolled back")
                            })?;
                            tx = (snapshot, done.tx);
                            nexus.prune_logs(w)?;
                            Ok(done.value)
                        },
                        false,
                    );
                    match r {
                        Ok(v) => {
                            nexus.after_write();
                            nexus.finish_purge_scrub();
                            let receipt = match tx {
                                (_, Some((seq, at))) => history::receipt(seq, at),
                                (snap, None) => history::no_effect(snap),
                            };
                            context.insert(RECEIPT.into(), receipt.clone());
                            context.insert(OP_RECEIPT.into(), receipt);
                            Ok(v)
                        }
                        Err(e) => Err(failure.unwrap_or_else(|| V2Error::from_kip(&e))),
                    }
                }
            }
        }
    }
}

/// Evaluates a query on a graph, filling the operation's context.
type RunQuery<'r> =
    dyn FnMut(&dyn GraphRead, &mut Map<String, Value>) -> Result<Value, V2Error> + 'r;

/// Runs query `q` on `g`, or on the space as it was when `q` reads `AS OF` (§48.1);
/// the operation's context gets the snapshot it read.
fn query_at(
    nexus: &Nexus,
    g: &dyn GraphRead,
    (q, token): (&kip_lang::v2::ast::Query, Option<&str>),
    param: &dyn Fn(&Scalar) -> Option<Value>,
    context: &mut Map<String, Value>,
    run: &mut RunQuery<'_>,
) -> Result<Value, V2Error> {
    if let Some(t) = &q.for_time {
        // §48.3: the world-valid time the projection used, beside the snapshot read.
        context.insert("valid_at".into(), scalar(param, t)?);
    }
    // The query's own AS OF, else the request's snapshot token (§78), else now.
    let commit = match (&q.as_of, token) {
        (Some(clause), _) => Some(history::resolve(g, clause, &|s| scalar(param, s))?),
        (None, Some(t)) => Some(history::at_seq(g, tokens::verify(nexus, g, t)?)?),
        (None, None) => None,
    };
    match commit {
        None => {
            context.insert("snapshot_seq".into(), json!(history::snapshot_seq(g)?));
            run(g, context)
        }
        Some(commit) => {
            let past = history::view(g, &commit)?;
            context.insert("snapshot_seq".into(), json!(commit.seq));
            run(&past, context)
        }
    }
}

/// The value of a scalar of the command (parameters were checked to exist).
pub(super) fn scalar(
    param: &dyn Fn(&Scalar) -> Option<Value>,
    s: &Scalar,
) -> Result<Value, V2Error> {
    param(s).ok_or_else(|| {
        V2Error::new(
            Code::InvalidRequestEnvelope,
            "a parameter of the command has no value",
        )
    })
}

/// A whole number ≥ 0, or TypeMismatch naming `what`.
pub(super) fn whole(v: &Value, what: &str) -> Result<u64, V2Error> {
    v.as_u64().ok_or_else(|| {
        V2Error::new(
            Code::TypeMismatch,
            format!("{what} takes a whole number ≥ 0"),
        )
        .with_hint(format!("{what} 12"))
    })
}

/// Runs a 2.0 read on a snapshot: the request's shared one if it has one, else a new
/// one.
fn read_v2(
    nexus: &Nexus,
    snap: Option<&dyn GraphRead>,
    f: impl FnOnce(&dyn crate::store::GraphRead) -> Result<Value, V2Error>,
) -> Result<Value, V2Error> {
    if let Some(g) = snap {
        // An atomic read-only batch: every operation on the one snapshot.
        return f(g);
    }
    let mut failure = None;
    let r = nexus.read(|g| {
        f(g).map_err(|e| {
            failure = Some(e);
            kip_lang::KipError::internal("the read failed")
        })
    });
    r.map_err(|e| failure.unwrap_or_else(|| V2Error::from_kip(&e)))
}

/// A valid 2.0 statement this runtime does not execute yet: said plainly, with what
/// does run (KIP2-RT-020: no silent downgrade, no answer that reads as "nothing
/// there").
fn not_yet(st: &Statement, text: &str) -> V2Error {
    let head: String = text
        .split(|c: char| c.is_whitespace() || c == '(' || c == '{')
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_uppercase();
    let what = match &st.kind {
        StatementKind::Meta(m) => match m.as_ref() {
            Meta::Describe(Describe::Named { what, .. }) => format!("DESCRIBE {what}"),
            Meta::Describe(_) => "this DESCRIBE".to_string(),
            _ => head,
        },
        _ => head,
    };
    V2Error::new(
        Code::UnsupportedCapability,
        format!(
            "{what} is valid KIP 2.0 {}, but this runtime does not execute it yet",
            st.kind.language()
        ),
    )
    .with_hint("DESCRIBE CAPABILITIES lists what runs; the same memory answers KIP 1.x requests (leave \"kip\" out)")
    .with_detail("language", st.kind.language())
}
