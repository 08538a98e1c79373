//! TTL reclamation's deletions, each decided in the transaction that deletes (issue 45).
//!
//! The cycle plans from one snapshot ([`super::health::verdict`] and
//! [`super::health::link_verdict`], with the strict timestamp reader of
//! [`crate::time`]) and logs the plan before anything is deleted: every element and
//! every link its deletion takes along (the incident links and, through them, the
//! links about links). Then each planned deletion runs in a write transaction of its
//! own that first evaluates the whole rule again on the state it is about to change:
//! an element that stopped being eligible since the plan (its Event's consolidation
//! set back to pending, a new `derived_from` making it sole evidence, its `expires_at`
//! pushed out) is skipped and reported, and so is one whose deletion would now take a
//! link the plan does not list. Nothing outside the plan is ever deleted.

use super::health::{link_verdict, verdict, LinkVerdict, Verdict};
use crate::kml::primitives::{Privilege, Writer};
use crate::store::{ElemRef, GraphRead, GraphWrite, StoreResult};
use kip_lang::KipError;
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::SystemTime;

/// One deletion of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    /// The element (`C:n` or `P:n`).
    pub id: String,
    /// A concept's `{type, name}` when planned (a deletion of a concept that was renamed
    /// since is skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<(String, String)>,
    /// The links its deletion takes along (incident links, then links about those
    /// links, recursively), as `P:n`.
    pub with_links: Vec<String>,
    #[serde(skip)]
    target: Option<ElemRef>,
    #[serde(skip)]
    cascade: BTreeSet<u64>,
}

impl Planned {
    /// The plan of deleting concept `id` (named `key`) as the graph `r` stands.
    pub fn concept(r: &dyn GraphRead, id: u64, key: (String, String)) -> StoreResult<Planned> {
        let at = ElemRef::Concept(id);
        let cascade = cascade(r, at)?;
        Ok(Planned {
            id: at.id_string(),
            key: Some(key),
            with_links: cascade
                .iter()
                .map(|p| ElemRef::Prop(*p).id_string())
                .collect(),
            target: Some(at),
            cascade,
        })
    }

    /// The plan of deleting link `id` as the graph `r` stands.
    pub fn link(r: &dyn GraphRead, id: u64) -> StoreResult<Planned> {
        let at = ElemRef::Prop(id);
        let cascade = cascade(r, at)?;
        Ok(Planned {
            id: at.id_string(),
            key: None,
            with_links: cascade
                .iter()
                .map(|p| ElemRef::Prop(*p).id_string())
                .collect(),
            target: Some(at),
            cascade,
        })
    }

    /// How many elements the deletion removes (itself and its links).
    pub fn size(&self) -> usize {
        1 + self.cascade.len()
    }
}

/// What became of a planned deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reclaimed {
    /// Deleted, with this many concepts and links.
    Deleted {
        /// Concepts deleted (0 or 1).
        concepts: u64,
        /// Links deleted.
        propositions: u64,
    },
    /// Not deleted: why.
    Skipped(String),
}

/// The links whose deletion deleting `at` implies: its incident links, and the links
/// whose subject or object is one of those, recursively.
pub fn cascade(r: &dyn GraphRead, at: ElemRef) -> StoreResult<BTreeSet<u64>> {
    let mut out = BTreeSet::new();
    let mut queue = vec![at];
    while let Some(e) = queue.pop() {
        let mut found = Vec::new();
        r.scan_out(e, None, &mut |_, _, id| {
            found.push(id);
            Ok(true)
        })?;
        r.scan_in(e, None, &mut |_, _, id| {
            found.push(id);
            Ok(true)
        })?;
        for id in found {
            if out.insert(id) {
                queue.push(ElemRef::Prop(id));
            }
        }
    }
    if let ElemRef::Prop(own) = at {
        out.remove(&own);
    }
    Ok(out)
}

/// Deletes what `p` plans, in the caller's write transaction, only if the element is
/// still eligible as of `now` and its deletion takes no link outside the plan.
pub fn delete_if_still_eligible(
    w: &mut dyn GraphWrite,
    p: &Planned,
    now: SystemTime,
) -> Result<Reclaimed, KipError> {
    let Some(target) = p.target else {
        return Ok(Reclaimed::Skipped("not a planned element".into()));
    };
    match target {
        ElemRef::Concept(n) => {
            let Some(c) = w.concept(n)? else {
                return Ok(Reclaimed::Skipped("already gone".into()));
            };
            if p.key.as_ref() != Some(&(c.concept_type.clone(), c.name.clone())) {
                return Ok(Reclaimed::Skipped(
                    "its type or name changed since the plan".into(),
                ));
            }
            let v = verdict(&*w, n, &c, now)?;
            if v != Verdict::Delete {
                return Ok(Reclaimed::Skipped(format!(
                    "no longer eligible for deletion ({})",
                    verdict_reason(&v)
                )));
            }
        }
        ElemRef::Prop(n) => {
            let Some(l) = w.prop(n)? else {
                return Ok(Reclaimed::Skipped("already gone".into()));
            };
            let v = link_verdict(&*w, &l, now)?;
            if v != LinkVerdict::Delete {
                return Ok(Reclaimed::Skipped(format!(
                    "no longer eligible for deletion ({v:?})"
                )));
            }
        }
    }
    let now_cascade = cascade(&*w, target)?;
    let outside: Vec<String> = now_cascade
        .difference(&p.cascade)
        .map(|id| ElemRef::Prop(*id).id_string())
        .collect();
    if !outside.is_empty() {
        return Ok(Reclaimed::Skipped(format!(
            "its deletion would now also delete links the plan does not list: {}",
            outside.join(", ")
        )));
    }
    let mut writer = Writer::new(w, Privilege::Agent);
    Ok(match target {
        ElemRef::Concept(n) => {
            let (concepts, propositions) = writer.delete_concepts(&[n])?;
            Reclaimed::Deleted {
                concepts,
                propositions,
            }
        }
        ElemRef::Prop(n) => Reclaimed::Deleted {
            concepts: 0,
            propositions: writer.delete_links(vec![n])?,
        },
    })
}

fn verdict_reason(v: &Verdict) -> &'static str {
    match v {
        Verdict::Keep => "not expired",
        Verdict::Unreadable => "expires_at is not a timestamp",
        Verdict::Protected => "protected",
        Verdict::Review => "its type or status is not TTL-deletable",
        Verdict::ExtendPending => "its consolidation is pending",
        Verdict::ExtendSoleEvidence => "it is the only evidence of an active concept",
        Verdict::Delete => "eligible",
    }
}
