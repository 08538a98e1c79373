//! `SEARCH CONCEPT|PROPOSITION "term" [WITH TYPE "T"] [LIMIT n]` (spec §5.2,
//! DECISIONS.md item 21): BM25 ranking over the concept text index kept in the store.
//!
//! Each query term matches the same term (weight 1) and, from two characters on, the
//! terms it is a prefix of (weight 0.7, at most [`PREFIX_EXPANSION`] of them), so
//! "aspir" finds "Aspirin". A name equal to the whole query earns a bonus over any
//! description mention. Results are element objects with `metadata._score`, best first.
//!
//! Links are not in the keyword index on their own: `SEARCH PROPOSITION` ranks the links
//! of the matching predicates (a `$PropositionType` whose name or description matches)
//! and the links touching the matching concepts, so the index stays the size of the
//! concepts. In the semantic and hybrid modes each link also has its own vector, and the
//! nearest link vectors join those candidates (`fused_links`).

use super::text;
use crate::kml::text as lit;
use crate::kql::QueryLimits;
use crate::outcome::Outcome;
use crate::schema::{self, PROPOSITION_TYPE};
use crate::store::{ElemRef, GraphRead, Stat};
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use kip_lang::ast::{Search, SearchMode, SearchTarget, Slot};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};

/// Default number of results.
pub const DEFAULT_LIMIT: usize = 10;
/// Most results one SEARCH returns.
pub const MAX_LIMIT: usize = 1000;
/// Most index terms one query term expands to as a prefix.
pub const PREFIX_EXPANSION: usize = 64;
const K1: f64 = 1.2;
const B: f64 = 0.75;
const PREFIX_WEIGHT: f64 = 0.7;
const EXACT_NAME_BONUS: f64 = 10.0;
const NAME_PREFIX_BONUS: f64 = 1.0;
/// Postings scored per index term: a term in more concepts than this carries almost no
/// weight (its IDF is near zero), and scoring all of them would make one common word
/// cost as much as a scan. Exact names are found through the name index regardless.
pub const MAX_POSTINGS_PER_TERM: usize = 5_000;
/// Postings scored per query, over all its terms and prefix expansions.
pub const MAX_POSTINGS_PER_QUERY: usize = 25_000;
/// Concepts whose links `SEARCH PROPOSITION` considers.
const LINK_SEED_CONCEPTS: usize = 64;
/// A link reached through a matching endpoint scores this share of the endpoint's score.
const ENDPOINT_WEIGHT: f64 = 0.8;

/// One index term, the postings scored `(concept, weighted tf, document length)` and
/// its document frequency (a lower bound for capped terms).
type TermPostings = (String, Vec<(u64, u32, u32)>, usize);

/// BM25 scores of the concepts matching `qterms` (concept number -> score).
fn concept_scores(
    g: &dyn GraphRead,
    qterms: &[String],
    limits: &QueryLimits,
) -> Result<HashMap<u64, f64>, KipError> {
    let docs = g.stat(Stat::TextDocs)?.max(1) as f64;
    let avgdl = (g.stat(Stat::TextLen)? as f64 / docs).max(1.0);
    let mut scores: HashMap<u64, f64> = HashMap::new();
    let mut work = 0u64;
    for qt in qterms {
        let prefix_ok = qt.chars().count() >= 2;
        // Postings grouped by term; the group's size is the term's document frequency.
        let mut groups: Vec<TermPostings> = Vec::new();
        let mut from = qt.clone();
        loop {
            let mut capped: Option<String> = None;
            g.scan_postings(&from, &mut |t, key, tf, len| {
                if !t.starts_with(qt.as_str()) || (!prefix_ok && t != qt) {
                    return Ok(false);
                }
                if groups.last().is_none_or(|(last, _, _)| last != t) {
                    if groups.len() > PREFIX_EXPANSION || work as usize >= MAX_POSTINGS_PER_QUERY {
                        return Ok(false);
                    }
                    groups.push((t.to_string(), Vec::new(), 0));
                }
                work += 1;
                if work > limits.max_work {
                    return Err(KipError::new(
                        ErrorCode::ResourceExhausted,
                        "the search matched too many index entries",
                    )
                    .with_hint("use a longer or more specific search term, or WITH TYPE")
                    .into());
                }
                let Some(last) = groups.last_mut() else {
                    return Ok(false);
                };
                last.2 += 1;
                if let ElemRef::Concept(n) = ElemRef::decode(key) {
                    last.1.push((n, tf, len));
                }
                if last.1.len() >= MAX_POSTINGS_PER_TERM {
                    // Skip the rest of this term; its document frequency is then a
                    // lower bound, which only matters for terms too common to rank.
                    capped = Some(t.to_string());
                    return Ok(false);
                }
                Ok(true)
            })?;
            match capped {
                Some(t) => from = format!("{t}\u{0}"),
                None => break,
            }
        }
        let mut best: HashMap<u64, f64> =
            HashMap::with_capacity(groups.iter().map(|g| g.1.len()).sum());
        for (t, postings, df) in groups {
            let df = df.max(1) as f64;
            let idf = ((docs - df + 0.5) / (df + 0.5) + 1.0).ln();
            let weight = if t == *qt { 1.0 } else { PREFIX_WEIGHT };
            for (n, tf, len) in postings {
                let dl = f64::from(len.max(1));
                let tf = f64::from(tf);
                let sc = weight * idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
                let e = best.entry(n).or_insert(0.0);
                if sc > *e {
                    *e = sc;
                }
            }
        }
        scores.reserve(best.len());
        for (n, sc) in best {
            *scores.entry(n).or_insert(0.0) += sc;
        }
    }
    Ok(scores)
}

/// The spellings of a query looked up in the name index: as typed, lower case, Title
/// Case (each word's first letter upper case, the rest lower case), upper case.
fn name_variants(term: &str) -> Vec<String> {
    let title = term
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| {
                f.to_uppercase()
                    .chain(c.flat_map(char::to_lowercase))
                    .collect()
            })
        })
        .collect::<Vec<String>>()
        .join(" ");
    let mut out = vec![
        term.to_string(),
        term.to_lowercase(),
        title,
        term.to_uppercase(),
    ];
    out.sort();
    out.dedup();
    out.retain(|v| !v.is_empty());
    out
}

/// The raw-score bonus of a concept named exactly as the (normalized) query, or
/// starting with it.
fn name_bonus(name: &str, query_norm: &str) -> f64 {
    let name_norm = text::normalize(name);
    if name_norm == query_norm {
        EXACT_NAME_BONUS
    } else if name_norm.starts_with(query_norm) {
        NAME_PREFIX_BONUS
    } else {
        0.0
    }
}

/// A ranked concept: `(score, number, (type, name))`.
type Ranked = (f64, u64, (String, String));

/// Concepts ranked by score with name bonuses: `(score, number, (type, name))`, best
/// first, looking at no more than `window` candidates, of `concept_type` when given.
/// Only each candidate's head (type and name) is read; the caller reads the records of
/// the few it returns.
fn ranked_concepts(
    g: &dyn GraphRead,
    scores: &HashMap<u64, f64>,
    query_norm: &str,
    window: usize,
    must: &HashSet<u64>,
    concept_type: Option<&str>,
) -> Result<Vec<Ranked>, KipError> {
    let best_first = |a: &(u64, f64), b: &(u64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut ranked: Vec<(u64, f64)> = scores.iter().map(|(&n, &x)| (n, x)).collect();
    // Each candidate costs a read: look at the best `window` (found without sorting the
    // rest), plus the concepts named exactly as the query wherever they rank.
    let mut candidates: Vec<(u64, f64)> = if ranked.len() > window {
        ranked.select_nth_unstable_by(window, best_first);
        let named: Vec<(u64, f64)> = ranked[window..]
            .iter()
            .filter(|(n, _)| must.contains(n))
            .copied()
            .collect();
        ranked.truncate(window);
        ranked.extend(named);
        ranked
    } else {
        ranked
    };
    candidates.sort_by(best_first);
    let mut out = Vec::new();
    if g.wants_prefetch() {
        let elems: Vec<ElemRef> = candidates.iter().map(|c| ElemRef::Concept(c.0)).collect();
        g.prefetch_elements(&elems)?;
    }
    for (n, score) in candidates {
        let Some(head) = g.concept_head(n)? else {
            continue;
        };
        if concept_type.is_some_and(|t| t != head.0) {
            continue;
        }
        let bonus = name_bonus(&head.1, query_norm);
        out.push((score + bonus, n, head));
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(out)
}

/// Concepts ranked for the semantic and hybrid modes: `(_score, number, record)`, best
/// first (see docs/semantics.md, "Semantic recall").
///
/// - semantic: the `window` nearest vectors (of the wanted type), scored by their
///   cosine with the query (clipped at 0); concepts not embedded yet that match by
///   keyword join with their keyword score, so a fresh write is found at once.
/// - hybrid: the keyword candidates and the nearest vectors together, each scored
///   `0.1 * keyword + 0.9 * cosine` (a concept not embedded yet: its keyword score).
///
/// The nearest vectors are looked for among `vector_window` (+16) of the wanted type:
/// the vector index filters by type itself, so unlike the keyword side it needs no
/// wider window for `WITH TYPE`. Returns `(_score, number)`; no record is read but
/// the heads of neighbours the keyword side scored outside its window (for their
/// names' bonus): the caller reads the results' records and skips any gone since.
/// `keyword` is the keyword side already ranked ([`ranked_concepts`]), `raw` its raw
/// scores before ranking.
#[allow(clippy::too_many_arguments)]
fn fused(
    g: &dyn GraphRead,
    keyword: Vec<Ranked>,
    raw: &HashMap<u64, f64>,
    query_norm: &str,
    vector_window: usize,
    mode: SearchMode,
    q: &Semantic<'_>,
    concept_type: Option<&str>,
) -> Result<Vec<(f64, u64)>, KipError> {
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut seen = HashSet::new();
    let hybrid = mode == SearchMode::Hybrid;
    for (kw, n, _) in keyword {
        let kw = normalized(kw);
        let cos = q.vectors.cosine(n, &q.query).map(|c| f64::from(c.max(0.0)));
        let score = match cos {
            Some(cos) if hybrid => HYBRID_KEYWORD_WEIGHT * kw + (1.0 - HYBRID_KEYWORD_WEIGHT) * cos,
            Some(cos) => cos,
            // Not embedded yet: found by keyword in both modes.
            None => kw,
        };
        seen.insert(n);
        out.push((score, n));
    }
    // Over-fetch: some nearest vectors may belong to concepts deleted since (the
    // caller reads the records of the results and skips those).
    let nearest = q
        .vectors
        .nearest(&q.query, vector_window + 16, concept_type);
    // Only a neighbour the keyword side scored outside its window needs its head read
    // here (its name's bonus counts in hybrid); for the others the vector index already
    // applied the type, and the keyword score is 0.
    let needs_head = |n: &u64| hybrid && raw.contains_key(n);
    if g.wants_prefetch() {
        let elems: Vec<ElemRef> = nearest
            .iter()
            .filter(|(_, n)| !seen.contains(n) && needs_head(n))
            .map(|(_, n)| ElemRef::Concept(*n))
            .collect();
        if !elems.is_empty() {
            g.prefetch_elements(&elems)?;
        }
    }
    for (cos, n) in nearest {
        if seen.contains(&n) {
            continue;
        }
        let cos = f64::from(cos.max(0.0));
        let score = if needs_head(&n) {
            let Some((ty, name)) = g.concept_head(n)? else {
                continue;
            };
            if concept_type.is_some_and(|t| t != ty) {
                continue;
            }
            let kw = raw
                .get(&n)
                .map_or(0.0, |r| normalized(r + name_bonus(&name, query_norm)));
            HYBRID_KEYWORD_WEIGHT * kw + (1.0 - HYBRID_KEYWORD_WEIGHT) * cos
        } else if hybrid {
            (1.0 - HYBRID_KEYWORD_WEIGHT) * cos
        } else {
            cos
        };
        seen.insert(n);
        out.push((score, n));
    }
    for x in &mut out {
        x.0 = round4(x.0);
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(out)
}

/// Propositions scored for the semantic and hybrid modes: `(proposition, _score)`.
/// Like [`fused`] over each link's own vector (its endpoints' names and its predicate,
/// see `semantic::prop_embedding_text`): the links reached by keyword (`keyword`, raw
/// scores) and the `window` nearest link vectors (of `predicate` when given), scored by
/// cosine (semantic) or `0.1 * keyword + 0.9 * cosine` (hybrid); a link not embedded
/// yet keeps its keyword score.
fn fused_links(
    keyword: &HashMap<u64, f64>,
    window: usize,
    mode: SearchMode,
    q: &Semantic<'_>,
    predicate: Option<&str>,
) -> Vec<(u64, f64)> {
    let hybrid = mode == SearchMode::Hybrid;
    let mix = |kw: f64, cos: f64| {
        if hybrid {
            HYBRID_KEYWORD_WEIGHT * kw + (1.0 - HYBRID_KEYWORD_WEIGHT) * cos
        } else {
            cos
        }
    };
    let mut out: HashMap<u64, f64> = HashMap::new();
    for (&id, &raw) in keyword {
        let kw = normalized(raw);
        let score = match q.vectors.cosine(ElemRef::Prop(id).encode(), &q.query) {
            Some(cos) => mix(kw, f64::from(cos.max(0.0))),
            None => kw,
        };
        out.insert(id, round4(score));
    }
    // Over-fetch: some nearest vectors may belong to links deleted since (the caller
    // reads the records of the results and skips those). A neighbour the keyword side
    // did not reach has a keyword score of 0.
    for (cos, id) in q.vectors.nearest_links(&q.query, window + 16, predicate) {
        out.entry(id)
            .or_insert_with(|| round4(mix(0.0, f64::from(cos.max(0.0)))));
    }
    out.into_iter().collect()
}

/// Raw scores (BM25 plus name bonuses) at which the normalized `_score` is one half.
const SCORE_HALF: f64 = 4.0;

/// The `_score` of a raw score: `s / (s + SCORE_HALF)`, in `[0, 1)`, rounded to four
/// places. Monotonic, so the order is the raw order; the top hit is not forced to 1,
/// so a weak best match stays weak and `THRESHOLD` means the same for every query
/// (DECISIONS.md item 32, docs/semantics.md).
fn normalized(score: f64) -> f64 {
    let s = score.max(0.0);
    ((s / (s + SCORE_HALF)) * 10_000.0).round() / 10_000.0
}

/// The query side of a semantic search: the engine's vectors and the embedded query.
pub struct Semantic<'a> {
    /// The vectors of the nexus.
    pub vectors: &'a crate::semantic::Semantic,
    /// The query text's embedding.
    pub query: Vec<f32>,
}

/// The mode a SEARCH runs in (DECISIONS.md item 32): without an embedder every mode is
/// keyword search; with one, an omitted `MODE` means `"hybrid"`.
pub fn effective_mode(s: &Search, has_embedder: bool) -> Result<SearchMode, KipError> {
    let asked = match &s.mode {
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        Some(Slot::Literal(m, _)) => Some(*m),
        None => None,
    };
    Ok(match (has_embedder, asked) {
        (false, _) => SearchMode::Keyword,
        (true, None) => SearchMode::Hybrid,
        (true, Some(m)) => m,
    })
}

/// Weight of the keyword score in a hybrid `_score` (the rest is the cosine). Measured
/// on the retrieval test set (`tests/data/recall_set.json`, docs/performance.md): 0.1
/// gives the best MRR by meaning (0.963, semantic alone 0.954) and keeps every search by
/// name first; 0.2 lowers MRR by meaning to 0.936 and 0.5 to 0.847 (keyword scores of
/// one shared word outweigh the cosines, which lie between 0.2 and 0.7).
pub const HYBRID_KEYWORD_WEIGHT: f64 = 0.1;

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Executes a SEARCH in `mode`, with the query's embedding asked for only once the
/// keyword side has been read (`sem` is called when the vectors are needed, `None`: keyword search), so
/// that the model can embed the text while the postings are read.
///
/// Long (about 200 lines): keyword, semantic and hybrid ranking share the candidate
/// filter (type, threshold, limit) and the fusion reads both sides; one sequence read
/// top to bottom.
pub fn search_pending<'q>(
    g: &dyn GraphRead,
    s: &Search,
    limits: &QueryLimits,
    mode: SearchMode,
    sem: &dyn Fn() -> Option<&'q Semantic<'q>>,
) -> Result<Outcome, KipError> {
    let term = lit(&s.term)?;
    if let Some(Slot::Param(p)) = &s.mode {
        return Err(crate::kml::unbound(&p.name));
    }
    // The vectors' side, once it is needed (keyword mode never asks).
    let vectors = || {
        if mode == SearchMode::Keyword {
            None
        } else {
            sem()
        }
    };
    let threshold = match &s.threshold {
        Some(Slot::Literal(t, _)) => *t,
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => 0.0,
    };
    let limit = match &s.limit {
        Some(Slot::Literal(n, _)) => usize::try_from(*n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => DEFAULT_LIMIT,
    };
    let with_type = match &s.with_type {
        Some(t) => {
            let t = lit(t)?;
            match s.target {
                SearchTarget::Concept => schema::require_concept_type(g, t)?,
                SearchTarget::Proposition => schema::require_predicate(g, t)?,
            }
            Some(t.to_string())
        }
        None => None,
    };
    let mut qterms = text::terms(term);
    qterms.sort();
    qterms.dedup();
    if qterms.is_empty() && vectors().is_none() {
        return Ok(Outcome::ok(json!([])));
    }
    let mut scores = if qterms.is_empty() {
        HashMap::new()
    } else {
        concept_scores(g, &qterms, limits)?
    };
    // Concepts named exactly as the query are candidates even when their terms were
    // beyond the posting caps or they rank behind the window: the name as typed, in
    // lower case, in Title Case and in upper case (the name index is exact; "orchid"
    // finds "Orchid").
    let mut exact = HashSet::new();
    for name in name_variants(term.trim()) {
        g.scan_name(&name, &mut |n| {
            scores.entry(n).or_insert(0.0);
            exact.insert(n);
            Ok(true)
        })?;
    }
    let query_norm = text::normalize(term.trim());
    match s.target {
        SearchTarget::Concept => {
            // Type filtering may discard candidates: look further then.
            let window = if with_type.is_some() {
                (limit * 20).max(200)
            } else {
                limit * 3 + 10
            };
            // Ranked (heads read) before the query's vector is waited for. The vectors'
            // side scores the nearest concepts' keyword side too (`scores`).
            let keyword = ranked_concepts(
                g,
                &scores,
                &query_norm,
                window,
                &exact,
                with_type.as_deref(),
            )?;
            let ranked: Vec<(f64, u64)> = match vectors() {
                None => keyword
                    .into_iter()
                    .map(|(score, n, _)| (normalized(score), n))
                    .collect(),
                Some(q) => fused(
                    g,
                    keyword,
                    &scores,
                    &query_norm,
                    limit * 3 + 10,
                    mode,
                    q,
                    with_type.as_deref(),
                )?,
            };
            // The records of the results only (a neighbour from the vector index may be
            // gone since it was embedded: skipped here; its type was the index's).
            let ranked: Vec<(f64, u64)> = ranked
                .into_iter()
                .filter(|(score, _)| *score >= threshold)
                .collect();
            if g.wants_prefetch() && mode != SearchMode::Keyword {
                let first: Vec<ElemRef> = ranked
                    .iter()
                    .take(limit + 16)
                    .map(|(_, n)| ElemRef::Concept(*n))
                    .collect();
                g.prefetch_elements(&first)?;
            }
            let mut results = Vec::new();
            for (score, n) in ranked {
                if results.len() >= limit {
                    break;
                }
                let Some(c) = g.concept(n)? else { continue };
                if with_type.as_deref().is_some_and(|t| t != c.concept_type) {
                    continue;
                }
                let mut meta = c.metadata.clone();
                meta.insert("_score".into(), json!(score));
                results.push(json!({"id": ElemRef::Concept(n).id_string(), "type": c.concept_type, "name": c.name, "attributes": c.attributes, "metadata": meta}));
            }
            Ok(Outcome::ok(Value::Array(results)))
        }
        SearchTarget::Proposition => {
            // Raw keyword scores, normalized once the links are ranked (below).
            let seeds = ranked_concepts(g, &scores, &query_norm, LINK_SEED_CONCEPTS, &exact, None)?;
            let per_seed = (limit * 2).max(20);
            let mut links: HashMap<u64, f64> = HashMap::new();
            let mut offer = |id: u64, score: f64| {
                let e = links.entry(id).or_insert(0.0);
                if score > *e {
                    *e = score;
                }
            };
            for (score, n, (concept_type, name)) in seeds.into_iter().take(LINK_SEED_CONCEPTS) {
                // A matching predicate: its links.
                if concept_type == PROPOSITION_TYPE && with_type.as_ref().is_none_or(|t| *t == name)
                {
                    let mut taken = 0;
                    g.scan_predicate(&name, &mut |_, _, id| {
                        offer(id, score);
                        taken += 1;
                        Ok(taken < per_seed)
                    })?;
                }
                // A matching concept: the links touching it.
                let at = ElemRef::Concept(n);
                let pred = with_type.as_deref();
                for outgoing in [true, false] {
                    let mut taken = 0;
                    let mut cb = |_: &str, _: ElemRef, id: u64| {
                        offer(id, score * ENDPOINT_WEIGHT);
                        taken += 1;
                        Ok(taken < per_seed)
                    };
                    if outgoing {
                        g.scan_out(at, pred, &mut cb)?;
                    } else {
                        g.scan_in(at, pred, &mut cb)?;
                    }
                }
            }
            let mut ranked: Vec<(u64, f64)> = match vectors() {
                None => links
                    .into_iter()
                    .map(|(id, raw)| (id, normalized(raw)))
                    .collect(),
                Some(q) => fused_links(&links, limit * 3 + 10, mode, q, with_type.as_deref()),
            };
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            // The records of the results only (a neighbour from the vector index may be
            // gone since it was embedded: skipped here; its predicate was the index's).
            let ranked: Vec<(u64, f64)> = ranked
                .into_iter()
                .filter(|(_, score)| *score >= threshold)
                .collect();
            if g.wants_prefetch() && mode != SearchMode::Keyword {
                let first: Vec<ElemRef> = ranked
                    .iter()
                    .take(limit + 16)
                    .map(|(id, _)| ElemRef::Prop(*id))
                    .collect();
                g.prefetch_elements(&first)?;
            }
            let mut results = Vec::new();
            for (id, score) in ranked {
                if results.len() >= limit {
                    break;
                }
                let Some(p) = g.prop(id)? else { continue };
                if with_type.as_deref().is_some_and(|t| t != p.predicate) {
                    continue;
                }
                let mut meta = p.metadata.clone();
                meta.insert("_score".into(), json!(score));
                results.push(json!({"id": ElemRef::Prop(id).id_string(), "subject": p.subject.id_string(), "predicate": p.predicate, "object": p.object.id_string(), "attributes": p.attributes, "metadata": meta}));
            }
            Ok(Outcome::ok(Value::Array(results)))
        }
    }
}
