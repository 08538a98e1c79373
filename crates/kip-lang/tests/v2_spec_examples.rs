//! Every KIP example of the KIP 2.0 Specification and KIPSyntax.md parses with the 2.0
//! parser. Blocks are extracted at test time, so a new example is covered automatically.
//!
//! The rule: a fenced block is a KIP example when its fence is tagged `prolog` or `kip`
//! (the documents' convention for KIP code), or when it is tagged `text` and its first
//! word (comments aside) is an uppercase 2.0 statement keyword. An example is parsed
//! - as a script of statements when it starts with a statement keyword;
//! - as a KQL WHERE body when it starts with a pattern or WHERE clause (`?x`, `(`,
//!   `PROPOSITION`, `STRUCTURAL`, `FILTER`, `NOT`, `OPTIONAL`, `UNION`);
//! - as the tail of a query (`FIND(?x) WHERE {} <block>`) when it starts with a query
//!   modifier (`AS OF`, `FOR TIME`, `WITH EPISTEMIC`, `ORDER BY`, `LIMIT`, `CURSOR`).
//!
//! The blocks that are not examples (grammar synopses with `<placeholders>`, `...`
//! elisions or `A | B` alternatives, lists of fragments) are listed in [`EXCLUDED`] by
//! document and line with the reason; the test checks that each of them really does
//! not parse, so the list cannot hide a block that should be tested.

use std::fs;
use std::path::PathBuf;

const DOCS: [&str; 2] = [
    "spec/kip2/KIP-2.0-SPECIFICATION.md",
    "spec/kip2/KIPSyntax.md",
];

/// (document, first line of the block's body, reason) of every block the rule selects
/// that is not a parseable example.
const EXCLUDED: &[(&str, usize, &str)] = &[
    (
        "KIP-2.0-SPECIFICATION.md",
        1398,
        "synopsis table of the SET/UNSET clauses: `(field, target) {options}` placeholders and prose",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3137,
        "import pipeline diagram (`→` arrows), not a statement",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3186,
        "query skeleton with `...` elisions",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3243,
        "`{...}` elision",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3401,
        "`...` elision",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3452,
        "synopsis `<expr> ASC|DESC [, ...]`",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3615,
        "three AS OF alternatives, one per line (each is tested by as_of_alternatives_of_section_48_1_parse)",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3737,
        "list of KML statement names with prose",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3814,
        "list of KML statement names",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3840,
        "`...` elision",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        3856,
        "`{...}` and `(...)` elisions",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4017,
        "`(...)` and `{...}` elisions",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4176,
        "synopsis of the UPDATE actions with `{...}` elisions",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4268,
        "`<target>` placeholder and `...`",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4393,
        "list of META statement names",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4430,
        "EXPORT synopsis with `...` elisions and `[ ]` optional parts",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4457,
        "synopsis `[MODE \"compact\" | \"full\"]`",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4507,
        "list of introspection synopses with `[ ]` optional parts",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4535,
        "`<KIND>` placeholder",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4665,
        "synopses with `[ ]` optional parts",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4680,
        "statement names with prose",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4704,
        "synopsis with `|` alternatives and `<artifact>`",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4723,
        "synopsis with `|` alternatives and `<input>`",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        4943,
        "three separate fragments (a pattern, a LIMIT, a FOR TIME), not one construct",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        5783,
        "conformance checklist (keywords and prose)",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        5839,
        "conformance checklist",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        5855,
        "conformance checklist",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        6821,
        "checklist of statements to call",
    ),
    (
        "KIP-2.0-SPECIFICATION.md",
        6833,
        "list of capsule statement names",
    ),
    (
        "KIPSyntax.md",
        107,
        "synopsis with `<projections>` placeholders",
    ),
    (
        "KIPSyntax.md",
        316,
        "synopsis with `[ ]` optional parts",
    ),
    (
        "KIPSyntax.md",
        339,
        "synopsis with `[ ]` optional parts",
    ),
    (
        "KIPSyntax.md",
        362,
        "synopsis with `<KIND>` and `[ ]` optional parts",
    ),
];

/// The words that start a 2.0 statement: the parser's own list, so the two cannot drift.
fn is_statement(word: &str) -> bool {
    kip_lang::v2::statement_keywords().contains(&word)
}

const WHERE_STARTS: [&str; 6] = [
    "PROPOSITION",
    "STRUCTURAL",
    "FILTER",
    "NOT",
    "OPTIONAL",
    "UNION",
];
const TAIL_STARTS: [&str; 6] = ["AS", "FOR", "WITH", "ORDER", "LIMIT", "CURSOR"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first word of the code (comment lines skipped), cut at the first non-letter.
fn first_word(block: &str) -> String {
    let line = block
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//"))
        .unwrap_or("");
    line.chars()
        .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
        .collect()
}

fn first_char(block: &str) -> Option<char> {
    block
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//"))
        .and_then(|l| l.chars().next())
}

/// (document, first body line, fence tag, body) of every selected block.
fn blocks() -> Vec<(&'static str, usize, String)> {
    let mut out = Vec::new();
    for doc in DOCS {
        let text = fs::read_to_string(repo().join(doc)).expect("read doc");
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let t = lines[i].trim_start();
            if let Some(tag) = t.strip_prefix("```") {
                let tag = tag.trim().to_string();
                let start = i + 2;
                let mut body = String::new();
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    body.push_str(lines[i]);
                    body.push('\n');
                    i += 1;
                }
                let w = first_word(&body);
                let selected =
                    tag == "prolog" || tag == "kip" || (tag == "text" && is_statement(w.as_str()));
                if selected && first_char(&body).is_some() {
                    out.push((doc, start, body));
                }
            }
            i += 1;
        }
    }
    out
}

fn parse_example(block: &str) -> Result<&'static str, kip_lang::KipError> {
    let w = first_word(block);
    let upper = w.to_ascii_uppercase();
    if is_statement(upper.as_str()) {
        kip_lang::v2::parse_script(block).map(|_| "statements")
    } else if TAIL_STARTS.contains(&upper.as_str()) {
        kip_lang::v2::parse(&format!("FIND(?x) WHERE {{ }}\n{block}")).map(|_| "query tail")
    } else if WHERE_STARTS.contains(&upper.as_str()) || matches!(first_char(block), Some('?' | '('))
    {
        kip_lang::v2::parse_where_clauses(block).map(|_| "where body")
    } else {
        Err(kip_lang::KipError::syntax(format!(
            "no rule for a block starting with {w:?}"
        )))
    }
}

#[test]
fn every_specification_and_kipsyntax_example_parses() {
    let mut parsed = std::collections::BTreeMap::<&str, usize>::new();
    let mut failures = Vec::new();
    let mut excluded_but_parses = Vec::new();
    let mut excluded_seen = 0;
    for (doc, line, body) in blocks() {
        let name = doc.rsplit('/').next().unwrap_or(doc);
        let excluded = EXCLUDED.iter().find(|(d, l, _)| *d == name && *l == line);
        match (parse_example(&body), excluded) {
            (Ok(kind), None) => *parsed.entry(kind).or_default() += 1,
            (Err(e), None) => {
                failures.push(format!("{name}:{line}: {e} (hint: {:?})\n{body}", e.hint))
            }
            (Ok(_), Some(_)) => excluded_but_parses.push(format!("{name}:{line}")),
            (Err(_), Some(_)) => excluded_seen += 1,
        }
    }
    assert!(
        failures.is_empty(),
        "{} examples fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        excluded_but_parses.is_empty(),
        "excluded blocks that parse (remove them from EXCLUDED): {excluded_but_parses:?}"
    );
    assert_eq!(
        excluded_seen,
        EXCLUDED.len(),
        "an EXCLUDED entry names no block"
    );
    let total: usize = parsed.values().sum();
    eprintln!("parsed {total} examples {parsed:?}; excluded {excluded_seen}");
    assert!(total >= 50, "only {total} examples parsed");
}

/// §48.1's three AS OF forms, listed one per line in one block, each parse as a query tail.
#[test]
fn as_of_alternatives_of_section_48_1_parse() {
    for tail in [
        "AS OF SEQ 1500",
        "AS OF TX \"tx-...\"",
        "AS OF TIME \"...\"",
    ] {
        kip_lang::v2::parse(&format!("FIND(?x) WHERE {{ }} {tail}"))
            .unwrap_or_else(|e| panic!("{tail}: {e}"));
    }
}

#[test]
fn every_specification_statement_example_prints_and_parses_back() {
    let mut n = 0;
    for (doc, line, body) in blocks() {
        let Ok(statements) = kip_lang::v2::parse_script(&body) else {
            continue;
        };
        for st in statements {
            let printed = st.to_string();
            let again = kip_lang::v2::parse(&printed)
                .unwrap_or_else(|e| panic!("{doc}:{line}: printed text fails: {e}\n{printed}"));
            assert_eq!(again.kind, st.kind, "{doc}:{line}: {printed}");
            n += 1;
        }
    }
    assert!(n >= 30, "only {n} statements round-tripped");
}
