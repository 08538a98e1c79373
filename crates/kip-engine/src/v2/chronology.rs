//! The META statements of cognitive time (Specification §68, §48.1): SNAPSHOT and
//! DESCRIBE SNAPSHOT [AS OF], DESCRIBE SCHEMA ENVIRONMENT AS OF, HISTORY ELEMENT |
//! SPACE and CHANGES AFTER SEQ | SINCE: their scalars read, then answered by
//! `history.rs` on the operation's snapshot (the request's transaction, its shared
//! snapshot, or a new one: the caller's `on`).

use super::error::{Code, V2Error};
use super::runtime::{scalar, whole};
use super::{history, packages, tokens};
use crate::nexus::Nexus;
use crate::store::GraphRead;
use kip_lang::v2::ast::{Describe, Meta, Scalar};
use serde_json::{json, Value};

/// The most commits or changes one HISTORY / CHANGES answers (page with FROM SEQ or
/// the change cursor).
const MAX_HISTORY_PAGE: usize = 1_000;

/// Runs a read on the operation's snapshot.
pub(super) type On<'a> =
    dyn Fn(&dyn Fn(&dyn GraphRead) -> Result<Value, V2Error>) -> Result<Value, V2Error> + 'a;

/// Whether `m` is one of the statements this module answers.
pub(super) fn handles(m: &Meta) -> bool {
    matches!(
        m,
        Meta::Snapshot(_)
            | Meta::Describe(Describe::Snapshot(_))
            | Meta::Describe(Describe::SchemaEnvironment(Some(_)))
            | Meta::History { .. }
            | Meta::Changes { .. }
    )
}

fn limit_of(
    nexus: &Nexus,
    param: &dyn Fn(&Scalar) -> Option<Value>,
    limit: &Option<Scalar>,
) -> Result<usize, V2Error> {
    Ok(match limit {
        Some(l) => usize::try_from(whole(&scalar(param, l)?, "LIMIT")?)
            .unwrap_or(usize::MAX)
            .min(MAX_HISTORY_PAGE),
        None => nexus.limits().default_page,
    })
}

/// Answers `m` (one [`handles`] accepts).
pub(super) fn run(
    nexus: &Nexus,
    m: &Meta,
    param: &dyn Fn(&Scalar) -> Option<Value>,
    on: &On<'_>,
) -> Result<Value, V2Error> {
    match m {
        Meta::Describe(Describe::SchemaEnvironment(Some(clause))) => on(&|g| {
            let commit = history::resolve(g, clause, &|s| scalar(param, s))?;
            packages::describe_at(g, commit.seq)
        }),
        Meta::Snapshot(clause) | Meta::Describe(Describe::Snapshot(clause)) => on(&|g| {
            let commit = match clause {
                Some(c) => history::resolve(g, c, &|s| scalar(param, s))?,
                None => history::newest(g)?.ok_or_else(|| {
                    V2Error::new(
                        Code::HistoricalSnapshotUnavailable,
                        "this memory records no history yet",
                    )
                })?,
            };
            let mut v = history::snapshot(&commit);
            if let Some(t) = tokens::issue(nexus, g, commit.seq)? {
                v["snapshot_token"] = json!(t);
            }
            Ok(v)
        }),
        Meta::History {
            element,
            from_seq,
            to_seq,
            limit,
            cursor,
        } => {
            let seq = |s: &Option<Scalar>| -> Result<Option<u64>, V2Error> {
                s.as_ref()
                    .map(|s| whole(&scalar(param, s)?, "SEQ"))
                    .transpose()
            };
            let (from, to) = (seq(from_seq)?, seq(to_seq)?);
            // `CURSOR null` (or none) is the first page; a cursor continues its
            // traversal where the last page stopped (it carries FROM and TO).
            let cursor = match cursor {
                Some(c) => match scalar(param, c)? {
                    Value::Null => None,
                    Value::String(t) => Some(t),
                    _ => {
                        return Err(V2Error::new(
                            Code::TypeMismatch,
                            "HISTORY ... CURSOR takes the next_cursor of a HISTORY page (a string) or null",
                        ))
                    }
                },
                None => None,
            };
            let limit = limit_of(nexus, param, limit)?;
            let id = element
                .as_ref()
                .map(|e| {
                    scalar(param, e)?
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| {
                            V2Error::new(Code::TypeMismatch, "HISTORY ELEMENT takes an element id")
                                .with_hint("HISTORY ELEMENT \"C:12\"")
                        })
                })
                .transpose()?;
            on(&|g| {
                let scope = id.as_deref().unwrap_or(history::SPACE_SCOPE);
                let (from, to) = match &cursor {
                    Some(t) => {
                        let (f, t) = tokens::read_history_cursor(g, t, scope)?;
                        // A traversal the history horizon cut since its last page
                        // would skip what it has not shown: refused, never skipped.
                        let kept = history::oldest_seq(g)?;
                        if f <= kept {
                            return Err(V2Error::new(
                                Code::CursorExpired,
                                format!("the history this cursor continues (from seq {f}) was cut: the memory keeps it from seq {kept} on"),
                            )
                            .with_hint("start the traversal again without CURSOR"));
                        }
                        (Some(f), Some(t))
                    }
                    None => (from, to),
                };
                match &id {
                    Some(id) => history::element(g, id, from, to, limit),
                    None => history::space(g, from, to, limit),
                }
            })
        }
        Meta::Changes {
            after_seq,
            from,
            limit,
        } => {
            let from = scalar(param, from)?;
            let after = if *after_seq {
                Some(whole(&from, "CHANGES AFTER SEQ")?)
            } else {
                None
            };
            let limit = limit_of(nexus, param, limit)?;
            on(&|g| match after {
                Some(seq) => history::changes_after(g, seq, limit),
                None => history::changes_since(g, &from, limit),
            })
        }
        _ => Err(V2Error::new(
            Code::InternalError,
            "a META statement of history was routed to the wrong executor",
        )),
    }
}
