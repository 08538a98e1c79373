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
//!
//! Concepts in the hybrid mode are ranked by reciprocal-rank fusion of the keyword and
//! the vector rankings (`rank_fused`). Query text loses its English stop words and
//! question words, and inflected words also look up their stem
//! (`kip_storage::text::query_terms`, `query_stem`). Without `WITH TYPE`, the system's
//! own structures are left out of the results, and long attribute values are cut to a
//! snippet (`hit_attributes`).
//!
//! Why one file of about 820 lines: keyword scoring, the vector side and their fusion
//! share the candidate types and constants measured together (docs/performance.md,
//! "Recall on conversations"); split the fusion out when it grows further.

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
///
/// `covered`, when given, sums per concept the IDF of the query terms it matched (as a
/// word, a prefix or an inflection), and the IDF of all the query's terms. Only the
/// hybrid fusion reads it, and only for a query of several terms ([`Coverage`]): the
/// sum costs a map entry per matched concept, which doubled the time of a prefix search
/// that matches thousands.
fn concept_scores(
    g: &dyn GraphRead,
    qterms: &[String],
    limits: &QueryLimits,
    mut covered: Option<&mut TermCoverage>,
) -> Result<HashMap<u64, f64>, KipError> {
    let docs = g.stat(Stat::TextDocs)?.max(1) as f64;
    let avgdl = (g.stat(Stat::TextLen)? as f64 / docs).max(1.0);
    let mut scores: HashMap<u64, f64> = HashMap::new();
    let mut work = 0u64;
    for qt in qterms {
        let prefix_ok = qt.chars().count() >= 2;
        // An inflected query term ("adopted") also finds the other forms of its stem
        // ("adopt", "adoption") at the prefix weight.
        let prefix = text::query_stem(qt).unwrap_or(qt.as_str());
        // Postings grouped by term; the group's size is the term's document frequency.
        let mut groups: Vec<TermPostings> = Vec::new();
        let mut from = prefix.to_string();
        loop {
            let mut capped: Option<String> = None;
            g.scan_postings(&from, &mut |t, key, tf, len| {
                if !t.starts_with(prefix) || (!prefix_ok && t != qt) {
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
        if let Some(covered) = covered.as_deref_mut() {
            // The term's IDF over the concepts it matched in any of its forms (a term
            // that matches nothing has the largest: no candidate has that word).
            let df = best.len() as f64;
            let idf = ((docs - df + 0.5) / (df + 0.5) + 1.0).ln();
            covered.total += idf;
            covered.per.reserve(best.len());
            for &n in best.keys() {
                *covered.per.entry(n).or_insert(0.0) += idf;
            }
        }
        if scores.is_empty() {
            // The first term's scores are the sums so far (no second map to fill).
            scores = best;
        } else {
            scores.reserve(best.len());
            for (n, sc) in best {
                *scores.entry(n).or_insert(0.0) += sc;
            }
        }
    }
    Ok(scores)
}

/// The spellings of a query looked up in the name index: as typed, lower case, Title
/// Case (each word's first letter upper case, the rest lower case), upper case.
pub(crate) fn name_variants(term: &str) -> Vec<String> {
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
/// first, looking at no more than `window` candidates, of `concept_type` when given;
/// without it, system structures are left out when `skip_system` is set
/// ([`schema::is_system_structure`]).
/// Only each candidate's head (type and name) is read; the caller reads the records of
/// the few it returns.
fn ranked_concepts(
    g: &dyn GraphRead,
    scores: &HashMap<u64, f64>,
    query_norm: &str,
    window: usize,
    must: &HashSet<u64>,
    concept_type: Option<&str>,
    skip_system: bool,
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
        match concept_type {
            Some(t) if t != head.0 => continue,
            None if skip_system && schema::is_system_structure(&head.0, &head.1) => continue,
            _ => {}
        }
        let bonus = name_bonus(&head.1, query_norm);
        out.push((score + bonus, n, head));
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(out)
}

/// The IDF of the query's terms matched per concept, and of all of them: what
/// [`concept_scores`] fills for [`Coverage`].
#[derive(Default)]
struct TermCoverage {
    /// Concept -> sum of the IDF of the query terms it matched.
    per: HashMap<u64, f64>,
    /// Sum of the IDF of all the query's terms.
    total: f64,
}

/// How much of the query a keyword candidate matches, asked by [`rank_fused`] of its
/// best few only (not worked out for every matched concept beforehand).
struct Coverage<'a> {
    /// The query's terms (stop words aside).
    terms: usize,
    /// The IDF matched per concept, summed when there are several terms.
    covered: &'a TermCoverage,
    /// Candidates only by their exact name (no term matched them).
    name_only: &'a HashSet<u64>,
}

impl Coverage<'_> {
    /// The share of the query's IDF mass that concept `n` matches, in `[0, 1]`: 1 for a
    /// concept matching every term, more for a rare word than for a common one.
    fn share(&self, n: u64) -> f64 {
        match self.terms {
            0 => 0.0,
            // One term: every candidate it scored matched it.
            1 => {
                if self.name_only.contains(&n) {
                    0.0
                } else {
                    1.0
                }
            }
            _ if self.covered.total <= 0.0 => 0.0,
            _ => (self.covered.per.get(&n).copied().unwrap_or(0.0) / self.covered.total).min(1.0),
        }
    }

    /// The weight of `n`'s keyword rank in the fusion: [`FUSION_KEYWORD_WEIGHT`] times
    /// its [`share`](Self::share) to the power [`FUSION_COVERAGE_POWER`].
    fn weight(&self, n: u64) -> f64 {
        FUSION_KEYWORD_WEIGHT * self.share(n).powi(FUSION_COVERAGE_POWER)
    }
}

/// Concepts ranked for the hybrid mode by reciprocal-rank fusion: `(_score, number)`,
/// best first (docs/semantics.md, "Semantic recall").
///
/// Each concept scores `w / (K + keyword rank) + 1 / (K + vector rank)` over the best
/// `depth` of each side ([`FUSION_K`]), where `w` grows with the share of the query's
/// IDF mass the concept matches ([`Coverage::weight`]): a keyword hit on the rare,
/// specific words of a question outweighs the vector ranking, one on a common word
/// hardly counts. A side that did not find it adds nothing (a concept not embedded yet
/// is found by keyword alone). `_score` is that sum over its largest possible value
/// (first on both sides, matching every word), so it lies in `(0, 1]`; a concept named
/// exactly as the query is the lookup asked for: `_score` 1, first. Ranks, not scores,
/// are fused: BM25 scores depend on the query's words and cosines on the model, and
/// neither is calibrated against the other.
/// No record is read: `keyword` holds the heads already read.
fn rank_fused(
    keyword: Vec<Ranked>,
    coverage: &Coverage<'_>,
    query_norm: &str,
    depth: usize,
    q: &Semantic<'_>,
    concept_type: Option<&str>,
) -> Vec<(f64, u64)> {
    // concept -> (fused score, named exactly as the query)
    let mut fused: HashMap<u64, (f64, bool)> = HashMap::with_capacity(2 * depth);
    for (rank, (_, n, (_, name))) in keyword.into_iter().take(depth).enumerate() {
        let e = fused.entry(n).or_insert((0.0, false));
        e.0 += coverage.weight(n) / (FUSION_K + rank as f64 + 1.0);
        e.1 |= name_bonus(&name, query_norm) == EXACT_NAME_BONUS;
    }
    // Over-fetch: some nearest vectors may belong to concepts deleted since (the
    // caller reads the records of the results and skips those).
    let nearest = q.vectors.nearest(&q.query, depth + 16, concept_type);
    for (rank, (_, n)) in nearest.into_iter().enumerate() {
        fused.entry(n).or_insert((0.0, false)).0 += 1.0 / (FUSION_K + rank as f64 + 1.0);
    }
    let best = (FUSION_KEYWORD_WEIGHT + 1.0) / (FUSION_K + 1.0);
    let mut out: Vec<(f64, bool, u64)> = fused
        .into_iter()
        .map(|(n, (sum, exact))| (sum / best, exact, n))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.total_cmp(&a.0)).then(a.2.cmp(&b.2)));
    out.into_iter()
        .map(|(score, exact, n)| (if exact { 1.0 } else { round4(score.min(1.0)) }, n))
        .collect()
}

/// Concepts ranked for the semantic mode: `(_score, number)`, best first (see
/// docs/semantics.md, "Semantic recall"): the keyword candidates and the `window`
/// nearest vectors (of the wanted type), each scored by its cosine with the query
/// (clipped at 0); a keyword candidate not embedded yet keeps its keyword score, so a
/// fresh write is found at once. The vector index filters by type itself, so unlike the
/// keyword side it needs no wider window for `WITH TYPE`. No record is read: the caller
/// reads the results' records and skips any gone since.
fn semantic_ranked(
    keyword: Vec<Ranked>,
    window: usize,
    q: &Semantic<'_>,
    concept_type: Option<&str>,
) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut seen = HashSet::new();
    for (kw, n, _) in keyword {
        let score = match q.vectors.cosine(n, &q.query) {
            Some(cos) => f64::from(cos.max(0.0)),
            // Not embedded yet: found by keyword.
            None => normalized(kw),
        };
        seen.insert(n);
        out.push((round4(score), n));
    }
    // Over-fetch: some nearest vectors may belong to concepts deleted since.
    for (cos, n) in q.vectors.nearest(&q.query, window + 16, concept_type) {
        if seen.insert(n) {
            out.push((round4(f64::from(cos.max(0.0))), n));
        }
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    out
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

/// Weight of the keyword score in a hybrid `_score` of `SEARCH PROPOSITION` (the rest
/// is the cosine; concepts are ranked by [`rank_fused`] since issue 50). Measured
/// on the retrieval test set (`tests/data/recall_set.json`, docs/performance.md): 0.1
/// gives the best MRR by meaning (0.963, semantic alone 0.954) and keeps every search by
/// name first; 0.2 lowers MRR by meaning to 0.936 and 0.5 to 0.847 (keyword scores of
/// one shared word outweigh the cosines, which lie between 0.2 and 0.7).
pub const HYBRID_KEYWORD_WEIGHT: f64 = 0.1;

/// Reciprocal-rank fusion constant of the hybrid mode (`1 / (K + rank)`). Measured with
/// [`FUSION_KEYWORD_WEIGHT`] and [`FUSION_COVERAGE_POWER`] on the two conversation sets
/// and the by-meaning set (`tests/data/conversations/`, `conversations2/`,
/// `recall_set.json`; docs/performance.md, "Recall on conversations"): K 1, 2 and 3
/// all pass every check with weight 2.5 and the cube; 2 is the middle.
pub const FUSION_K: f64 = 2.0;
/// Weight of the keyword side's reciprocal rank in the hybrid mode for a concept that
/// matches every word of the query (stop words aside; the vector side's weight is 1).
/// A concept matching a share `s` of the query's IDF mass weighs `2.5 x s^3`
/// ([`FUSION_COVERAGE_POWER`]): as much as the vector side at `s` = 0.74, the former
/// fixed weight 0.3 at `s` = 0.5. So a keyword hit on the rare, specific words of a
/// question (a name, a place, a title) can outrank the meaning, and one on a single
/// shared word cannot. Measured (the rankings of the three sets replayed, then the
/// engine): weights 2 to 3 with the cube beat keyword, semantic and the plain fusion on
/// both conversation sets and keep by-meaning recall@5 and MRR at least semantic's;
/// 2.5 is the middle. A fixed weight cannot do both: 0.3 (the former one) ranks below
/// keyword search on the second set (R@5 0.746 against 0.791), equal weights fail the
/// by-meaning set (MRR 0.834 against 0.954).
pub const FUSION_KEYWORD_WEIGHT: f64 = 2.5;
/// Power of the matched share of the query's IDF mass in a keyword candidate's fusion
/// weight ([`FUSION_KEYWORD_WEIGHT`]). Measured: the square lets a hit on half of a
/// question's words ("protect" in "how I protect my logins", of a trademark) outrank
/// the meaning (by-meaning recall@5 0.99, below semantic's 1.00); the fourth power
/// loses the second conversation set's lead over keyword search at R@10 (0.870-0.883
/// against 0.876 for weights 2 to 3).
pub const FUSION_COVERAGE_POWER: i32 = 3;
/// How deep each side's ranking goes into the hybrid fusion (at least `3 x LIMIT + 10`).
/// Depths from 20 to 200 measured the same on both recall sets; 40 asks the vector
/// index for as many neighbours as before the fusion (its cost grows with them once an
/// HNSW graph answers), and reads as many keyword heads as an untyped search did.
pub const FUSION_DEPTH: usize = 40;

/// Longest string attribute value a search hit returns whole, in characters; a longer
/// one is cut to a snippet of this length ending in "…".
pub const SNIPPET_CHARS: usize = 300;

/// A search hit's attributes: string values longer than [`SNIPPET_CHARS`] cut to a
/// snippet, arrays and objects longer than that (as JSON) left out; the keys of both
/// are listed in the hit's `metadata._truncated` (FIND reads the whole values).
fn hit_attributes(
    attrs: &serde_json::Map<String, Value>,
    meta: &mut serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::with_capacity(attrs.len());
    let mut cut = Vec::new();
    for (k, v) in attrs {
        match v {
            Value::String(s) if s.chars().count() > SNIPPET_CHARS => {
                let mut snip: String = s.chars().take(SNIPPET_CHARS).collect();
                // At a word boundary when one is near the end.
                if let Some(at) = snip.rfind(char::is_whitespace) {
                    if at >= SNIPPET_CHARS / 2 {
                        snip.truncate(at);
                    }
                }
                snip.push('…');
                out.insert(k.clone(), Value::String(snip));
                cut.push(json!(k));
            }
            Value::Array(_) | Value::Object(_) if v.to_string().len() > SNIPPET_CHARS => {
                cut.push(json!(k));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !cut.is_empty() {
        meta.insert("_truncated".into(), Value::Array(cut));
    }
    out
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Executes a SEARCH in `mode`, with the query's embedding asked for only once the
/// keyword side has been read (`sem` is called when the vectors are needed, `None`: keyword search), so
/// that the model can embed the text while the postings are read. `WITH TYPE` must be a
/// type (a predicate for propositions) of the 1.x schema.
pub fn search_pending<'q>(
    g: &dyn GraphRead,
    s: &Search,
    limits: &QueryLimits,
    mode: SearchMode,
    sem: &dyn Fn() -> Option<&'q Semantic<'q>>,
) -> Result<Outcome, KipError> {
    if let Some(t) = &s.with_type {
        let t = lit(t)?;
        match s.target {
            SearchTarget::Concept => schema::require_concept_type(g, t)?,
            SearchTarget::Proposition => schema::require_predicate(g, t)?,
        }
    }
    search_resolved(g, s, limits, mode, sem)
}

/// [`search_pending`] with `WITH TYPE` taken as it is, not checked against the 1.x
/// schema: for KIP 2.0, whose Schema Environment has resolved it (a type or predicate
/// of the Cognitive Memory Profile need not be one of the 1.x schema's).
///
/// Long (about 200 lines): keyword, semantic and hybrid ranking share the candidate
/// filter (type, threshold, limit) and the fusion reads both sides; one sequence read
/// top to bottom.
pub fn search_resolved<'q>(
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
        Some(t) => Some(lit(t)?.to_string()),
        None => None,
    };
    // Stop words and question words left out, possessives dropped (query side only).
    let qterms = text::query_terms(term);
    if qterms.is_empty() && vectors().is_none() {
        return Ok(Outcome::ok(json!([])));
    }
    // How much of the query (its stop words aside) each concept matches is asked by the
    // hybrid fusion only, and summed per concept only for several words.
    let mut covered = TermCoverage::default();
    let count_terms = mode == SearchMode::Hybrid && qterms.len() > 1;
    let mut scores = if qterms.is_empty() {
        HashMap::new()
    } else {
        concept_scores(g, &qterms, limits, count_terms.then_some(&mut covered))?
    };
    // Concepts named exactly as the query are candidates even when their terms were
    // beyond the posting caps or they rank behind the window: the name as typed, in
    // lower case, in Title Case and in upper case (the name index is exact; "orchid"
    // finds "Orchid").
    let mut exact = HashSet::new();
    // The exact names that no query term matched (candidates by name only).
    let mut name_only = HashSet::new();
    for name in name_variants(term.trim()) {
        g.scan_name(&name, &mut |n| {
            scores.entry(n).or_insert_with(|| {
                name_only.insert(n);
                0.0
            });
            exact.insert(n);
            Ok(true)
        })?;
    }
    let coverage = Coverage {
        terms: qterms.len(),
        covered: &covered,
        name_only: &name_only,
    };
    let query_norm = text::normalize(term.trim());
    match s.target {
        SearchTarget::Concept => {
            // Type filtering may discard candidates: look further then.
            let window = if with_type.is_some() {
                (limit * 20).max(200)
            } else {
                limit * 3 + 10
            };
            // Hybrid fuses the ranks of both sides, each this deep.
            let fusion_depth = FUSION_DEPTH.max(limit * 3 + 10);
            let window = if mode == SearchMode::Hybrid {
                window.max(fusion_depth)
            } else {
                window
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
                true,
            )?;
            let ranked: Vec<(f64, u64)> = match vectors() {
                None => keyword
                    .into_iter()
                    .map(|(score, n, _)| (normalized(score), n))
                    .collect(),
                Some(q) if mode == SearchMode::Hybrid => rank_fused(
                    keyword,
                    &coverage,
                    &query_norm,
                    fusion_depth,
                    q,
                    with_type.as_deref(),
                ),
                Some(q) => semantic_ranked(keyword, limit * 3 + 10, q, with_type.as_deref()),
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
                match with_type.as_deref() {
                    Some(t) if t != c.concept_type => continue,
                    // A neighbour from the vector index is not filtered before.
                    None if schema::is_system_structure(&c.concept_type, &c.name) => continue,
                    _ => {}
                }
                let mut meta = c.metadata.clone();
                meta.insert("_score".into(), json!(score));
                let attributes = hit_attributes(&c.attributes, &mut meta);
                results.push(json!({"id": ElemRef::Concept(n).id_string(), "type": c.concept_type, "name": c.name, "attributes": attributes, "metadata": meta}));
            }
            Ok(Outcome::ok(Value::Array(results)))
        }
        SearchTarget::Proposition => {
            // Raw keyword scores, normalized once the links are ranked (below).
            let seeds = ranked_concepts(
                g,
                &scores,
                &query_norm,
                LINK_SEED_CONCEPTS,
                &exact,
                None,
                false,
            )?;
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
                match with_type.as_deref() {
                    Some(t) if t != p.predicate => continue,
                    // The links of system structures (the Genesis filing, `$self`'s).
                    None => {
                        if let ElemRef::Concept(s) = p.subject {
                            if g.concept_head(s)?
                                .is_some_and(|(t, name)| schema::is_system_structure(&t, &name))
                            {
                                continue;
                            }
                        }
                    }
                    _ => {}
                }
                let mut meta = p.metadata.clone();
                meta.insert("_score".into(), json!(score));
                let attributes = hit_attributes(&p.attributes, &mut meta);
                results.push(json!({"id": ElemRef::Prop(id).id_string(), "subject": p.subject.id_string(), "predicate": p.predicate, "object": p.object.id_string(), "attributes": attributes, "metadata": meta}));
            }
            Ok(Outcome::ok(Value::Array(results)))
        }
    }
}
