//! Cursor tokens (DECISIONS.md item 14): where the next page of a query starts (a
//! keyset [`Anchor`]: the last row's sort keys and tie, never a position), the order of
//! rows with equal ORDER BY keys ([`Tie`]), and the opaque `kc2_` token that carries an
//! anchor bound to its query's fingerprint.

use kip_lang::ast::FindQuery;
use kip_lang::{Command, KipError};
use serde_json::{json, Value};

/// FNV-1a, 64 bits: a stable hash for binding cursors to their query.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The identity of a query for its cursors: its canonical text without LIMIT/CURSOR.
pub fn query_fingerprint(q: &FindQuery) -> u64 {
    let mut q = q.clone();
    q.limit = None;
    q.cursor = None;
    fnv1a(&Command::Find(q).to_string())
}

/// Where the next page starts: just after the last row of the previous one, in the
/// page order (a keyset cursor). A row deleted or added between pages therefore never
/// shifts the rows after it: no surviving row is skipped or repeated.
#[derive(Debug, Clone, PartialEq)]
pub enum Anchor {
    /// Pages in the order of the first matched concept (ascending number), then of the
    /// rows' hash: after row `hash` of concept `id`.
    Root {
        /// The concept number of the last row.
        id: u64,
        /// The hash of its projected values.
        hash: u64,
    },
    /// Pages sorted by the ORDER BY keys, then by the number of the row's determining
    /// concept (0 when the query has none: `result::tie_concept`), then by the rows'
    /// hash: after this row.
    Sorted {
        /// The ORDER BY values of the last row (a DESCRIBE list: its name).
        keys: Vec<Value>,
        /// The number of its determining concept (0: none).
        id: u64,
        /// The hash of its projected values.
        hash: u64,
    },
}

/// How rows with equal ORDER BY keys are ordered: by `rank` (the determining
/// concept's number, reversed under a descending first key; one value for every row
/// when there is none), then by the row hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tie {
    /// The determining concept's number in tie order.
    pub rank: u64,
    /// The row hash.
    pub hash: u64,
}

/// The hash that orders rows with equal keys (and rows of one concept): FNV-1a of the
/// row's projected values as JSON.
pub fn row_hash(proj: &[Value]) -> u64 {
    fnv1a(&serde_json::to_string(proj).unwrap_or_default())
}

/// Encodes a cursor: the anchor and the query's fingerprint, as
/// `kc2_<hex of the anchor as JSON>_<fingerprint>`.
pub fn encode_cursor(anchor: &Anchor, fingerprint: u64) -> String {
    let v = match anchor {
        Anchor::Root { id, hash } => json!(["r", id, hash]),
        Anchor::Sorted { keys, id: 0, hash } => json!(["s", keys, hash]),
        Anchor::Sorted { keys, id, hash } => json!(["s", keys, hash, id]),
    };
    let text = v.to_string();
    let mut hex = String::with_capacity(text.len() * 2);
    for b in text.bytes() {
        hex.push_str(&format!("{b:02x}"));
    }
    format!("kc2_{hex}_{fingerprint:016x}")
}

/// Decodes a cursor made for the query with `fingerprint`.
pub fn decode_cursor(token: &str, fingerprint: u64) -> Result<Anchor, KipError> {
    let bad = || {
        KipError::syntax(format!("invalid CURSOR token {:?}: it was not issued for this query", token.chars().take(80).collect::<String>()))
            .with_hint("pass the next_cursor of the previous response to the same query unchanged, or re-run the query without CURSOR")
    };
    let rest = token.strip_prefix("kc2_").ok_or_else(bad)?;
    let (hex, fp) = rest.rsplit_once('_').ok_or_else(bad)?;
    if u64::from_str_radix(fp, 16).map_err(|_| bad())? != fingerprint || hex.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let hash = v.get(2).and_then(Value::as_u64).ok_or_else(bad)?;
    match (v.get(0).and_then(Value::as_str), v.get(1)) {
        (Some("r"), Some(id)) => Ok(Anchor::Root {
            id: id.as_u64().ok_or_else(bad)?,
            hash,
        }),
        (Some("s"), Some(Value::Array(keys))) => Ok(Anchor::Sorted {
            keys: keys.clone(),
            id: match v.get(3) {
                None => 0,
                Some(id) => id.as_u64().ok_or_else(bad)?,
            },
            hash,
        }),
        _ => Err(bad()),
    }
}

pub(super) fn stale_cursor() -> KipError {
    KipError::syntax("this CURSOR no longer applies: the data changed how the query is planned")
        .with_hint("re-run the query without CURSOR")
}
