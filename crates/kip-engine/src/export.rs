//! Export of the whole graph as a KIP capsule that re-imports to the same graph.
//!
//! The capsule names every element by its identity, never by its engine ID: concepts by
//! `{type, name}`, propositions by their `(subject, "predicate", object)` structure
//! (nested for higher-order links). Order is by content, so the same graph always
//! exports to the same text: type definitions first (`$ConceptType` then
//! `$PropositionType`), then the other concepts by type and name, then links by nesting
//! depth and text. Each element carries its attributes and its exact metadata.

use crate::store::{ElemRef, GraphRead, PropRecord};
use kip_lang::KipError;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Write;

/// Blocks per UPSERT statement in an export.
pub const BLOCKS_PER_UPSERT: usize = 500;

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn obj(m: &Map<String, Value>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

/// Renders the whole graph as a capsule.
pub fn export_capsule(g: &dyn GraphRead) -> Result<String, KipError> {
    let mut out = Vec::new();
    export_capsule_to(g, &mut out)?;
    String::from_utf8(out).map_err(|_| KipError::internal("export produced invalid UTF-8"))
}

/// Writes the whole graph as a capsule to `out`, block by block. Only the sort keys are
/// held in memory (type and name per concept, the rendered `(s, p, o)` per link); each
/// block's attributes and metadata are read again when it is written, so exporting a
/// graph takes a fraction of the memory of its text.
pub fn export_capsule_to(g: &dyn GraphRead, out: &mut dyn Write) -> Result<(), KipError> {
    let io = |e: std::io::Error| KipError::internal(format!("cannot write the export: {e}"));
    let mut ids = Vec::new();
    g.scan_concepts(&mut |n| {
        ids.push(n);
        Ok(true)
    })?;
    let mut names: HashMap<u64, (String, String)> = HashMap::with_capacity(ids.len());
    let mut concepts: Vec<(u8, u64)> = Vec::with_capacity(ids.len());
    for n in ids {
        let Some(c) = g.concept(n)? else { continue };
        let rank = match c.concept_type.as_str() {
            "$ConceptType" if c.name == "$ConceptType" => 0,
            "$ConceptType" if c.name == "$PropositionType" => 1,
            "$ConceptType" => 2,
            "$PropositionType" => 3,
            _ => 4,
        };
        concepts.push((rank, n));
        names.insert(n, (c.concept_type, c.name));
    }
    // (rank, type, name): unique per concept, so the order is total.
    concepts.sort_by(|a, b| (a.0, names.get(&a.1)).cmp(&(b.0, names.get(&b.1))));

    let mut ids = Vec::new();
    g.scan_props(&mut |n| {
        ids.push(n);
        Ok(true)
    })?;
    // Rendered text of links used as endpoints of other links (higher-order), so deep
    // nesting is rendered once.
    let mut memo: HashMap<u64, (usize, String)> = HashMap::new();
    let mut links: Vec<(usize, String, u64)> = Vec::with_capacity(ids.len());
    for n in ids {
        let Some(p) = g.prop(n)? else { continue };
        let (depth, text) = render_prop(g, &p, &names, &mut memo, 0)?;
        links.push((depth, text, n));
    }
    drop(memo);
    // (depth, text): a link's text is its identity, unique per link.
    links.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));

    out.write_all(
        b"// kip-nexus export: the whole graph as a KIP capsule (kip import re-creates it).\n",
    )
    .map_err(io)?;
    let mut in_statement = 0usize;
    let mut block = String::new();
    let total = concepts.len() + links.len();
    let mut written = 0usize;
    let mut emit = |out: &mut dyn Write, block: &str| -> Result<(), KipError> {
        if in_statement == 0 {
            out.write_all(b"UPSERT {\n").map_err(io)?;
        }
        out.write_all(block.as_bytes()).map_err(io)?;
        out.write_all(b"\n").map_err(io)?;
        in_statement += 1;
        written += 1;
        if in_statement == BLOCKS_PER_UPSERT || written == total {
            out.write_all(b"}\n").map_err(io)?;
            in_statement = 0;
        }
        Ok(())
    };
    for (_, n) in &concepts {
        let c = g
            .concept(*n)?
            .ok_or_else(|| KipError::internal(format!("concept C:{n} vanished during export")))?;
        block.clear();
        block.push_str(&format!(
            "  CONCEPT {{\n    {{type: {}, name: {}}}\n",
            q(&c.concept_type),
            q(&c.name)
        ));
        if !c.attributes.is_empty() {
            block.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&c.attributes)));
        }
        block.push_str("  }");
        if !c.metadata.is_empty() {
            block.push_str(&format!(" WITH METADATA {}", obj(&c.metadata)));
        }
        emit(out, &block)?;
    }
    for (_, text, n) in &links {
        let p = g.prop(*n)?.ok_or_else(|| {
            KipError::internal(format!("proposition P:{n} vanished during export"))
        })?;
        block.clear();
        block.push_str(&format!("  PROPOSITION {{\n    {text}\n"));
        if !p.attributes.is_empty() {
            block.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&p.attributes)));
        }
        block.push_str("  }");
        if !p.metadata.is_empty() {
            block.push_str(&format!(" WITH METADATA {}", obj(&p.metadata)));
        }
        emit(out, &block)?;
    }
    out.flush().map_err(io)
}

/// `(nesting depth, "(subject, \"predicate\", object)")` of a link.
fn render_prop(
    g: &dyn GraphRead,
    p: &PropRecord,
    names: &HashMap<u64, (String, String)>,
    memo: &mut HashMap<u64, (usize, String)>,
    depth_guard: usize,
) -> Result<(usize, String), KipError> {
    let (ds, s) = render_endpoint(g, p.subject, names, memo, depth_guard + 1)?;
    let (dob, o) = render_endpoint(g, p.object, names, memo, depth_guard + 1)?;
    Ok((ds.max(dob) + 1, format!("({s}, {}, {o})", q(&p.predicate))))
}

fn render_endpoint(
    g: &dyn GraphRead,
    r: ElemRef,
    names: &HashMap<u64, (String, String)>,
    memo: &mut HashMap<u64, (usize, String)>,
    depth_guard: usize,
) -> Result<(usize, String), KipError> {
    match r {
        ElemRef::Concept(n) => {
            let (t, name) = names
                .get(&n)
                .ok_or_else(|| KipError::internal(format!("dangling reference C:{n}")))?;
            Ok((0, format!("{{type: {}, name: {}}}", q(t), q(name))))
        }
        ElemRef::Prop(n) => {
            if let Some(v) = memo.get(&n) {
                return Ok(v.clone());
            }
            if depth_guard > 64 {
                return Err(KipError::internal(
                    "proposition nesting deeper than 64 levels",
                ));
            }
            let p = g
                .prop(n)?
                .ok_or_else(|| KipError::internal(format!("dangling reference P:{n}")))?;
            let v = render_prop(g, &p, names, memo, depth_guard)?;
            memo.insert(n, v.clone());
            Ok(v)
        }
    }
}
