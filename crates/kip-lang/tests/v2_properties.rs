//! Property tests of the KIP 2.0 parser: it never panics and every error it returns
//! carries its registry name, line, column and a hint; a statement parses alone as it
//! does in a script; keyword case never changes the tree (grammar decision 1: keywords
//! are ASCII case-insensitive); and WHERE blocks assembled from valid clauses parse to
//! as many clauses; a printed statement parses back to the same tree.

use kip_lang::lexer::{tokenize, Tok};
use kip_lang::v2;
use proptest::prelude::*;

/// Valid statements of every language, each using many keywords.
const STATEMENTS: &[&str] = &[
    r#"FIND(?c.name, COUNT(DISTINCT ?a)) WHERE { ?c CONCEPT {type: "Person"} OPTIONAL { ?a ASSERTION {proposition: ?p} } NOT { ?p PROPOSITION (?c, "blocked", ?o) } UNION { ?c {type: "Robot"} } FILTER(?c.age >= 18 && !IS_NULL(?c.name)) } AS OF SEQ 5 FOR TIME :t WITH EPISTEMIC {risk: "low"} ORDER BY ?c.name DESC LIMIT 10 CURSOR :cur"#,
    r#"FIND(?b, ?s) WHERE { ?b BELIEF (?x, "prefers", ?y) ?s BELIEF SLOT (?x, "prefers") ?d BELIEF (id: :pid) ?e STRUCTURAL (?x, "cites", ?y) (?x, "knows"{1,3} | "likes", ?z) }"#,
    r#"MUTATE { CREATE CONCEPT ?c { TYPE "Person" CLIENT KEY "k" NAME "n" SET ATTRIBUTES {a: 1} } UPSERT CONCEPT ?u { MATCH {key: "k"} EXPECT VERSION 1 SET FIELDS {name: "x"} UNSET FACET "f" {a} UNSET STRUCTURAL {("r", ?c)} } ENSURE PROPOSITION ?p (?c, "likes", ?u) EXPECT VERSION 2 ASSERT ?a (?c, "likes", ?u) {by: :me} SUPERSEDING :old CREATE EVIDENCE ?e { SET FIELDS {x: 1} } }"#,
    r#"UPDATE ?x EXPECT VERSION 3 SET FACET "mnemonic" {s: ADD(?x.s, 1)} UNSET ATTRIBUTES {a} WHERE { ?x {key: "k"} } LIMIT 5"#,
    r#"TRANSITION ACTIVITY ?x TO "completed" SET FIELDS {ended_at: :t} SET STRUCTURAL {("produced", ?y) {w: 1}} EXPECT STATE "running""#,
    r#"PURGE ?c WHERE { ?c {} } LIMIT 1 REFERENCE POLICY "detach" CONFIRM "PURGE""#,
    r#"MERGE CONCEPT :a INTO :b WHERE { ?x {} } EXPECT VERSION 7"#,
    r#"SEARCH CONCEPT "alice" WITH TYPE "Person" WITH PREDICATE "p" MODE "hybrid" THRESHOLD 0.5 AS OF SEQ 3 LIMIT 5 CURSOR :c"#,
    r#"DESCRIBE TRANSACTION BY IDEMPOTENCY KEY "k""#,
    r#"HISTORY ELEMENT "C:1" FROM SEQ 1 TO SEQ 9 LIMIT 5 CURSOR :c"#,
    r#"EXPORT CAPSULE :out WHERE { ?c {type: "Person"} } WITH {closure: "roots"} AS OF TIME "2026""#,
    r#"LIST SCHEMA PACKAGES STATUS "active" LIMIT 5 CURSOR :c"#,
];

/// Valid WHERE clauses (KQL).
const CLAUSES: &[&str] = &[
    r#"?c CONCEPT {type: "Person", name: :n}"#,
    r#"?c {tags: ["a", ?t, {x: 1}]}"#,
    r#"?p PROPOSITION (?c, "prefers", ?o)"#,
    r#"(?c, ?pred, (id: :pid))"#,
    r#"?a ASSERTION {stance: "support"}"#,
    r#"?e EVIDENCE {}"#,
    r#"?x ACTIVITY {status: "completed"}"#,
    r#"STRUCTURAL (?x, "used", ?e)"#,
    r#"?b BELIEF (?p)"#,
    r#"?s BELIEF SLOT (:alice, "prefers")"#,
    r#"FILTER(IN(?c.name, ["a", "b"]) || -?c.n < 3)"#,
    r#"NOT { ?c {type: "Robot"} }"#,
    r#"OPTIONAL { ?c2 {name: ?n} FILTER(?n != null) }"#,
    r#"UNION { (?c, "is"{0,}, ?k) }"#,
];

/// The text with every keyword token's case changed as `mask` says.
fn recase(text: &str, mask: &[u8]) -> String {
    let Ok(tokens) = tokenize(text) else {
        return text.to_string();
    };
    let mut out = text.to_string();
    let mut i = 0;
    for t in tokens {
        if let Tok::Ident(w) = &t.tok {
            let is_keyword = w.len() > 1
                && w.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                && !text[t.span.end..].starts_with('(')
                || w == "FIND"
                || w == "COUNT";
            if is_keyword {
                let m = mask[i % mask.len()];
                i += 1;
                let new: String = w
                    .chars()
                    .enumerate()
                    .map(|(k, c)| {
                        if (m >> (k % 8)) & 1 == 1 {
                            c.to_ascii_lowercase()
                        } else {
                            c
                        }
                    })
                    .collect();
                out.replace_range(t.span.start..t.span.end, &new);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_and_errors_carry_name_position_and_hint(text in any::<String>()) {
        match v2::parse(&text) {
            Ok(st) => {
                let again = v2::parse(&st.to_string()).expect("printed text parses");
                prop_assert_eq!(&again.kind, &st.kind);
                let script = v2::parse_script(&text).expect("a statement is a script");
                prop_assert_eq!(script, vec![st]);
            }
            Err(e) => {
                prop_assert!(["InvalidSyntax", "InvalidIdentifier", "ResourceExhausted"].contains(&e.v2_code()), "{}", e);
                prop_assert!(e.line.is_some() && e.column.is_some(), "no position: {}", e);
                prop_assert!(e.hint.is_some(), "no hint: {}", e);
            }
        }
    }

    #[test]
    fn never_panics_on_statement_like_text(
        parts in prop::collection::vec(
            prop_oneof![
                Just("FIND(".to_string()), Just(")".to_string()), Just("WHERE".to_string()),
                Just("{".to_string()), Just("}".to_string()), Just("?x".to_string()),
                Just("(".to_string()), Just(",".to_string()), Just("\"p\"".to_string()),
                Just(":p".to_string()), Just("BELIEF".to_string()), Just("SLOT".to_string()),
                Just("MUTATE".to_string()), Just("CREATE CONCEPT".to_string()),
                Just("SET FIELDS".to_string()), Just("|".to_string()), Just("{1,2}".to_string()),
                Just("id:".to_string()), Just("-".to_string()), Just("!".to_string()),
                Just("FILTER".to_string()), Just("NOT".to_string()), Just("1".to_string()),
                Just("CONFIRM \"PURGE\"".to_string()), Just("DESCRIBE".to_string()),
            ],
            0..40,
        )
    ) {
        let text = parts.join(" ");
        if let Err(e) = v2::parse(&text) {
            prop_assert!(e.line.is_some() && e.column.is_some(), "no position: {}", e);
            prop_assert!(e.hint.is_some(), "no hint: {}", e);
        }
    }

    #[test]
    fn printed_statements_parse_back_to_the_same_tree(
        which in 0..STATEMENTS.len(),
        picks in prop::collection::vec(0..CLAUSES.len(), 0..8),
    ) {
        let body: Vec<&str> = picks.iter().map(|&i| CLAUSES[i]).collect();
        for text in [STATEMENTS[which].to_string(), format!("FIND(?c) WHERE {{ {} }}", body.join(" "))] {
            let st = v2::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            let printed = st.to_string();
            let again = v2::parse(&printed).map_err(|e| TestCaseError::fail(format!("{printed}: {e}")))?;
            prop_assert_eq!(again.kind, st.kind);
        }
    }

    #[test]
    fn keyword_case_never_changes_the_tree(
        which in 0..STATEMENTS.len(),
        mask in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let text = STATEMENTS[which];
        let original = v2::parse(text).expect("valid statement");
        let recased = recase(text, &mask);
        let again = v2::parse(&recased).map_err(|e| TestCaseError::fail(format!("{recased}: {e}")))?;
        prop_assert_eq!(again, original);
    }

    #[test]
    fn where_blocks_of_valid_clauses_parse_to_as_many_clauses(
        picks in prop::collection::vec(0..CLAUSES.len(), 0..12),
    ) {
        let body: Vec<&str> = picks.iter().map(|&i| CLAUSES[i]).collect();
        let text = format!("FIND(?c) WHERE {{\n{}\n}} LIMIT 3", body.join("\n"));
        match v2::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?.kind {
            v2::StatementKind::Query(q) => prop_assert_eq!(q.where_clauses.len(), picks.len()),
            other => prop_assert!(false, "not a query: {:?}", other),
        }
        prop_assert_eq!(v2::parse_where_clauses(&body.join(" ")).expect("body").len(), picks.len());
    }
}
