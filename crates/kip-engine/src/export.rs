//! Export of the whole graph as a KIP capsule that re-imports to the same graph.
//!
//! The capsule names every element by its identity, never by its engine ID: concepts by
//! `{type, name}`, propositions by their `(subject, "predicate", object)` structure.
//! Order is by content, so the same graph always exports to the same text: type
//! definitions first (`$ConceptType` then `$PropositionType`), then the other concepts
//! by type and name, then the links between concepts by text, then the higher-order
//! links (about other links).
//!
//! A higher-order link names a link between concepts by its structure (one level, a
//! fixed size), and a higher-order link by a handle (`PROPOSITION ?h12 { ... }`) bound
//! earlier in the same UPSERT: each group of higher-order links that refer to one
//! another is written in one statement, in dependency order. So an export is linear in
//! the graph and never nests (a chain of 20,000 statements about statements exported
//! as nested text grew quadratically and could not be parsed back).

use crate::store::{ElemRef, GraphRead, PropRecord};
use kip_lang::KipError;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Write;

/// Blocks per UPSERT statement in an export.
pub const BLOCKS_PER_UPSERT: usize = 500;

pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

pub(crate) fn obj(m: &Map<String, Value>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

/// Metadata without the engine's reserved `_` keys, which are never exported (they
/// are the engine's own bookkeeping, and an import refuses them).
pub fn exportable(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !crate::kml::primitives::is_reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
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
///
/// Long (about 165 lines): the concept blocks, then the link blocks, in one sorted
/// pass each, sharing the writer and the block size.
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
    // First-order links (both ends concepts): rendered in full, sorted by text.
    // Higher-order links: endpoints and a content hash per link, for the groups below.
    let mut links: Vec<(String, u64)> = Vec::new();
    let mut first_order_text: HashMap<u64, String> = HashMap::new();
    let mut higher: HashMap<u64, PropRecord> = HashMap::new();
    for n in ids {
        let Some(p) = g.prop(n)? else { continue };
        match (p.subject, p.object) {
            (ElemRef::Concept(_), ElemRef::Concept(_)) => {
                let text = format!(
                    "({}, {}, {})",
                    concept_ref(&names, p.subject)?,
                    q(&p.predicate),
                    concept_ref(&names, p.object)?
                );
                first_order_text.insert(n, text.clone());
                links.push((text, n));
            }
            _ => {
                higher.insert(n, p);
            }
        }
    }
    links.sort();
    let groups = higher_order_groups(&higher, &names, &first_order_text)?;
    out.write_all(
        b"// kip-nexus export: the whole graph as a KIP capsule (kip import re-creates it).\n",
    )
    .map_err(io)?;
    let mut in_statement = 0usize;
    let mut block = String::new();
    // Ends the open UPSERT statement, if any.
    let close = |out: &mut dyn Write, in_statement: &mut usize| -> Result<(), KipError> {
        if *in_statement > 0 {
            out.write_all(b"}\n").map_err(io)?;
            *in_statement = 0;
        }
        Ok(())
    };
    let emit =
        |out: &mut dyn Write, in_statement: &mut usize, block: &str| -> Result<(), KipError> {
            if *in_statement == 0 {
                out.write_all(b"UPSERT {\n").map_err(io)?;
            }
            out.write_all(block.as_bytes()).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
            *in_statement += 1;
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
        let meta = exportable(&c.metadata);
        if !meta.is_empty() {
            block.push_str(&format!(" WITH METADATA {}", obj(&meta)));
        }
        emit(out, &mut in_statement, &block)?;
        if in_statement == BLOCKS_PER_UPSERT {
            close(out, &mut in_statement)?;
        }
    }
    let prop_block = |block: &mut String, handle: &str, text: &str, p: &PropRecord| {
        block.clear();
        block.push_str(&format!("  PROPOSITION {handle}{{\n    {text}\n"));
        if !p.attributes.is_empty() {
            block.push_str(&format!("    SET ATTRIBUTES {}\n", obj(&p.attributes)));
        }
        block.push_str("  }");
        let meta = exportable(&p.metadata);
        if !meta.is_empty() {
            block.push_str(&format!(" WITH METADATA {}", obj(&meta)));
        }
    };
    for (text, n) in &links {
        let p = g.prop(*n)?.ok_or_else(|| {
            KipError::internal(format!("proposition P:{n} vanished during export"))
        })?;
        prop_block(&mut block, "", text, &p);
        emit(out, &mut in_statement, &block)?;
        if in_statement == BLOCKS_PER_UPSERT {
            close(out, &mut in_statement)?;
        }
    }
    // Each group in one statement (its handles are bound there); a statement holds
    // whole groups, up to BLOCKS_PER_UPSERT blocks unless one group is larger.
    let mut next_handle = 0usize;
    for group in &groups {
        if in_statement > 0 && in_statement + group.len() > BLOCKS_PER_UPSERT {
            close(out, &mut in_statement)?;
        }
        let mut handles: HashMap<u64, String> = HashMap::with_capacity(group.len());
        for n in group {
            let p = higher.get(n).ok_or_else(|| {
                KipError::internal(format!("proposition P:{n} vanished during export"))
            })?;
            let end = |r: ElemRef| -> Result<String, KipError> {
                match r {
                    ElemRef::Concept(_) => concept_ref(&names, r),
                    ElemRef::Prop(m) => match (handles.get(&m), first_order_text.get(&m)) {
                        (Some(h), _) => Ok(h.clone()),
                        (None, Some(t)) => Ok(t.clone()),
                        (None, None) => Err(KipError::internal(format!(
                            "export: P:{n} refers to P:{m}, which is not written before it"
                        ))),
                    },
                }
            };
            let text = format!(
                "({}, {}, {})",
                end(p.subject)?,
                q(&p.predicate),
                end(p.object)?
            );
            let handle = format!("?h{next_handle}");
            next_handle += 1;
            prop_block(&mut block, &format!("{handle} "), &text, p);
            handles.insert(*n, handle);
            emit(out, &mut in_statement, &block)?;
        }
        if in_statement >= BLOCKS_PER_UPSERT {
            close(out, &mut in_statement)?;
        }
    }
    close(out, &mut in_statement)?;
    out.flush().map_err(io)
}

fn concept_ref(names: &HashMap<u64, (String, String)>, r: ElemRef) -> Result<String, KipError> {
    match r {
        ElemRef::Concept(n) => {
            let (t, name) = names
                .get(&n)
                .ok_or_else(|| KipError::internal(format!("dangling reference C:{n}")))?;
            Ok(format!("{{type: {}, name: {}}}", q(t), q(name)))
        }
        ElemRef::Prop(n) => Err(KipError::internal(format!("P:{n} is not a concept"))),
    }
}

/// 64-bit FNV-1a, folded over several parts.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The higher-order links in groups that refer to one another, each group in
/// dependency order (a link after the links it names), groups and members ordered by
/// content (a hash of the link's structure, computed without rendering it), so the
/// same graph exports to the same text.
fn higher_order_groups(
    higher: &HashMap<u64, PropRecord>,
    names: &HashMap<u64, (String, String)>,
    first_order: &HashMap<u64, String>,
) -> Result<Vec<Vec<u64>>, KipError> {
    // Content key and depth per link, bottom-up with an explicit stack (no recursion:
    // chains can be long).
    let mut key: HashMap<u64, (usize, u64)> = HashMap::with_capacity(higher.len());
    let end_key = |r: ElemRef, key: &HashMap<u64, (usize, u64)>| -> Option<(usize, u64)> {
        match r {
            ElemRef::Concept(n) => names
                .get(&n)
                .map(|(t, nm)| (0, fnv(&[b"C", t.as_bytes(), nm.as_bytes()]))),
            ElemRef::Prop(m) => match first_order.get(&m) {
                Some(t) => Some((1, fnv(&[b"P", t.as_bytes()]))),
                None => key.get(&m).copied(),
            },
        }
    };
    let mut ids: Vec<u64> = higher.keys().copied().collect();
    ids.sort_unstable();
    for start in &ids {
        let mut stack = vec![*start];
        let mut guard = 0usize;
        while let Some(&n) = stack.last() {
            guard += 1;
            if guard > 4 * higher.len() + 16 {
                return Err(KipError::internal(
                    "export: a cycle among higher-order links",
                ));
            }
            if key.contains_key(&n) {
                stack.pop();
                continue;
            }
            let p = higher
                .get(&n)
                .ok_or_else(|| KipError::internal(format!("dangling reference P:{n}")))?;
            let mut missing = false;
            for r in [p.subject, p.object] {
                if end_key(r, &key).is_none() {
                    match r {
                        ElemRef::Prop(m) if higher.contains_key(&m) => {
                            stack.push(m);
                            missing = true;
                        }
                        ElemRef::Prop(m) => {
                            return Err(KipError::internal(format!("dangling reference P:{m}")))
                        }
                        ElemRef::Concept(c) => {
                            return Err(KipError::internal(format!("dangling reference C:{c}")))
                        }
                    }
                }
            }
            if missing {
                continue;
            }
            let (ds, hs) = end_key(p.subject, &key).unwrap_or((0, 0));
            let (dob, ho) = end_key(p.object, &key).unwrap_or((0, 0));
            let h = fnv(&[&hs.to_le_bytes(), p.predicate.as_bytes(), &ho.to_le_bytes()]);
            key.insert(n, (ds.max(dob) + 1, h));
            stack.pop();
        }
    }
    // Groups: union of each link with the higher-order links it names.
    let mut parent: HashMap<u64, u64> = ids.iter().map(|n| (*n, *n)).collect();
    fn find(parent: &mut HashMap<u64, u64>, mut x: u64) -> u64 {
        let mut root = x;
        while let Some(&p) = parent.get(&root) {
            if p == root {
                break;
            }
            root = p;
        }
        while let Some(&p) = parent.get(&x) {
            if p == root {
                break;
            }
            parent.insert(x, root);
            x = p;
        }
        root
    }
    for n in &ids {
        if let Some(p) = higher.get(n) {
            for r in [p.subject, p.object] {
                if let ElemRef::Prop(m) = r {
                    if higher.contains_key(&m) {
                        let (a, b) = (find(&mut parent, *n), find(&mut parent, m));
                        if a != b {
                            parent.insert(a.max(b), a.min(b));
                        }
                    }
                }
            }
        }
    }
    let mut by_root: HashMap<u64, Vec<u64>> = HashMap::new();
    for n in &ids {
        let r = find(&mut parent, *n);
        by_root.entry(r).or_default().push(*n);
    }
    let order = |n: &u64| key.get(n).copied().unwrap_or((0, 0));
    let mut groups: Vec<Vec<u64>> = by_root
        .into_values()
        .map(|mut members| {
            // Depth first: a link comes after every link it names.
            members.sort_by_key(|n| (order(n), *n));
            members
        })
        .collect();
    groups.sort_by_key(|m| m.first().map(order));
    Ok(groups)
}
