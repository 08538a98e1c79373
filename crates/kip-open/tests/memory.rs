//! Memory-server tool semantics on the KIP graph (one test per rule).

mod common;
use common::*;
use serde_json::{json, Value};

fn call(n: &kip_engine::Nexus, tool: &str, args: Value) -> Result<Value, kip_lang::KipError> {
    n.memory_tool(tool, &args)
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

#[test]
fn duplicate_names_are_skipped_on_create() {
    let n = nexus();
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "A", "entityType": "x", "observations": []}]}),
    )
    .expect("create");
    let r = call(&n, "create_entities", json!({"entities": [{"name": "A", "entityType": "y", "observations": []}, {"name": "B", "entityType": "y", "observations": []}, {"name": "B", "entityType": "z", "observations": []}]})).expect("create");
    let names: Vec<&str> = r["entities"]
        .as_array()
        .expect("arr")
        .iter()
        .map(|e| e["name"].as_str().expect("n"))
        .collect();
    assert_eq!(names, vec!["B"]);
}

#[test]
fn relations_to_unknown_entities_are_rejected_and_nothing_is_saved() {
    let n = nexus();
    call(
        &n,
        "create_entities",
        json!({"entities": [{"name": "A", "entityType": "x", "observations": []}]}),
    )
    .expect("create");
    let before = n.dump().expect("dump");
    let e = call(&n, "create_relations", json!({"relations": [{"from": "A", "to": "A", "relationType": "likes"}, {"from": "A", "to": "Nobody", "relationType": "knows"}]})).expect_err("unknown");
    assert_eq!(e.message, "Entity with name Nobody not found");
    assert_eq!(n.dump().expect("dump"), before);
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
    let before = n.dump().expect("dump");
    let e = call(&n, "add_observations", json!({"observations": [{"entityName": "A", "contents": ["o2"]}, {"entityName": "Ghost", "contents": ["x"]}]})).expect_err("ghost");
    assert_eq!(e.message, "Entity with name Ghost not found");
    assert_eq!(n.dump().expect("dump"), before);
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
    assert!(n.check_integrity().expect("integrity").is_empty());
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
    // Visible to the memory tools without any observations.
    let g = call(&n, "read_graph", json!({})).expect("read");
    assert_eq!(
        g["entities"],
        json!([{"name": "redb", "entityType": "Software", "observations": []}]),
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
    n.set_limits(kip_engine::kql::QueryLimits {
        max_response_bytes: 4_000,
        ..kip_engine::kql::QueryLimits::default()
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
        n.export_memory_jsonl().expect("export").lines().count(),
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
