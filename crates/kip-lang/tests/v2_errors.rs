//! KIP 2.0 syntax errors: the registry name (`InvalidSyntax`, `InvalidIdentifier`), the
//! line and column of the offending token and a hint an agent can act on; and the
//! conformance cases (`KIP2-...`) that can be checked at parse level.

use kip_lang::v2::ast::*;
use kip_lang::v2::{self, StatementKind};
use kip_lang::KipError;

fn err(text: &str) -> KipError {
    match v2::parse(text) {
        Ok(st) => panic!("{text:?} parsed: {st:?}"),
        Err(e) => e,
    }
}

/// Asserts the 2.0 name, the position and that the hint mentions `hint_part`.
fn check(text: &str, name: &str, line: usize, column: usize, hint_part: &str) {
    let e = err(text);
    assert_eq!(e.v2_code(), name, "{text:?}: {e}");
    assert_eq!(
        (e.line, e.column),
        (Some(line), Some(column)),
        "{text:?}: {e}"
    );
    let hint = e.hint.clone().unwrap_or_default();
    assert!(
        hint.contains(hint_part),
        "{text:?}: hint {hint:?} lacks {hint_part:?}"
    );
    let json = e.to_v2_json();
    assert_eq!(json["code"], name);
    assert_eq!(json["category"], "syntax");
    assert_eq!(json["details"]["line"], line);
    assert_eq!(json["details"]["column"], column);
}

fn query(text: &str) -> Query {
    match v2::parse(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .kind
    {
        StatementKind::Query(q) => *q,
        other => panic!("not a query: {other:?}"),
    }
}

fn mutation(text: &str) -> Mutation {
    match v2::parse(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .kind
    {
        StatementKind::Mutation(m) => *m,
        other => panic!("not a mutation: {other:?}"),
    }
}

fn meta(text: &str) -> Meta {
    match v2::parse(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .kind
    {
        StatementKind::Meta(m) => *m,
        other => panic!("not a META statement: {other:?}"),
    }
}

// ---- errors ----------------------------------------------------------------------------

#[test]
fn empty_text_is_invalid_syntax_at_the_start() {
    check("", "InvalidSyntax", 1, 1, "FIND");
    check("  // only a comment\n", "InvalidSyntax", 1, 1, "FIND");
}

#[test]
fn unknown_statement_names_the_2_0_statements() {
    check("SELECT ?x FROM x", "InvalidSyntax", 1, 1, "FIND(...) WHERE");
    check(
        "DELETE CONCEPT ?x",
        "InvalidSyntax",
        1,
        1,
        "RETRACT ASSERTION",
    );
    check("\n  FOO", "InvalidSyntax", 2, 3, "MUTATE");
}

#[test]
fn a_concept_pattern_needs_its_match_object() {
    check(
        "FIND(?x) WHERE {\n  ?x CONCEPT\n}",
        "InvalidSyntax",
        3,
        1,
        "match object",
    );
}

#[test]
fn a_pattern_after_a_variable_is_one_of_the_pattern_families() {
    check(
        "FIND(?x) WHERE { ?x FACT {} }",
        "InvalidSyntax",
        1,
        21,
        "?a ASSERTION",
    );
}

#[test]
fn missing_where_after_find_is_reported_at_the_token_found() {
    check("FIND(?x) { ?x {} }", "InvalidSyntax", 1, 10, "WHERE");
}

#[test]
fn a_proposition_tuple_has_three_members() {
    check(
        "FIND(?p) WHERE { ?p (?s, \"likes\") }",
        "InvalidSyntax",
        1,
        33,
        "(subject, \"predicate\", object)",
    );
}

#[test]
fn an_unquoted_predicate_is_named_with_its_quoted_form() {
    check(
        "FIND(?p) WHERE { ?p (?s, likes, ?o) }",
        "InvalidSyntax",
        1,
        26,
        "\"likes\"",
    );
}

#[test]
fn kip2_kql_023_belief_never_follows_a_raw_path() {
    // Raw paths are syntax for raw Proposition patterns only (KQL grammar decision 4b,
    // Specification §45): BELIEF's triple form takes one exact predicate.
    check(
        "FIND(?b) WHERE { ?b BELIEF (?s, \"knows\"{1,3}, ?o) }",
        "InvalidSyntax",
        1,
        40,
        "§45",
    );
    check(
        "FIND(?b) WHERE { ?b BELIEF SLOT (?s, \"a\" | \"b\") }",
        "InvalidSyntax",
        1,
        42,
        "exact predicate",
    );
}

#[test]
fn belief_is_not_a_mutation_selector() {
    check(
        "UPDATE ?x SET FIELDS {name: \"n\"} WHERE { ?x BELIEF (?p) }",
        "InvalidSyntax",
        1,
        45,
        "KQL read patterns",
    );
    check(
        "EXPORT CAPSULE :c WHERE { ?b BELIEF SLOT (?s, \"p\") }",
        "InvalidSyntax",
        1,
        30,
        "KQL read patterns",
    );
}

#[test]
fn raw_paths_are_kql_only() {
    check(
        "ENSURE PROPOSITION (?a, \"knows\"{1,2}, ?b)",
        "InvalidSyntax",
        1,
        32,
        "KQL read syntax only",
    );
}

#[test]
fn kip2_kml_007_mutate_cannot_nest() {
    check(
        "MUTATE {\n  MUTATE { }\n}",
        "InvalidSyntax",
        2,
        3,
        "cannot be nested",
    );
}

#[test]
fn create_needs_a_local_handle() {
    check(
        "CREATE CONCEPT { TYPE \"Person\" }",
        "InvalidSyntax",
        1,
        16,
        "CREATE CONCEPT ?h",
    );
}

#[test]
fn a_clause_outside_its_statement_names_the_allowed_ones() {
    // MATCH belongs to UPSERT, not to CREATE.
    check(
        "CREATE CONCEPT ?c { MATCH {key: \"k\"} }",
        "InvalidSyntax",
        1,
        21,
        "TYPE, CLIENT KEY, NAME",
    );
    // Records have an immutable type and no attributes.
    check(
        "CREATE EVIDENCE ?e { SET ATTRIBUTES {a: 1} }",
        "InvalidSyntax",
        1,
        22,
        "CLIENT KEY, SET FIELDS, SET FACET, SET STRUCTURAL",
    );
}

#[test]
fn schema_symbols_are_quoted() {
    check(
        "CREATE CONCEPT ?c { TYPE Person }",
        "InvalidSyntax",
        1,
        26,
        "\"Person\"",
    );
}

#[test]
fn purge_requires_the_exact_confirmation() {
    check(
        "PURGE ?x WHERE { ?x {} }",
        "InvalidSyntax",
        1,
        25,
        "CONFIRM \"PURGE\"",
    );
    check(
        "PURGE ?x WHERE { ?x {} } CONFIRM \"yes\"",
        "InvalidSyntax",
        1,
        34,
        "CONFIRM \"PURGE\"",
    );
}

#[test]
fn update_needs_an_action() {
    check(
        "UPDATE ?x WHERE { ?x {} }",
        "InvalidSyntax",
        1,
        11,
        "at least one SET",
    );
}

#[test]
fn search_mode_and_primer_mode_are_closed_sets() {
    check(
        "SEARCH CONCEPT \"a\" MODE \"fuzzy\"",
        "InvalidSyntax",
        1,
        25,
        "\"hybrid\"",
    );
    check(
        "DESCRIBE PRIMER MODE \"short\"",
        "InvalidSyntax",
        1,
        22,
        "\"compact\"",
    );
}

#[test]
fn clauses_out_of_grammar_order_are_extra_text() {
    // LIMIT comes after ORDER BY.
    check(
        "FIND(?x) WHERE { ?x {} } LIMIT 5 ORDER BY ?x.name",
        "InvalidSyntax",
        1,
        34,
        "grammar's order",
    );
}

#[test]
fn two_statements_in_one_command_are_refused_with_advice() {
    check(
        "DESCRIBE PROTOCOL DESCRIBE CAPABILITIES",
        "InvalidSyntax",
        1,
        19,
        "MUTATE",
    );
    assert_eq!(
        v2::parse_script("DESCRIBE PROTOCOL; DESCRIBE CAPABILITIES")
            .expect("script")
            .len(),
        2
    );
}

#[test]
fn comparisons_do_not_chain() {
    check(
        "FIND(?x) WHERE { ?x {} FILTER(1 < ?x.n < 3) }",
        "InvalidSyntax",
        1,
        40,
        "do not chain",
    );
}

#[test]
fn unclosed_block_at_end_of_input() {
    check(
        "FIND(?x) WHERE {\n  ?x {}\n",
        "InvalidSyntax",
        3,
        1,
        "ended early",
    );
}

#[test]
fn lexical_errors_keep_their_names_and_positions() {
    check(
        "FIND(?x) WHERE { ?x {name: 'a'} }",
        "InvalidSyntax",
        1,
        28,
        "double quotes",
    );
    let e = err("FIND(?1x) WHERE { }");
    assert_eq!(e.v2_code(), "InvalidIdentifier");
    assert_eq!((e.line, e.column), (Some(1), Some(6)));
    check(
        "FIND(?x) WHERE { ?x {n: :1} }",
        "InvalidIdentifier",
        1,
        25,
        "placeholders",
    );
}

#[test]
fn a_lone_minus_is_unary_minus_in_2_0_only() {
    let q = query("FIND(-?x.n) WHERE { ?x {} FILTER(-?x.n < -1) }");
    assert!(matches!(q.projection[0], Projection::Expr(Expr::Neg(_))));
    // The 1.x lexer is unchanged: a lone '-' stays an error there.
    assert!(kip_lang::parse_command("FIND(-?x.n) WHERE { ?x {} }").is_err());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(
        "FIND(?x) WHERE {{ FILTER({}1{}) }}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert_eq!(err(&deep).v2_code(), "InvalidSyntax");
    let deep = format!(
        "FIND(?x) WHERE {{ ?x {{a: {}1{}}} }}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    assert_eq!(err(&deep).v2_code(), "InvalidSyntax");
}

#[test]
fn the_1_x_codes_and_json_are_unchanged() {
    let e = kip_lang::parse_command("FIND(?x)").unwrap_err();
    assert_eq!(e.to_json()["code"], "KIP_1001");
    assert_eq!(e.v2_code(), "InvalidSyntax");
}

// ---- conformance cases checkable at parse level ------------------------------------

#[test]
fn kip2_kql_001_to_007_every_pattern_family_parses() {
    let q = query(
        r#"FIND(?c, ?p, ?a, ?e, ?x, ?s) WHERE {
            ?c CONCEPT {type: "Person", name: :n}
            ?p PROPOSITION (?c, "prefers", ?o)
            ?a ASSERTION {proposition: ?p, stance: "support"}
            ?e EVIDENCE {evidence_class: "tool_result"}
            ?x ACTIVITY {activity_class: "inference"}
            ?s STRUCTURAL (?x, "used", ?e)
            ?o {type: "Preference"}
            (?c, ?pred, ?o)
        }"#,
    );
    let kinds: Vec<_> = q
        .where_clauses
        .iter()
        .map(|c| match c {
            WhereClause::Concept { .. } => "concept",
            WhereClause::Proposition { .. } => "proposition",
            WhereClause::Record {
                kind: RecordKind::Assertion,
                ..
            } => "assertion",
            WhereClause::Record {
                kind: RecordKind::Evidence,
                ..
            } => "evidence",
            WhereClause::Record {
                kind: RecordKind::Activity,
                ..
            } => "activity",
            WhereClause::Structural { .. } => "structural",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "concept",
            "proposition",
            "assertion",
            "evidence",
            "activity",
            "structural",
            "concept",
            "proposition"
        ]
    );
}

#[test]
fn kip2_kql_008_to_015_filter_not_optional_union_count_order_parse() {
    let q = query(
        r#"find(count(distinct ?c), ?c.name) where {
            ?c {type: "Person"}
            filter(?c.age >= 18 && !IS_NULL(?c.name) || IN(?c.name, ["a", "b"]))
            not { (?c, "blocked", ?_x) }
            optional { ?c2 {name: ?n} }
            union { ?c {type: "Robot"} }
        } order by ?c.name desc, count(?c) limit :n cursor :cur"#,
    );
    assert!(matches!(
        &q.projection[0],
        Projection::Aggregate { func, distinct: true, .. } if func == "COUNT"
    ));
    assert_eq!(q.where_clauses.len(), 5);
    assert!(q.order_by[0].descending);
    assert_eq!(q.limit, Some(Scalar::Param("n".into())));
    assert_eq!(q.cursor, Some(Scalar::Param("cur".into())));
}

#[test]
fn kip2_kql_019_to_022_belief_and_belief_slot_forms_parse() {
    let q = query(
        r#"FIND(?b, ?d, ?t, ?slot) WHERE {
            ?p PROPOSITION (:alice, "prefers", ?o)
            ?b BELIEF (?p)
            ?d BELIEF (id: :pid)
            ?t BELIEF (:alice, "prefers", ?o)
            ?slot BELIEF SLOT (:alice, "prefers")
        } WITH EPISTEMIC {purpose: "answer_user", risk: "low"}"#,
    );
    assert!(
        matches!(&q.where_clauses[1], WhereClause::Belief { target: BeliefTarget::Var(v), .. } if v == "p")
    );
    assert!(matches!(
        &q.where_clauses[2],
        WhereClause::Belief {
            target: BeliefTarget::Id(_),
            ..
        }
    ));
    assert!(matches!(
        &q.where_clauses[3],
        WhereClause::Belief {
            target: BeliefTarget::Triple(..),
            ..
        }
    ));
    assert!(matches!(
        &q.where_clauses[4],
        WhereClause::BeliefSlot { .. }
    ));
    assert!(q.epistemic.is_some());
}

#[test]
fn kip2_kql_023_raw_paths_parse_on_raw_propositions() {
    let q =
        query(r#"FIND(?y) WHERE { (?x, "is_subclass_of"{0,5} | "related_to"{1,} | "is", ?y) }"#);
    let WhereClause::Proposition {
        tuple: PropTuple::Triple(_, path, _),
        ..
    } = &q.where_clauses[0]
    else {
        panic!("not a tuple");
    };
    let qs: Vec<_> = path.iter().map(|a| a.quantifier).collect();
    assert_eq!(
        qs,
        [
            Some(Quantifier {
                min: 0,
                max: Some(5)
            }),
            Some(Quantifier { min: 1, max: None }),
            None
        ]
    );
}

#[test]
fn kip2_kql_024_to_026_as_of_and_for_time_parse() {
    let q = query(r#"FIND(?c) WHERE { ?c {} } AS OF SEQ 1500 FOR TIME "2026-01-01T00:00:00Z""#);
    assert_eq!(q.as_of, Some(AsOf::Seq(Scalar::Literal(1500.into()))));
    assert!(q.for_time.is_some());
    assert!(matches!(
        query(r#"FIND(?c) WHERE { ?c {} } AS OF TX :tx"#).as_of,
        Some(AsOf::Tx(_))
    ));
}

#[test]
fn kip2_kml_001_to_008_write_forms_parse() {
    let m = mutation(
        r#"MUTATE {
            CREATE CONCEPT ?e { TYPE "Event" CLIENT KEY "ev-1" NAME "Launch" SET ATTRIBUTES {at: "2026"} }
            UPSERT CONCEPT ?alice { MATCH {type: "Person", key: "person:alice"} EXPECT VERSION 3 SET FIELDS {name: "Alice"} UNSET ATTRIBUTES {old, "older one"} UNSET STRUCTURAL {("knows", ?bob)} }
            ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
            CREATE EVIDENCE ?ev { SET FIELDS {evidence_class: "observation", content: {text: "said so"}} }
            CREATE ASSERTION ?a { SET FIELDS {proposition: ?p, stance: "support", confidence: 0.8} SET STRUCTURAL { ("cites", ?ev) {weight: 1} } }
            CREATE ACTIVITY ?x { SET FIELDS {activity_class: "inference"} SET FACET "mnemonic" {salience: 0.5} }
            ASSERT ?a2 (?alice, "prefers", ?dark) { by: :me, mode: "stated", confidence: 0.9 } SUPERSEDING ?a
        }"#,
    );
    let Mutation::Mutate(clauses) = m else {
        panic!("not MUTATE")
    };
    assert_eq!(clauses.len(), 7);
}

#[test]
fn kip2_kml_011_to_019_revision_forms_parse() {
    for text in [
        r#"UPDATE ?c EXPECT VERSION :v SET FACET "mnemonic" {salience: ADD(?c.salience, 0.1)} WHERE { ?c {key: "k"} } LIMIT 10"#,
        r#"UPDATE :c SET FIELDS {name: "n"}"#,
        r#"RETRACT ASSERTION ?a WHERE { ?a ASSERTION {} } LIMIT 5 EXPECT STATE "active""#,
        r#"SUPERSEDE ASSERTION :old BY :new EXPECT STATE "active""#,
        r#"CORRECT EVIDENCE "E:1" BY ?e2"#,
        r#"TRANSITION ACTIVITY ?x TO "completed" SET FIELDS {ended_at: :t} SET STRUCTURAL {("produced", ?y)} EXPECT STATE "running""#,
        r#"SET RETENTION ?c {retention_class: "short"} WHERE { ?c {} } LIMIT 3 EXPECT VERSION 2"#,
        r#"ARCHIVE ?c WHERE { ?c {} } LIMIT 1 EXPECT STATE "active""#,
        r#"TOMBSTONE :id"#,
        r#"PURGE ?c WHERE { ?c {} } LIMIT 1 REFERENCE POLICY "detach" CONFIRM "PURGE""#,
        r#"MERGE CONCEPT :a INTO :b WHERE { ?x {} } EXPECT VERSION 7"#,
    ] {
        mutation(text);
    }
}

#[test]
fn kip2_meta_001_to_022_meta_forms_parse() {
    for text in [
        "DESCRIBE PRIMER",
        "DESCRIBE PRIMER MODE \"full\"",
        "DESCRIBE PRIMER MODE :m",
        "DESCRIBE PROTOCOL",
        "DESCRIBE EXECUTION CONTEXT",
        "DESCRIBE CAPABILITIES",
        "DESCRIBE SPACE",
        "DESCRIBE SPACE \"default\"",
        "DESCRIBE SCHEMA ENVIRONMENT AS OF SEQ 3",
        "DESCRIBE PACKAGE :p",
        "DESCRIBE TYPE \"Person\"",
        "DESCRIBE PREDICATE \"prefers\"",
        "DESCRIBE FACET \"mnemonic\"",
        "DESCRIBE STRUCTURAL FIELD \"cites\"",
        "DESCRIBE COMPATIBILITY FROM \"1.0.0\" TO \"2.0.0\"",
        "DESCRIBE ERROR \"InvalidSyntax\"",
        "DESCRIBE TRANSACTION :tx",
        "DESCRIBE TRANSACTION BY IDEMPOTENCY KEY \"k-1\"",
        "DESCRIBE SNAPSHOT",
        "DESCRIBE CAPSULE :c",
        "DESCRIBE EPISTEMIC POLICY",
        "DESCRIBE PROJECTION CAPABILITY",
        "DESCRIBE TRUST \"signer\"",
        "DESCRIBE ACCESS WITH {actor: :a}",
        "LIST SPACES LIMIT 10 CURSOR :c",
        "LIST SCHEMA PACKAGES STATUS \"active\" LIMIT 5",
        "LIST TYPES",
        "LIST PREDICATES CURSOR :c",
        "LIST FACETS",
        "LIST STRUCTURAL FIELDS",
        "LIST EPISTEMIC POLICIES",
        "SEARCH CONCEPT \"alice\" WITH TYPE \"Person\" MODE \"keyword\" THRESHOLD 0.5 LIMIT 5",
        "SEARCH PROPOSITION :q WITH PREDICATE \"prefers\" MODE :m AS OF SEQ 10 CURSOR :c",
        "SEARCH COGNITION \"what\" MODE \"hybrid\"",
        "VERIFY CAPSULE :c",
        "VERIFY SCHEMA PACKAGE :p",
        "VERIFY RECEIPT :r",
        "VALIDATE KML :text WITH {strict: true}",
        "VALIDATE IMPORT PLAN :plan",
        "PREVIEW KML :text",
        "PREVIEW IMPORT CAPSULE :c INTO \"default\"",
        "HISTORY ELEMENT \"C:1\" FROM SEQ 1 TO SEQ 9 LIMIT 5",
        "HISTORY SPACE CURSOR :c",
        "CHANGES SINCE :cursor LIMIT 100",
        "CHANGES AFTER SEQ 42",
        "SNAPSHOT",
        "SNAPSHOT AS OF TIME \"2026-01-01T00:00:00Z\"",
        "EXPORT CAPSULE :out WHERE { ?c {type: \"Person\"} } WITH {closure: \"roots\"} AS OF SEQ 5",
    ] {
        meta(text);
    }
}

#[test]
fn kip2_rt_004_and_rt_005_kip_looking_text_in_a_literal_stays_data() {
    let q = query(r#"FIND(?c) WHERE { ?c {name: "Hello :name\" } DELETE"} }"#);
    let WhereClause::Concept { pattern, .. } = &q.where_clauses[0] else {
        panic!("not a concept pattern")
    };
    assert_eq!(
        pattern[0].1,
        Pattern::Literal(serde_json::json!("Hello :name\" } DELETE"))
    );
}

#[test]
fn kip2_rt_007_the_language_is_read_from_the_text_not_a_label() {
    let lang = |t: &str| v2::parse(t).expect(t).kind.language();
    assert_eq!(lang("FIND(?x) WHERE { ?x {} }"), "KQL");
    assert_eq!(lang("ARCHIVE :x"), "KML");
    assert_eq!(lang("SET RETENTION :x {}"), "KML");
    assert_eq!(lang("DESCRIBE PRIMER"), "META");
    assert_eq!(lang("EXPORT CAPSULE :c WHERE { }"), "META");
}

#[test]
fn keywords_are_case_insensitive_and_literals_are_not() {
    let a = v2::parse(r#"FIND(?x) WHERE { ?x CONCEPT {ok: true} } ORDER BY ?x.n DESC LIMIT 1"#)
        .expect("upper");
    let b = v2::parse(r#"find(?x) Where { ?x concept {ok: true} } order by ?x.n desc limit 1"#)
        .expect("lower");
    assert_eq!(a.kind, b.kind);
    check(
        "FIND(?x) WHERE { ?x {ok: TRUE} }",
        "InvalidSyntax",
        1,
        26,
        "lowercase: true",
    );
}

#[test]
fn raw_control_characters_in_strings_are_refused_in_2_0_only() {
    // `unescaped_string_character` excludes U+0000..U+001F (all three grammars).
    check(
        "FIND(?x) WHERE { ?x {name: \"two\nlines\"} }",
        "InvalidSyntax",
        1,
        32,
        "\\n",
    );
    query("FIND(?x) WHERE { ?x {name: \"two\\nlines\"} }");
    // 1.x keeps accepting them, as before.
    assert!(kip_lang::parse_command("FIND(?x) WHERE { ?x {name: \"two\nlines\"} }").is_ok());
}

#[test]
fn a_semicolon_is_not_kip_2_0() {
    check("DESCRIBE PROTOCOL;", "InvalidSyntax", 1, 18, "no ';'");
}

#[test]
fn kip_1_x_habits_get_the_2_0_way_in_the_hint() {
    check(
        "UPSERT CONCEPT ?c { MATCH {key: \"k\"} SET PROPOSITIONS { (\"likes\", ?d) } }",
        "InvalidSyntax",
        1,
        38,
        "ASSERT (?s",
    );
    check(
        "UPSERT CONCEPT ?c { MATCH {key: \"k\"} } WITH METADATA { confidence: 0.9 }",
        "InvalidSyntax",
        1,
        40,
        "is an Assertion",
    );
    check(
        "UPSERT { CONCEPT ?c { {type: \"A\", name: \"b\"} } }",
        "InvalidSyntax",
        1,
        8,
        "UPSERT CONCEPT ?h",
    );
}

#[test]
fn parameters_lists_every_placeholder_once() {
    let st = v2::parse(
        r#"MUTATE {
            UPSERT CONCEPT ?c { MATCH {key: :key} SET FACET :facet {v: ADD(?c.v, :step)} }
            ASSERT (?c, :pred, (id: :pid)) { by: :me, evidence: [:e1, :e2] } SUPERSEDING :old
            PURGE :x WHERE { ?x {} FILTER(?x.n > :n) } REFERENCE POLICY :policy CONFIRM "PURGE"
        }"#,
    )
    .expect("parses");
    let names: Vec<String> = st.parameters().into_iter().collect();
    assert_eq!(
        names,
        ["e1", "e2", "facet", "key", "me", "n", "old", "pid", "policy", "pred", "step", "x"]
    );
    assert!(v2::parse("DESCRIBE PROTOCOL")
        .expect("parses")
        .parameters()
        .is_empty());
}
