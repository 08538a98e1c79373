//! Cognitive time (Specification §48.1, §68, §33): resolving `AS OF SEQ | TX | TIME`
//! to a commit of the space, reads of the past through `kip_storage::asof::AsOf`,
//! `SNAPSHOT` / `DESCRIBE SNAPSHOT`, `HISTORY ELEMENT` / `HISTORY SPACE`, `CHANGES
//! AFTER SEQ`, and the receipt of a committed transaction. The space sequence and the
//! version chain are kept by the storage contract (`kip_storage::history`).

use super::error::{Code, V2Error, V2Result};
use super::request::DEFAULT_SPACE;
use crate::store::GraphRead;
use kip_lang::v2::ast::{AsOf as AsOfClause, Scalar};
use kip_storage::asof::AsOf;
use kip_storage::history::{self, CommitRecord, PART_RECORD, PART_ROW};
use kip_storage::{ElementId, ElementKind, ElementRecord, SpaceId};
use serde_json::{json, Map, Value};
use std::time::{Duration, UNIX_EPOCH};

/// How a transaction of the default space is named (`kip:space:default#12`: the
/// reference engine's form, so a TX parses to its seq).
pub fn tx_id(seq: u64) -> String {
    format!("kip:space:{DEFAULT_SPACE}#{seq}")
}

fn time_text(ms: u64) -> String {
    crate::time::format(UNIX_EPOCH + Duration::from_millis(ms))
}

fn unavailable(message: String) -> V2Error {
    V2Error::new(Code::HistoricalSnapshotUnavailable, message).with_hint(
        "SNAPSHOT tells the newest coordinate of the space; HISTORY SPACE lists its commits",
    )
}

fn whole(v: &Value, what: &str) -> V2Result<u64> {
    v.as_u64().ok_or_else(|| {
        V2Error::new(
            Code::TypeMismatch,
            format!("{what} takes a whole number ≥ 0"),
        )
        .with_hint("AS OF SEQ 12")
    })
}

/// The newest commit of the default space (`None`: no history recorded).
pub fn newest(g: &dyn GraphRead) -> V2Result<Option<CommitRecord>> {
    Ok(history::last(g, SpaceId::DEFAULT)?)
}

/// The snapshot sequence a read of `g` sees: the newest commit (0 without history).
pub fn snapshot_seq(g: &dyn GraphRead) -> V2Result<u64> {
    Ok(newest(g)?.map_or(0, |c| c.seq))
}

/// The commit an `AS OF` clause names; `value` evaluates its scalar.
pub fn resolve(
    g: &dyn GraphRead,
    clause: &AsOfClause,
    value: &dyn Fn(&Scalar) -> V2Result<Value>,
) -> V2Result<CommitRecord> {
    let last = newest(g)?.ok_or_else(|| {
        unavailable("this memory records no history yet: there is no coordinate to read".into())
    })?;
    let commit_of = |seq: u64| -> V2Result<Option<CommitRecord>> {
        Ok(history::commit(g, SpaceId::DEFAULT, seq)?)
    };
    match clause {
        AsOfClause::Seq(s) => at_seq(g, whole(&value(s)?, "AS OF SEQ")?),
        AsOfClause::Tx(t) => {
            let v = value(t)?;
            let text = v.as_str().ok_or_else(|| {
                V2Error::new(
                    Code::TypeMismatch,
                    "AS OF TX takes a transaction id (a string)",
                )
                .with_hint(format!("AS OF TX \"{}\"", tx_id(last.seq)))
            })?;
            let seq = text
                .strip_prefix(&format!("kip:space:{DEFAULT_SPACE}#"))
                .and_then(|n| n.parse::<u64>().ok());
            match seq.map(commit_of).transpose()?.flatten() {
                Some(c) => Ok(c),
                None => Err(V2Error::new(
                    Code::TransactionUnknown,
                    format!("no committed transaction of this memory is named \"{text}\""),
                )
                .with_hint(format!(
                    "transaction ids look like \"{}\" (the newest); HISTORY SPACE lists them",
                    tx_id(last.seq)
                ))),
            }
        }
        AsOfClause::Time(t) => {
            let v = value(t)?;
            let at = v.as_str().and_then(crate::time::parse).ok_or_else(|| {
                V2Error::new(Code::TypeMismatch, "AS OF TIME takes an RFC 3339 timestamp")
                    .with_hint("AS OF TIME \"2026-11-28T10:00:00Z\"")
            })?;
            let ms = at
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0);
            history::commit_at_or_before(g, SpaceId::DEFAULT, ms)?.ok_or_else(|| {
                unavailable(format!(
                    "{} is before the history this memory keeps",
                    v.as_str().unwrap_or_default()
                ))
            })
        }
    }
}

/// The commit of seq `seq`: refused when the space has not reached it, or when it is
/// before the history the memory keeps.
pub fn at_seq(g: &dyn GraphRead, seq: u64) -> V2Result<CommitRecord> {
    let last = newest(g)?.ok_or_else(|| {
        unavailable("this memory records no history yet: there is no coordinate to read".into())
    })?;
    if seq > last.seq {
        return Err(unavailable(format!(
            "the space has not reached seq {seq}: its newest commit is seq {}; a coordinate is never rounded to the present",
            last.seq
        ))
        .with_detail("space_seq", last.seq));
    }
    history::commit(g, SpaceId::DEFAULT, seq)?
        .ok_or_else(|| unavailable(format!("seq {seq} is before the history this memory keeps")))
}

/// A read of `g` after commit `c`.
pub fn view<'a>(g: &'a dyn GraphRead, c: &CommitRecord) -> V2Result<AsOf<'a>> {
    AsOf::new(g, SpaceId::DEFAULT, c.seq)?
        .ok_or_else(|| unavailable(format!("seq {} is not readable", c.seq)))
}

/// What `SNAPSHOT` and `DESCRIBE SNAPSHOT` answer for commit `c`.
pub fn snapshot(c: &CommitRecord) -> Value {
    json!({
        "space_id": DEFAULT_SPACE,
        "snapshot_seq": c.seq,
        "tx_id": tx_id(c.seq),
        "committed_at": time_text(c.at_ms),
    })
}

/// The receipt of a committed transaction (§33.2).
pub fn receipt(seq: u64, at_ms: u64) -> Value {
    json!({
        "status": "committed",
        "tx_id": tx_id(seq),
        "space_id": DEFAULT_SPACE,
        "snapshot_seq": seq.saturating_sub(1),
        "space_seq": seq,
        "committed_at": time_text(at_ms),
        "transaction_class": "cognitive",
    })
}

/// The receipt of a write transaction that changed nothing (§32.8).
pub fn no_effect(snapshot_seq: u64) -> Value {
    json!({"status": "no_effect", "space_id": DEFAULT_SPACE, "snapshot_seq": snapshot_seq})
}

/// The element an id names, as the version chain keys it.
fn element_key(id: &str) -> V2Result<(u64, ElementId)> {
    let e = ElementId::parse_id(id).ok_or_else(|| {
        V2Error::new(Code::TypeMismatch, format!("\"{id}\" is not an element id"))
            .with_hint("ids look like \"C:12\", \"P:7\", \"A:3\"")
    })?;
    Ok((e.encode(), e))
}

/// The stored state bytes of one part, as JSON (`null`: absent).
fn state_json(part: u8, kind: ElementKind, bytes: &[u8]) -> V2Result<Value> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    Ok(match (part, kind) {
        (PART_ROW, ElementKind::Concept) => {
            let c: kip_storage::ConceptRecord = kip_storage::decode(bytes)?;
            json!({"type": c.concept_type, "name": c.name, "attributes": c.attributes, "metadata": c.metadata})
        }
        (PART_ROW, _) => {
            let p: kip_storage::PropRecord = kip_storage::decode(bytes)?;
            json!({
                "subject": p.subject.id_string(),
                "predicate": p.predicate,
                "object": p.object.id_string(),
                "attributes": p.attributes,
                "metadata": p.metadata,
            })
        }
        _ => {
            let r = ElementRecord::decode(bytes)?;
            json!({"payload": r.payload, "state": r.state, "version": r.version})
        }
    })
}

/// `HISTORY ELEMENT id [FROM SEQ a] [TO SEQ b] [LIMIT n]` (§68): the commits that
/// changed the element, oldest first, each with the state it replaced; then its
/// current state. Transition chronology, not content reconstruction (that is `AS OF`).
pub fn element(
    g: &dyn GraphRead,
    id: &str,
    from: Option<u64>,
    to: Option<u64>,
    limit: usize,
) -> V2Result<Value> {
    let (key, eid) = element_key(id)?;
    let first = from.unwrap_or(1).max(1);
    let last = to.unwrap_or(u64::MAX);
    let purged = g
        .element(SpaceId::DEFAULT, eid)?
        .is_some_and(|r| r.state.get("state") == Some(&json!("purged")));
    let mut seqs = Vec::new();
    if purged {
        // The chain is gone with the purge: the changes index still names the
        // commits (ids only), scanned from `from` on.
        g.scan_changes(SpaceId::DEFAULT, first - 1, &mut |seq, k| {
            if seq > last {
                return Ok(false);
            }
            if k == key {
                seqs.push(seq);
            }
            // A page and one more (whether there is a next page) is enough.
            Ok(seqs.len() <= limit)
        })?;
    } else {
        // Every change of the element kept its replaced state, under the commit's seq:
        // the element's own chain (both parts) names its commits, no scan of others.
        let mut all = std::collections::BTreeSet::new();
        for part in [PART_ROW, PART_RECORD] {
            let mut at = first - 1;
            while let Some((valid_to, _)) = g.version_after(SpaceId::DEFAULT, key, part, at)? {
                if valid_to > last {
                    break;
                }
                all.insert(valid_to);
                at = valid_to;
                if all.range(..=valid_to).count() > limit {
                    break;
                }
            }
        }
        seqs = all.into_iter().take(limit + 1).collect();
    }
    let exists_now = match eid.kind {
        ElementKind::Concept => g.concept(eid.n)?.is_some(),
        ElementKind::Proposition => g.prop(eid.n)?.is_some(),
        _ => false,
    } || g.element(SpaceId::DEFAULT, eid)?.is_some();
    if seqs.is_empty() && !exists_now {
        return Err(V2Error::new(
            Code::NotFoundOrNotVisible,
            format!("{id} is not an element of this memory, and no history names it"),
        )
        .with_hint("FIND an element's id first"));
    }
    let next = seqs.get(limit).copied();
    let mut out = Vec::new();
    for seq in seqs.into_iter().take(limit) {
        let mut replaced = Map::new();
        for (part, name) in [(PART_ROW, "row"), (PART_RECORD, "record")] {
            if let Some((valid_to, bytes)) =
                history::state_after(g, SpaceId::DEFAULT, key, part, seq - 1)?
            {
                if valid_to == seq {
                    replaced.insert(name.into(), state_json(part, eid.kind, &bytes)?);
                }
            }
        }
        let commit = history::commit(g, SpaceId::DEFAULT, seq)?;
        // A change whose replaced state is gone: the element was purged since.
        let purged = replaced.is_empty();
        out.push(json!({
            "space_seq": seq,
            "tx_id": tx_id(seq),
            "committed_at": commit.map(|c| time_text(c.at_ms)),
            "replaced": Value::Object(replaced),
            "purged": purged,
        }));
    }
    let mut v = json!({"element": id, "changes": out, "exists": exists_now});
    if let Some(from) = next {
        let to = match to {
            Some(t) => t,
            None => newest(g)?.map_or(from, |c| c.seq),
        };
        v["next_cursor"] = json!(super::tokens::history_cursor(g, id, from, to)?);
    }
    Ok(v)
}

/// The seq of the oldest commit kept: its own changes are gone with a horizon cut
/// below it (0 when history is whole or not recorded).
pub fn oldest_seq(g: &dyn GraphRead) -> V2Result<u64> {
    Ok(history::oldest(g, SpaceId::DEFAULT)?.map_or(0, |c| c.seq))
}

/// The scope a `HISTORY SPACE` cursor is bound to (element cursors: the element id).
pub const SPACE_SCOPE: &str = "space";

/// `HISTORY SPACE [FROM SEQ a] [TO SEQ b] [LIMIT n]`: the space's commits in seq order
/// (KIP2-HIST-010), each with the elements it changed or ended (creations are the ids
/// between the watermarks of consecutive commits).
pub fn space(
    g: &dyn GraphRead,
    from: Option<u64>,
    to: Option<u64>,
    limit: usize,
) -> V2Result<Value> {
    let Some(last) = newest(g)? else {
        return Ok(json!({"space_id": DEFAULT_SPACE, "commits": []}));
    };
    // Not below the oldest commit kept (a history horizon may have cut the rest).
    // Commit `h` of a cut history is its base: its own changes went with the cut.
    let first = history::oldest(g, SpaceId::DEFAULT)?.map_or(1, |c| c.seq + 1);
    let start = from.unwrap_or(1).max(first);
    let end = to.unwrap_or(last.seq).min(last.seq);
    let mut commits = Vec::new();
    let mut seq = start;
    while seq <= end && commits.len() < limit {
        if let Some(c) = history::commit(g, SpaceId::DEFAULT, seq)? {
            commits.push(commit_json(g, &c)?);
        }
        seq += 1;
    }
    let mut v = json!({"space_id": DEFAULT_SPACE, "commits": commits});
    if seq <= end {
        v["next_cursor"] = json!(super::tokens::history_cursor(g, SPACE_SCOPE, seq, end)?);
    }
    Ok(v)
}

/// One commit with what it did.
fn commit_json(g: &dyn GraphRead, c: &CommitRecord) -> V2Result<Value> {
    let mut changed = Vec::new();
    g.scan_changes(SpaceId::DEFAULT, c.seq - 1, &mut |seq, key| {
        if seq != c.seq {
            return Ok(false);
        }
        if let Some(id) = ElementId::decode(key) {
            changed.push(json!(id.id_string()));
        }
        Ok(true)
    })?;
    let prev = history::commit(g, SpaceId::DEFAULT, c.seq - 1)?;
    let mut created = Map::new();
    if let Some(p) = prev {
        let w0 = p.watermarks;
        let w1 = c.watermarks;
        for (name, a, b) in [
            ("C", w0.concept, w1.concept),
            // Propositions and assertions share one counter.
            ("P|A", w0.prop, w1.prop),
            ("E", w0.evidence, w1.evidence),
            ("X", w0.activity, w1.activity),
        ] {
            if b > a {
                created.insert(name.into(), json!([a, b - 1]));
            }
        }
    }
    Ok(json!({
        "space_seq": c.seq,
        "tx_id": tx_id(c.seq),
        "committed_at": time_text(c.at_ms),
        "changed": changed,
        "created_ranges": Value::Object(created),
    }))
}

/// `CHANGES AFTER SEQ k [LIMIT n]`: the commits after `k`, oldest first.
pub fn changes_after(g: &dyn GraphRead, after: u64, limit: usize) -> V2Result<Value> {
    let last = newest(g)?.map_or(0, |c| c.seq);
    if after > last {
        return Err(unavailable(format!(
            "the space has not reached seq {after}: its newest commit is seq {last}"
        )));
    }
    if let Some(oldest) = history::oldest(g, SpaceId::DEFAULT)? {
        if after < oldest.seq {
            // The changes right after `after` were cut by the history horizon: a page
            // from here would silently skip them.
            return Err(unavailable(format!(
                "the changes after seq {after} are past the history this memory keeps (it starts at seq {})",
                oldest.seq
            ))
            .with_detail("oldest_seq", oldest.seq));
        }
    }
    let mut v = space(g, Some(after + 1), None, limit)?;
    let shown = v["commits"].as_array().map_or(0, Vec::len) as u64;
    v["after_seq"] = json!(after);
    v["newest_seq"] = json!(last);
    if after + shown < last {
        v["more"] = json!(true);
    }
    // Where `CHANGES SINCE` continues: after the last commit shown.
    v["cursor"] = json!(super::tokens::change_cursor(g, after + shown)?);
    Ok(v)
}

/// `CHANGES SINCE cursor [LIMIT n]`: [`changes_after`] the seq a change cursor names.
/// A cursor of this memory's form that names no reached seq, or is not whole, is
/// `ChangeCursorInvalid`; a string this memory never issued (another memory's cursor,
/// whose tag does not verify under this memory's key, or one it no longer knows) is
/// `ChangeCursorExpired`, never a silent restart from now (KIP2-META-022).
pub fn changes_since(g: &dyn GraphRead, cursor: &Value, limit: usize) -> V2Result<Value> {
    let Some(text) = cursor.as_str().filter(|t| !t.is_empty()) else {
        return Err(V2Error::new(
            Code::ChangeCursorInvalid,
            "CHANGES SINCE takes a change cursor: the \"cursor\" of an earlier CHANGES result",
        )
        .with_hint("CHANGES AFTER SEQ 0 starts from the beginning"));
    };
    if text.starts_with(super::cursors::PREFIX) {
        return Err(V2Error::new(
            Code::CursorTypeMismatch,
            "a KQL cursor is not a change cursor: cursor families are not interchangeable (§88.4)",
        )
        .with_hint(
            "page the FIND with its CURSOR; CHANGES SINCE takes the \"cursor\" of a CHANGES result",
        ));
    }
    let last = newest(g)?.map_or(0, |c| c.seq);
    if let Some(rest) = text.strip_prefix(super::tokens::CHANGE_CURSOR) {
        use super::tokens::ChangeCursor;
        return match super::tokens::read_change_cursor(g, rest)? {
            ChangeCursor::After(seq) if seq <= last => changes_after(g, seq, limit).map_err(|e| {
                if e.code == Code::HistoricalSnapshotUnavailable {
                    // The cursor's position was cut by the history horizon.
                    V2Error::new(Code::ChangeCursorExpired, e.message)
                        .with_hint("start again with CHANGES AFTER SEQ at the oldest seq kept (HISTORY SPACE shows it)")
                } else {
                    e
                }
            }),
            ChangeCursor::Foreign => Err(V2Error::new(
                Code::ChangeCursorExpired,
                format!("\"{text}\" was not issued by this memory: a change cursor continues only the history it came from"),
            )
            .with_hint(format!(
                "start again with CHANGES AFTER SEQ n (the newest seq is {last}); HISTORY SPACE lists the commits"
            ))),
            _ => Err(V2Error::new(
                Code::ChangeCursorInvalid,
                format!("\"{text}\" is not a change cursor of this memory's history (newest seq {last})"),
            )
            .with_hint("send the \"cursor\" of a CHANGES result as it came")),
        };
    }
    Err(V2Error::new(
        Code::ChangeCursorExpired,
        format!("this memory holds no change cursor \"{text}\": it expired or came from another memory"),
    )
    .with_hint(format!(
        "start again with CHANGES AFTER SEQ n (the newest seq is {last}); HISTORY SPACE lists the commits"
    )))
}

/// The request's `preconditions` (§35.4), checked in the transaction they bind: the
/// space at another seq is `PreconditionFailed`, the Schema Environment at another
/// version `SchemaEnvironmentChanged`; nothing runs then.
pub fn check_preconditions(g: &dyn GraphRead, pre: Option<&Map<String, Value>>) -> V2Result<()> {
    let Some(pre) = pre else {
        return Ok(());
    };
    if let Some(v) = pre.get("space_seq") {
        let want = whole(v, "preconditions.space_seq")?;
        let have = snapshot_seq(g)?;
        if want != have {
            return Err(V2Error::new(
                Code::PreconditionFailed,
                format!("the space is at seq {have}, the request expects {want}"),
            )
            .with_hint("read again (SNAPSHOT) and decide on the current state")
            .with_detail("expected", want)
            .with_detail("actual", have));
        }
    }
    if let Some(v) = pre.get("schema_environment_version") {
        let want = whole(v, "preconditions.schema_environment_version")?;
        let have = super::packages::version(g)?;
        if want != have {
            return Err(V2Error::new(
                Code::SchemaEnvironmentChanged,
                format!("the Schema Environment is at version {have}, the request expects {want}"),
            )
            .with_hint("DESCRIBE SCHEMA ENVIRONMENT, then send the request for the current one")
            .with_detail("expected", want)
            .with_detail("actual", have));
        }
    }
    Ok(())
}
