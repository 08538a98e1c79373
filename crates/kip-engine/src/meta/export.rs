//! `EXPORT ?x WHERE {...} [LIMIT n] [CURSOR "t"]` (RC11 §5.3): the elements bound to
//! `?x` as one idempotent `UPSERT` statement that re-imports to the same graph (ids
//! aside). Concepts are written by `{type, name}` with their attributes and metadata;
//! propositions by their `(subject, "predicate", object)` structure, where a concept
//! end is a `{type, name}` reference and a proposition end a nested structural clause
//! (link ids are not portable). Reserved `_` metadata is never exported.
//!
//! Pages: the matched elements are taken in id order (concepts, then propositions);
//! a page holds at most `LIMIT` of them (the FIND default page size without LIMIT),
//! and `next_cursor` resumes after the last one (a keyset cursor bound to the command,
//! as for FIND). Each page is a capsule of its own. Within a page, type definitions
//! come first, then the other concepts, then links between concepts, then links about
//! links, so that every reference inside the capsule points at something written
//! before it.

use crate::export::{exportable, obj, q};
use crate::kql::exec::Val;
use crate::kql::result::{decode_cursor, encode_cursor, fnv1a, solutions, Anchor};
use crate::kql::QueryLimits;
use crate::outcome::Outcome;
use crate::store::{ElemRef, GraphRead};
use kip_lang::ast::{Command, Export, Slot};
use kip_lang::{ErrorCode, KipError};
use serde_json::json;

/// How deeply proposition ends may nest in an exported reference.
const MAX_NESTING: usize = 32;

/// Runs an EXPORT on a snapshot.
pub fn export_command(
    g: &dyn GraphRead,
    e: &Export,
    limits: &QueryLimits,
) -> Result<Outcome, KipError> {
    let fingerprint = {
        let mut bare = e.clone();
        bare.limit = None;
        bare.cursor = None;
        fnv1a(&Command::Export(bare).to_string())
    };
    let after = match &e.cursor {
        Some(Slot::Literal(t, _)) => match decode_cursor(t, fingerprint)? {
            Anchor::Root { id, .. } => Some(id),
            Anchor::Sorted { .. } => {
                return Err(
                    KipError::syntax("this CURSOR was not issued for this EXPORT")
                        .with_hint("pass the next_cursor of the previous EXPORT unchanged"),
                )
            }
        },
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => None,
    };
    let page = match e.limit.as_ref().and_then(|l| l.literal()) {
        Some(n) => usize::try_from(*n).unwrap_or(usize::MAX),
        None => limits.default_page,
    };
    if page > limits.max_page {
        return Err(KipError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "LIMIT {page} is over the largest page of {}",
                limits.max_page
            ),
        )
        .with_hint("export in pages: use a smaller LIMIT and follow next_cursor"));
    }
    let mut keys = Vec::new();
    for v in solutions(g, &e.where_clauses, &e.target.name, limits)? {
        match v {
            Val::Elem(r) => keys.push(r.encode()),
            Val::Pred(_) => {
                return Err(KipError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                        "?{} is bound to a predicate name, not to an element",
                        e.target.name
                    ),
                )
                .with_hint("EXPORT a variable bound to concepts or to links"))
            }
        }
    }
    keys.sort_unstable();
    keys.retain(|k| after.is_none_or(|a| *k > a));
    let more = keys.len() > page;
    keys.truncate(page);
    let next_cursor = if more {
        keys.last()
            .map(|k| encode_cursor(&Anchor::Root { id: *k, hash: 0 }, fingerprint))
    } else {
        None
    };

    let mut concepts = Vec::new();
    let mut links = Vec::new();
    for k in keys {
        match ElemRef::decode(k) {
            ElemRef::Concept(n) => {
                if let Some(c) = g.concept(n)? {
                    let rank = match c.concept_type.as_str() {
                        "$ConceptType" => 0u8,
                        "$PropositionType" => 1,
                        _ => 2,
                    };
                    concepts.push((rank, n, c));
                }
            }
            ElemRef::Prop(n) => {
                if let Some(p) = g.prop(n)? {
                    let depth = link_depth(g, &p, 0)?;
                    links.push((depth, n, p));
                }
            }
        }
    }
    concepts.sort_by_key(|(rank, n, _)| (*rank, *n));
    links.sort_by_key(|(depth, n, _)| (*depth, *n));

    let mut text = String::from("UPSERT {\n");
    for (_, _, c) in &concepts {
        text.push_str(&format!(
            "  CONCEPT {{\n    {{type: {}, name: {}}}\n",
            q(&c.concept_type),
            q(&c.name)
        ));
        if !c.attributes.is_empty() {
            text.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&c.attributes)));
        }
        text.push_str("  }");
        let meta = exportable(&c.metadata);
        if !meta.is_empty() {
            text.push_str(&format!(" WITH METADATA {}", obj(&meta)));
        }
        text.push('\n');
    }
    for (_, _, p) in &links {
        text.push_str(&format!(
            "  PROPOSITION {{\n    ({}, {}, {})\n",
            end_ref(g, p.subject, 0)?,
            q(&p.predicate),
            end_ref(g, p.object, 0)?
        ));
        if !p.attributes.is_empty() {
            text.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&p.attributes)));
        }
        text.push_str("  }");
        let meta = exportable(&p.metadata);
        if !meta.is_empty() {
            text.push_str(&format!(" WITH METADATA {}", obj(&meta)));
        }
        text.push('\n');
    }
    text.push('}');
    Ok(Outcome::Ok {
        result: json!({"capsule": text, "concepts": concepts.len(), "propositions": links.len()}),
        next_cursor,
    })
}

fn too_deep() -> KipError {
    KipError::new(
        ErrorCode::ResourceExhausted,
        format!("a link about links nests more than {MAX_NESTING} levels deep"),
    )
    .with_hint("export the inner links with `kip export`, which writes such chains with handles")
}

/// 0 for a link between concepts, 1 + the deepest end otherwise.
fn link_depth(
    g: &dyn GraphRead,
    p: &crate::store::PropRecord,
    level: usize,
) -> Result<usize, KipError> {
    if level > MAX_NESTING {
        return Err(too_deep());
    }
    let mut depth = 0;
    for end in [p.subject, p.object] {
        if let ElemRef::Prop(n) = end {
            let inner = g
                .prop(n)?
                .ok_or_else(|| KipError::internal(format!("dangling reference P:{n}")))?;
            depth = depth.max(1 + link_depth(g, &inner, level + 1)?);
        }
    }
    Ok(depth)
}

/// A reference to an end: `{type, name}` for a concept, the nested structural clause
/// `(s, "p", o)` for a proposition.
fn end_ref(g: &dyn GraphRead, r: ElemRef, level: usize) -> Result<String, KipError> {
    if level > MAX_NESTING {
        return Err(too_deep());
    }
    match r {
        ElemRef::Concept(n) => {
            let c = g
                .concept(n)?
                .ok_or_else(|| KipError::internal(format!("dangling reference C:{n}")))?;
            Ok(format!(
                "{{type: {}, name: {}}}",
                q(&c.concept_type),
                q(&c.name)
            ))
        }
        ElemRef::Prop(n) => {
            let p = g
                .prop(n)?
                .ok_or_else(|| KipError::internal(format!("dangling reference P:{n}")))?;
            Ok(format!(
                "({}, {}, {})",
                end_ref(g, p.subject, level + 1)?,
                q(&p.predicate),
                end_ref(g, p.object, level + 1)?
            ))
        }
    }
}
