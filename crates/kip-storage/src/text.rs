//! Text analysis for SEARCH: what an element's searchable text is, and how text becomes
//! terms.
//!
//! Analysis: Unicode NFKD normalization with combining marks removed (accent-insensitive),
//! lowercase (case-insensitive), then runs of CJK script are segmented by jieba (search
//! mode, which also emits the sub-words of long words) and other text is split into
//! Unicode words (UAX #29), with `snake_case` words also split at underscores. The same
//! analysis applies to documents and queries.

use crate::ConceptRecord;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// The version of the analysis and index layout; a store indexed with another version
/// is re-indexed when opened.
pub const TEXT_INDEX_VERSION: u64 = 6;

/// Weight of a name term relative to a description term.
pub const NAME_WEIGHT: u32 = 3;

/// Attributes whose string values (or arrays of strings) describe an element. Version 6
/// added `observations` (what the memory-server tools store), so SEARCH finds what
/// `search_nodes` finds.
pub const DESCRIPTIVE_ATTRIBUTES: [&str; 10] = [
    "description",
    "observations",
    "aliases",
    "content_summary",
    "summary",
    "display_name",
    "title",
    "keywords",
    "tags",
    "scope_note",
];

fn jieba() -> &'static jieba_rs::Jieba {
    static JIEBA: OnceLock<jieba_rs::Jieba> = OnceLock::new();
    JIEBA.get_or_init(jieba_rs::Jieba::new)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F)
}

/// Normalizes text: NFKD, combining marks removed, lowercase.
pub fn normalize(text: &str) -> String {
    if text.is_ascii() {
        // NFKD leaves ASCII unchanged and it has no combining marks: the same result
        // without the decomposition machinery (most text an agent stores).
        return text.to_ascii_lowercase();
    }
    full_normalize(text)
}

fn full_normalize(text: &str) -> String {
    text.nfkd()
        .filter(|c| !is_combining_mark(*c))
        .collect::<String>()
        .to_lowercase()
}

/// The terms of a text, in order (with repeats).
pub fn terms(text: &str) -> Vec<String> {
    let norm = normalize(text);
    let mut out = Vec::new();
    let mut run = String::new();
    let mut run_cjk = false;
    let flush = |run: &mut String, cjk: bool, out: &mut Vec<String>| {
        if run.is_empty() {
            return;
        }
        if cjk {
            for w in jieba().cut_for_search(run, true) {
                let w = w.word.trim();
                if !w.is_empty() && w.chars().any(char::is_alphanumeric) {
                    out.push(w.to_string());
                }
            }
        } else {
            for w in run.unicode_words() {
                out.push(w.to_string());
                if w.contains('_') {
                    out.extend(w.split('_').filter(|p| !p.is_empty()).map(str::to_string));
                }
            }
        }
        run.clear();
    };
    if !norm.chars().any(is_cjk) {
        // One run of non-CJK text: the whole string, without copying it char by char.
        let mut all = norm;
        flush(&mut all, false, &mut out);
        return out;
    }
    for c in norm.chars() {
        let cjk = is_cjk(c);
        if cjk != run_cjk {
            flush(&mut run, run_cjk, &mut out);
            run_cjk = cjk;
        }
        run.push(c);
    }
    flush(&mut run, run_cjk, &mut out);
    out
}

/// English stop words and question words: left out of a query's terms (not of the
/// index, so no store is re-indexed), so "what did the bank lend" ranks by "bank" and
/// "lend" rather than by the concepts that say "the" most. Sorted (binary search).
/// Lower case, straight apostrophes (a query's curly ones are read as straight).
pub const STOP_WORDS_EN: [&str; 124] = [
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "didn't",
    "do",
    "does",
    "doesn't",
    "doing",
    "don't",
    "during",
    "each",
    "few",
    "for",
    "from",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "i'm",
    "if",
    "in",
    "into",
    "is",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "of",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "that's",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "until",
    "very",
    "was",
    "wasn't",
    "we",
    "were",
    "what",
    "what's",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "you",
    "you're",
    "your",
    "yours",
    "yourself",
];

/// The stop-word lists by language, for the query side ([`query_terms`]). Only English
/// for now; CJK text is segmented by jieba and never matches these.
pub const STOP_WORDS: [(&str, &[&str]); 1] = [("en", &STOP_WORDS_EN)];

/// True when `term` (an analysed term) is a stop word of one of [`STOP_WORDS`].
pub fn is_stop_word(term: &str) -> bool {
    let t = term.replace('\u{2019}', "'");
    STOP_WORDS
        .iter()
        .any(|(_, list)| list.binary_search(&t.as_str()).is_ok())
}

/// The stem a query term is also looked up by as a prefix, for English inflections:
/// "adopted" -> "adopt" (finds "adopt", "adopts", "adoption"), "training" -> "train",
/// "recipes" -> "recipe". Only for lower-case ASCII words, and only when at least four
/// letters are left (so "moving" keeps its own letters and does not look up "mov").
/// `None`: the term is looked up as it is.
pub fn query_stem(term: &str) -> Option<&str> {
    if !term.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    for suffix in ["ing", "ed", "s"] {
        if let Some(stem) = term.strip_suffix(suffix) {
            if stem.len() >= 4 && !stem.ends_with('s') {
                return Some(stem);
            }
        }
    }
    None
}

/// The terms a query is looked up by: its [`terms`], each once, a possessive "'s"
/// dropped ("Maya's" looks up "maya", which also finds "maya's" as a prefix), and the
/// stop words left out unless nothing else is left (a query of stop words only, such
/// as "The Who", still searches by them; a name equal to the query is found through
/// the name index anyway).
pub fn query_terms(text: &str) -> Vec<String> {
    let mut all: Vec<String> = terms(text)
        .into_iter()
        .map(
            |t| match t.strip_suffix("'s").or_else(|| t.strip_suffix("\u{2019}s")) {
                Some(stem) if !stem.is_empty() => stem.to_string(),
                _ => t,
            },
        )
        .collect();
    all.sort();
    all.dedup();
    let content: Vec<String> = all.iter().filter(|t| !is_stop_word(t)).cloned().collect();
    if content.is_empty() {
        all
    } else {
        content
    }
}

fn add(terms_tf: &mut BTreeMap<String, u32>, text: &str, weight: u32) -> u32 {
    let mut n = 0;
    for t in terms(text) {
        if t.len() > 200 {
            continue;
        }
        *terms_tf.entry(t).or_default() += weight;
        n += weight;
    }
    n
}

fn add_value(terms_tf: &mut BTreeMap<String, u32>, v: &Value) -> u32 {
    match v {
        Value::String(s) => add(terms_tf, s, 1),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                if let Value::String(s) = i {
                    add(terms_tf, s, 1)
                } else {
                    0
                }
            })
            .sum(),
        _ => 0,
    }
}

/// A document: weighted term frequencies and its length (sum of weights).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Doc {
    /// term -> weighted frequency
    pub terms: BTreeMap<String, u32>,
    /// Weighted length.
    pub len: u32,
}

/// The searchable text of a concept: its name (weighted) and descriptive attributes.
pub fn concept_doc(c: &ConceptRecord) -> Doc {
    let mut d = Doc::default();
    d.len += add(&mut d.terms, &c.name, NAME_WEIGHT);
    for k in DESCRIPTIVE_ATTRIBUTES {
        if let Some(v) = c.attributes.get(k) {
            d.len += add_value(&mut d.terms, v);
        }
    }
    d
}

/// True when the concept's searchable text differs between two versions.
pub fn concept_text_changed(a: &ConceptRecord, b: &ConceptRecord) -> bool {
    a.name != b.name
        || DESCRIPTIVE_ATTRIBUTES
            .iter()
            .any(|k| a.attributes.get(*k) != b.attributes.get(*k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_seed: proptest::test_runner::RngSeed::Fixed(3),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        /// The ASCII shortcut normalizes exactly as the full Unicode path does.
        #[test]
        fn the_ascii_shortcut_matches_full_normalization(text in "[ -~\t\n]{0,40}") {
            prop_assert_eq!(normalize(&text), full_normalize(&text));
        }

        /// Text without CJK is split as one run, exactly as the char-by-char path does.
        #[test]
        fn terms_of_text_without_cjk_match_the_run_by_run_split(text in "\\PC{0,40}") {
            let norm = normalize(&text);
            prop_assume!(!norm.chars().any(is_cjk));
            let mut run_by_run = Vec::new();
            for w in norm.unicode_words() {
                run_by_run.push(w.to_string());
                if w.contains('_') {
                    run_by_run.extend(w.split('_').filter(|p| !p.is_empty()).map(str::to_string));
                }
            }
            prop_assert_eq!(terms(&text), run_by_run);
        }
    }

    #[test]
    fn stop_word_lists_are_sorted_lower_case_and_unique() {
        for (_, list) in STOP_WORDS {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
            assert!(list.iter().all(|w| terms(w) == [*w]), "{list:?}");
        }
    }

    #[test]
    fn query_stems_drop_english_inflections() {
        assert_eq!(query_stem("adopted"), Some("adopt"));
        assert_eq!(query_stem("training"), Some("train"));
        assert_eq!(query_stem("recipes"), Some("recipe"));
        assert_eq!(query_stem("moving"), None);
        assert_eq!(query_stem("glass"), None);
        assert_eq!(query_stem("bank"), None);
        assert_eq!(query_stem("cafés"), None);
    }

    #[test]
    fn stop_words_and_question_words_are_left_out_of_a_query() {
        assert_eq!(
            query_terms("money owed to the bank"),
            ["bank", "money", "owed"]
        );
        assert_eq!(
            query_terms("When did Maya's dog arrive?"),
            ["arrive", "dog", "maya"]
        );
        assert_eq!(
            query_terms("What\u{2019}s Leo\u{2019}s cello?"),
            ["cello", "leo"]
        );
        // Only stop words: searched by them.
        assert_eq!(query_terms("The Who"), ["the", "who"]);
        // CJK is unaffected.
        assert_eq!(query_terms("头痛"), terms("头痛"));
    }

    #[test]
    fn analysis_is_case_and_accent_insensitive() {
        assert_eq!(terms("Café AU Lait"), vec!["cafe", "au", "lait"]);
        assert_eq!(terms("Ørsted naïve"), vec!["ørsted", "naive"]);
    }

    #[test]
    fn snake_case_is_split_too() {
        assert_eq!(
            terms("has_side_effect"),
            vec!["has_side_effect", "has", "side", "effect"]
        );
    }

    #[test]
    fn cjk_is_segmented() {
        let t = terms("深色模式");
        assert!(
            t.contains(&"深色".to_string()) && t.contains(&"模式".to_string()),
            "{t:?}"
        );
        let mixed = terms("头痛 headache 阿司匹林");
        assert!(
            mixed.contains(&"headache".to_string()) && mixed.contains(&"头痛".to_string()),
            "{mixed:?}"
        );
    }
}
