//! The sleep cycle never deletes what it must keep (issue 45): each planned deletion is
//! decided again in the transaction that deletes, timestamps are read strictly (with
//! their offsets), and nothing outside the logged plan is deleted.

mod common;
use common::{nexus, ok};
use kip_engine::brain::reclaim::{delete_if_still_eligible, Planned, Reclaimed};
use kip_engine::brain::{SleepOptions, SleepReport};
use kip_engine::store::ElemRef;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn run_with(n: &Nexus, cmd: &str, params: Value) -> Value {
    let r = n
        .execute_json(
            &json!({ "command": cmd, "parameters": params }),
            Access::ReadWrite,
        )
        .to_json();
    assert!(r.get("error").is_none(), "{cmd}\n{r}");
    r["result"].clone()
}

/// An Event expired at `expires`, its consolidation `status`.
fn event(n: &Nexus, name: &str, status: &str, expires: &str) -> u64 {
    run_with(
        n,
        "UPSERT { CONCEPT ?e { {type: \"Event\", name: :name} SET ATTRIBUTES { event_class: \"Conversation\", start_time: \"2020-01-01T00:00:00Z\", content_summary: \"talk\", consolidation_status: :status } } } WITH METADATA { expires_at: :expires }",
        json!({"name": name, "status": status, "expires": expires}),
    );
    concept_id(n, "Event", name).expect("the event exists")
}

fn concept_id(n: &Nexus, ty: &str, name: &str) -> Option<u64> {
    n.read(|r| Ok(r.concept_by_key(ty, name)?)).expect("read")
}

fn sleep(n: &Nexus) -> SleepReport {
    n.brain()
        .sleep(&SleepOptions {
            trigger: "test".into(),
            ..SleepOptions::default()
        })
        .expect("a cycle")
}

fn plan_of(n: &Nexus, id: u64, name: &str) -> Planned {
    n.read(|r| Ok(Planned::concept(r, id, ("Event".into(), name.into()))?))
        .expect("plan")
}

fn reclaim(n: &Nexus, plan: &Planned) -> Reclaimed {
    n.write(
        |w| delete_if_still_eligible(w, plan, std::time::SystemTime::now()),
        false,
    )
    .expect("the checked delete runs")
}

/// Issue 45 item 2: an agent sets the Event's consolidation back to pending and
/// derives an Insight from it between the plan and the deletion: both writes stand.
#[test]
fn an_event_made_ineligible_after_the_plan_is_kept_and_reported() {
    let n = nexus();
    let id = event(&n, "E1", "completed", "2020-01-01T00:00:00Z");
    let plan = plan_of(&n, id, "E1");
    ok(
        &n,
        r#"UPSERT { CONCEPT ?e { {type: "Event", name: "E1"} SET ATTRIBUTES { consolidation_status: "pending" } } }"#,
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?i { {type: "Insight", name: "I1"} SET ATTRIBUTES { content: "learned" } SET PROPOSITIONS { ("derived_from", {type: "Event", name: "E1"}) } } }"#,
    );
    match reclaim(&n, &plan) {
        Reclaimed::Skipped(reason) => assert!(reason.contains("pending"), "{reason}"),
        other => panic!("deleted although no longer eligible: {other:?}"),
    }
    assert_eq!(concept_id(&n, "Event", "E1"), Some(id));
    let links = ok(
        &n,
        r#"FIND(COUNT(?l)) WHERE { ?l ({type: "Insight", name: "I1"}, "derived_from", {type: "Event", name: "E1"}) }"#,
    );
    assert_eq!(links, json!(1), "the Insight's link stays");
}

/// The same with consolidation done but the Event now the only evidence of an
/// active Insight.
#[test]
fn an_event_that_became_sole_evidence_is_kept() {
    let n = nexus();
    let id = event(&n, "E2", "completed", "2020-01-01T00:00:00Z");
    let plan = plan_of(&n, id, "E2");
    ok(
        &n,
        r#"UPSERT { CONCEPT ?i { {type: "Insight", name: "I2"} SET ATTRIBUTES { content: "x" } SET PROPOSITIONS { ("derived_from", {type: "Event", name: "E2"}) } } }"#,
    );
    assert!(matches!(reclaim(&n, &plan), Reclaimed::Skipped(_)));
    assert_eq!(concept_id(&n, "Event", "E2"), Some(id));
}

/// A link drawn to a planned Event after the plan (the Event itself still eligible)
/// would be deleted with it without being in the plan: the deletion is skipped.
#[test]
fn a_deletion_that_would_take_an_unplanned_link_is_skipped() {
    let n = nexus();
    let id = event(&n, "E3", "completed", "2020-01-01T00:00:00Z");
    let plan = plan_of(&n, id, "E3");
    ok(
        &n,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Ann"} SET PROPOSITIONS { ("prefers", {type: "Event", name: "E3"}) } } }"#,
    );
    match reclaim(&n, &plan) {
        Reclaimed::Skipped(reason) => assert!(reason.contains("P:"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(concept_id(&n, "Event", "E3"), Some(id));
    // Planned again, it goes, with its link.
    let plan = plan_of(&n, id, "E3");
    assert_eq!(plan.with_links.len(), 1);
    assert_eq!(
        reclaim(&n, &plan),
        Reclaimed::Deleted {
            concepts: 1,
            propositions: 1
        }
    );
}

/// Issue 45 item 4: an offset is honoured (20:00 at +14:00 is long past), junk and
/// padded values are never taken as timestamps, and the cycle deletes exactly what
/// the plan it logs lists, links about links included.
#[test]
fn the_cycle_reads_timestamps_strictly_and_deletes_exactly_its_plan() {
    let n = nexus();
    let offset = event(&n, "Offset", "completed", "2020-11-27T20:00:00+14:00");
    event(&n, "Junk", "completed", "2020-01-01T00:00:00Z junk");
    event(&n, "Padded", "completed", " 2020-01-01");
    event(&n, "Future", "completed", "2099-01-01T00:00:00+14:00");
    // A link from the Offset Event, and a link about that link.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Bob"} } CONCEPT ?e { {type: "Event", name: "Offset"} SET PROPOSITIONS { ("involves", ?p) } } }"#,
    );
    let link = n
        .read(|r| {
            Ok(r.prop_by_spo(
                ElemRef::Concept(offset),
                "involves",
                ElemRef::Concept(concept_id(&n, "Person", "Bob").expect("Bob")),
            )?)
        })
        .expect("read")
        .expect("the link");
    run_with(
        &n,
        &format!(
            r#"UPSERT {{ CONCEPT ?p {{ {{type: "Person", name: "Bob"}} }} PROPOSITION ?h {{ (?p, "mentions", (id: "{}")) }} }}"#,
            ElemRef::Prop(link).id_string()
        ),
        json!({}),
    );
    let report = sleep(&n);
    let deleted: Vec<&str> = report
        .deleted_concepts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(deleted, vec!["Offset"], "{report:?}");
    assert_eq!(
        report.deleted_propositions, 2,
        "the link and the link about it"
    );
    for kept in ["Junk", "Padded", "Future"] {
        assert!(concept_id(&n, "Event", kept).is_some(), "{kept} is kept");
    }
    let unreadable = report
        .issues
        .iter()
        .filter(|i| i.contains("not a timestamp"))
        .count();
    assert_eq!(unreadable, 2, "{:?}", report.issues);
    // The logged plan lists both links with the Event.
    let log = ok(
        &n,
        r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    let plan = log[0]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["phase"] == "ttl_reclamation"))
        .expect("the plan is logged")
        .clone();
    let planned = &plan["about_to_delete"]["concepts"][0];
    assert_eq!(planned["name"], "Offset");
    assert_eq!(planned["with_links"].as_array().map(Vec::len), Some(2));
    // Every statement of the cycle's deletions names a planned element.
    for st in report
        .statements
        .iter()
        .filter(|s| s.command.starts_with("DELETE"))
    {
        assert_eq!(st.parameters["id"], planned["id"], "{st:?}");
    }
}

/// Issue 45 item 3: `$self prefers $system` no longer switches decay off for its
/// predicate.
#[test]
fn a_link_between_system_actors_does_not_stop_decay() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?ann { {type: "Person", name: "Ann"} }
            CONCEPT ?bob { {type: "Person", name: "Bob"} SET PROPOSITIONS { ("prefers", ?ann) } }
            CONCEPT ?me { {type: "Person", name: "$self"} SET PROPOSITIONS { ("prefers", {type: "Person", name: "$system"}) } }
        } WITH METADATA { memory_strength: 0.9 }"#,
    );
    let report = sleep(&n);
    assert!(report.decayed_links >= 2, "{report:?}");
    assert!(
        !report.issues.iter().any(|i| i.contains("KIP_3004")),
        "{:?}",
        report.issues
    );
    let s = ok(
        &n,
        r#"FIND(?l.metadata.memory_strength) WHERE { ?l ({type: "Person", name: "Bob"}, "prefers", ?o) }"#,
    );
    let v = s[0].as_f64().expect("a number");
    assert!((v - 0.81).abs() < 1e-9, "{s}");
}
