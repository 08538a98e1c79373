//! KQL cursors (Specification §44.8, KQL design §82-89): a traversal is pinned to the
//! snapshot its first page was read from. The cursors are server-mapped (§88.4): the
//! first page (`CURSOR null`, or a parameter holding null) evaluates the whole ordered
//! result on one read snapshot, answers the first `LIMIT` rows (the query limits'
//! default page without a LIMIT) and keeps the rest here; each later page is served
//! from what was kept, so writes committed in between never move, duplicate or skip a
//! row (KIP2-KQL-016). A cursor is bound to the digest of its query text and of every
//! parameter but the cursor itself: another query is `CursorMismatch` (KQL-017); a
//! cursor of this family given to SEARCH is `CursorTypeMismatch` (KQL-018). Tokens are
//! opaque, unguessable, one per page (asking for a page again gives the same rows),
//! kept for [`TTL`], at most [`MAX_CURSORS`] (holding [`MAX_ROWS_KEPT`] rows) at a time per memory, and do not
//! survive a restart or cross servers: past any of those, `CursorExpired` (start the
//! traversal again).

use super::error::{Code, V2Error, V2Result};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long a page's cursor stays valid.
pub const TTL: Duration = Duration::from_secs(600);
/// The most cursors one memory keeps (the oldest is dropped first).
pub const MAX_CURSORS: usize = 256;
/// The most result rows the open cursors of one memory hold together (the oldest
/// traversals are dropped first; a hostile client cannot make a memory hold more).
pub const MAX_ROWS_KEPT: usize = 1_000_000;
/// The prefix of every KQL cursor token (what tells its family apart).
pub const PREFIX: &str = "kqlc_";

struct Entry {
    digest: String,
    rows: Arc<Vec<Value>>,
    offset: usize,
    page: usize,
    made: Instant,
}

/// The open cursors of one memory.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<String, Entry>>,
    counter: AtomicU64,
}

impl Cursors {
    /// A new token for the rows from `offset` on (`None` when nothing is left).
    pub fn open(
        &self,
        digest: &str,
        rows: Arc<Vec<Value>>,
        offset: usize,
        page: usize,
    ) -> Option<String> {
        if offset >= rows.len() {
            return None;
        }
        let token = self.token();
        let Ok(mut open) = self.open.lock() else {
            return None;
        };
        open.retain(|_, e| e.made.elapsed() < TTL);
        // The rows kept for all traversals with this one (a traversal's tokens share
        // its rows).
        let kept = |open: &HashMap<String, Entry>| {
            let mut seen = std::collections::HashSet::new();
            seen.insert(Arc::as_ptr(&rows));
            rows.len()
                + open
                    .values()
                    .filter(|e| seen.insert(Arc::as_ptr(&e.rows)))
                    .map(|e| e.rows.len())
                    .sum::<usize>()
        };
        while open.len() >= MAX_CURSORS || (!open.is_empty() && kept(&open) > MAX_ROWS_KEPT) {
            let Some(oldest) = open
                .iter()
                .min_by_key(|(_, e)| e.made)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            open.remove(&oldest);
        }
        open.insert(
            token.clone(),
            Entry {
                digest: digest.to_string(),
                rows,
                offset,
                page,
                made: Instant::now(),
            },
        );
        Some(token)
    }

    /// The page a token stands for and the token of the page after it.
    pub fn next(&self, token: &str, digest: &str) -> V2Result<(Vec<Value>, Option<String>)> {
        let expired = || {
            V2Error::new(
                Code::CursorExpired,
                "this cursor is not known here any more (it is kept for 10 minutes, on the server that gave it, until a restart)",
            )
            .with_hint("run the query again with CURSOR null to start a new traversal")
        };
        if !token.starts_with(PREFIX) {
            return Err(V2Error::new(
                Code::CursorTypeMismatch,
                "this cursor was not given by a KQL FIND",
            )
            .with_hint("pass the next_cursor of the previous page of this same query"));
        }
        let (rows, offset, page) = {
            let open = self.open.lock().map_err(|_| expired())?;
            let e = open
                .get(token)
                .filter(|e| e.made.elapsed() < TTL)
                .ok_or_else(expired)?;
            if e.digest != digest {
                return Err(V2Error::new(
                    Code::CursorMismatch,
                    "this cursor belongs to another query (its text or parameters differ)",
                )
                .with_hint(
                    "continue with the same query text and parameters, changing only the cursor",
                ));
            }
            (e.rows.clone(), e.offset, e.page)
        };
        let end = offset.saturating_add(page).min(rows.len());
        let out = rows[offset..end].to_vec();
        let next = self.open(digest, rows, end, page);
        Ok((out, next))
    }

    fn token(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut seed = std::collections::hash_map::RandomState::new().build_hasher();
        seed.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let text = format!("{}:{nanos}", seed.finish());
        let hex: String = Sha256::digest(text.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{PREFIX}{hex}")
    }
}

/// One page of a FIND with a CURSOR clause: the first (cursor null) or the one a
/// token stands for; the token of the next page goes into `context` as `next_cursor`.
/// `digest` binds the traversal (see [`digest`]); `default_page` is the page size
/// without a LIMIT.
pub fn page(
    cursors: &Cursors,
    ctx: &super::eval::Ctx,
    q: &kip_lang::v2::ast::Query,
    digest: &str,
    default_page: usize,
    context: &mut serde_json::Map<String, Value>,
) -> V2Result<Value> {
    let Some(c) = &q.cursor else {
        return super::query::find(ctx, q);
    };
    let n = super::query::limit_of(ctx, q)?
        .unwrap_or(default_page)
        .max(1);
    let (rows, next) = match super::eval::scalar(ctx, c)? {
        Value::Null => {
            let all = Arc::new(super::query::rows(ctx, q, None)?);
            let first = all[..n.min(all.len())].to_vec();
            let next = cursors.open(digest, all, n, n);
            (first, next)
        }
        Value::String(token) => cursors.next(&token, digest)?,
        other => {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!("CURSOR takes the next_cursor string of a previous page (or null to start), not {other}"),
            )
            .with_hint("CURSOR :cursor with \"cursor\": null for the first page"))
        }
    };
    if let Some(t) = next {
        context.insert("next_cursor".into(), Value::String(t));
    }
    Ok(Value::Array(rows))
}

/// What a cursor is bound to: the query without its CURSOR clause and the request's
/// parameters except the one the cursor is passed in.
pub fn digest(q: &kip_lang::v2::ast::Query, parameters: &serde_json::Map<String, Value>) -> String {
    let mut bare = q.clone();
    let cursor_param = match bare.cursor.take() {
        Some(kip_lang::v2::ast::Scalar::Param(p)) => Some(p),
        _ => None,
    };
    let mut params = parameters.clone();
    if let Some(p) = cursor_param {
        params.remove(&p);
    }
    super::request::digest(&serde_json::json!({
        "query": format!("{bare:?}"),
        "parameters": params,
    }))
}
