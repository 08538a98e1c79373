//! Snapshot tokens (Specification §78, KIP2-RT-016/017): an opaque token that binds a
//! readable coordinate of the space. `kips_` + the seq (16 hex digits) + the first 16
//! bytes of HMAC-SHA256 over it under a per-memory key (32 random bytes from the OS,
//! made at bootstrap, kept in `meta`): an edited coordinate does not verify and is
//! refused, never read. A token grants nothing: every request is authorized as if it
//! carried none (current governance, §68.2).
//!
//! Change cursors (`CHANGES`, §68) are bound the same way: `kipchg_default_` + the
//! seq + `_` + the first 16 bytes of HMAC-SHA256 over a change-cursor label and the
//! seq, so another memory's cursor (or an edited one) is refused instead of read as a
//! position in this memory's history.

use super::error::{Code, V2Error, V2Result};
use crate::nexus::Nexus;
use crate::store::{GraphRead, GraphWrite};
use hmac::{KeyInit, Mac};
use kip_lang::KipError;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// `meta` key of the token key.
const KEY: &str = "kip2.snapshot_token_key";
const PREFIX: &str = "kips_";

/// Whether the memory has its token key (bootstrap makes one when not).
pub fn has_key(g: &dyn GraphRead) -> Result<bool, KipError> {
    Ok(g.meta(KEY)?.is_some_and(|k| k.len() == 32))
}

/// Makes the memory's token key, once (bootstrap).
pub fn ensure_key(w: &mut dyn GraphWrite) -> Result<(), KipError> {
    if has_key(w)? {
        return Ok(());
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| {
        KipError::internal(format!("no randomness for the snapshot-token key: {e}"))
    })?;
    w.set_meta(KEY, &key)?;
    Ok(())
}

/// The memory's key: cached on the `Nexus` once `load` has read it.
fn key(
    nexus: &Nexus,
    load: &mut dyn FnMut() -> V2Result<Option<Vec<u8>>>,
) -> V2Result<Option<Vec<u8>>> {
    if let Some(k) = nexus.token_key().get() {
        return Ok(Some(k.clone()));
    }
    match load()?.filter(|k| k.len() == 32) {
        Some(k) => Ok(Some(nexus.token_key().get_or_init(|| k).clone())),
        None => Ok(None),
    }
}

fn from(g: &dyn GraphRead) -> impl FnMut() -> V2Result<Option<Vec<u8>>> + '_ {
    move || Ok(g.meta(KEY)?)
}

fn mac(key: &[u8], seq: u64) -> V2Result<HmacSha256> {
    labelled(key, b"kip:space:default#", seq)
}

fn labelled(key: &[u8], label: &[u8], seq: u64) -> V2Result<HmacSha256> {
    let mut m = HmacSha256::new_from_slice(key)
        .map_err(|e| V2Error::new(Code::InternalError, format!("snapshot-token key: {e}")))?;
    m.update(label);
    m.update(&seq.to_be_bytes());
    Ok(m)
}

fn hex16(m: HmacSha256) -> String {
    m.finalize()
        .into_bytes()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How change cursors begin (then the seq they continue after, `_`, the tag).
pub const CHANGE_CURSOR: &str = "kipchg_default_";
const CHANGE_LABEL: &[u8] = b"kip:changes:default#";

/// The change cursor that continues after `seq` (unbound, as `kipchg_default_<seq>`,
/// only in a memory without its key, which bootstrap always makes).
pub fn change_cursor(g: &dyn GraphRead, seq: u64) -> V2Result<String> {
    match g.meta(KEY)?.filter(|k| k.len() == 32) {
        Some(k) => Ok(format!(
            "{CHANGE_CURSOR}{seq}_{}",
            hex16(labelled(&k, CHANGE_LABEL, seq)?)
        )),
        None => Ok(format!("{CHANGE_CURSOR}{seq}")),
    }
}

/// How history cursors begin (then `from_to_tag`).
pub const HISTORY_CURSOR: &str = "kiphc_";

fn history_mac(key: &[u8], scope: &str, from: u64, to: u64) -> V2Result<HmacSha256> {
    let mut m = labelled(key, b"kip:history:", from)?;
    m.update(&to.to_be_bytes());
    m.update(scope.as_bytes());
    Ok(m)
}

/// The cursor of a `HISTORY` traversal of `scope` (an element id, or `space`) that
/// continues with seqs `from..=to` (history does not move: a stateless, MAC'd
/// position; `to` pins the newest commit of the first page).
pub fn history_cursor(g: &dyn GraphRead, scope: &str, from: u64, to: u64) -> V2Result<String> {
    let k = g.meta(KEY)?.filter(|k| k.len() == 32).ok_or_else(|| {
        V2Error::new(
            Code::InternalError,
            "this memory has no token key: HISTORY pages with FROM SEQ instead",
        )
    })?;
    Ok(format!(
        "{HISTORY_CURSOR}{from}_{to}_{}",
        hex16(history_mac(&k, scope, from, to)?)
    ))
}

/// The `(from, to)` a history cursor of `scope` continues with. A cursor of another
/// family is `CursorTypeMismatch`; one of another traversal (another element, or
/// edited, or another memory's) is `CursorMismatch`.
pub fn read_history_cursor(g: &dyn GraphRead, text: &str, scope: &str) -> V2Result<(u64, u64)> {
    let mismatch = || {
        V2Error::new(
            Code::CursorMismatch,
            format!("\"{text}\" is not a cursor of this HISTORY traversal"),
        )
        .with_hint(
            "send the next_cursor of the previous HISTORY page of the same statement, as it came",
        )
    };
    let Some(rest) = text.strip_prefix(HISTORY_CURSOR) else {
        return Err(V2Error::new(
            Code::CursorTypeMismatch,
            "HISTORY takes the next_cursor of a HISTORY page: cursor families are not interchangeable (§88.4)",
        )
        .with_hint("CHANGES SINCE takes change cursors; FIND ... CURSOR takes KQL cursors"));
    };
    let parts: Vec<&str> = rest.split('_').collect();
    let [from, to, tag] = parts[..] else {
        return Err(mismatch());
    };
    let (Ok(from), Ok(to)) = (from.parse::<u64>(), to.parse::<u64>()) else {
        return Err(mismatch());
    };
    let bytes: Vec<u8> = (0..tag.len())
        .step_by(2)
        .filter_map(|i| tag.get(i..i + 2))
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    let k = g
        .meta(KEY)?
        .filter(|k| k.len() == 32)
        .ok_or_else(mismatch)?;
    if tag.len() != 32 || bytes.len() != 16 {
        return Err(mismatch());
    }
    history_mac(&k, scope, from, to)?
        .verify_truncated_left(&bytes)
        .map_err(|_| mismatch())?;
    Ok((from, to))
}

/// What a string of the change-cursor form says.
pub enum ChangeCursor {
    /// Issued by this memory: continue after this seq.
    After(u64),
    /// Of the form, but not this memory's (another memory's, or edited).
    Foreign,
    /// Not even of the form (no seq, no tag).
    Malformed,
}

/// Reads `rest`, a change cursor without its [`CHANGE_CURSOR`] prefix.
pub fn read_change_cursor(g: &dyn GraphRead, rest: &str) -> V2Result<ChangeCursor> {
    let key = g.meta(KEY)?.filter(|k| k.len() == 32);
    let (seq, tag) = match rest.split_once('_') {
        Some((seq, tag)) => (seq, Some(tag)),
        None => (rest, None),
    };
    let Ok(seq) = seq.parse::<u64>() else {
        return Ok(ChangeCursor::Malformed);
    };
    Ok(match (key, tag) {
        (None, None) => ChangeCursor::After(seq),
        (Some(_), None) | (None, Some(_)) => ChangeCursor::Malformed,
        (Some(k), Some(tag)) => {
            let bytes: Vec<u8> = (0..tag.len())
                .step_by(2)
                .filter_map(|i| tag.get(i..i + 2))
                .filter_map(|h| u8::from_str_radix(h, 16).ok())
                .collect();
            if tag.len() != 32 || bytes.len() != 16 {
                ChangeCursor::Malformed
            } else if labelled(&k, CHANGE_LABEL, seq)?
                .verify_truncated_left(&bytes)
                .is_ok()
            {
                ChangeCursor::After(seq)
            } else {
                ChangeCursor::Foreign
            }
        }
    })
}

/// The token of seq `seq` (`None`: the memory has no token key yet).
pub fn issue(nexus: &Nexus, g: &dyn GraphRead, seq: u64) -> V2Result<Option<String>> {
    issue_with(nexus, &mut from(g), seq)
}

/// [`issue`] outside a read (the key read in a snapshot of its own, once).
pub fn issue_now(nexus: &Nexus, seq: u64) -> V2Result<Option<String>> {
    let mut load = || -> V2Result<Option<Vec<u8>>> {
        nexus
            .read(|g| Ok(g.meta(KEY)?))
            .map_err(|e| V2Error::from_kip(&e))
    };
    issue_with(nexus, &mut load, seq)
}

fn issue_with(
    nexus: &Nexus,
    load: &mut dyn FnMut() -> V2Result<Option<Vec<u8>>>,
    seq: u64,
) -> V2Result<Option<String>> {
    let Some(k) = key(nexus, load)? else {
        return Ok(None);
    };
    Ok(Some(format!("{PREFIX}{seq:016x}{}", hex16(mac(&k, seq)?))))
}

/// The seq a token this memory issued binds; anything else (edited, truncated, another
/// memory's) is refused.
pub fn verify(nexus: &Nexus, g: &dyn GraphRead, token: &str) -> V2Result<u64> {
    let refused = || {
        V2Error::new(
            Code::InvalidRequestEnvelope,
            "read.snapshot_token is not a snapshot token this memory issued (tokens are opaque: an edited one is refused, never read)",
        )
        .with_hint("use the snapshot_token of an earlier response as it came, or leave read.snapshot_token out")
    };
    let body = token.strip_prefix(PREFIX).ok_or_else(refused)?;
    if body.len() != 48 || !body.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(refused());
    }
    let seq = u64::from_str_radix(&body[..16], 16).map_err(|_| refused())?;
    let tag: Vec<u8> = (16..48)
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&body[i..i + 2], 16).ok())
        .collect();
    let k = key(nexus, &mut from(g))?.ok_or_else(refused)?;
    mac(&k, seq)?
        .verify_truncated_left(&tag)
        .map_err(|_| refused())?;
    Ok(seq)
}
