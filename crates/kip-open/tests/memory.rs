//! Memory-server tool semantics on the KIP graph (one test per rule).

mod common;
use common::*;
use serde_json::{json, Value};

fn call(n: &kip_engine::Nexus, tool: &str, args: Value) -> Result<Value, kip_lang::KipError> {
    n.memory().call(tool, &args)
}

#[test]
fn entities_are_concepts_with_upper_camel_case_types_visible_to_kip() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "Rustacean", "entityType": "software project", "observations": ["fast"]}]})).expect("create");
    let r = ok(
        &n,
        r#"FIND(?e.type, ?e.attributes.observations, ?e.metadata.entity_type, ?e.metadata.version) WHERE { ?e {name: "Rustacean"} }"#,
    );
    assert_eq!(
        r,
        json!([["SoftwareProject"], [["fast"]], ["software project"], [1]])
    );
    // The type was registered in the Unsorted domain.
    let d = ok(
        &n,
        r#"FIND(?d.name) WHERE { ({type: "$ConceptType", name: "SoftwareProject"}, "belongs_to_domain", ?d) }"#,
    );
    assert_eq!(d, json!(["Unsorted"]));
    assert_eq!(
        ok(&n, r#"SEARCH CONCEPT "rustacean""#)[0]["name"],
        "Rustacean"
    );
}

#[test]
fn kip_concepts_with_observations_are_entities() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Grace"} SET ATTRIBUTES { observations: ["wrote COBOL"] } } }"#,
    );
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(
        g["entities"],
        json!([{"name": "Grace", "entityType": "Person", "observations": ["wrote COBOL"]}])
    );
}

/// As the official server: a name the graph holds is skipped, however often it is
/// sent; a name new to the graph is stored as often as the call sends it.
#[test]
fn names_of_the_graph_are_skipped_and_names_repeated_in_one_call_are_kept() {
    let n = nexus();
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "A", "entityType": "x", "observations": []}]}),
    )
    .expect("create");
    let r = call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "y", "observations": []}, {"name": "B", "entityType": "y", "observations": []}, {"name": "A", "entityType": "w", "observations": []}, {"name": "B", "entityType": "z", "observations": []}]})).expect("create");
    assert_eq!(names(&r["entities"]), ["B", "B"]);
    assert_eq!(r["entities"][1]["entityType"], "z");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(names(&g["entities"]), ["A", "B", "B"]);
}

/// A name sent twice in one call is two entities for every tool, listed where they
/// were sent; the first is the one the tools change, a deletion takes both, and KIP
/// sees one concept carrying the copy.
#[test]
fn a_name_sent_twice_in_one_call_is_listed_twice_where_it_was_sent() {
    let n = nexus();
    let r = call(
        &n,
        "create_entities",
        json!({"entities": [
            {"name": "A", "entityType": "person", "observations": ["first"]},
            {"name": "B", "entityType": "person", "observations": []},
            {"name": "A", "entityType": "city", "observations": ["second"]}
        ]}),
    )
    .expect("create");
    assert_eq!(names(&r["entities"]), ["A", "B", "A"]);
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "C", "entityType": "person", "observations": []}]}),
    )
    .expect("create C");
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("A", "C", "knows")]}),
    )
    .expect("relate");
    call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "A", "contents": ["added"]}]}),
    )
    .expect("add");
    let g = call(&n, "read_graph", json!({})).expect("read");
    let strip = |v: &Value| -> Value {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|e| json!([e["name"], e["entityType"], e["observations"]]))
            .collect()
    };
    assert_eq!(
        strip(&g["entities"]),
        json!([
            ["A", "person", ["first", "added"]],
            ["B", "person", []],
            ["A", "city", ["second"]],
            ["C", "person", []]
        ])
    );
    // Only the copy matches; the relations of its name are answered with it.
    let s = call(&n, "search_nodes", json!({"query": "second"})).expect("search");
    assert_eq!(strip(&s["entities"]), json!([["A", "city", ["second"]]]));
    assert_eq!(s["relations"].as_array().map(Vec::len), Some(1));
    let o = call(&n, "open_nodes", json!({"names": ["A"]})).expect("open");
    assert_eq!(names(&o["entities"]), ["A", "A"]);
    // KIP: one concept, the copy in its metadata.
    let k = ok(&n, r#"FIND(?a.metadata.copies) WHERE { ?a {name: "A"} }"#);
    assert_eq!(k[0][0]["entity_type"], "city");
    call(
        &n,
        "delete_observations",
        json!({"deletions": [{"entityName": "A", "observations": ["second"]}]}),
    )
    .expect("delete obs");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(g["entities"][2]["observations"], json!(["second"]));
    call(&n, "delete_entities", json!({"entityNames": ["A"]})).expect("delete");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(names(&g["entities"]), ["B", "C"]);
    assert_eq!(g["relations"], json!([]));
}

/// A relation sent twice in one call is listed twice, where it was sent; one
/// `delete_relations` removes both.
#[test]
fn a_relation_sent_twice_in_one_call_is_listed_twice_where_it_was_sent() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "person", "observations": []}, {"name": "B", "entityType": "person", "observations": []}]})).expect("create");
    let r = call(&n, "create_relations", json!({"relations": [rel("A", "B", "knows"), rel("B", "A", "knows"), rel("A", "B", "knows")]})).expect("relate");
    assert_eq!(r["relations"].as_array().map(Vec::len), Some(3));
    let again = call(
        &n,
        "create_relations",
        json!({"relations": [rel("A", "B", "knows")]}),
    )
    .expect("again");
    assert_eq!(again["relations"], json!([]));
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("B", "B", "knows")]}),
    )
    .expect("later");
    let g = call(&n, "read_graph", json!({})).expect("read");
    let ends = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                format!(
                    "{}>{}",
                    r["from"].as_str().unwrap_or(""),
                    r["to"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(ends(&g["relations"]), ["A>B", "B>A", "A>B", "B>B"]);
    call(
        &n,
        "delete_relations",
        json!({"relations": [rel("A", "B", "knows")]}),
    )
    .expect("delete");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(ends(&g["relations"]), ["B>A", "B>B"]);
}

/// The official server tells relations apart by their exact relationType; KIP folds
/// `"works at"` and `"works_at"` into one predicate, so the second is a further entry
/// of the link: both listed, each deleted and updated on its own.
#[test]
fn relation_types_that_fold_into_one_predicate_stay_two_relations() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "person", "observations": []}, {"name": "B", "entityType": "company", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("A", "B", "works at")]}),
    )
    .expect("one");
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("B", "A", "employs")]}),
    )
    .expect("between");
    let r = call(
        &n,
        "create_relations",
        json!({"relations": [rel("A", "B", "works_at")]}),
    )
    .expect("two");
    assert_eq!(r["relations"][0]["relationType"], "works_at");
    let types = |g: &Value| -> Vec<String> {
        g["relations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["relationType"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(types(&g), ["works at", "employs", "works_at"]);
    let u = call(
        &n,
        "update_relations",
        json!({"relations": [rel("A", "B", "works_at")]}),
    )
    .expect("update");
    assert_eq!(u["relations"][0]["version"], 2);
    assert_eq!(u["relations"][0]["relationType"], "works_at");
    let none = call(
        &n,
        "delete_relations",
        json!({"relations": [rel("A", "B", "worksAt")]}),
    )
    .expect("no such");
    assert_eq!(none["notFound"].as_array().map(Vec::len), Some(1));
    call(
        &n,
        "delete_relations",
        json!({"relations": [rel("A", "B", "works at")]}),
    )
    .expect("delete");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(types(&g), ["employs", "works_at"]);
    assert_eq!(g["relations"][1]["version"], 2);
    // One KIP link is left, showing the entry that remains.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?l.metadata.relation_type) WHERE { ?l ({name: "A"}, "works_at", {name: "B"}) }"#
        ),
        json!(["works_at"])
    );
    call(
        &n,
        "delete_relations",
        json!({"relations": [rel("A", "B", "works_at")]}),
    )
    .expect("delete");
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(types(&g), ["employs"]);
}

/// A file of the official server holding a name or relation twice moves over whole and
/// exports back to the same lines.
#[test]
fn repeated_lines_of_a_memory_file_are_imported_and_exported_as_they_were() {
    let n = nexus();
    let file = [
        r#"{"type":"entity","name":"A","entityType":"person","observations":["x"]}"#,
        r#"{"type":"entity","name":"B","entityType":"person","observations":[]}"#,
        r#"{"type":"entity","name":"A","entityType":"person","observations":["y"]}"#,
        r#"{"type":"relation","from":"A","to":"B","relationType":"knows"}"#,
        r#"{"type":"relation","from":"B","to":"A","relationType":"knows"}"#,
        r#"{"type":"relation","from":"A","to":"B","relationType":"knows"}"#,
    ];
    let (report, _) = n
        .memory()
        .import_jsonl(&file.join("\n"), false)
        .expect("import");
    assert_eq!(
        (report.entities, report.relations, report.already_present),
        (3, 3, 0)
    );
    let out = n.memory().export_jsonl().expect("export");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("json");
            if let Some(m) = v.as_object_mut() {
                m.remove("createdAt");
                m.remove("version");
            }
            v
        })
        .collect();
    let expected: Vec<Value> = file
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines, expected);
    // Imported again into the same memory: everything is there already.
    let (again, _) = n
        .memory()
        .import_jsonl(&file.join("\n"), false)
        .expect("again");
    assert_eq!((again.entities, again.relations), (0, 0));
}

#[test]
fn add_observations_on_an_unknown_entity_fails_and_saves_nothing() {
    let n = nexus();
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "A", "entityType": "x", "observations": ["o1"]}]}),
    )
    .expect("create");
    let before = n.admin().dump().expect("dump");
    let e = call(&n, "add_observations", json!({"observations": [{"entityName": "A", "contents": ["o2"]}, {"entityName": "Ghost", "contents": ["x"]}]})).expect_err("ghost");
    assert_eq!(e.message, "Entity with name Ghost not found");
    assert_eq!(n.admin().dump().expect("dump"), before);
    let r = call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "A", "contents": ["o2", "o1"]}]}),
    )
    .expect("add");
    assert_eq!(
        r["results"],
        json!([{"entityName": "A", "addedObservations": ["o2"]}])
    );
}

#[test]
fn versions_start_at_one_and_grow_with_updates() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "x", "observations": []}, {"name": "B", "entityType": "x", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}),
    )
    .expect("rel");
    let r = call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "A", "observations": ["new"]}]}),
    )
    .expect("update");
    assert_eq!(r["entities"][0]["version"], 2);
    assert_eq!(r["entities"][0]["observations"], json!(["new"]));
    let r = call(
        &n,
        "update_relations",
        json!({"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}),
    )
    .expect("update rel");
    assert_eq!(r["relations"][0]["version"], 2);
    assert!(call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "Nope"}]})
    )
    .is_err());
    assert!(call(
        &n,
        "update_relations",
        json!({"relations": [{"from": "A", "to": "B", "relationType": "hates"}]})
    )
    .is_err());
}

#[test]
fn update_entities_can_change_the_type_keeping_relations() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "person", "observations": []}, {"name": "B", "entityType": "person", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}),
    )
    .expect("rel");
    call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "A", "entityType": "robot"}]}),
    )
    .expect("retype");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.type, ?b.name) WHERE { ?a {name: "A"} (?a, "knows", ?b) }"#
        ),
        json!([["Robot"], ["B"]])
    );
    assert!(n.admin().check_integrity().expect("integrity").is_empty());
}

#[test]
fn deletes_cascade_and_report_what_was_not_found() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "x", "observations": ["o"]}, {"name": "B", "entityType": "x", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}),
    )
    .expect("rel");
    let r = call(
        &n,
        "delete_entities",
        json!({"entityNames": ["A", "Ghost"]}),
    )
    .expect("delete");
    assert_eq!(
        r,
        json!({"success": true, "message": "Entities deleted successfully", "notFound": ["Ghost"]})
    );
    assert_eq!(
        call(&n, "read_graph", json!({})).expect("read")["relations"],
        json!([])
    );
    let r = call(
        &n,
        "delete_relations",
        json!({"relations": [{"from": "B", "to": "A", "relationType": "knows"}]}),
    )
    .expect("delete rel");
    assert_eq!(r["notFound"].as_array().expect("arr").len(), 1);
    let r = call(
        &n,
        "delete_observations",
        json!({"deletions": [{"entityName": "Ghost", "observations": ["x"]}]}),
    )
    .expect("del obs");
    assert_eq!(r["notFound"], json!(["Ghost"]));
}

#[test]
fn search_is_a_case_insensitive_substring_match_with_touching_relations() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "Alpha", "entityType": "Greek Letter", "observations": ["First"]}, {"name": "Beta", "entityType": "greek letter", "observations": ["second"]}, {"name": "Omega", "entityType": "end", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [{"from": "Beta", "to": "Omega", "relationType": "precedes"}]}),
    )
    .expect("rel");
    let r = call(&n, "search_nodes", json!({"query": "SECOND"})).expect("search");
    assert_eq!(r["entities"].as_array().expect("arr").len(), 1);
    assert_eq!(r["relations"][0]["to"], "Omega");
    let r = call(&n, "search_nodes", json!({"query": "greek"})).expect("search");
    assert_eq!(r["entities"].as_array().expect("arr").len(), 2);
    let r = call(&n, "open_nodes", json!({"names": ["Omega", "Nope"]})).expect("open");
    assert_eq!(r["entities"].as_array().expect("arr").len(), 1);
    assert_eq!(r["relations"].as_array().expect("arr").len(), 1);
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let n = nexus();
    assert!(call(&n, "create_entities", json!({})).is_err());
    assert!(call(&n, "create_entities", json!({"entities": [{"name": 5}]})).is_err());
    assert!(call(&n, "search_nodes", json!({"query": []})).is_err());
    assert!(call(&n, "no_such_tool", json!({})).is_err());
}

/// One memory, one view (issue 20 item 4): the two tool sets agree about the graph.
#[test]
fn kip_concepts_are_entities_and_names_refer_to_them() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Software"} SET ATTRIBUTES { description: "a program" } }
            CONCEPT ?r { {type: "Software", name: "redb"} SET ATTRIBUTES { description: "an embedded key-value store" } }
        }"#,
    );
    // Visible to the memory tools, its description as an observation.
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(
        g["entities"],
        json!([{"name": "redb", "entityType": "Software", "observations": ["an embedded key-value store"]}]),
        "the system's own concepts stay hidden; KIP concepts are entities"
    );
    // A relation to it works, and creating an entity of that name refers to it instead
    // of making a second one.
    call(&n, "create_entities", json!({"entities": [{"name": "kip", "entityType": "software", "observations": ["a memory engine"]}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [{"from": "kip", "to": "redb", "relationType": "uses"}]}),
    )
    .expect("relation to a KIP concept");
    let created = call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "redb", "entityType": "database", "observations": ["x"]}]}),
    )
    .expect("create");
    assert_eq!(created["entities"], json!([]), "{created}");
    let count = ok(&n, r#"FIND(COUNT(?x)) WHERE { ?x {name: "redb"} }"#);
    assert_eq!(count, json!(1));
    call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "redb", "contents": ["written in Rust"]}]}),
    )
    .expect("observe");
    // SEARCH finds what search_nodes finds (observations are indexed).
    let hits = ok(&n, r#"SEARCH CONCEPT "rust""#);
    assert_eq!(hits[0]["name"], "redb", "{hits}");
    let nodes = call(&n, "search_nodes", json!({"query": "rust"})).expect("search");
    assert_eq!(nodes["entities"][0]["name"], "redb");
    // Two concepts of one name are ambiguous for the name-based tools: a clear error.
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Database"} SET ATTRIBUTES { description: "a database" } }
            CONCEPT ?r { {type: "Database", name: "redb"} }
        }"#,
    );
    let e = call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "redb", "contents": ["y"]}]}),
    )
    .expect_err("ambiguous");
    assert_eq!(e.code.as_str(), "KIP_3003");
    assert!(
        e.message.contains("ambiguous")
            && e.message.contains("Software")
            && e.message.contains("Database"),
        "{}",
        e.message
    );
    let e = call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "redb", "entityType": "thing", "observations": []}]}),
    )
    .expect_err("ambiguous");
    assert_eq!(e.code.as_str(), "KIP_3003");
}

/// The reading tools have no paging in the official API; on a large memory they answer
/// KIP_4002 with a way out instead of building gigabytes of JSON.
#[test]
fn reading_tools_are_bounded_by_the_response_limit() {
    let mut n = nexus();
    let entities: Vec<Value> = (0..200)
        .map(|i| json!({"name": format!("entity {i}"), "entityType": "thing", "observations": [format!("note {i} about the weather")]}))
        .collect();
    call(&n, "create_entities", json!({ "entities": entities })).expect("create");
    n.set_limits(kip_engine::QueryLimits {
        max_response_bytes: 4_000,
        ..kip_engine::QueryLimits::default()
    });
    for (tool, args) in [
        ("read_graph", json!({})),
        ("search_nodes", json!({"query": "weather"})),
    ] {
        let e = call(&n, tool, args).expect_err("too big");
        assert_eq!(e.code.as_str(), "KIP_4002", "{tool}: {e}");
        assert!(e.hint.as_deref().unwrap_or("").contains("CURSOR"), "{e:?}");
    }
    // A narrow read still works, and an export is never bounded.
    let one = call(&n, "open_nodes", json!({"names": ["entity 7"]})).expect("open");
    assert_eq!(one["entities"][0]["name"], "entity 7");
    assert_eq!(
        n.memory().export_jsonl().expect("export").lines().count(),
        200
    );
}

/// The memory tools write through the same primitives as UPSERT and DELETE: a rule
/// that guards a KIP write guards the same change made by a tool.
#[test]
fn the_tools_are_held_to_the_rules_of_kip_writes() {
    let n = nexus();
    // `$self` becomes visible to the tools once it has observations.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?s { {type: "Person", name: "$self"} SET ATTRIBUTES { observations: ["I am the agent"] } } }"#,
    );
    let code = |r: Result<Value, kip_lang::KipError>| r.expect_err("refused").code.as_str();
    // Protected: deleting it, or changing its type, is refused as in KIP.
    assert_eq!(
        code(call(
            &n,
            "delete_entities",
            json!({"entityNames": ["$self"]})
        )),
        "KIP_3004"
    );
    assert_eq!(
        code(call(
            &n,
            "update_entities",
            json!({"entities": [{"name": "$self", "entityType": "robot"}]})
        )),
        "KIP_3004"
    );
    // Its observations are ordinary attributes: they may change.
    call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "$self", "contents": ["likes graphs"]}]}),
    )
    .expect("observations of $self may change");

    // A type definition with instances cannot be deleted or re-typed by a tool, as a
    // DELETE CONCEPT of it is refused (before, the tools deleted it and left the
    // instances with an unregistered type).
    ok(
        &n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Gadget"} SET ATTRIBUTES { description: "a gadget", observations: ["a definition"] } } CONCEPT ?g { {type: "Gadget", name: "Widget"} } }"#,
    );
    assert_eq!(
        code(call(
            &n,
            "delete_entities",
            json!({"entityNames": ["Gadget"]})
        )),
        "KIP_2002"
    );
    assert_eq!(
        code(call(
            &n,
            "update_entities",
            json!({"entities": [{"name": "Gadget", "entityType": "thing"}]})
        )),
        "KIP_2002"
    );
    assert_eq!(
        err(
            &n,
            r#"DELETE CONCEPT ?t DETACH WHERE { ?t {type: "$ConceptType", name: "Gadget"} }"#
        ),
        "KIP_2002"
    );
    // Nothing changed: the definition and its instance are still there.
    assert_eq!(
        ok(&n, r#"FIND(?g.name) WHERE { ?g {type: "Gadget"} }"#),
        json!(["Widget"])
    );
    // Once the instance is gone, both paths may delete the definition.
    call(
        &n,
        "delete_entities",
        json!({"entityNames": ["Widget", "Gadget"]}),
    )
    .expect("delete");
    assert_eq!(
        err(&n, r#"FIND(?g.name) WHERE { ?g {type: "Gadget"} }"#),
        "KIP_2001"
    );
}

/// Every memory tool the registry lists is one the dispatch runs (the MCP list and the
/// read-only list come from the same registry: kip-server's and the engine's unit tests).
#[test]
fn every_memory_tool_of_the_registry_is_dispatched() {
    let n = nexus();
    for name in kip_engine::memory::TOOLS {
        match call(&n, name, json!({})) {
            Ok(_) => assert_eq!(name, "read_graph", "{name} ran without its arguments"),
            Err(e) => assert!(
                e.message.starts_with("missing argument"),
                "{name}: {}",
                e.message
            ),
        }
    }
    let e = call(&n, "drop_everything", json!({})).expect_err("unknown");
    assert!(e.message.contains("unknown memory tool"), "{}", e.message);
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn rel(from: &str, to: &str, t: &str) -> Value {
    json!({"from": from, "to": to, "relationType": t})
}

/// As the official server does, `create_relations` stores a relation whose end names no
/// entity (here with a placeholder concept), with the valid relations sent with it; the
/// placeholder is in no entity list and is not an entity for the other tools.
#[test]
fn a_relation_to_an_unknown_entity_is_kept_and_its_placeholder_is_not_listed() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}, {"name": "Bob", "entityType": "person", "observations": []}]})).expect("create");
    let r = call(
        &n,
        "create_relations",
        json!({"relations": [rel("Alice", "Bob", "knows"), rel("Alice", "Nobody", "knows"), rel("Ghost", "Phantom", "haunts")]}),
    )
    .expect("relations to unknown entities are stored");
    let stripped = |v: &Value| -> Vec<Value> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|r| json!([r["from"], r["to"], r["relationType"]]))
            .collect()
    };
    let all = vec![
        json!(["Alice", "Bob", "knows"]),
        json!(["Alice", "Nobody", "knows"]),
        json!(["Ghost", "Phantom", "haunts"]),
    ];
    assert_eq!(stripped(&r["relations"]), all);
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(names(&g["entities"]), vec!["Alice", "Bob"]);
    assert_eq!(stripped(&g["relations"]), all);
    // Search and open see relations through listed entities only, as the official
    // server does (its relations name strings, not entities).
    let s = call(&n, "search_nodes", json!({"query": "alice"})).expect("search");
    assert_eq!(
        stripped(&s["relations"]),
        vec![
            json!(["Alice", "Bob", "knows"]),
            json!(["Alice", "Nobody", "knows"])
        ]
    );
    for q in ["nobody", "unknown", "ghost"] {
        let s = call(&n, "search_nodes", json!({"query": q})).expect("search");
        assert_eq!(s, json!({"entities": [], "relations": []}), "{q}");
    }
    let o = call(&n, "open_nodes", json!({"names": ["Nobody", "Ghost"]})).expect("open");
    assert_eq!(o, json!({"entities": [], "relations": []}));
    // Not an entity for the other tools either.
    let e = call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
    )
    .expect_err("no such entity");
    assert_eq!(e.message, "Entity with name Nobody not found");
    assert!(call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "Nobody", "observations": []}]})
    )
    .is_err());
    // Skipped when sent again; deleted and updated by its names.
    let again = call(
        &n,
        "create_relations",
        json!({"relations": [rel("Alice", "Nobody", "knows")]}),
    )
    .expect("again");
    assert_eq!(again["relations"], json!([]));
    let u = call(
        &n,
        "update_relations",
        json!({"relations": [rel("Ghost", "Phantom", "haunts")]}),
    )
    .expect("update");
    assert_eq!(u["relations"][0]["version"], 2);
    // The export leaves the placeholders out and keeps their relations.
    let exported = n.memory().export_jsonl().expect("export");
    assert!(
        !exported.contains("\"type\":\"entity\",\"name\":\"Nobody\""),
        "{exported}"
    );
    assert_eq!(exported.lines().count(), 5, "{exported}");
    // For KIP the placeholder is a concept marked as such.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.type, ?p.metadata.placeholder) WHERE { ?p {name: "Nobody"} }"#
        ),
        json!([["Unknown"], [true]])
    );
    assert!(n.admin().check_integrity().expect("integrity").is_empty());
}

/// An entity created under a placeholder's name takes its place: its relations are
/// kept, it is listed after the entities created before it (where the official server
/// lists it), and the placeholder is gone.
#[test]
fn creating_the_entity_of_a_placeholder_keeps_its_relations() {
    let n = nexus();
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "Alice", "entityType": "person", "observations": []}]}),
    )
    .expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("Alice", "Nobody", "knows"), rel("Nobody", "Alice", "admires"), rel("Alice", "Someone", "knows")]}),
    )
    .expect("relations");
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "Bob", "entityType": "person", "observations": []}]}),
    )
    .expect("create");
    let created = call(&n, "create_entities", json!({"entities": [{"name": "Nobody", "entityType": "person", "observations": ["exists now"]}, {"name": "Someone", "entityType": "unknown", "observations": []}]})).expect("create");
    assert_eq!(names(&created["entities"]), vec!["Nobody", "Someone"]);
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(
        names(&g["entities"]),
        vec!["Alice", "Bob", "Nobody", "Someone"]
    );
    assert_eq!(g["entities"][2]["observations"], json!(["exists now"]));
    let rels: Vec<(String, String)> = g["relations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["from"].as_str().unwrap_or("").to_string(),
                r["to"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        rels,
        vec![
            ("Alice".to_string(), "Nobody".to_string()),
            ("Nobody".to_string(), "Alice".to_string()),
            ("Alice".to_string(), "Someone".to_string())
        ]
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.type, ?p.metadata.placeholder) WHERE { ?p {name: "Nobody"} }"#
        ),
        json!([["Person"], [null]])
    );
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?p)) WHERE { ?p {type: "Unknown"} }"#),
        json!(1),
        "Someone (entityType unknown) is an entity now, not a placeholder"
    );
    let o = call(&n, "open_nodes", json!({"names": ["Nobody"]})).expect("open");
    assert_eq!(o["relations"].as_array().map(Vec::len), Some(2));
    assert!(n.admin().check_integrity().expect("integrity").is_empty());
}

/// A placeholder lives as long as a relation names it: deleting the last such relation,
/// or the entity at its other end, deletes it; deleting its name deletes its relations
/// (as the official server deletes the relations naming a deleted name).
#[test]
fn a_placeholder_goes_with_its_last_relation() {
    let n = nexus();
    call(&n, "create_entities", json!({"entities": [{"name": "Alice", "entityType": "person", "observations": []}, {"name": "Bob", "entityType": "person", "observations": []}]})).expect("create");
    call(
        &n,
        "create_relations",
        json!({"relations": [rel("Alice", "Nobody", "knows"), rel("Bob", "Nobody", "knows"), rel("Alice", "Ghost", "fears"), rel("Bob", "Phantom", "fears")]}),
    )
    .expect("relations");
    let placeholders = |n: &kip_engine::Nexus| -> Value {
        ok(
            n,
            r#"FIND(?p.name) WHERE { ?p {type: "Unknown"} } ORDER BY ?p.name"#,
        )
    };
    call(
        &n,
        "delete_relations",
        json!({"relations": [rel("Alice", "Nobody", "knows")]}),
    )
    .expect("delete");
    assert_eq!(placeholders(&n), json!(["Ghost", "Nobody", "Phantom"]));
    call(
        &n,
        "delete_relations",
        json!({"relations": [rel("Bob", "Nobody", "knows")]}),
    )
    .expect("delete");
    assert_eq!(placeholders(&n), json!(["Ghost", "Phantom"]));
    let d = call(
        &n,
        "delete_entities",
        json!({"entityNames": ["Alice", "Phantom"]}),
    )
    .expect("delete");
    assert_eq!(
        d["notFound"],
        json!(["Phantom"]),
        "a placeholder is no entity"
    );
    assert_eq!(placeholders(&n), json!([]));
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(names(&g["entities"]), vec!["Bob"]);
    assert_eq!(g["relations"], json!([]));
    assert!(n.admin().check_integrity().expect("integrity").is_empty());
}

/// The mapping rule for concepts written through KIP (docs/memory-server.md): the
/// descriptive attributes (those SEARCH reads) are the observations, `description`
/// as it is, the others as `attribute: value`; the entityType is the KIP type. The
/// tools find, add to and delete from that view.
#[test]
fn kip_concepts_show_their_descriptive_attributes_as_observations() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Software"} SET ATTRIBUTES { description: "a program" } }
            CONCEPT ?k { {type: "Software", name: "kip-nexus"} SET ATTRIBUTES { description: "An agent memory written in Rust", aliases: ["kip"], version_number: 3 } }
        }"#,
    );
    let hits = ok(&n, r#"SEARCH CONCEPT "rust""#);
    assert_eq!(hits[0]["name"], "kip-nexus", "{hits}");
    let found = call(&n, "search_nodes", json!({"query": "rust"})).expect("search");
    assert_eq!(
        found["entities"],
        json!([{"name": "kip-nexus", "entityType": "Software", "observations": ["An agent memory written in Rust", "aliases: kip"]}])
    );
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(
        g["entities"], found["entities"],
        "read_graph applies the same rule"
    );
    let o = call(&n, "open_nodes", json!({"names": ["kip-nexus"]})).expect("open");
    assert_eq!(
        o["entities"], found["entities"],
        "open_nodes applies the same rule"
    );
    // An observation already shown is not added again; a new one goes to
    // `observations`, after the description.
    let added = call(
        &n,
        "add_observations",
        json!({"observations": [{"entityName": "kip-nexus", "contents": ["An agent memory written in Rust", "fast"]}]}),
    )
    .expect("add");
    assert_eq!(added["results"][0]["addedObservations"], json!(["fast"]));
    let shown = |n: &kip_engine::Nexus| -> Value {
        call(n, "open_nodes", json!({"names": ["kip-nexus"]})).expect("open")["entities"][0]
            ["observations"]
            .clone()
    };
    assert_eq!(
        shown(&n),
        json!(["An agent memory written in Rust", "fast", "aliases: kip"])
    );
    // Deleting an observation deletes it where it is shown from.
    call(
        &n,
        "delete_observations",
        json!({"deletions": [{"entityName": "kip-nexus", "observations": ["aliases: kip"]}]}),
    )
    .expect("delete");
    assert_eq!(
        shown(&n),
        json!(["An agent memory written in Rust", "fast"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?k.attributes.aliases, ?k.attributes.version_number) WHERE { ?k {name: "kip-nexus"} }"#
        ),
        json!([[[]], [3]]),
        "other attributes are untouched"
    );
    // Replacing the observations keeps the description when it is among them.
    call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "kip-nexus", "observations": ["An agent memory written in Rust", "new"]}]}),
    )
    .expect("update");
    assert_eq!(shown(&n), json!(["An agent memory written in Rust", "new"]));
    call(
        &n,
        "update_entities",
        json!({"entities": [{"name": "kip-nexus", "observations": ["only this"]}]}),
    )
    .expect("update");
    assert_eq!(shown(&n), json!(["only this"]));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?k.attributes.description) WHERE { ?k {name: "kip-nexus"} }"#
        ),
        json!([null])
    );
}

/// A memory moved over from a file starts healthy: the imported entities (and the
/// placeholders, types and predicates) are filed in a domain, so the health report
/// counts no orphans and no Unsorted backlog for them, and their links decay from
/// their last use (`createdAt`), not from the import.
#[test]
fn an_imported_memory_starts_healthy_and_decays_from_its_last_use() {
    let n = nexus();
    // A first cycle decays what the new nexus has; the one after the import shows
    // what the import left to decay.
    n.brain()
        .sleep(&kip_engine::brain::SleepOptions::default())
        .expect("sleep");
    let before = n.brain().health().expect("health");
    let mut file = String::new();
    for i in 0..40 {
        file.push_str(&json!({"type": "entity", "name": format!("e{i}"), "entityType": format!("kind {i}"), "observations": ["x"]}).to_string());
        file.push('\n');
    }
    let recent = kip_engine::memory::now();
    for i in 0..39 {
        file.push_str(&json!({"type": "relation", "from": format!("e{i}"), "to": format!("e{}", i + 1), "relationType": format!("rel {i}"), "createdAt": recent}).to_string());
        file.push('\n');
    }
    // Last used long ago, and an end the file never defines.
    file.push_str(&json!({"type": "relation", "from": "e0", "to": "Nobody", "relationType": "knew", "createdAt": "2020-01-01T00:00:00.000Z"}).to_string());
    file.push('\n');
    // The official format: no createdAt (decay counts from the import).
    file.push_str(
        &json!({"type": "relation", "from": "e1", "to": "e0", "relationType": "knows"}).to_string(),
    );
    let (report, bad) = n.memory().import_jsonl(&file, false).expect("import");
    assert!(bad.is_empty());
    assert_eq!(report.relations, 41);
    assert_eq!(report.placeholders, vec!["Nobody"]);
    let after = n.brain().health().expect("health");
    assert_eq!(
        after.orphans.count, before.orphans.count,
        "{:?}",
        after.orphans.sample
    );
    assert_eq!(after.unsorted_backlog.count, before.unsorted_backlog.count);
    assert!(after.triggers.is_empty(), "{:?}", after.triggers);
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?e)) WHERE { (?e, "belongs_to_domain", {type: "Domain", name: "MemoryServerImport"}) }"#
        ),
        json!(40 + 1 + 41 + 41),
        "40 entities, the placeholder, 41 types (Unknown with them), 41 predicates"
    );
    let report = n
        .brain()
        .sleep(&kip_engine::brain::SleepOptions::default())
        .expect("sleep");
    assert_eq!(
        report.decayed_links, 1,
        "only the link last used in 2020 decays"
    );
    let strength = ok(
        &n,
        r#"FIND(?l.metadata.memory_strength) WHERE { ?l ({name: "e0"}, "knew", ?o) }"#,
    );
    assert!(strength[0].as_f64().is_some_and(|s| s < 0.7), "{strength}");
}
