//! META `SEARCH` (Specification §66): associative grounding over the one memory's
//! search index, the 1.x search (`crate::meta::search`: BM25 keyword ranking, and the
//! semantic and hybrid modes with the nexus's embedder) under the 2.0 rules
//! (docs/semantics.md, "KIP 2.0 on the one memory", SEARCH):
//!
//! - `CONCEPT` and `PROPOSITION` are searchable; the other kinds have no index and are
//!   `UnsupportedCapability`, never an empty list (§66.6: a miss proves nothing).
//! - `WITH TYPE` / `WITH PREDICATE` resolve through the Schema Environment.
//! - A hit is a pointer (§66.4): exact id, kind, exact schema identity, a safe snippet,
//!   and `retrieval: {score, mode}`, a retrieval score and never a confidence (§2.10);
//!   how it was ranked and how fresh the index is go to the operation's
//!   `context.search` (§66.5).
//! - Elements 2.0 does not see (the 1.x control plane, literal holders) and elements
//!   whose state is not `active` are never hits.
//! - A display name 2.0 gave a keyed concept lives in its element record, outside the
//!   text index: a query equal to one finds it through the display-name index
//!   (`display_hits`).

use super::error::{Code, V2Error, V2Result};
use super::model::{self, ACTIVE, LITERAL_TYPE, SPACE};
use super::names;
use super::schema_env::{active, SymbolKind};
use crate::meta::search::{
    name_variants, search_resolved, Semantic as Sem, DEFAULT_LIMIT, MAX_LIMIT, SNIPPET_CHARS,
};
use crate::nexus::Nexus;
use crate::outcome::Outcome;
use crate::store::{ElementId, ElementKind, GraphRead, GraphWrite};
use kip_lang::ast::{Search as Search1, SearchMode, SearchTarget, Slot};
use kip_lang::v2::ast::{Scalar, Search};
use kip_lang::{KipError, Span};
use serde_json::{json, Map, Value};

/// Hits asked of the 1.x search beyond `LIMIT`, for those this runtime leaves out
/// (archived, merged, hidden); asked again with four times as many while too few are
/// left and more exist.
const OVERFETCH: usize = 16;
/// The score of a concept whose display name equals the query (keyword and semantic;
/// in hybrid 1, as the 1.x search scores an exact name).
const DISPLAY_EQUAL: f64 = 0.75;
/// The attributes a snippet is taken from, the first one present.
const SNIPPET_FIELDS: [&str; 5] = [
    "description",
    "content_summary",
    "summary",
    "scope_note",
    "title",
];

/// A SEARCH's values, read and checked.
struct Plan {
    target: SearchTarget,
    query: String,
    /// `WITH TYPE` / `WITH PREDICATE` as written (resolved on the snapshot).
    filter: Option<String>,
    mode: SearchMode,
    threshold: f64,
    limit: usize,
}

fn mode_word(m: SearchMode) -> &'static str {
    match m {
        SearchMode::Keyword => "keyword",
        SearchMode::Semantic => "semantic",
        SearchMode::Hybrid => "hybrid",
    }
}

fn unsupported(what: String, hint: &str) -> V2Error {
    V2Error::new(
        Code::UnsupportedCapability,
        format!("{what} is valid KIP 2.0 META, but this runtime does not support it"),
    )
    .with_hint(hint.to_string())
    .with_detail("language", "META")
}

/// Runs `SEARCH` (§66): the hits, best first, and the operation's `context.search`.
/// `tx` is the request's transaction when it runs in one (atomic, dry run); `atomic`
/// says the request asked for one (a read-only atomic request runs without).
pub fn run(
    nexus: &Nexus,
    s: &Search,
    param: &dyn Fn(&Scalar) -> Option<Value>,
    tx: Option<&mut dyn GraphWrite>,
    atomic: bool,
) -> V2Result<(Value, Value)> {
    let plan = plan(nexus, s, param, atomic || tx.is_some())?;
    let hits = match tx {
        Some(w) => find(nexus, &*w, &plan)?,
        None => {
            let mut failure = None;
            let r = nexus.read(|g| {
                find(nexus, g, &plan).map_err(|e| {
                    failure = Some(e);
                    KipError::internal("the search failed")
                })
            });
            r.map_err(|e| failure.unwrap_or_else(|| V2Error::from_kip(&e)))?
        }
    };
    Ok((Value::Array(hits), context(nexus, &plan)))
}

/// Reads and checks what the SEARCH asks, before anything is read from the memory.
fn plan(
    nexus: &Nexus,
    s: &Search,
    param: &dyn Fn(&Scalar) -> Option<Value>,
    atomic: bool,
) -> V2Result<Plan> {
    let value = |x: &Scalar| param(x).unwrap_or(Value::Null);
    let target = match s.kind.as_str() {
        "CONCEPT" => SearchTarget::Concept,
        "PROPOSITION" => SearchTarget::Proposition,
        other => {
            return Err(V2Error::new(
                Code::UnsupportedCapability,
                format!(
                    "SEARCH {other} is not supported: this runtime's search index holds concepts (and reaches propositions through them and their own vectors), not {}",
                    match other {
                        "ASSERTION" => "assertions",
                        "EVIDENCE" => "evidence",
                        "ACTIVITY" => "activities",
                        _ => "cognition records",
                    }
                ),
            )
            .with_hint("SEARCH CONCEPT or SEARCH PROPOSITION to find what it is about, then FIND its assertions, evidence or activities by their fields (FIND(?a) WHERE { ?a ASSERTION {proposition: :p} })")
            .with_detail("language", "META")
            .with_detail("kind", other));
        }
    };
    if s.as_of_seq.is_some() {
        return Err(V2Error::new(
            Code::HistoricalSearchUnavailable,
            "SEARCH ... AS OF SEQ: this runtime keeps only the present search index, not a historically correct one (§66.1); it does not search the present state instead",
        )
        .with_hint("leave AS OF SEQ out to search the present state"));
    }
    if let Some(c) = &s.cursor {
        // KIP2-KQL-018: a cursor of another family is not read as a search position.
        if param(c)
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with(super::cursors::PREFIX))
        {
            return Err(V2Error::new(
                Code::CursorTypeMismatch,
                "this cursor was given by a KQL FIND; SEARCH does not continue it",
            )
            .with_hint("pass a KQL cursor only to the FIND that gave it"));
        }
        return Err(unsupported(
            "SEARCH ... CURSOR (paged search results)".into(),
            "leave CURSOR out and ask for more at once with LIMIT (at most 1000)",
        ));
    }
    match (target, &s.with_type, &s.with_predicate) {
        (SearchTarget::Concept, _, Some(_)) => {
            return Err(unsupported(
                "SEARCH CONCEPT ... WITH PREDICATE".into(),
                "SEARCH CONCEPT takes WITH TYPE; SEARCH PROPOSITION takes WITH PREDICATE",
            ))
        }
        (SearchTarget::Proposition, Some(_), _) => {
            return Err(unsupported(
                "SEARCH PROPOSITION ... WITH TYPE".into(),
                "filter propositions by their predicate: SEARCH PROPOSITION \"...\" WITH PREDICATE \"prefers\"",
            ))
        }
        _ => {}
    }
    let query = match value(&s.query) {
        Value::String(q) => q,
        other => {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!("the search text is a string, not {other}"),
            )
            .with_hint("SEARCH CONCEPT \"alice\""))
        }
    };
    let filter = match s.with_type.as_ref().or(s.with_predicate.as_ref()) {
        None => None,
        Some(x) => match value(x) {
            Value::String(t) => Some(t),
            other => {
                return Err(V2Error::new(
                    Code::TypeMismatch,
                    format!("WITH TYPE and WITH PREDICATE take a symbol as a string, not {other}"),
                )
                .with_hint("WITH TYPE \"Person\", WITH PREDICATE \"prefers\""))
            }
        },
    };
    let has_embedder = nexus.recall().semantic().is_some();
    let mode = match s.mode.as_ref().map(value) {
        // Not asked: the best the runtime has, but inside one transaction (atomic, dry
        // run) only the keyword index is aligned with it (§79).
        None if has_embedder && !atomic => SearchMode::Hybrid,
        None => SearchMode::Keyword,
        Some(Value::String(m)) => match m.as_str() {
            "keyword" => SearchMode::Keyword,
            "semantic" => SearchMode::Semantic,
            "hybrid" => SearchMode::Hybrid,
            other => {
                return Err(V2Error::new(
                    Code::SearchModeUnsupported,
                    format!("\"{other}\" is not a search mode"),
                )
                .with_hint("MODE \"keyword\", \"semantic\" or \"hybrid\"")
                .with_detail("mode", other))
            }
        },
        Some(other) => {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!("MODE takes a string, not {other}"),
            )
            .with_hint("MODE \"keyword\""))
        }
    };
    if mode != SearchMode::Keyword && !has_embedder {
        return Err(V2Error::new(
            Code::SearchModeUnsupported,
            format!(
                "MODE \"{}\" needs an embedder, and none is configured; the search is not run as keyword search instead",
                mode_word(mode)
            ),
        )
        .with_hint("use MODE \"keyword\" (or leave MODE out), or start kip with an embedder (kip model install; --embedder)")
        .with_detail("mode", mode_word(mode)));
    }
    if mode != SearchMode::Keyword && atomic {
        return Err(V2Error::new(
            Code::SearchIndexUnavailable,
            format!(
                "MODE \"{}\" cannot run inside an atomic or dry-run request: the vector index is built after each commit and is not aligned with the transaction's snapshot (§79)",
                mode_word(mode)
            ),
        )
        .with_hint("use MODE \"keyword\" there (its index is written in the same transaction), or send the semantic SEARCH in a request of its own")
        .with_detail("mode", mode_word(mode)));
    }
    let threshold = match s.threshold.as_ref().map(value) {
        None => 0.0,
        Some(v) => match v.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => t,
            Some(t) => {
                return Err(V2Error::new(
                    Code::ConstraintViolation,
                    format!("THRESHOLD is a retrieval score between 0 and 1, not {t}"),
                )
                .with_hint("THRESHOLD 0.3"))
            }
            None => {
                return Err(V2Error::new(
                    Code::TypeMismatch,
                    format!("THRESHOLD takes a number, not {v}"),
                )
                .with_hint("THRESHOLD 0.3"))
            }
        },
    };
    let limit = match s.limit.as_ref().map(value) {
        None => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n) if n <= MAX_LIMIT as u64 => n as usize,
            Some(n) => {
                return Err(V2Error::new(
                    Code::ResultLimitExceeded,
                    format!("a SEARCH returns at most {MAX_LIMIT} hits; LIMIT {n} asks for more"),
                )
                .with_hint(format!("LIMIT {MAX_LIMIT} or less")))
            }
            None => {
                return Err(
                    V2Error::new(Code::TypeMismatch, "LIMIT takes a whole number")
                        .with_hint("LIMIT 10"),
                )
            }
        },
    };
    Ok(Plan {
        target,
        query,
        filter,
        mode,
        threshold,
        limit,
    })
}

/// The query's embedding (a recent text comes from the query cache). A failure is an
/// error: a 2.0 SEARCH does not run as keyword search when it asked for vectors.
fn embed<'n>(nexus: &'n Nexus, query: &str) -> V2Result<Sem<'n>> {
    let Some(sem) = nexus.recall().semantic() else {
        return Err(
            V2Error::new(Code::SearchModeUnsupported, "no embedder is configured")
                .with_hint("use MODE \"keyword\""),
        );
    };
    let vector = match sem.cached_query(query) {
        Some(v) => v,
        None => sem.embed_query(query).map_err(|e| {
            V2Error::new(
                Code::SearchIndexUnavailable,
                format!("the search text could not be embedded: {}", e.message),
            )
            .with_hint("try again later, or use MODE \"keyword\"")
        })?,
    };
    Ok(Sem {
        vectors: sem.as_ref(),
        query: vector,
    })
}

/// The element object of a hit when 2.0 sees it and its state is `active`.
fn visible(g: &dyn GraphRead, id: ElementId) -> V2Result<Option<Value>> {
    Ok(model::view(g, id)?.filter(|v| {
        v.pointer("/_system/state")
            .and_then(Value::as_str)
            .is_none_or(|s| s == ACTIVE)
    }))
}

/// The hits on the snapshot `g`: the 1.x search's, less those 2.0 does not show, with
/// the concepts found by display name, best first.
fn find(nexus: &Nexus, g: &dyn GraphRead, plan: &Plan) -> V2Result<Vec<Value>> {
    let filter = match &plan.filter {
        None => None,
        Some(name) => {
            let kind = match plan.target {
                SearchTarget::Concept => SymbolKind::ConceptType,
                SearchTarget::Proposition => SymbolKind::Predicate,
            };
            Some(active().resolve(g, kind, name)?.local)
        }
    };
    let sem = match plan.mode {
        SearchMode::Keyword => None,
        _ => Some(embed(nexus, &plan.query)?),
    };
    let at = Span::default();
    let mut ask = (plan.limit + OVERFETCH).min(MAX_LIMIT);
    let mut kept: Vec<(ElementId, f64, Value)> = Vec::new();
    loop {
        let s1 = Search1 {
            target: plan.target,
            term: Slot::Literal(plan.query.clone(), at),
            with_type: filter.clone().map(|t| Slot::Literal(t, at)),
            mode: None,
            threshold: Some(Slot::Literal(plan.threshold, at)),
            limit: Some(Slot::Literal(ask as u64, at)),
            span: at,
        };
        let hits = match search_resolved(g, &s1, nexus.limits(), plan.mode, &|| sem.as_ref())? {
            Outcome::Ok { result, .. } => result,
            Outcome::Err(e) => return Err(V2Error::from_kip(&e)),
        };
        let hits = hits.as_array().map(Vec::as_slice).unwrap_or_default();
        kept.clear();
        for h in hits {
            let Some(id) = h["id"].as_str().and_then(ElementId::parse_id) else {
                continue;
            };
            let score = h
                .pointer("/metadata/_score")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if let Some(view) = visible(g, id)? {
                kept.push((id, score, view));
            }
        }
        if kept.len() >= plan.limit || hits.len() < ask || ask >= MAX_LIMIT {
            break;
        }
        ask = (ask * 4).min(MAX_LIMIT);
    }
    if plan.target == SearchTarget::Concept {
        for (id, score) in display_hits(g, plan, filter.as_deref())? {
            match kept.iter_mut().find(|k| k.0 == id) {
                Some(k) => k.1 = k.1.max(score),
                None => {
                    if let Some(view) = visible(g, id)? {
                        kept.push((id, score, view));
                    }
                }
            }
        }
    }
    // Stable: ties keep the 1.x order, display-name hits after.
    kept.sort_by(|a, b| b.1.total_cmp(&a.1));
    kept.truncate(plan.limit);
    let mode = mode_word(plan.mode);
    kept.into_iter()
        .map(|(_, score, view)| hit(g, &view, score, mode))
        .collect()
}

/// The concepts whose display name (a 2.0 name that differs from the concept's key,
/// kept in its element record and the display-name index, `names.rs`) is the query
/// as typed, in lower case, in Title Case or in upper case (as the 1.x search looks up
/// exact names), of the type `ty` when given, with their scores.
fn display_hits(
    g: &dyn GraphRead,
    plan: &Plan,
    ty: Option<&str>,
) -> V2Result<Vec<(ElementId, f64)>> {
    let score = if plan.mode == SearchMode::Hybrid {
        1.0
    } else {
        DISPLAY_EQUAL
    };
    if score < plan.threshold {
        return Ok(Vec::new());
    }
    let mut out: Vec<(ElementId, f64)> = Vec::new();
    for name in name_variants(plan.query.trim()) {
        for n in names::lookup(g, &name)? {
            let id = ElementId::new(ElementKind::Concept, n);
            if out.iter().any(|(x, _)| *x == id) {
                continue;
            }
            if let Some(t) = ty {
                if g.concept(n)?.is_none_or(|row| row.concept_type != t) {
                    continue;
                }
            }
            out.push((id, score));
        }
    }
    Ok(out)
}

/// One hit (§66.4): the element's identity fields, a snippet, the retrieval score.
fn hit(g: &dyn GraphRead, view: &Value, score: f64, mode: &str) -> V2Result<Value> {
    let concept = view["kind"] == "concept";
    let fields: &[&str] = if concept {
        &["id", "kind", "type", "schema_ref", "key", "name"]
    } else {
        &[
            "id",
            "kind",
            "subject",
            "predicate",
            "predicate_ref",
            "object",
        ]
    };
    let mut o = Map::new();
    for f in fields {
        if let Some(v) = view.get(*f) {
            o.insert((*f).to_string(), v.clone());
        }
    }
    let snippet = if concept {
        SNIPPET_FIELDS
            .iter()
            .find_map(|f| {
                view.pointer(&format!("/attributes/{f}"))
                    .and_then(Value::as_str)
            })
            .map(cut)
    } else {
        Some(format!(
            "{} {} {}",
            end_text(g, &view["subject"])?,
            view["predicate"].as_str().unwrap_or_default(),
            end_text(g, &view["object"])?
        ))
    };
    if let Some(s) = snippet.filter(|s| !s.trim().is_empty()) {
        o.insert("snippet".into(), json!(s));
    }
    o.insert("retrieval".into(), json!({"score": score, "mode": mode}));
    Ok(Value::Object(o))
}

/// A proposition end as a snippet reads it: a concept's display name, a
/// proposition's predicate, a literal's value.
fn end_text(g: &dyn GraphRead, end: &Value) -> V2Result<String> {
    let Some(s) = end.as_str() else {
        return Ok(end.to_string());
    };
    let Some(id) = ElementId::parse_id(s) else {
        return Ok(s.to_string());
    };
    Ok(match id.kind {
        ElementKind::Concept => match g.concept(id.n)? {
            Some(row) if row.concept_type != LITERAL_TYPE => {
                let rec = g.element(SPACE, id)?;
                model::concept_name(&row, rec.as_ref())
            }
            _ => s.to_string(),
        },
        ElementKind::Proposition => g.prop(id.n)?.map_or(s.to_string(), |p| p.predicate),
        _ => s.to_string(),
    })
}

/// A text cut to [`SNIPPET_CHARS`] characters (at a word boundary when one is in the
/// second half), ending in "…" when cut.
fn cut(s: &str) -> String {
    if s.chars().count() <= SNIPPET_CHARS {
        return s.to_string();
    }
    let mut snip: String = s.chars().take(SNIPPET_CHARS).collect();
    if let Some(at) = snip.rfind(char::is_whitespace) {
        if at >= snip.len() / 2 {
            snip.truncate(at);
        }
    }
    snip.push('…');
    snip
}

/// `context.search` (§66.5, `SearchContext` of the response schema): the mode, what
/// the score means, how current the index is.
fn context(nexus: &Nexus, plan: &Plan) -> Value {
    let (consistency, ranking) = match (plan.mode, plan.target) {
        // The text index is written in the writing transaction: a search reads exactly
        // the state it reads.
        (SearchMode::Keyword, _) => (
            "snapshot",
            "BM25 over names and descriptive attributes, with name bonuses; score s / (s + 4)",
        ),
        // Vectors are made after the commit, by a worker: they may lag.
        (SearchMode::Semantic, _) => (
            "keyword_snapshot_vectors_eventual",
            "cosine of the embeddings, clipped at 0; an element not embedded yet keeps its keyword score",
        ),
        (SearchMode::Hybrid, SearchTarget::Concept) => (
            "keyword_snapshot_vectors_eventual",
            "reciprocal rank fusion of the keyword and vector rankings, over its largest value",
        ),
        (SearchMode::Hybrid, SearchTarget::Proposition) => (
            "keyword_snapshot_vectors_eventual",
            "0.1 x keyword score + 0.9 x cosine",
        ),
    };
    let mut ext = json!({"ranking": ranking, "score_range": [0, 1]});
    if plan.mode != SearchMode::Keyword {
        if let Some(sem) = nexus.recall().semantic() {
            ext["embedding_model"] = json!(sem.model_id());
        }
    }
    json!({
        "mode": mode_word(plan.mode),
        "score_semantics": "retrieval_score_not_confidence",
        "consistency": consistency,
        "extensions": {"kip-nexus/search": ext},
    })
}
