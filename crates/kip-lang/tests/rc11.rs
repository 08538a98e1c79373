//! The RC9-RC11 statements: what parses into what, and the errors (code, place, hint)
//! for the mistakes an agent makes with them.

use kip_lang::ast::*;
use kip_lang::{bind, parse_command, ErrorCode};
use serde_json::json;

fn err(src: &str) -> kip_lang::KipError {
    parse_command(src).expect_err(src)
}

#[test]
fn update_parses_values_and_nested_expressions() {
    let c = parse_command(
        r#"UPDATE ?l SET METADATA { s: CLAMP(MUL(COALESCE(?l.metadata.s, 0.7), :f), 0.0, 1.0), at: :now } WHERE { ?l (?a, ?p, ?b) } LIMIT 500"#,
    )
    .expect("parses");
    let Command::Update(u) = &c else {
        panic!("{c:?}")
    };
    assert_eq!(u.target.name, "l");
    assert!(u.set_attributes.is_none());
    let m = u.set_metadata.as_ref().expect("SET METADATA");
    assert_eq!(m.entries.len(), 2);
    let UpdateValue::Call { func, args, .. } = &m.entries[0].1 else {
        panic!("{:?}", m.entries[0])
    };
    assert_eq!(*func, UpdateFunc::Clamp);
    assert!(matches!(
        &args[0],
        UpdateValue::Call {
            func: UpdateFunc::Mul,
            ..
        }
    ));
    assert!(matches!(&m.entries[1].1, UpdateValue::Value(_)));
    assert_eq!(
        u.limit.as_ref().and_then(|l| l.literal()).copied(),
        Some(500)
    );
    // Printing and parsing again gives the same statement.
    assert_eq!(parse_command(&c.to_string()).expect("reparse"), c);
    // Placeholders inside expressions are bound.
    let bound = bind(
        &c,
        json!({"f": 0.95, "now": "2026"}).as_object().expect("obj"),
    )
    .expect("binds");
    assert!(
        bound
            .to_string()
            .contains("MUL(COALESCE(?l.metadata.s, 0.7), 0.95)"),
        "{bound}"
    );
    assert!(c.is_write());
}

#[test]
fn update_mistakes_are_syntax_errors_with_hints() {
    let cases = [
        // Nothing to set.
        ("UPDATE ?x WHERE { ?x {type: \"T\"} }", "SET"),
        // A path on another variable.
        (
            "UPDATE ?x SET ATTRIBUTES { n: ADD(?y.attributes.n, 1) } WHERE { ?x {type: \"T\"} ?y {type: \"T\"} }",
            "own state",
        ),
        // A bare path is not a value.
        (
            "UPDATE ?x SET ATTRIBUTES { n: ?x.attributes.m } WHERE { ?x {type: \"T\"} }",
            "COALESCE",
        ),
        // Wrong arity.
        (
            "UPDATE ?x SET ATTRIBUTES { n: CLAMP(1, 2) } WHERE { ?x {type: \"T\"} }",
            "CLAMP(x, lo, hi)",
        ),
        // Lowercase function names.
        (
            "UPDATE ?x SET ATTRIBUTES { n: add(1, 2) } WHERE { ?x {type: \"T\"} }",
            "ADD(",
        ),
        // A string operand.
        (
            "UPDATE ?x SET ATTRIBUTES { n: ADD(\"1\", 2) } WHERE { ?x {type: \"T\"} }",
            "ADD(COALESCE",
        ),
        // EXPECT VERSION is for UPSERT blocks.
        (
            "UPDATE ?x SET ATTRIBUTES { n: 1 } EXPECT VERSION 2 WHERE { ?x {type: \"T\"} }",
            "UPSERT blocks only",
        ),
        (
            "DELETE CONCEPT ?x DETACH EXPECT VERSION 2 WHERE { ?x {type: \"T\"} }",
            "UPSERT blocks only",
        ),
        // ... and after the WHERE, where an agent used to UPSERT's guard puts it.
        (
            "UPDATE ?x SET ATTRIBUTES { n: 1 } WHERE { ?x {type: \"T\"} } EXPECT VERSION 2",
            "UPSERT blocks only",
        ),
        (
            "DELETE CONCEPT ?x DETACH WHERE { ?x {type: \"T\"} } EXPECT VERSION 2",
            "UPSERT blocks only",
        ),
        // A path that is not attributes/metadata.
        (
            "UPDATE ?x SET ATTRIBUTES { n: ADD(?x.name, 1) } WHERE { ?x {type: \"T\"} }",
            "attributes.<key>",
        ),
    ];
    for (src, hint) in cases {
        let e = err(src);
        assert_eq!(e.code, ErrorCode::InvalidSyntax, "{src}: {e}");
        assert!(e.line.is_some() && e.column.is_some(), "{src}: {e}");
        let h = e.hint.clone().unwrap_or_default();
        assert!(h.contains(hint), "{src}: hint {h:?} lacks {hint:?}");
    }
}

#[test]
fn merge_and_export_parse() {
    let c = parse_command(
        r#"MERGE CONCEPT ?dup INTO ?canon WHERE { ?dup {type: "T", name: "a"} ?canon {type: "T", name: "b"} }"#,
    )
    .expect("merge");
    let Command::Merge(m) = &c else { panic!() };
    assert_eq!(
        (m.source.name.as_str(), m.target.name.as_str()),
        ("dup", "canon")
    );
    assert!(c.is_write());
    assert_eq!(parse_command(&c.to_string()).expect("reparse"), c);
    assert_eq!(
        err("MERGE ?a INTO ?b WHERE { ?a {type: \"T\"} }").code,
        ErrorCode::InvalidSyntax
    );
    assert!(err("MERGE CONCEPT ?a WITH ?b WHERE { }")
        .hint
        .is_some_and(|h| h.contains("INTO")));

    let c = parse_command(r#"EXPORT ?n WHERE { ?n {type: "Event"} } LIMIT 20 CURSOR :c"#)
        .expect("export");
    let Command::Export(e) = &c else { panic!() };
    assert!(e.cursor.is_some() && e.limit.is_some());
    assert!(!c.is_write());
    assert_eq!(c.kind(), CommandKind::Meta);
    assert_eq!(parse_command(&c.to_string()).expect("reparse"), c);
}

#[test]
fn expect_version_follows_the_identity() {
    let c = parse_command(
        r#"UPSERT { CONCEPT ?s { {type: "Person", name: "$self"} EXPECT VERSION :v SET ATTRIBUTES { a: 1 } } PROPOSITION ?p { (?s, "knows", ?s) EXPECT VERSION 0 } }"#,
    )
    .expect("parses");
    let Command::Upsert(u) = &c else { panic!() };
    let UpsertBlock::Concept(cb) = &u.blocks[0] else {
        panic!()
    };
    assert!(matches!(cb.expect_version, Some(Slot::Param(_))));
    let UpsertBlock::Proposition(pb) = &u.blocks[1] else {
        panic!()
    };
    assert_eq!(
        pb.expect_version
            .as_ref()
            .and_then(|v| v.literal())
            .copied(),
        Some(0)
    );
    assert_eq!(parse_command(&c.to_string()).expect("reparse"), c);
    // Bound from a parameter; a wrong type is KIP_2003.
    let b = bind(&c, json!({"v": 3}).as_object().expect("obj")).expect("bind");
    assert!(b.to_string().contains("EXPECT VERSION 3"), "{b}");
    let e = bind(&c, json!({"v": "3"}).as_object().expect("obj")).expect_err("string");
    assert_eq!(e.code, ErrorCode::InvalidValueType);
    // After SET it is misplaced; negative versions do not exist.
    let e = err(
        r#"UPSERT { CONCEPT ?s { {type: "T", name: "n"} SET ATTRIBUTES { a: 1 } EXPECT VERSION 1 } }"#,
    );
    assert!(
        e.hint.is_some_and(|h| h.contains("right after")),
        "misplaced"
    );
    assert_eq!(
        err(r#"UPSERT { CONCEPT ?s { {type: "T", name: "n"} EXPECT VERSION -1 } }"#).code,
        ErrorCode::InvalidSyntax
    );
}

#[test]
fn search_mode_and_threshold() {
    let c = parse_command(
        r#"SEARCH CONCEPT "pain" WITH TYPE "Drug" MODE "hybrid" THRESHOLD 0.75 LIMIT 5"#,
    )
    .expect("parses");
    let Command::Search(s) = &c else { panic!() };
    assert_eq!(
        s.mode.as_ref().and_then(|m| m.literal()).copied(),
        Some(SearchMode::Hybrid)
    );
    assert_eq!(
        s.threshold.as_ref().and_then(|t| t.literal()).copied(),
        Some(0.75)
    );
    assert_eq!(parse_command(&c.to_string()).expect("reparse"), c);
    for bad in [
        r#"SEARCH CONCEPT "x" MODE "fuzzy""#,
        r#"SEARCH CONCEPT "x" MODE keyword"#,
        r#"SEARCH CONCEPT "x" THRESHOLD 1.5"#,
        r#"SEARCH CONCEPT "x" THRESHOLD "high""#,
        r#"SEARCH CONCEPT "x" MODE "keyword" MODE "semantic""#,
    ] {
        let e = err(bad);
        assert_eq!(e.code, ErrorCode::InvalidSyntax, "{bad}: {e}");
        assert!(e.hint.is_some(), "{bad}");
    }
    let c = parse_command(r#"SEARCH PROPOSITION :q MODE :m THRESHOLD :t"#).expect("params");
    let b = bind(
        &c,
        json!({"q": "x", "m": "semantic", "t": 0.5})
            .as_object()
            .expect("o"),
    )
    .expect("bind");
    assert!(
        b.to_string().contains(r#"MODE "semantic" THRESHOLD 0.5"#),
        "{b}"
    );
    for params in [
        json!({"q": "x", "m": "fast", "t": 0.5}),
        json!({"q": "x", "m": "keyword", "t": 2}),
    ] {
        let e = bind(&c, params.as_object().expect("o")).expect_err("bad parameter");
        assert_eq!(e.code, ErrorCode::InvalidValueType);
    }
}

#[test]
fn lowercase_statement_keywords_get_a_hint() {
    let e = err(r#"update ?x SET ATTRIBUTES { a: 1 } WHERE { ?x {type: "T"} }"#);
    assert!(e.hint.is_some_and(|h| h.contains("UPDATE")));
}
