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
