//! The parser builds the tree the grammar describes, and binding fills placeholders on
//! that tree without ever re-reading text.

use kip_lang::ast::*;
use kip_lang::{bind, parse_command, Command, ErrorCode};
use serde_json::{json, Map, Value};

fn find(src: &str) -> FindQuery {
    match parse_command(src).unwrap_or_else(|e| panic!("{src}: {e}")) {
        Command::Find(q) => q,
        other => panic!("not a FIND: {other:?}"),
    }
}

fn lit(s: &StrSlot) -> &str {
    s.literal().expect("literal")
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().expect("object").clone()
}

#[test]
fn find_projections_aggregates_and_modifiers() {
    let q = find(
        r#"FIND(?e.attributes.event_class, COUNT(DISTINCT ?p), SUM(?e.attributes.n))
           WHERE { ?e {type: "Event"} OPTIONAL { (?e, "has_participant", ?p) } }
           ORDER BY COUNT(DISTINCT ?p) DESC, ?e.attributes.event_class
           LIMIT :limit CURSOR :cursor"#,
    );
    assert_eq!(q.projections.len(), 3);
    match &q.projections[1] {
        Projection::Aggregate(a) => {
            assert_eq!(a.func, AggregateFunc::Count);
            assert!(a.distinct);
            assert_eq!(a.arg.var.name, "p");
        }
        p => panic!("{p:?}"),
    }
    match &q.projections[0] {
        Projection::Path(p) => assert_eq!(p.path, vec!["attributes", "event_class"]),
        p => panic!("{p:?}"),
    }
    assert_eq!(q.order_by.len(), 2);
    assert_eq!(q.order_by[0].direction, Direction::Desc);
    assert_eq!(q.order_by[1].direction, Direction::Asc);
    assert!(matches!(q.limit, Some(Slot::Param(ref p)) if p.name == "limit"));
    assert!(matches!(q.cursor, Some(Slot::Param(ref p)) if p.name == "cursor"));
}

#[test]
fn concept_clause_forms() {
    let q = find(
        r#"FIND(?a, ?b, ?c, ?d) WHERE { ?a {id: "C:1"} ?b {type: "Drug", name: "Aspirin"} ?c {type: "Drug"} ?d {name: "X"} }"#,
    );
    let ms: Vec<&ConceptMatcher> = q
        .where_clauses
        .iter()
        .map(|c| match c {
            WhereClause::Concept(cp) => &cp.matcher,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(lit(ms[0].id.as_ref().expect("id")), "C:1");
    assert_eq!(lit(ms[1].concept_type.as_ref().expect("type")), "Drug");
    assert_eq!(lit(ms[1].name.as_ref().expect("name")), "Aspirin");
    assert!(ms[2].name.is_none() && ms[3].concept_type.is_none());
}

fn triple(c: &WhereClause) -> (&Option<Variable>, &TriplePattern) {
    match c {
        WhereClause::Proposition(PropositionPattern {
            var,
            matcher: PropositionMatcher::Triple(t),
            ..
        }) => (var, t),
        other => panic!("{other:?}"),
    }
}

#[test]
fn proposition_clauses_paths_and_higher_order() {
    let q = find(
        r#"FIND(?x) WHERE {
            ?l (?a, ?pred, ?b)
            (?a, "follows"{0,5}, ?b)
            (?a, "follows"{2,}, ?b)
            (?a, "follows"{3}, ?b)
            (?a, "follows" | "connects", ?b)
            ((?d, "treats", {type: "Symptom", name: "Headache"}), "supported_by", ?paper)
            (?u, "stated", ?fact (?d, "treats", ?s))
            (?x {type: "Person"}, "knows", ?y)
            ?p (id: "P:1")
        }"#,
    );
    let w = &q.where_clauses;
    let (var, t) = triple(&w[0]);
    assert_eq!(var.as_ref().expect("link var").name, "l");
    assert!(matches!(&t.predicate, PredicatePattern::Var(v) if v.name == "pred"));
    let hops = |c| match &triple(c).1.predicate {
        PredicatePattern::Literal { hops, .. } => *hops,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        hops(&w[1]),
        Some(HopRange {
            min: 0,
            max: Some(5),
            exact: false
        })
    );
    assert_eq!(
        hops(&w[2]),
        Some(HopRange {
            min: 2,
            max: None,
            exact: false
        })
    );
    assert_eq!(
        hops(&w[3]),
        Some(HopRange {
            min: 3,
            max: Some(3),
            exact: true
        })
    );
    match &triple(&w[4]).1.predicate {
        PredicatePattern::Literal {
            alternatives,
            hops: None,
            ..
        } => {
            assert_eq!(
                alternatives.iter().map(lit).collect::<Vec<_>>(),
                ["follows", "connects"]
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&triple(&w[5]).1.subject, Endpoint::Proposition(p) if p.var.is_none()));
    match &triple(&w[6]).1.object {
        Endpoint::Proposition(p) => assert_eq!(p.var.as_ref().expect("inline").name, "fact"),
        other => panic!("{other:?}"),
    }
    match &triple(&w[7]).1.subject {
        Endpoint::Concept {
            var: Some(v),
            matcher,
        } => {
            assert_eq!(v.name, "x");
            assert_eq!(lit(matcher.concept_type.as_ref().expect("type")), "Person");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        &w[8],
        WhereClause::Proposition(PropositionPattern {
            matcher: PropositionMatcher::Id(_),
            ..
        })
    ));
}

#[test]
fn filter_precedence_and_functions() {
    let q = find(
        r#"FIND(?x) WHERE { ?x {type: "T"}
            FILTER(!IS_NULL(?x.name) || ?x.attributes.a < 3 && IN(?x.attributes.c, ["a", 1]))
            FILTER(REGEX(?x.name, "^A") && STARTS_WITH(?x.name, "A") && ENDS_WITH(?x.name, "b") && CONTAINS(?x.name, "c") && IS_NOT_NULL(?x.metadata.m)) }"#,
    );
    let WhereClause::Filter(f) = &q.where_clauses[1] else {
        panic!()
    };
    // || binds loosest: (!IS_NULL(..)) || ((a < 3) && IN(..))
    match &f.expr {
        Expr::Binary {
            op: BinaryOp::Or,
            left,
            right,
            ..
        } => {
            assert!(matches!(**left, Expr::Not(..)));
            assert!(matches!(
                **right,
                Expr::Binary {
                    op: BinaryOp::And,
                    ..
                }
            ));
        }
        other => panic!("{other:?}"),
    }
    let WhereClause::Filter(f2) = &q.where_clauses[2] else {
        panic!()
    };
    let mut funcs = Vec::new();
    fn walk(e: &Expr, out: &mut Vec<Function>) {
        match e {
            Expr::Binary { left, right, .. } => {
                walk(left, out);
                walk(right, out);
            }
            Expr::Call { func, .. } => out.push(*func),
            _ => {}
        }
    }
    walk(&f2.expr, &mut funcs);
    assert_eq!(
        funcs,
        [
            Function::Regex,
            Function::StartsWith,
            Function::EndsWith,
            Function::Contains,
            Function::IsNotNull
        ]
    );
}

#[test]
fn union_not_optional_nest() {
    let q = find(
        r#"FIND(?d) WHERE { ?d {type: "Drug"} NOT { OPTIONAL { UNION { (?d, "p", ?z) } } } }"#,
    );
    let WhereClause::Not(g) = &q.where_clauses[1] else {
        panic!()
    };
    let WhereClause::Optional(g2) = &g.clauses[0] else {
        panic!()
    };
    assert!(matches!(&g2.clauses[0], WhereClause::Union(_)));
}

#[test]
fn upsert_blocks_and_metadata_levels() {
    let cmd = parse_command(
        r#"UPSERT {
            CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { x: 1 } SET PROPOSITIONS {
                ("treats", {type: "Symptom", name: "H"}) WITH METADATA { confidence: 0.5 }
                ("rel", ?a)
                ("about", (id: "P:9"))
                ("about", ({type: "Drug", name: "A"}, "treats", {id: "C:2"}))
            } } WITH METADATA { block: true }
            PROPOSITION ?p { (?a, "treats", {type: "Symptom", name: "H"}) SET ATTRIBUTES { y: 2 } }
            PROPOSITION { (id: "P:1") }
        } WITH METADATA { source: "s" }"#,
    )
    .expect("parse");
    let Command::Upsert(u) = cmd else { panic!() };
    assert_eq!(u.blocks.len(), 3);
    assert_eq!(
        u.metadata.as_ref().expect("stmt meta").entries[0].0,
        "source"
    );
    let UpsertBlock::Concept(c) = &u.blocks[0] else {
        panic!()
    };
    assert_eq!(c.handle.as_ref().expect("handle").name, "a");
    let props = c.set_propositions.as_ref().expect("props");
    assert_eq!(props.len(), 4);
    assert!(props[0].metadata.is_some() && props[1].metadata.is_none());
    assert!(matches!(props[1].target, Endpoint::Var(_)));
    assert!(
        matches!(&props[2].target, Endpoint::Proposition(p) if matches!(p.matcher, PropositionMatcher::Id(_)))
    );
    assert!(c.metadata.is_some());
    let UpsertBlock::Proposition(p) = &u.blocks[2] else {
        panic!()
    };
    assert!(p.handle.is_none());
}

#[test]
fn delete_forms() {
    let cases = [
        (
            r#"DELETE ATTRIBUTES {"a", "b"} FROM ?d WHERE { ?d {type: "Drug"} }"#,
            "attributes",
        ),
        (
            r#"DELETE METADATA {"m"} FROM ?d WHERE { ?d {type: "Drug"} }"#,
            "metadata",
        ),
        (
            r#"DELETE PROPOSITIONS ?l WHERE { ?l (?s, "treats", ?o) }"#,
            "propositions",
        ),
        (
            r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug", name: "X"} }"#,
            "concept",
        ),
    ];
    for (src, kind) in cases {
        let Command::Delete(d) = parse_command(src).expect(src) else {
            panic!()
        };
        let got = match &d.target {
            DeleteTarget::Attributes { keys, .. } => {
                assert_eq!(keys.len(), 2);
                "attributes"
            }
            DeleteTarget::Metadata { .. } => "metadata",
            DeleteTarget::Propositions { .. } => "propositions",
            DeleteTarget::Concept { .. } => "concept",
        };
        assert_eq!(got, kind);
        assert_eq!(d.where_clauses.len(), 1);
    }
}

#[test]
fn meta_forms() {
    let forms = [
        "DESCRIBE PRIMER",
        "DESCRIBE DOMAINS",
        "DESCRIBE CONCEPT TYPES LIMIT 5 CURSOR \"c\"",
        "DESCRIBE CONCEPT TYPE \"Drug\"",
        "DESCRIBE PROPOSITION TYPES",
        "DESCRIBE PROPOSITION TYPE \"treats\"",
    ];
    for f in forms {
        assert!(
            matches!(parse_command(f).expect(f), Command::Describe(_)),
            "{f}"
        );
    }
    let Command::Search(s) =
        parse_command("SEARCH PROPOSITION :q WITH TYPE \"prefers\" LIMIT 3").expect("search")
    else {
        panic!()
    };
    assert_eq!(s.target, SearchTarget::Proposition);
    assert!(matches!(s.term, Slot::Param(_)));
    assert_eq!(s.limit.as_ref().and_then(|l| l.literal().copied()), Some(3));
}

#[test]
fn command_kinds() {
    assert!(parse_command("UPSERT { }")
        .expect("empty upsert")
        .is_write());
    assert!(!parse_command("DESCRIBE PRIMER")
        .expect("describe")
        .is_write());
}

#[test]
fn binding_replaces_placeholders_with_json_values() {
    let cmd = parse_command(
        r#"UPSERT { CONCEPT ?e { {type: "Event", name: :name} SET ATTRIBUTES { n: :n, tags: [:tag, "x"], nested: { v: :obj } } } }"#,
    )
    .expect("parse");
    let bound = bind(
        &cmd,
        &params(json!({"name": "MyEvent", "n": 3, "tag": "t", "obj": {"k": [1, 2]}})),
    )
    .expect("bind");
    let expected = parse_command(
        r#"UPSERT { CONCEPT ?e { {type: "Event", name: "MyEvent"} SET ATTRIBUTES { n: 3, tags: ["t", "x"], nested: { v: {k: [1, 2]} } } } }"#,
    )
    .expect("parse expected");
    assert_eq!(bound, expected);
}

#[test]
fn a_parameter_can_never_change_the_structure() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {type: "Drug", name: :n} }"#).expect("parse");
    let evil = r#"x"} } DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug""#;
    let bound = bind(&cmd, &params(json!({"n": evil}))).expect("bind");
    let Command::Find(q) = &bound else {
        panic!("structure changed")
    };
    let WhereClause::Concept(cp) = &q.where_clauses[0] else {
        panic!()
    };
    assert_eq!(lit(cp.matcher.name.as_ref().expect("name")), evil);
    // Printing escapes it, so the text form is just as safe.
    assert_eq!(parse_command(&bound.to_string()).expect("reparse"), bound);
}

#[test]
fn a_placeholder_inside_a_string_is_literal_text() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {name: "Hello :name"} }"#).expect("parse");
    let bound = bind(&cmd, &Map::new()).expect("nothing to bind");
    assert_eq!(bound, cmd);
}

#[test]
fn missing_parameter_is_reference_error_naming_it() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {type: "Drug"} } LIMIT :limit"#).expect("parse");
    let e = bind(&cmd, &Map::new()).expect_err("missing");
    assert_eq!(e.code, ErrorCode::ReferenceError);
    assert!(e.message.contains(":limit"), "{}", e.message);
    assert!(e.hint.expect("hint").contains("\"limit\""));
}

#[test]
fn a_missing_parameter_hint_names_the_parameters_that_were_sent() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {type: :t} }"#).expect("parse");
    let mut params = Map::new();
    params.insert("type".into(), Value::from("Drug"));
    let e = bind(&cmd, &params).expect_err("missing");
    assert_eq!(e.code, ErrorCode::ReferenceError);
    let hint = e.hint.expect("hint");
    assert!(
        hint.contains("\"t\"") && hint.contains("`parameters` has \"type\""),
        "{hint}"
    );
}

#[test]
fn parameter_types_are_checked_against_their_position() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {type: :t} } LIMIT :limit"#).expect("parse");
    let e = bind(&cmd, &params(json!({"t": 5, "limit": 1}))).expect_err("number as type");
    assert_eq!(e.code, ErrorCode::InvalidValueType);
    // Every wrong LIMIT is one code, KIP_1001 (DECISIONS 18), whatever its JSON type.
    for bad in [
        json!("ten"),
        json!(0),
        json!(2.5),
        json!(-3),
        json!(null),
        json!([5]),
        json!({"n": 5}),
        json!(true),
        json!(1e300),
        json!("10"),
    ] {
        let e = bind(&cmd, &params(json!({"t": "Drug", "limit": bad}))).expect_err("a wrong LIMIT");
        assert_eq!(e.code, ErrorCode::InvalidSyntax, "{bad}: {e}");
        assert!(e.hint.is_some());
    }
    let ok = bind(&cmd, &params(json!({"t": "Drug", "limit": 10}))).expect("ok");
    let Command::Find(q) = ok else { panic!() };
    assert_eq!(q.limit.and_then(|l| l.literal().copied()), Some(10));
}

#[test]
fn in_list_parameter_must_be_an_array() {
    let cmd = parse_command(r#"FIND(?d) WHERE { ?d {type: "Drug"} FILTER(IN(?d.name, :names)) }"#)
        .expect("parse");
    bind(&cmd, &params(json!({"names": ["a", "b"]}))).expect("array ok");
    let e = bind(&cmd, &params(json!({"names": "a"}))).expect_err("string");
    assert_eq!(e.code, ErrorCode::InvalidValueType);
}

#[test]
fn spans_point_into_the_source() {
    let src = r#"FIND(?drug.name) WHERE { ?drug {type: "Drug"} }"#;
    let q = find(src);
    let Projection::Path(p) = &q.projections[0] else {
        panic!()
    };
    assert_eq!(&src[p.span.start..p.span.end], "?drug.name");
    let WhereClause::Concept(cp) = &q.where_clauses[0] else {
        panic!()
    };
    assert_eq!(&src[cp.span.start..cp.span.end], r#"?drug {type: "Drug"}"#);
    assert_eq!(&src[q.span.start..q.span.end], src);
}
