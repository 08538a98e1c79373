//! The KIP 2.0 core model, KQL and KML through the wire (`Nexus::execute_json` with
//! `"kip": "2.0"`), on whichever backend the test matrix selects (DECISIONS.md item
//! 44). Tests are named by the conformance document's case ids
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md`) where one applies; the
//! others by the rule of docs/semantics.md ("KIP 2.0 on the one memory") they hold.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn send(n: &Nexus, request: Value) -> Value {
    n.execute_json(&request, Access::ReadWrite).to_json()
}

fn run(n: &Nexus, command: &str) -> Value {
    send(
        n,
        json!({"kip": "2.0", "operations": [{"command": command}]}),
    )
}

fn run_with(n: &Nexus, command: &str, params: Value) -> Value {
    send(
        n,
        json!({"kip": "2.0", "operations": [{"command": command, "parameters": params}]}),
    )
}

/// The result of a command that must succeed.
fn ok(n: &Nexus, command: &str) -> Value {
    let r = run(n, command);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .or_else(|| r["error"]["code"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Alice prefers Dark, asserted by Alice: the handles' ids.
fn seed(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "person:alice"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE ASSERTION ?a {
    SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.6 }
  }
}"#,
    )["handles"]
        .clone()
}

#[test]
fn kip2_core_002_proposition_tuple_is_immutable() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(
        &n,
        r#"UPDATE :p SET FIELDS { object: "Light" }"#,
        json!({"p": h["p"]}),
    );
    assert_eq!(code(&r), "ImmutableField", "{r}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?o.name) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#
        ),
        json!(["Dark"])
    );
}

#[test]
fn kip2_core_003_ensure_proposition_is_canonical() {
    let n = nexus();
    let h = seed(&n);
    let again = run_with(
        &n,
        r#"ENSURE PROPOSITION ?q (:s, "prefers", :o)"#,
        json!({"s": h["alice"], "o": h["dark"]}),
    );
    assert_eq!(again["results"][0]["result"]["handles"]["q"], h["p"]);
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#
        ),
        json!([1])
    );
    let create_only = run_with(
        &n,
        r#"ENSURE PROPOSITION (:s, "prefers", :o) EXPECT VERSION 0"#,
        json!({"s": h["alice"], "o": h["dark"]}),
    );
    assert_eq!(code(&create_only), "VersionConflict");
}

#[test]
fn kip2_core_005_assertion_targets_exactly_one_proposition() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(
        &n,
        r#"CREATE ASSERTION ?a { SET FIELDS { asserted_by: :alice, stance: "support", mode: "stated" } }"#,
        json!({"alice": h["alice"]}),
    );
    assert_eq!(code(&r), "TypeMismatch", "{r}");
    assert_eq!(
        ok(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!([1])
    );
}

#[test]
fn kip2_core_007_assertion_epistemic_payload_is_immutable() {
    let n = nexus();
    seed(&n);
    for set in [
        "stance: \"reject\"",
        "confidence: 0.1",
        "asserted_by: \"C:1\"",
    ] {
        let r = run(
            &n,
            &format!("UPDATE ?a SET FIELDS {{ {set} }} WHERE {{ ?a ASSERTION {{}} }}"),
        );
        assert_eq!(code(&r), "EpistemicRevisionRequired", "{set}: {r}");
    }
    assert_eq!(
        ok(
            &n,
            "FIND(?a.stance, ?a.confidence) WHERE { ?a ASSERTION {} }"
        ),
        json!([["support", 0.6]])
    );
}

#[test]
fn kip2_core_008_assertion_revision_preserves_history() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(
        &n,
        r#"ASSERT ?a2 (:alice, "prefers", :dark) { by: :alice, mode: "stated", confidence: 0.9 } SUPERSEDING :a1"#,
        json!({"alice": h["alice"], "dark": h["dark"], "a1": h["a"]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    let mut rows = ok(
        &n,
        "FIND(?a.confidence, ?a.lifecycle.status) WHERE { ?a ASSERTION {} } ORDER BY ?a.confidence",
    );
    assert_eq!(rows, json!([[0.6, "superseded"], [0.9, "active"]]));
    rows = ok(
        &n,
        r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#,
    );
    assert_eq!(rows, json!([1]), "the sugar ENSUREs the same tuple");
}

#[test]
fn kip2_core_009_evidence_payload_is_immutable() {
    let n = nexus();
    let e = ok(
        &n,
        r#"CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: "I like dark mode" } }"#,
    )["handles"]["e"]
        .clone();
    let r = run_with(
        &n,
        r#"UPDATE :e SET FIELDS { payload: "changed" }"#,
        json!({"e": e}),
    );
    assert_eq!(code(&r), "EvidenceCorrectionRequired", "{r}");
    assert_eq!(
        ok(&n, "FIND(?e.payload) WHERE { ?e EVIDENCE {} }"),
        json!(["I like dark mode"])
    );
}

#[test]
fn kip2_core_018_memory_strength_is_not_confidence() {
    let n = nexus();
    seed(&n);
    ok(
        &n,
        r#"UPDATE ?c SET FACET "MnemonicState" { memory_strength: 0.1 } WHERE { ?c CONCEPT {key: "person:alice"} }"#,
    );
    assert_eq!(
        ok(&n, "FIND(?a.confidence) WHERE { ?a ASSERTION {} }"),
        json!([0.6])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.facets["MnemonicState"].memory_strength, ?c._system.version) WHERE { ?c CONCEPT {key: "person:alice"} }"#
        ),
        json!([[0.1, 2]])
    );
}

#[test]
fn kip2_core_020_and_021_merge_is_non_destructive_and_keeps_raw_endpoints() {
    let n = nexus();
    let h = seed(&n);
    let dup = ok(
        &n,
        r#"UPSERT CONCEPT ?d { MATCH {type: "Person", key: "person:alice-2"} SET FIELDS {name: "Alice"} }"#,
    )["handles"]["d"]
        .clone();
    ok(
        &n,
        r#"MERGE CONCEPT ?s INTO ?t WHERE { ?s CONCEPT {key: "person:alice-2"} ?t CONCEPT {key: "person:alice"} }"#,
    );
    // The source stays addressable by id, as merged, pointing at the target.
    let r = run_with(
        &n,
        r#"FIND(?c._system.state, ?c.merged_into) WHERE { ?c CONCEPT {id: :d, state: "merged"} }"#,
        json!({"d": dup}),
    );
    assert_eq!(r["results"][0]["result"], json!([["merged", h["alice"]]]));
    // Out of default recall; an upsert by its key resolves to the target.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.key) WHERE { ?c CONCEPT {type: "Person", name: "Alice"} }"#
        ),
        json!(["person:alice"])
    );
    let u = ok(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {type: "Person", key: "person:alice-2"} SET ATTRIBUTES {note: "x"} }"#,
    );
    assert_eq!(u["handles"]["x"], h["alice"]);
    // The raw tuple still names its original subject.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.subject) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#
        ),
        json!([h["alice"]])
    );
    let cycle = run(
        &n,
        r#"MERGE CONCEPT ?s INTO ?t WHERE { ?s CONCEPT {key: "person:alice"} ?t CONCEPT {key: "person:alice-2", state: "merged"} }"#,
    );
    assert_eq!(code(&cycle), "IdentityMergeConflict", "{cycle}");
}

#[test]
fn kip2_kql_001_to_004_patterns_and_predicate_variables() {
    let n = nexus();
    seed(&n);
    assert_eq!(
        ok(&n, r#"FIND(?c.name) WHERE { ?c {type: "Person"} }"#),
        json!(["Alice"])
    );
    assert_eq!(
        ok(&n, r#"FIND(?r) WHERE { ?p (?s, ?r, ?o) }"#),
        json!(["kip://profiles/cognitive-memory@2.0.0/prefers"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.mode, ?who.name) WHERE { ?p PROPOSITION (?s, "prefers", ?o) ?a ASSERTION {proposition: ?p, asserted_by: ?who} }"#
        ),
        json!([["stated", "Alice"]])
    );
}

#[test]
fn kip2_kql_008_filter_functions_and_three_valued_logic() {
    let n = nexus();
    seed(&n);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {} FILTER(STARTS_WITH(?c.name, "Al") && IN(?c.type, ["Person", "Event"])) }"#
        ),
        json!(["Alice"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person"} FILTER(!(?c.name > 5)) }"#
        ),
        json!([])
    );
    let bad = run(&n, "FIND(?c) WHERE { ?c CONCEPT {} FILTER(NOPE(?c)) }");
    assert_eq!(code(&bad), "InvalidSyntax");
}

#[test]
fn kip2_kql_012_aggregates_group_by_the_other_projections() {
    let n = nexus();
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "A" }
  CREATE CONCEPT ?b { TYPE "Person" NAME "B" }
  CREATE CONCEPT ?c { TYPE "Preference" NAME "C" }
}"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.type, COUNT(?c)) WHERE { ?c CONCEPT {} FILTER(IN(?c.type, ["Person", "Preference"])) } ORDER BY ?c.type"#
        ),
        json!([["Person", 2], ["Preference", 1]])
    );
}

#[test]
fn kip2_kml_002_upsert_stable_key_is_idempotent() {
    let n = nexus();
    let cmd = r#"UPSERT CONCEPT ?p { MATCH {type: "Person", key: "person:kip"} SET FIELDS {name: "Kip"} SET ATTRIBUTES {role: "test"} }"#;
    let first = ok(&n, cmd)["handles"]["p"].clone();
    let again = ok(&n, cmd);
    let second = again["handles"]["p"].clone();
    assert_eq!(first, second);
    // The second upsert sets what is already there: no change, no new version.
    assert_eq!(again["changed"], json!([]), "{again:#}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p._system.version) WHERE { ?p CONCEPT {key: "person:kip"} }"#
        ),
        json!([1])
    );
    let third = ok(
        &n,
        r#"UPSERT CONCEPT ?p { MATCH {type: "Person", key: "person:kip"} SET ATTRIBUTES {role: "lead"} }"#,
    );
    assert_eq!(third["changed"], json!([first]), "{third:#}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p CONCEPT {key: "person:kip"} }"#
        ),
        json!([1])
    );
}

#[test]
fn kip2_kml_003_name_only_native_upsert_rejected() {
    let n = nexus();
    let r = run(
        &n,
        r#"UPSERT CONCEPT ?p { MATCH {type: "Person", name: "Alice"} SET ATTRIBUTES {x: 1} }"#,
    );
    assert!(
        ["IdentitySelectorRequired", "NameIdentityForbidden"].contains(&code(&r).as_str()),
        "{r}"
    );
}

#[test]
fn kip2_kml_004_ensure_proposition_creates_no_assertion() {
    let n = nexus();
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "A" }
  CREATE CONCEPT ?b { TYPE "Preference" NAME "B" }
  ENSURE PROPOSITION (?a, "prefers", ?b)
}"#,
    );
    assert_eq!(
        ok(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!([0])
    );
}

#[test]
fn kip2_kml_007_mutate_compound_transition_is_atomic() {
    let n = nexus();
    let r = run(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "Probe" }
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "tool_result" } }
  CREATE ASSERTION ?x { SET FIELDS { proposition: ?missing, asserted_by: ?a, stance: "support", mode: "stated" } }
}"#,
    );
    assert_eq!(r["status"], "failed");
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Probe"} }"#
        ),
        json!([0])
    );
    assert_eq!(
        ok(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!([0])
    );
}

#[test]
fn kip2_kml_009_duplicate_local_handle_fails() {
    let n = nexus();
    let r = run(
        &n,
        r#"MUTATE { CREATE CONCEPT ?a { TYPE "Person" NAME "X" } CREATE CONCEPT ?a { TYPE "Person" NAME "Y" } }"#,
    );
    assert_eq!(code(&r), "DuplicateLocalHandle");
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "X"} }"#),
        json!([0])
    );
}

#[test]
fn forward_references_resolve_within_a_mutate_block() {
    let n = nexus();
    let r = ok(
        &n,
        r#"MUTATE {
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "observed", confidence: 1.0 }
                        SET STRUCTURAL { ("evidence", ?e) {role: "support"} } }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement" } }
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "dark mode" }
}"#,
    );
    assert!(r["handles"]["a"]
        .as_str()
        .is_some_and(|s| s.starts_with("A:")));
    // The handles of the later clauses were used before them.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?o.name, ?a.evidence) WHERE { ?p PROPOSITION (?s, "prefers", ?o) ?a ASSERTION {proposition: ?p} }"#
        ),
        json!([["dark mode", [{"id": r["handles"]["e"], "role": "support"}]]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?s.name) WHERE { ?p PROPOSITION (?s, "prefers", ?o) ?o {type: "Preference", name: "dark mode"} }"#
        ),
        json!(["Alice"])
    );
}

#[test]
fn an_atomic_request_applies_all_its_operations_or_none() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"CREATE CONCEPT ?a { TYPE "Person" NAME "Atomic" }"#},
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Atomic"} }"#},
            {"command": r#"CREATE CONCEPT ?b { TYPE "Spaceship" NAME "Nope" }"#}
        ]}),
    );
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["results"][0]["status"], "rolled_back");
    assert_eq!(r["results"][2]["error"]["code"], "SchemaSymbolNotFound");
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Atomic"} }"#
        ),
        json!([0])
    );
    let good = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"CREATE CONCEPT ?a { TYPE "Person" NAME "Atomic" }"#},
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Atomic"} }"#}
        ]}),
    );
    assert_eq!(good["status"], "succeeded", "{good}");
    assert_eq!(
        good["results"][1]["result"],
        json!([1]),
        "reads see the writes before them"
    );
}

#[test]
fn names_may_repeat_and_a_key_is_identity_within_its_type() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?a { TYPE "Person" NAME "Sam" }"#);
    ok(&n, r#"CREATE CONCEPT ?b { TYPE "Person" NAME "Sam" }"#);
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person", name: "Sam"} }"#
        ),
        json!([2])
    );
    ok(
        &n,
        r#"CREATE CONCEPT ?k { TYPE "Person" NAME "Samuel" SET FIELDS {key: "Sam"} }"#,
    );
    let again = run(
        &n,
        r#"CREATE CONCEPT ?k { TYPE "Person" NAME "Other" SET FIELDS {key: "Sam"} }"#,
    );
    assert_eq!(code(&again), "IdentityConflict", "{again}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person", key: "Sam"} }"#
        ),
        json!(["Samuel"])
    );
    let upd = run(
        &n,
        r#"UPDATE ?c SET FIELDS {key: "new"} WHERE { ?c CONCEPT {key: "Sam"} }"#,
    );
    assert_eq!(code(&upd), "ImmutableField");
}

#[test]
fn the_profile_checks_attributes_and_facets() {
    let n = nexus();
    let missing = run(&n, r#"CREATE CONCEPT ?e { TYPE "Experience" NAME "E" }"#);
    assert_eq!(code(&missing), "ConstraintViolation", "{missing}");
    let bad_enum = run(
        &n,
        r#"CREATE CONCEPT ?e { TYPE "Experience" NAME "E" SET ATTRIBUTES {goal: "g", outcome_status: "great"} }"#,
    );
    assert_eq!(code(&bad_enum), "ConstraintViolation");
    let closed = run(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "P" SET FACET "MnemonicState" {mood: "ok"} }"#,
    );
    assert_eq!(code(&closed), "SchemaFieldNotFound");
    let range = run(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "P" SET FACET "MnemonicState" {salience: 2} }"#,
    );
    assert_eq!(code(&range), "ConstraintViolation");
    let system = run(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "P" SET FIELDS {_system: {}} }"#,
    );
    assert_eq!(code(&system), "ProtectedSystemField");
}

#[test]
fn one_memory_1x_facts_read_in_2_0_and_2_0_concepts_read_in_1x() {
    let n = nexus();
    let one_x = n
        .execute_json(
            &json!({"command": r#"UPSERT { CONCEPT ?e { {type: "Event", name: "Launch"} SET ATTRIBUTES { event_class: "Milestone", start_time: "2026-01-01T00:00:00Z", content_summary: "launch" } } }"#}),
            Access::ReadWrite,
        )
        .to_json();
    assert!(one_x.get("error").is_none(), "{one_x}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?e.key, ?e.schema_ref, ?e._system.version) WHERE { ?e CONCEPT {type: "Event", name: "Launch"} }"#
        ),
        json!([["Launch", "kip://profiles/cognitive-memory@2.0.0/Event", 1]])
    );
    ok(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "Grace" SET ATTRIBUTES {display_name: "G"} }"#,
    );
    let read = n
        .execute_json(
            &json!({"command": r#"FIND(?p.attributes.display_name) WHERE { ?p {type: "Person", name: "Grace"} }"#}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(read["result"], json!(["G"]), "{read}");
    // The 1.x control plane is not a 2.0 element.
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "$self"} }"#
        ),
        json!([0])
    );
}

#[test]
fn a_readonly_caller_runs_kql_and_not_kml() {
    let n = nexus();
    seed(&n);
    let q = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"}]}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(q["results"][0]["result"], json!([1]));
    let w = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "X" }"#}]}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(code(&w), "ReadonlyViolation");
}

#[test]
fn kip2_kql_023_raw_paths_follow_propositions_and_alternatives() {
    let n = nexus();
    n.admin()
        .install_schema_package(
            &json!({"format": "KIP-Schema-Package", "manifest": {"package_id": "kip://test/org", "version": "1.0.0"},
                    "definitions": {"predicates": {"reports_to": {}, "mentors": {}}}}),
            true,
        )
        .expect("installs");
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "A" }
  CREATE CONCEPT ?b { TYPE "Person" NAME "B" }
  CREATE CONCEPT ?c { TYPE "Person" NAME "C" }
  CREATE CONCEPT ?d { TYPE "Person" NAME "D" }
  ENSURE PROPOSITION (?a, "reports_to", ?b)
  ENSURE PROPOSITION (?b, "reports_to", ?c)
  ENSURE PROPOSITION (?c, "reports_to", ?d)
  ENSURE PROPOSITION (?a, "mentors", ?d)
}"#,
    );
    let up = |q: &str| {
        ok(
            &n,
            &format!(
                r#"FIND(?y.name) WHERE {{ ?x CONCEPT {{name: "A"}} ({q}) }} ORDER BY ?y.name"#
            ),
        )
    };
    assert_eq!(up(r#"?x, "reports_to"{1,2}, ?y"#), json!(["B", "C"]));
    assert_eq!(up(r#"?x, "reports_to"{2,}, ?y"#), json!(["C", "D"]));
    assert_eq!(up(r#"?x, "reports_to"{0,1}, ?y"#), json!(["A", "B"]));
    assert_eq!(up(r#"?x, "reports_to" | "mentors", ?y"#), json!(["B", "D"]));
    // Backwards from a bound object.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.name) WHERE { ?y CONCEPT {name: "D"} (?x, "reports_to"{1,3}, ?y) } ORDER BY ?x.name"#
        ),
        json!(["A", "B", "C"])
    );
    let unbound = run(&n, r#"FIND(?x) WHERE { (?x, "reports_to"{1,3}, ?y) }"#);
    assert_eq!(code(&unbound), "ResourceExhausted");
    let with_var = run(
        &n,
        r#"FIND(?p) WHERE { ?x CONCEPT {name: "A"} ?p (?x, "reports_to"{1,2}, ?y) }"#,
    );
    assert_eq!(code(&with_var), "InvalidSyntax");
}

#[test]
fn kip2_kml_010_conflicting_final_mutation_fails() {
    let n = nexus();
    seed(&n);
    let r = run(
        &n,
        r#"MUTATE {
  UPDATE ?a SET ATTRIBUTES { mood: "calm" } WHERE { ?a CONCEPT {key: "person:alice"} }
  UPDATE ?b SET ATTRIBUTES { mood: "busy" } WHERE { ?b CONCEPT {key: "person:alice"} }
}"#,
    );
    assert_eq!(code(&r), "DuplicateMutationTarget", "{r}");
    // Two clauses on one element that do not disagree are one plan.
    ok(
        &n,
        r#"MUTATE {
  UPDATE ?a SET ATTRIBUTES { mood: "calm" } WHERE { ?a CONCEPT {key: "person:alice"} }
  UPDATE ?b SET FACET "MnemonicState" { salience: 0.7 } WHERE { ?b CONCEPT {key: "person:alice"} }
}"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.attributes.mood) WHERE { ?a CONCEPT {key: "person:alice"} }"#
        ),
        json!(["calm"])
    );
}

#[test]
fn kip2_kql_010_optional_missing_is_null_not_an_error() {
    let n = nexus();
    seed(&n);
    ok(&n, r#"CREATE CONCEPT ?b { TYPE "Person" NAME "Bob" }"#);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.name, ?o.name) WHERE { ?p CONCEPT {type: "Person"} OPTIONAL { (?p, "prefers", ?o) } } ORDER BY ?p.name"#
        ),
        json!([["Alice", "Dark"], ["Bob", null]])
    );
}
