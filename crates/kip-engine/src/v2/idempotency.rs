//! Idempotency keys (Specification §34): a state-changing operation that carries a key
//! (`execution.idempotency_key` for the request's transaction, an operation's own
//! `idempotency_key`) is recorded with its outcome in the request log — the same log
//! that gives exactly-once across failover (`nexus/requests.rs`) — in the transaction
//! that applies it. The same key with the same request answers the recorded outcome
//! without running again; with another request it is `IdempotencyConflict`. A failure
//! is not recorded, so it binds nothing (§34.3). Keys are scoped by space and endpoint
//! and kept as long as the log keeps records ([`crate::REQUEST_LOG_WINDOW`], §34.5).

use super::error::{Code, V2Error, V2Result};
use super::request::{Operation, Request, DEFAULT_SPACE};
use crate::envelope::Access;
use crate::store::{GraphRead, GraphWrite};
use serde_json::{json, Value};

/// The log key and digest an operation's outcome is recorded under, if it has a key.
pub fn key_of(
    req: &Request,
    op: &Operation,
    index: usize,
    access: Access,
) -> Option<(String, String)> {
    let endpoint = if access == Access::ReadOnly {
        "execute_kip_readonly"
    } else {
        "execute_kip"
    };
    if let Some(k) = &op.idempotency_key {
        return Some((
            format!("kip2:{DEFAULT_SPACE}:{endpoint}:op:{k}"),
            op.digest.clone(),
        ));
    }
    let k = req.execution.as_ref()?.idempotency_key.as_ref()?;
    Some((
        format!("kip2:{DEFAULT_SPACE}:{endpoint}:tx:{k}#{index}"),
        req.digest.clone(),
    ))
}

/// What a write under a key did: its result, the transaction that committed it (seq,
/// time in ms; `None`: it changed nothing), and whether this is a replay of it.
#[derive(Debug)]
pub struct Once {
    /// The result.
    pub value: Value,
    /// The committing transaction's seq and time.
    pub tx: Option<(u64, u64)>,
    /// Answered from the record (the write ran before).
    pub replayed: bool,
}

/// The recorded outcome of `key`: `Some` when this request already ran it, an error
/// when another request used the key.
pub fn recorded(g: &dyn GraphRead, key: &str, digest: &str) -> V2Result<Option<Value>> {
    let Some(bytes) = g.request_record(key)? else {
        return Ok(None);
    };
    let rec: Value = serde_json::from_slice(&bytes).map_err(|e| {
        V2Error::new(
            Code::InternalError,
            format!("the recorded outcome under an idempotency key does not read back: {e}"),
        )
    })?;
    if rec["digest"] != json!(digest) {
        return Err(V2Error::new(
            Code::IdempotencyConflict,
            "this idempotency key was used by another request; it names one logical mutation",
        )
        .with_hint("resend the original request unchanged, or use a new key for a new intent"));
    }
    Ok(Some(rec))
}

/// Records `result` under `key`, in the transaction that applied it.
pub fn record(
    w: &mut dyn GraphWrite,
    key: &str,
    digest: &str,
    result: &Value,
    tx: Option<(u64, u64)>,
) -> V2Result<()> {
    let bytes = serde_json::to_vec(&json!({"digest": digest, "result": result, "tx": tx}))
        .map_err(|e| V2Error::new(Code::InternalError, format!("recording: {e}")))?;
    let now = crate::time::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    w.put_request_record(key, now, &bytes)?;
    Ok(())
}

/// Runs a write exactly once per key: the recorded outcome when there is one, else
/// `run`, recorded when it succeeds.
pub fn once(
    w: &mut dyn GraphWrite,
    key: Option<&(String, String)>,
    run: impl FnOnce(&mut dyn GraphWrite) -> V2Result<Value>,
) -> V2Result<Once> {
    let tx_of = |w: &mut dyn GraphWrite| {
        let h = w.txn_history();
        h.seq().zip(h.at_ms())
    };
    let Some((key, digest)) = key else {
        let value = run(w)?;
        return Ok(Once {
            value,
            tx: tx_of(w),
            replayed: false,
        });
    };
    if let Some(rec) = recorded(w, key, digest)? {
        // §34.3: the original outcome, with the transaction that committed it.
        let tx = rec["tx"]
            .as_array()
            .and_then(|a| Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?)));
        return Ok(Once {
            value: rec["result"].clone(),
            tx,
            replayed: true,
        });
    }
    let value = run(w)?;
    let tx = tx_of(w);
    record(w, key, digest, &value, tx)?;
    Ok(Once {
        value,
        tx,
        replayed: false,
    })
}

/// Whether any write operation of `req` is answered from the request log (a retry of
/// a request that committed): its preconditions held when it first ran.
pub fn replays(g: &dyn GraphRead, req: &Request, access: Access) -> V2Result<bool> {
    for (i, op) in req.operations.iter().enumerate() {
        if let Some((key, _)) = key_of(req, op, i, access) {
            if g.request_record(&key)?.is_some() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `DESCRIBE TRANSACTION BY IDEMPOTENCY KEY k` (§68): what the key's transaction did.
pub fn describe(g: &dyn GraphRead, k: &str, access: Access) -> V2Result<Value> {
    let endpoint = if access == Access::ReadOnly {
        "execute_kip_readonly"
    } else {
        "execute_kip"
    };
    let keys = std::iter::once(format!("kip2:{DEFAULT_SPACE}:{endpoint}:op:{k}"))
        .chain((0..256).map(|i| format!("kip2:{DEFAULT_SPACE}:{endpoint}:tx:{k}#{i}")));
    for key in keys {
        if let Some(bytes) = g.request_record(&key)? {
            let rec: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Ok(
                json!({"idempotency_key": k, "status": "committed", "request_digest": rec["digest"], "result": rec["result"]}),
            );
        }
    }
    Err(V2Error::new(
        Code::TransactionUnknown,
        format!("no transaction is recorded under the idempotency key \"{k}\" (records are kept 15 minutes)"),
    )
    .with_hint("a transaction that failed bound no key: send the request again"))
}
