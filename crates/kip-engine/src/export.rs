//! Export of the whole graph as a KIP capsule that re-imports to the same graph.
//!
//! The capsule names every element by its identity, never by its engine ID: concepts by
//! `{type, name}`, propositions by their `(subject, "predicate", object)` structure
//! (nested for higher-order links). Order is by content, so the same graph always
//! exports to the same text: type definitions first (`$ConceptType` then
//! `$PropositionType`), then the other concepts by type and name, then links by nesting
//! depth and text. Each element carries its attributes and its exact metadata.

use crate::store::{ElemRef, GraphRead};
use kip_lang::KipError;
use serde_json::{Map, Value};
use std::collections::HashMap;

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
    let mut concepts = Vec::new();
    g.scan_concepts(&mut |n| {
        concepts.push(n);
        Ok(true)
    })?;
    let mut names: HashMap<u64, (String, String)> = HashMap::new();
    let mut blocks: Vec<((u8, String, String), String)> = Vec::new();
    for n in concepts {
        let Some(c) = g.concept(n)? else { continue };
        let rank = match c.concept_type.as_str() {
            "$ConceptType" if c.name == "$ConceptType" => 0,
            "$ConceptType" if c.name == "$PropositionType" => 1,
            "$ConceptType" => 2,
            "$PropositionType" => 3,
            _ => 4,
        };
        let mut b = format!(
            "  CONCEPT {{\n    {{type: {}, name: {}}}\n",
            q(&c.concept_type),
            q(&c.name)
        );
        if !c.attributes.is_empty() {
            b.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&c.attributes)));
        }
        b.push_str("  }");
        if !c.metadata.is_empty() {
            b.push_str(&format!(" WITH METADATA {}", obj(&c.metadata)));
        }
        names.insert(n, (c.concept_type.clone(), c.name.clone()));
        blocks.push(((rank, c.concept_type, c.name), b));
    }
    blocks.sort_by(|a, b| a.0.cmp(&b.0));

    let mut props = Vec::new();
    g.scan_props(&mut |n| {
        props.push(n);
        Ok(true)
    })?;
    let mut rendered: HashMap<u64, (usize, String)> = HashMap::new();
    fn render(
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
                    .cloned()
                    .ok_or_else(|| KipError::internal(format!("dangling reference C:{n}")))?;
                Ok((0, format!("{{type: {}, name: {}}}", q(&t), q(&name))))
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
                let (ds, s) = render(g, p.subject, names, memo, depth_guard + 1)?;
                let (dob, o) = render(g, p.object, names, memo, depth_guard + 1)?;
                let v = (ds.max(dob) + 1, format!("({s}, {}, {o})", q(&p.predicate)));
                memo.insert(n, v.clone());
                Ok(v)
            }
        }
    }
    let mut links: Vec<((usize, String), String)> = Vec::new();
    for n in props {
        let Some(p) = g.prop(n)? else { continue };
        let (depth, text) = render(g, ElemRef::Prop(n), &names, &mut rendered, 0)?;
        let mut b = format!("  PROPOSITION {{\n    {text}\n");
        if !p.attributes.is_empty() {
            b.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&p.attributes)));
        }
        b.push_str("  }");
        if !p.metadata.is_empty() {
            b.push_str(&format!(" WITH METADATA {}", obj(&p.metadata)));
        }
        links.push(((depth, text), b));
    }
    links.sort_by(|a, b| a.0.cmp(&b.0));

    let mut out = String::from(
        "// kip-nexus export: the whole graph as a KIP capsule (kip import re-creates it).\n",
    );
    let all: Vec<String> = blocks
        .into_iter()
        .map(|b| b.1)
        .chain(links.into_iter().map(|l| l.1))
        .collect();
    for chunk in all.chunks(BLOCKS_PER_UPSERT) {
        out.push_str("UPSERT {\n");
        for b in chunk {
            out.push_str(b);
            out.push('\n');
        }
        out.push_str("}\n");
    }
    Ok(out)
}
