//! KIP 2.0 record kinds and one memory through the wire: client keys, evidence
//! correction, activity transitions, and the founding assertions of facts written in
//! KIP 1.x (DECISIONS.md item 40). Named by the conformance document's case ids where
//! one applies.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn run_with(n: &Nexus, command: &str, params: Value) -> Value {
    n.execute_json(
        &json!({"kip": "2.0", "operations": [{"command": command, "parameters": params}]}),
        Access::ReadWrite,
    )
    .to_json()
}

fn ok(n: &Nexus, command: &str, params: Value) -> Value {
    let r = run_with(n, command, params);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn one_x(n: &Nexus, command: &str) -> Value {
    let r = n
        .execute_json(&json!({ "command": command }), Access::ReadWrite)
        .to_json();
    assert!(r.get("error").is_none(), "{command}: {r}");
    r
}

#[test]
fn kip2_core_012_evidence_client_key_retry_deduplicates() {
    let n = nexus();
    let cmd = r#"CREATE EVIDENCE ?e { CLIENT KEY "message:42:evidence" SET FIELDS { evidence_class: "user_statement", payload: "hi" } }"#;
    let first = ok(&n, cmd, json!({}))["handles"]["e"].clone();
    let again = ok(&n, cmd, json!({}))["handles"]["e"].clone();
    assert_eq!(first, again);
    assert_eq!(
        ok(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }", json!({})),
        json!([1])
    );
    let concept = r#"CREATE CONCEPT ?x { TYPE "Person" CLIENT KEY "turn:7" NAME "Ann" }"#;
    assert_eq!(
        ok(&n, concept, json!({}))["handles"]["x"],
        ok(&n, concept, json!({}))["handles"]["x"]
    );
}

#[test]
fn kip2_core_013_conflicting_client_key_fails() {
    let n = nexus();
    ok(
        &n,
        r#"CREATE EVIDENCE ?e { CLIENT KEY "k" SET FIELDS { evidence_class: "user_statement", payload: "A" } }"#,
        json!({}),
    );
    let r = run_with(
        &n,
        r#"CREATE EVIDENCE ?e { CLIENT KEY "k" SET FIELDS { evidence_class: "user_statement", payload: "B" } }"#,
        json!({}),
    );
    assert_eq!(code(&r), "ClientKeyConflict", "{r}");
    assert_eq!(
        ok(&n, "FIND(?e.payload) WHERE { ?e EVIDENCE {} }", json!({})),
        json!(["A"])
    );
}

#[test]
fn kip2_core_010_evidence_correction_preserves_original() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?e1 { SET FIELDS { evidence_class: "tool_result", payload: "42 ms" } }
  CREATE EVIDENCE ?e2 { SET FIELDS { evidence_class: "tool_result", payload: "24 ms" } }
}"#,
        json!({}),
    )["handles"]
        .clone();
    ok(
        &n,
        "CORRECT EVIDENCE :a BY :b",
        json!({"a": h["e1"], "b": h["e2"]}),
    );
    let rows = ok(
        &n,
        "FIND(?e.payload, ?e.correction.status) WHERE { ?e EVIDENCE {} } ORDER BY ?e.payload",
        json!({}),
    );
    assert_eq!(rows, json!([["24 ms", "current"], ["42 ms", "corrected"]]));
    let again = run_with(
        &n,
        "CORRECT EVIDENCE :a BY :b",
        json!({"a": h["e1"], "b": h["e2"]}),
    );
    assert_eq!(code(&again), "EvidenceCorrectionConflict");
}

#[test]
fn kip2_core_015_completed_activity_topology_is_immutable() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?in { SET FIELDS { evidence_class: "document" } }
  CREATE ACTIVITY ?act { SET FIELDS { activity_class: "inference", status: "running" } SET STRUCTURAL { ("inputs", ?in) } }
}"#,
        json!({}),
    )["handles"]
        .clone();
    ok(
        &n,
        r#"TRANSITION ACTIVITY :x TO "completed" SET FIELDS { ended_at: "2026-11-27T10:00:00Z" } EXPECT STATE "running""#,
        json!({"x": h["act"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.status, ?x.ended_at, ?x.inputs) WHERE { ?x ACTIVITY {activity_class: "inference"} }"#,
            json!({})
        ),
        json!([["completed", "2026-11-27T10:00:00Z", [h["in"]]]])
    );
    let again = run_with(
        &n,
        r#"TRANSITION ACTIVITY :x TO "failed""#,
        json!({"x": h["act"]}),
    );
    assert_eq!(code(&again), "ActivityTerminal");
    let upd = run_with(
        &n,
        r#"UPDATE :x SET FIELDS { status: "running" }"#,
        json!({"x": h["act"]}),
    );
    assert_ne!(upd["status"], "succeeded");
}

#[test]
fn a_1x_fact_has_a_founding_assertion_and_is_believed() {
    let n = nexus();
    one_x(
        &n,
        r#"UPSERT {
  CONCEPT ?a { {type: "Person", name: "Ada"} }
  CONCEPT ?p { {type: "Preference", name: "Tea"} SET ATTRIBUTES { description: "tea", content: "tea" } }
  PROPOSITION ?l { (?a, "prefers", ?p) }
} WITH METADATA { confidence: 0.8 }"#,
    );
    let a = ok(
        &n,
        r#"FIND(?x.stance, ?x.mode, ?x.confidence, ?x.lifecycle.status) WHERE { ?s CONCEPT {name: "Ada"} ?p PROPOSITION (?s, "prefers", ?o) ?x ASSERTION {proposition: ?p} }"#,
        json!({}),
    );
    assert_eq!(a, json!([["support", "stated", 0.8, "active"]]));
    let b = ok(
        &n,
        r#"FIND(?b.status) WHERE { ?s CONCEPT {name: "Ada"} ?b BELIEF (?s, "prefers", ?o) }"#,
        json!({}),
    );
    assert_eq!(b, json!(["accepted"]));
    // Retracting it records it; then the fact is no longer believed.
    ok(
        &n,
        r#"RETRACT ASSERTION ?x WHERE { ?s CONCEPT {name: "Ada"} ?p PROPOSITION (?s, "prefers", ?o) ?x ASSERTION {proposition: ?p} }"#,
        json!({}),
    );
    let b = ok(
        &n,
        r#"FIND(?b.status) WHERE { ?s CONCEPT {name: "Ada"} ?b BELIEF (?s, "prefers", ?o) }"#,
        json!({}),
    );
    assert_eq!(b, json!(["insufficient"]));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.lifecycle.status, ?x.confidence) WHERE { ?x ASSERTION {stance: "support"} }"#,
            json!({})
        ),
        json!([["retracted", 0.8]])
    );
}

/// An Experience with two ordered steps, and the handles.
fn trajectory(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?exp { TYPE "Experience" NAME "Deploy" SET ATTRIBUTES { goal: "ship", outcome_status: "success" }
                        SET STRUCTURAL { ("has_step", ?s1) ("has_step", ?s2) } }
  CREATE CONCEPT ?s1 { TYPE "ExperienceStep" NAME "build" SET ATTRIBUTES { step_kind: "action", summary: "built" } }
  CREATE CONCEPT ?s2 { TYPE "ExperienceStep" NAME "release" SET ATTRIBUTES { step_kind: "action", summary: "released" } }
}"#,
        json!({}),
    )["handles"]
        .clone()
}

#[test]
fn kip2_core_016_structural_reference_is_not_a_proposition() {
    let n = nexus();
    trajectory(&n);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?s.name, ?e.index) WHERE { ?x CONCEPT {name: "Deploy"} ?e STRUCTURAL (?x, "has_step", ?s) } ORDER BY ?e.index"#,
            json!({})
        ),
        json!([["build", 0], ["release", 1]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?x CONCEPT {name: "Deploy"} ?p PROPOSITION (?x, ?r, ?s) }"#,
            json!({})
        ),
        json!([0]),
        "no semantic edge was made"
    );
}

#[test]
fn kip2_kql_007_structural_pattern_works_both_ways_and_orders_densely() {
    let n = nexus();
    let h = trajectory(&n);
    // From the target back to its source.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.name) WHERE { ?s CONCEPT {name: "release"} STRUCTURAL (?x, "has_step", ?s) }"#,
            json!({})
        ),
        json!(["Deploy"])
    );
    // An explicit index inserts; removing re-densifies (§17.4-17.5).
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?s0 { TYPE "ExperienceStep" NAME "plan" SET ATTRIBUTES { step_kind: "decision", summary: "planned" } }
  UPDATE :exp SET STRUCTURAL { ("has_step", ?s0) {index: 0} }
}"#,
        json!({"exp": h["exp"]}),
    );
    ok(
        &n,
        r#"UPDATE :exp UNSET STRUCTURAL { ("has_step", :s1) }"#,
        json!({"exp": h["exp"], "s1": h["s1"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?s.name, ?e.index) WHERE { ?e STRUCTURAL (:exp, "has_step", ?s) } ORDER BY ?e.index"#,
            json!({"exp": h["exp"]})
        ),
        json!([["plan", 0], ["release", 1]])
    );
    let bad = run_with(
        &n,
        r#"UPDATE :exp SET STRUCTURAL { ("has_step", :who) }"#,
        json!({"exp": h["exp"], "who": h["exp"]}),
    );
    assert_eq!(code(&bad), "StructuralReferenceInvalid", "{bad}");
    let far = run_with(
        &n,
        r#"UPDATE :exp SET STRUCTURAL { ("has_step", :s) {index: 9} }"#,
        json!({"exp": h["exp"], "s": h["s1"]}),
    );
    assert_eq!(code(&far), "StructuralReferenceInvalid");
}

#[test]
fn kip2_kml_006_activity_provenance_is_queryable_structurally() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?in { SET FIELDS { evidence_class: "document" } }
  CREATE ACTIVITY ?act { SET FIELDS { activity_class: "inference", status: "completed" } SET STRUCTURAL { ("inputs", ?in) } }
}"#,
        json!({}),
    )["handles"]
        .clone();
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.id) WHERE { ?a ACTIVITY {} STRUCTURAL (?a, "inputs", :in) }"#,
            json!({"in": h["in"]})
        ),
        json!([h["act"]])
    );
}

#[test]
fn kip2_kml_008_mutual_forward_references_in_one_mutate() {
    let n = nexus();
    let r = ok(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "tool_result" } SET STRUCTURAL { ("generated_by", ?act) } }
  CREATE ACTIVITY ?act { SET FIELDS { activity_class: "tool_call", status: "completed" } SET STRUCTURAL { ("outputs", ?e) } }
}"#,
        json!({}),
    );
    let (e, act) = (r["handles"]["e"].clone(), r["handles"]["act"].clone());
    assert!(e.as_str().is_some_and(|s| s.starts_with("E:")), "{r:#}");
    assert!(act.as_str().is_some_and(|s| s.starts_with("X:")), "{r:#}");
    assert_eq!(r["created"].as_array().map(Vec::len), Some(2), "{r:#}");
    // Each points at the other, and both exist.
    assert_eq!(
        ok(
            &n,
            "FIND(?e.generated_by, ?x.outputs) WHERE { ?e EVIDENCE {id: :e} ?x ACTIVITY {id: :x} }",
            json!({"e": e, "x": act}),
        ),
        json!([[[act], [e]]])
    );
    // A reference to a handle no clause binds is still a ReferenceError.
    let bad = run_with(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?e2 { SET FIELDS { evidence_class: "tool_result" } SET STRUCTURAL { ("generated_by", ?nobody) } }
  CREATE ACTIVITY ?a2 { SET FIELDS { activity_class: "tool_call" } SET STRUCTURAL { ("outputs", ?e2) } }
}"#,
        json!({}),
    );
    assert_eq!(code(&bad), "ReferenceError", "{bad:#}");
}
