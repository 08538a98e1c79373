//! A type scan joined with the links into it: `?c {type: T}` then `(x, "p", ?c)`.
//!
//! When the predicate has fewer than `SEEK_COST` links per scanned concept, one pass
//! over its links in (object, subject) order, merged with the scanned concepts in
//! ascending number, replaces one index lookup per concept (a thousand categories and
//! the links into them: one range instead of a thousand descents). `merge_join` makes
//! the rows (in the same order as the nested loop's); [`count_in_links`] only counts the
//! links per concept, for `COUNT` grouped by the scanned concept.

use super::exec::{bind, run_steps, scan_step_from, Ctx, More, Row, Val};
use super::plan::{ConceptStep, EndpointC, Group, PredC, PropKind, PropStep, Step};
use crate::store::{ElemRef, StoreResult};
use kip_lang::KipError;

/// Links per scanned concept above which one lookup per concept beats one pass over
/// the predicate's links (a lookup costs about this many sequential entries).
pub(crate) const SEEK_COST: u64 = 64;

/// A link step right after a concept scan that reads the links of one literal predicate
/// *into* the scanned concepts: `?c {type: T}` then `(x, "p", ?c)`.
pub(crate) fn in_links_of<'s>(c: &ConceptStep, next: &'s Step) -> Option<(&'s PropStep, &'s str)> {
    let Step::Prop(p) = next else { return None };
    let PropKind::Triple(_, PredC::Lits(names, None), EndpointC::Var(o)) = &p.kind else {
        return None;
    };
    let m = &c.matcher;
    let scan = m.id.is_none() && m.name.is_none() && m.concept_type.is_some();
    match names.as_slice() {
        [pred] if *o == c.var && scan => Some((p, pred.as_str())),
        _ => None,
    }
}

/// The concepts step `c` scans, ascending, and whether one pass over the links of
/// `pred` is cheaper than a lookup per concept.
fn scan_ids(ctx: &Ctx, c: &ConceptStep, pred: &str) -> Result<(Vec<u64>, bool), KipError> {
    let mut ids = Vec::new();
    scan_step_from(ctx, c, 0, &mut |n| {
        ids.push(n);
        Ok(true)
    })?;
    let links = ctx.g.stat(crate::store::Stat::Predicate(pred))?;
    let merge = links <= (ids.len() as u64).saturating_mul(SEEK_COST);
    Ok((ids, merge))
}

/// One pass over the links of `pred`, merged with `ids` (ascending):
/// `f(subject, object, link)` for each link into one of them.
fn merged(
    ctx: &Ctx,
    ids: &[u64],
    pred: &str,
    f: &mut dyn FnMut(ElemRef, u64, u64) -> StoreResult<More>,
) -> Result<(), KipError> {
    let mut k = 0usize;
    ctx.g.scan_predicate(pred, &mut |sv, ov, id| {
        ctx.tick()?;
        // Concepts sort before links as objects: past them, nothing more can join.
        let ElemRef::Concept(o) = ov else {
            return Ok(false);
        };
        while ids.get(k).is_some_and(|&n| n < o) {
            k += 1;
        }
        match ids.get(k) {
            None => Ok(false),
            Some(&n) if n != o => Ok(true),
            Some(_) => f(sv, o, id),
        }
    })?;
    Ok(())
}

/// Runs steps `i` (the scan `c`) and `i + 1` (the links into it, `p` of `pred`) as a
/// merge join when that is cheaper, else as the nested loop, then the rest of `steps`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge_join(
    ctx: &Ctx,
    c: &ConceptStep,
    p: &PropStep,
    pred: &str,
    steps: &[Step],
    i: usize,
    row: &Row,
    emit: &mut dyn FnMut(&Row) -> Result<More, KipError>,
) -> Result<More, KipError> {
    let (ids, merge) = scan_ids(ctx, c, pred)?;
    let bind_c = |n: u64| {
        let mut r = row.clone();
        r[c.var] = Some(Val::Elem(ElemRef::Concept(n)));
        r
    };
    if !merge {
        for n in ids {
            if !run_steps(ctx, steps, i + 1, &bind_c(n), emit)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let PropKind::Triple(s, _, _) = &p.kind else {
        return Ok(true);
    };
    // The usual subject is an unbound variable and the link unnamed: then the rows are
    // made by writing into one buffer, with no allocation per link.
    let free_subject = match s {
        EndpointC::Var(slot) if row[*slot].is_none() && *slot != c.var => Some(*slot),
        _ => None,
    };
    let mut more = true;
    if let (Some(slot), None) = (free_subject, p.var) {
        let mut buf = bind_c(0);
        merged(ctx, &ids, pred, &mut |sv, o, _| {
            buf[c.var] = Some(Val::Elem(ElemRef::Concept(o)));
            buf[slot] = Some(Val::Elem(sv));
            more = run_steps(ctx, steps, i + 2, &buf, emit)?;
            Ok(more)
        })?;
        return Ok(more);
    }
    let mut current: Option<(u64, Row)> = None;
    merged(ctx, &ids, pred, &mut |sv, o, id| {
        if current.as_ref().is_none_or(|(x, _)| *x != o) {
            current = Some((o, bind_c(o)));
        }
        let Some((_, r1)) = &current else {
            return Ok(true);
        };
        let Some(r2) = super::exec::accept(ctx, s, sv, r1)? else {
            return Ok(true);
        };
        let r3 = match p.var {
            Some(slot) => match bind(&r2, slot, Val::Elem(ElemRef::Prop(id))) {
                Some(r) => r,
                None => return Ok(true),
            },
            None => r2,
        };
        more = run_steps(ctx, steps, i + 2, &r3, emit)?;
        Ok(more)
    })?;
    Ok(more)
}

/// The shape [`count_in_links`] answers: a group that is exactly `?c {type: T}` then
/// `(?x, "p", ?c)` (no link variable, `?x` free), whose keys read `?c` alone
/// (`key_slots` holds at most its slot). Returns the scan step and the predicate.
pub fn counted_shape<'g>(g: &'g Group, key_slots: &[usize]) -> Option<(&'g ConceptStep, &'g str)> {
    let [Step::Concept(c), next] = g.steps.as_slice() else {
        return None;
    };
    if !g.unions.is_empty() || key_slots.iter().any(|s| *s != c.var) {
        return None;
    }
    let (p, pred) = in_links_of(c, next)?;
    match &p.kind {
        PropKind::Triple(EndpointC::Var(x), _, _) if *x != c.var && p.var.is_none() => {
            Some((c, pred))
        }
        _ => None,
    }
}

/// Concepts whose links [`count_in_links`] asks a store to count at a time.
const COUNT_CHUNK: usize = 1_024;

/// For a group of [`counted_shape`]: the number of links into each scanned concept that
/// has any, counted from the index without making a row per link. `None` when the group
/// has another shape.
pub fn count_in_links(
    ctx: &Ctx,
    g: &Group,
    key_slots: &[usize],
) -> Result<Option<Vec<(u64, u64)>>, KipError> {
    let Some((c, pred)) = counted_shape(g, key_slots) else {
        return Ok(None);
    };
    let (ids, merge) = scan_ids(ctx, c, pred)?;
    let mut counts: Vec<(u64, u64)> = Vec::new();
    if ctx.g.wants_prefetch() {
        // A store whose scans are round trips counts where the links are.
        for chunk in ids.chunks(COUNT_CHUNK) {
            let nodes: Vec<ElemRef> = chunk.iter().map(|n| ElemRef::Concept(*n)).collect();
            let ks = ctx.g.count_in_many(&nodes, pred)?;
            for (n, k) in chunk.iter().zip(ks) {
                ctx.tick_by(k)?;
                if k > 0 {
                    counts.push((*n, k));
                }
            }
        }
        return Ok(Some(counts));
    }
    if !merge {
        for n in ids {
            let mut k = 0u64;
            ctx.g
                .scan_in(ElemRef::Concept(n), Some(pred), &mut |_, _, _| {
                    ctx.tick()?;
                    k += 1;
                    Ok(true)
                })?;
            if k > 0 {
                counts.push((n, k));
            }
        }
        return Ok(Some(counts));
    }
    merged(ctx, &ids, pred, &mut |_, o, _| {
        match counts.last_mut() {
            Some((last, n)) if *last == o => *n += 1,
            _ => counts.push((o, 1)),
        }
        Ok(true)
    })?;
    Ok(Some(counts))
}
