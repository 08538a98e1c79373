//! The integrity check behind `kip check` ([`Admin::check_integrity`], a method of the
//! administration handle): the write-ahead log read back against what the nexus wrote,
//! and every secondary index, reference, statistic and text posting recomputed from the
//! records. Kept apart from the open/commit machinery of `nexus/mod.rs`: it only reads.

use super::*;

/// Elements the check reads (and announces to the store) at a time.
const CHECK_CHUNK: usize = 512;

impl Admin<'_> {
    /// Checks the store's invariants: every index entry matches its record, every link's
    /// subject and object exist, statistics match the data. Returns the problems found.
    pub fn check_integrity(&self) -> Result<Vec<String>, KipError> {
        let mut problems = self.nexus.store.check_storage()?;
        problems.extend(self.check_graph()?);
        problems.extend(
            self.nexus
                .read(|r| Ok(crate::semantic::check_vectors(r)?))?,
        );
        Ok(problems)
    }

    /// One pass over the records gathering what every index must hold, then one
    /// comparison per index: long (about 180 lines) because the expectations are
    /// gathered in a single scan.
    fn check_graph(&self) -> Result<Vec<String>, KipError> {
        use crate::store::ElemRef;
        self.nexus.read(|r| {
            let mut problems = Vec::new();
            let mut type_counts: std::collections::HashMap<String, u64> = Default::default();
            // What the type, name, predicate and incoming-link indexes must hold.
            let mut by_type: HashMap<String, Vec<u64>> = HashMap::new();
            let mut by_name: HashMap<String, Vec<u64>> = HashMap::new();
            // What the attribute value index must hold, per (type, attribute).
            let mut by_attr: HashMap<(String, String), Vec<(String, u64)>> = HashMap::new();
            let mut by_pred: HashMap<String, Vec<(u64, u64, u64)>> = HashMap::new();
            let mut preds: Vec<String> = Vec::new();
            let mut pred_no: HashMap<String, usize> = HashMap::new();
            let mut incoming: Vec<(u64, usize, u64, u64)> = Vec::new();
            let mut concept_ids = Vec::new();
            r.scan_concepts(&mut |n| {
                concept_ids.push(n);
                Ok(true)
            })?;
            // In chunks, each read once; a store whose reads are round trips is told
            // first what the chunk reads (records, then the text index entries their
            // text implies): one round trip per chunk on PostgreSQL, not per element
            // and term.
            let announce = r.wants_prefetch();
            for chunk in concept_ids.chunks(CHECK_CHUNK) {
                if announce {
                    let elems: Vec<ElemRef> = chunk.iter().map(|n| ElemRef::Concept(*n)).collect();
                    r.prefetch_elements(&elems)?;
                }
                let mut recs = Vec::with_capacity(chunk.len());
                for n in chunk {
                    let c = r.concept(*n)?;
                    let doc = c.as_ref().map(crate::meta::text::concept_doc);
                    recs.push((n, c, doc));
                }
                if announce {
                    let wanted: Vec<(&str, u64)> = recs
                        .iter()
                        .filter_map(|(n, _, d)| Some((ElemRef::Concept(**n).encode(), d.as_ref()?)))
                        .flat_map(|(key, d)| d.terms.keys().map(move |t| (t.as_str(), key)))
                        .collect();
                    r.prefetch_postings(&wanted)?;
                }
                for (n, c, doc) in recs {
                    let (Some(c), Some(doc)) = (c, doc) else {
                        problems.push(format!("C:{n} listed but unreadable"));
                        continue;
                    };
                    if r.concept_by_key(&c.concept_type, &c.name)? != Some(*n) {
                        problems.push(format!("C:{n} missing from the (type, name) index"));
                    }
                    if r.concept_by_key(crate::schema::CONCEPT_TYPE, &c.concept_type)?
                        .is_none()
                    {
                        problems.push(format!("C:{n} has unregistered type {}", c.concept_type));
                    }
                    *type_counts.entry(c.concept_type.clone()).or_default() += 1;
                    by_type.entry(c.concept_type.clone()).or_default().push(*n);
                    by_name.entry(c.name.clone()).or_default().push(*n);
                    for (a, v) in crate::store::attrs::entries(&c) {
                        by_attr
                            .entry((c.concept_type.clone(), a.to_string()))
                            .or_default()
                            .push((v, *n));
                    }
                    check_doc(r, ElemRef::Concept(*n), &doc, &mut problems)?;
                }
            }
            for (t, k) in &type_counts {
                let s = r.stat(crate::store::Stat::Type(t))?;
                if s != *k {
                    problems.push(format!(
                        "statistics say {s} concepts of type {t}, the data has {k}"
                    ));
                }
            }
            let mut prop_ids = Vec::new();
            r.scan_props(&mut |n| {
                prop_ids.push(n);
                Ok(true)
            })?;
            let mut pred_counts: std::collections::HashMap<String, u64> = Default::default();
            for chunk in prop_ids.chunks(CHECK_CHUNK) {
                // Announced: the links, then their ends and (subject, predicate, object).
                if announce {
                    let elems: Vec<ElemRef> = chunk.iter().map(|n| ElemRef::Prop(*n)).collect();
                    r.prefetch_elements(&elems)?;
                }
                let mut recs = Vec::with_capacity(chunk.len());
                for n in chunk {
                    recs.push((n, r.prop(*n)?));
                }
                if announce {
                    let live = recs.iter().filter_map(|(_, p)| p.as_ref());
                    let ends: Vec<ElemRef> =
                        live.clone().flat_map(|p| [p.subject, p.object]).collect();
                    r.prefetch_elements(&ends)?;
                    let triples: Vec<(ElemRef, &str, ElemRef)> = live
                        .map(|p| (p.subject, p.predicate.as_str(), p.object))
                        .collect();
                    r.prefetch(&[], &triples)?;
                }
                for (n, p) in recs {
                    let Some(p) = p else {
                        problems.push(format!("P:{n} listed but unreadable"));
                        continue;
                    };
                    for end in [p.subject, p.object] {
                        let exists = match end {
                            ElemRef::Concept(c) => r.concept(c)?.is_some(),
                            ElemRef::Prop(q) => r.prop(q)?.is_some(),
                        };
                        if !exists {
                            problems.push(format!("P:{n} references missing {}", end.id_string()));
                        }
                    }
                    if r.prop_by_spo(p.subject, &p.predicate, p.object)? != Some(*n) {
                        problems.push(format!("P:{n} missing from the spo index"));
                    }
                    let (s, o) = (p.subject.encode(), p.object.encode());
                    by_pred
                        .entry(p.predicate.clone())
                        .or_default()
                        .push((o, s, *n));
                    let k = match pred_no.get(&p.predicate) {
                        Some(k) => *k,
                        None => {
                            preds.push(p.predicate.clone());
                            pred_no.insert(p.predicate.clone(), preds.len() - 1);
                            preds.len() - 1
                        }
                    };
                    incoming.push((o, k, s, *n));
                    *pred_counts.entry(p.predicate.clone()).or_default() += 1;
                }
            }
            let docs = r.stat(crate::store::Stat::TextDocs)?;
            let expected_docs = concept_ids.len() as u64;
            if docs > expected_docs {
                problems.push(format!(
                    "the text index counts {docs} documents for {expected_docs} elements"
                ));
            }
            for (p, k) in &pred_counts {
                let s = r.stat(crate::store::Stat::Predicate(p))?;
                if s != *k {
                    problems.push(format!("statistics say {s} links of {p}, the data has {k}"));
                }
            }
            for ((t, a), want) in by_attr {
                let s = r.stat(crate::store::Stat::Attr(&t, &a))?;
                if s != want.len() as u64 {
                    problems.push(format!(
                        "statistics say {s} indexed values of {t}.{a}, the data has {}",
                        want.len()
                    ));
                }
                let mut got = Vec::new();
                r.scan_attr(
                    &t,
                    &a,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    false,
                    &mut |v, n| {
                        got.push((v.to_string(), n));
                        Ok(true)
                    },
                )?;
                compare_index(&format!("attribute {t}.{a}"), want, got, &mut problems);
            }
            check_secondary(
                r,
                by_type,
                by_name,
                by_pred,
                &preds,
                incoming,
                &mut problems,
            )?;
            Ok(problems)
        })
    }
}

/// Compares one key's index entries with what the records say it must hold (both sorted).
fn compare_index<T: Ord + std::fmt::Debug>(
    what: &str,
    mut want: Vec<T>,
    mut got: Vec<T>,
    problems: &mut Vec<String>,
) {
    want.sort();
    if got.windows(2).any(|w| w[0] >= w[1]) {
        problems.push(format!("the {what} index is out of order"));
        got.sort();
    }
    if want != got {
        let missing = want
            .iter()
            .filter(|x| got.binary_search(x).is_err())
            .count();
        let extra = got
            .iter()
            .filter(|x| want.binary_search(x).is_err())
            .count();
        problems.push(format!(
            "the {what} index disagrees with the records: {missing} entries missing, {extra} extra"
        ));
    }
}

/// Checks the type, name, predicate and incoming-link indexes against the records:
/// under every key the records use, exactly the entries they imply, in key order.
fn check_secondary(
    r: &dyn GraphRead,
    by_type: HashMap<String, Vec<u64>>,
    by_name: HashMap<String, Vec<u64>>,
    by_pred: HashMap<String, Vec<(u64, u64, u64)>>,
    preds: &[String],
    mut incoming: Vec<(u64, usize, u64, u64)>,
    problems: &mut Vec<String>,
) -> Result<(), KipError> {
    use crate::store::{ElemRef, StoreResult};
    type ScanIds =
        fn(&dyn GraphRead, &str, &mut dyn FnMut(u64) -> StoreResult<bool>) -> StoreResult<()>;
    type IdsByKey = HashMap<String, Vec<u64>>;
    let mut by_name = by_name;
    if r.wants_prefetch() {
        // A store whose scans are round trips: many names per query, in chunks.
        let names: Vec<String> = by_name.keys().cloned().collect();
        for chunk in names.chunks(CHECK_CHUNK) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let mut got: HashMap<String, Vec<u64>> = HashMap::new();
            r.scan_names(&refs, &mut |name, n| {
                got.entry(name.to_owned()).or_default().push(n);
                Ok(true)
            })?;
            for name in refs {
                let ids = by_name.remove(name).unwrap_or_default();
                let found = got.remove(name).unwrap_or_default();
                compare_index(&format!("name {name:?}"), ids, found, problems);
            }
        }
    }
    let by_key: [(&str, IdsByKey, ScanIds); 2] = [
        ("type", by_type, |r, k, f| r.scan_type(k, f)),
        ("name", by_name, |r, k, f| r.scan_name(k, f)),
    ];
    for (what, map, scan) in by_key {
        for (key, ids) in map {
            let mut got = Vec::new();
            scan(r, &key, &mut |n| {
                got.push(n);
                Ok(true)
            })?;
            compare_index(&format!("{what} {key:?}"), ids, got, problems);
        }
    }
    for (p, links) in by_pred {
        let mut got = Vec::new();
        r.scan_predicate(&p, &mut |s, o, id| {
            got.push((o.encode(), s.encode(), id));
            Ok(true)
        })?;
        compare_index(&format!("predicate {p:?}"), links, got, problems);
    }
    // Incoming links, one scan per object; predicates compare as strings (key order).
    incoming.sort_by(|a, b| (a.0, &preds[a.1], a.2).cmp(&(b.0, &preds[b.1], b.2)));
    if r.wants_prefetch() {
        // A store whose scans are round trips: the objects' links by every predicate,
        // many objects per query (scan_many), in the same order.
        let mut names = preds.to_vec();
        names.sort();
        let groups: Vec<&[(u64, usize, u64, u64)]> = incoming.chunk_by(|a, b| a.0 == b.0).collect();
        for batch in groups.chunks(CHECK_CHUNK) {
            let nodes: Vec<ElemRef> = batch.iter().map(|g| ElemRef::decode(g[0].0)).collect();
            let mut got: HashMap<u64, Vec<(String, u64, u64)>> = HashMap::new();
            r.scan_many(&nodes, &names, false, &mut |node, p, s, id| {
                got.entry(node.encode())
                    .or_default()
                    .push((p.to_string(), s.encode(), id));
                Ok(true)
            })?;
            for group in batch {
                let object = group[0].0;
                let want: Vec<(String, u64, u64)> = group
                    .iter()
                    .map(|(_, k, s, id)| (preds[*k].clone(), *s, *id))
                    .collect();
                compare_index(
                    &format!("incoming-link ({})", ElemRef::decode(object).id_string()),
                    want,
                    got.remove(&object).unwrap_or_default(),
                    problems,
                );
            }
        }
        return Ok(());
    }
    for group in incoming.chunk_by(|a, b| a.0 == b.0) {
        let object = group[0].0;
        let want: Vec<(String, u64, u64)> = group
            .iter()
            .map(|(_, k, s, id)| (preds[*k].clone(), *s, *id))
            .collect();
        let mut got = Vec::new();
        r.scan_in(ElemRef::decode(object), None, &mut |p, s, id| {
            got.push((p.to_string(), s.encode(), id));
            Ok(true)
        })?;
        compare_index(
            &format!("incoming-link ({})", ElemRef::decode(object).id_string()),
            want,
            got,
            problems,
        );
    }
    Ok(())
}

/// Checks that an element's text index entries match its current text.
fn check_doc(
    r: &dyn GraphRead,
    e: crate::store::ElemRef,
    doc: &crate::meta::text::Doc,
    problems: &mut Vec<String>,
) -> Result<(), KipError> {
    let key = e.encode();
    if doc.terms.is_empty() {
        return Ok(());
    }
    for (t, tf) in &doc.terms {
        match r.posting(t, key)? {
            Some((f, _)) if f != *tf => problems.push(format!(
                "{} has a stale frequency for the text index term {t:?}",
                e.id_string()
            )),
            Some((_, len)) if len != doc.len => {
                problems.push(format!("{} has a stale text index length", e.id_string()))
            }
            Some(_) => {}
            None => problems.push(format!(
                "{} is missing the text index term {t:?}",
                e.id_string()
            )),
        }
    }
    Ok(())
}
