//! What is embedded for each element and how a vector is stored: the texts
//! (concepts, propositions), the hash that ties a stored vector to its text, the stored
//! encoding, and the checks over stored vectors (`kip check`, `kip reindex --vectors`).

use crate::store::{ConceptRecord, ElemRef, GraphRead, PropRecord, StoreResult};
use kip_lang::KipError;
use serde_json::Value;

/// The text embedded for a concept: `name: first value. next value. ...` (the colon
/// after the name measured better with MiniLM than a full stop: a name is often a made-up
/// word the model knows nothing of).
pub fn embedding_text(c: &ConceptRecord) -> String {
    let mut out = c.name.clone();
    let mut first = true;
    let mut push = |s: &str| {
        let s = s.trim();
        if !s.is_empty() {
            if !out.is_empty() {
                out.push_str(if first { ": " } else { ". " });
            }
            first = false;
            out.push_str(s);
        }
    };
    for k in kip_storage::text::DESCRIPTIVE_ATTRIBUTES {
        match c.attributes.get(k) {
            Some(Value::String(s)) => push(s),
            Some(Value::Array(items)) => {
                for it in items {
                    if let Value::String(s) = it {
                        push(s);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A predicate in words: `works_at` -> `works at`.
fn predicate_words(p: &str) -> String {
    p.replace(['_', '-'], " ")
}

/// How an endpoint of a link reads in its text: a concept's name; a proposition (a
/// higher-order link) as its predicate in words.
fn endpoint_text(r: &dyn GraphRead, e: ElemRef) -> StoreResult<String> {
    Ok(match e {
        ElemRef::Concept(n) => r.concept_head(n)?.map(|(_, name)| name).unwrap_or_default(),
        ElemRef::Prop(n) => r
            .prop(n)?
            .map(|p| predicate_words(&p.predicate))
            .unwrap_or_default(),
    })
}

/// The text embedded for a proposition: `subject predicate-in-words object`, then the
/// predicate's description when its `$PropositionType` has one.
pub fn prop_embedding_text(r: &dyn GraphRead, p: &PropRecord) -> StoreResult<String> {
    let mut out = format!(
        "{} {} {}",
        endpoint_text(r, p.subject)?,
        predicate_words(&p.predicate),
        endpoint_text(r, p.object)?
    );
    let def = match r.concept_by_key(kip_storage::PROPOSITION_TYPE, &p.predicate)? {
        Some(n) => r.concept(n)?,
        None => None,
    };
    if let Some(Value::String(d)) = def.as_ref().and_then(|c| c.attributes.get("description")) {
        let d = d.trim();
        if !d.is_empty() {
            out.push_str(". ");
            out.push_str(d);
        }
    }
    Ok(out.trim().to_string())
}

/// The vector-index type tag of a link of `predicate` (concept types never start with
/// a NUL, so the two kinds cannot collide).
pub(super) fn link_tag(predicate: &str) -> String {
    format!("\u{0}{predicate}")
}

/// An element's current type tag (a concept's type; [`link_tag`] of a link's predicate)
/// and embedded text, by [`ElemRef::encode`] key; `None` when it is gone.
pub(super) fn element_text(r: &dyn GraphRead, key: u64) -> StoreResult<Option<(String, String)>> {
    Ok(match ElemRef::decode(key) {
        ElemRef::Concept(n) => r
            .concept(n)?
            .map(|c| (c.concept_type.clone(), embedding_text(&c))),
        ElemRef::Prop(n) => match r.prop(n)? {
            Some(p) => Some((link_tag(&p.predicate), prop_embedding_text(r, &p)?)),
            None => None,
        },
    })
}

/// FNV-1a of the embedded text: what a stored vector was made from.
pub(super) fn text_hash(t: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in t.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(super) fn encode_vector(hash: u64, v: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + v.len() * 4);
    b.extend_from_slice(&hash.to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

pub(super) fn decode_vector(b: &[u8]) -> Option<(u64, Vec<f32>)> {
    if b.len() < 8 || !(b.len() - 8).is_multiple_of(4) {
        return None;
    }
    let hash = u64::from_le_bytes(b[..8].try_into().ok()?);
    let v = b[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some((hash, v))
}
/// The stored vectors' invariants, for `kip check`: each decodes, all have one
/// dimension, holds only finite numbers, and belongs to an element that exists (a
/// deleted element's vector goes in the same transaction). Returns the problems found.
pub fn check_vectors(r: &dyn GraphRead) -> StoreResult<Vec<String>> {
    let mut problems = Vec::new();
    let mut dim: Option<usize> = None;
    let mut keys = Vec::new();
    r.scan_vectors(&mut |key, bytes| {
        let id = ElemRef::decode(key).id_string();
        match decode_vector(bytes) {
            None => problems.push(format!("the stored vector of {id} does not decode")),
            Some((_, v)) => {
                if v.iter().any(|x| !x.is_finite()) {
                    problems.push(format!(
                        "the stored vector of {id} holds a non-finite number"
                    ));
                }
                match dim {
                    None => dim = Some(v.len()),
                    Some(d) if d != v.len() => problems.push(format!(
                        "the stored vector of {id} has {} dimensions, the others {d}",
                        v.len()
                    )),
                    Some(_) => {}
                }
            }
        }
        keys.push(key);
        Ok(true)
    })?;
    for key in keys {
        let exists = match ElemRef::decode(key) {
            ElemRef::Concept(n) => r.concept_head(n)?.is_some(),
            ElemRef::Prop(n) => r.prop(n)?.is_some(),
        };
        if !exists {
            problems.push(format!(
                "a vector is stored for {}, which does not exist",
                ElemRef::decode(key).id_string()
            ));
        }
    }
    Ok(problems)
}

/// Elements ([`ElemRef::encode`] keys) whose stored vector is missing or was made from
/// another text.
pub fn stale_elements(r: &dyn GraphRead) -> Result<Vec<u64>, KipError> {
    let mut ids = Vec::new();
    r.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    r.scan_props(&mut |id| {
        ids.push(ElemRef::Prop(id).encode());
        Ok(true)
    })?;
    let mut stale = Vec::new();
    for id in ids {
        let Some((_, text)) = element_text(r, id)? else {
            continue;
        };
        let fresh = r
            .vector(id)?
            .and_then(|b| decode_vector(&b))
            .is_some_and(|(h, _)| h == text_hash(&text));
        if !fresh {
            stale.push(id);
        }
    }
    Ok(stale)
}
