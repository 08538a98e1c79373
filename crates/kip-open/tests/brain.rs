//! The deterministic brain: the health report against a hand count, and each rule of
//! the sleep cycle (TTL reclamation, decay, finalization, dry run) on a graph holding
//! eligible and ineligible elements side by side.

mod common;
use kip_engine::brain::{SleepOptions, SleepReport};
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn run(n: &Nexus, cmd: &str) -> Value {
    run_with(n, cmd, json!({}))
}

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

const PAST: &str = "2020-01-01T00:00:00Z";
const FUTURE: &str = "2099-01-01T00:00:00Z";

fn event(n: &Nexus, name: &str, status: &str, expires: Option<&str>, start: &str) {
    let meta = expires.map_or(String::new(), |e| {
        format!(" WITH METADATA {{ expires_at: \"{e}\" }}")
    });
    run_with(
        n,
        &format!(
            "UPSERT {{ CONCEPT ?e {{ {{type: \"Event\", name: :name}} SET ATTRIBUTES {{ event_class: \"Conversation\", start_time: :start, content_summary: \"talk\", consolidation_status: :status }} SET PROPOSITIONS {{ (\"belongs_to_domain\", {{type: \"Domain\", name: \"Archived\"}}) }} }} }}{meta}"
        ),
        json!({"name": name, "start": start, "status": status}),
    );
}

fn exists(n: &Nexus, t: &str, name: &str) -> bool {
    let r = run_with(
        n,
        "FIND(COUNT(?c)) WHERE { ?c {type: :t, name: :n} }",
        json!({"t": t, "n": name}),
    );
    r.as_u64() == Some(1)
}

fn expires(n: &Nexus, t: &str, name: &str) -> Value {
    let r = run_with(
        n,
        "FIND(?c.metadata.expires_at) WHERE { ?c {type: :t, name: :n} }",
        json!({"t": t, "n": name}),
    );
    r[0].clone()
}

/// The graph of the TTL rules: one element per rule, eligible and not side by side.
fn ttl_graph(n: &Nexus) {
    run(
        n,
        r#"UPSERT {
            CONCEPT ?alice { {type: "Person", name: "alice"} SET ATTRIBUTES { person_class: "Human" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Unsorted"}) } }
        }"#,
    );
    event(
        n,
        "ev-done",
        "completed",
        Some(PAST),
        "2020-01-01T00:00:00Z",
    );
    event(
        n,
        "ev-archived",
        "archived",
        Some("2021-06-01"),
        "2020-01-01T00:00:00Z",
    );
    event(
        n,
        "ev-pending",
        "pending",
        Some(PAST),
        "2020-01-01T00:00:00Z",
    );
    event(
        n,
        "ev-future",
        "completed",
        Some(FUTURE),
        "2020-01-01T00:00:00Z",
    );
    event(
        n,
        "ev-evidence",
        "completed",
        Some(PAST),
        "2020-01-01T00:00:00Z",
    );
    event(
        n,
        "ev-shared",
        "completed",
        Some(PAST),
        "2020-01-01T00:00:00Z",
    );
    run(
        n,
        r#"UPSERT {
            CONCEPT ?x { {type: "Preference", name: "pref-x"} SET ATTRIBUTES { description: "likes tea" } SET PROPOSITIONS { ("derived_from", {type: "Event", name: "ev-evidence"}) ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
            CONCEPT ?y { {type: "Preference", name: "pref-y"} SET ATTRIBUTES { description: "likes rain" } SET PROPOSITIONS { ("derived_from", {type: "Event", name: "ev-shared"}) ("derived_from", {type: "Event", name: "ev-future"}) ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
            CONCEPT ?ev { {type: "Event", name: "ev-done"} SET PROPOSITIONS { ("involves", {type: "Person", name: "alice"}) } }
        }"#,
    );
    run(
        n,
        r#"UPSERT {
            CONCEPT ?t1 { {type: "SleepTask", name: "task-done"} SET ATTRIBUTES { target_type: "Event", target_name: "x", requested_action: "archive", reason: "r", status: "completed" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "System"}) } }
            CONCEPT ?t2 { {type: "SleepTask", name: "task-pending"} SET ATTRIBUTES { target_type: "Event", target_name: "x", requested_action: "archive", reason: "r", status: "pending" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "System"}) } }
            CONCEPT ?c1 { {type: "Commitment", name: "c-fulfilled"} SET ATTRIBUTES { commitment_class: "Promise", description: "d", status: "fulfilled" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
            CONCEPT ?c2 { {type: "Commitment", name: "c-pending"} SET ATTRIBUTES { commitment_class: "Promise", description: "d", status: "pending" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
            CONCEPT ?bob { {type: "Person", name: "bob"} SET ATTRIBUTES { person_class: "Human" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
        }
        WITH METADATA { expires_at: "2020-01-01T00:00:00Z" }"#,
    );
    run(
        n,
        r#"UPSERT {
            CONCEPT ?tmp { {type: "Person", name: "scratch"} SET ATTRIBUTES { person_class: "Human" } }
        }
        WITH METADATA { expires_at: "2020-01-01T00:00:00+02:00", memory_tier: "short-term" }"#,
    );
    // Links: an expired one (deleted), an expired superseded one (history: kept), an
    // expired one from a pending Event (extended), a live one.
    run(
        n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "alice"} SET PROPOSITIONS {
                ("prefers", {type: "Preference", name: "pref-x"}) WITH METADATA { expires_at: "2020-01-01T00:00:00Z" }
                ("prefers", {type: "Preference", name: "pref-y"}) WITH METADATA { expires_at: "2020-01-01T00:00:00Z", superseded: true }
            } }
            CONCEPT ?p { {type: "Event", name: "ev-pending"} SET PROPOSITIONS {
                ("involves", {type: "Person", name: "alice"}) WITH METADATA { expires_at: "2020-01-01T00:00:00Z" }
            } }
        }"#,
    );
}

fn sleep(n: &Nexus, dry_run: bool) -> SleepReport {
    n.brain()
        .sleep(&SleepOptions {
            dry_run,
            ..SleepOptions::default()
        })
        .expect("sleep cycle")
}

#[test]
fn ttl_reclamation_deletes_exactly_the_eligible() {
    let n = common::nexus();
    ttl_graph(&n);
    let h = n.brain().health().expect("health");
    // Expired concepts: ev-done, ev-archived, ev-pending, ev-evidence, ev-shared,
    // task-done, task-pending, c-fulfilled, c-pending, bob, scratch.
    assert_eq!(h.expired.concepts, 11, "{h:?}");
    // Deletable: ev-done, ev-archived, ev-shared, task-done, c-fulfilled, scratch.
    assert_eq!(h.expired.reclaimable_concepts, 6, "{h:?}");
    // The statement-level `expires_at` of the capsules above also landed on their domain
    // links (the pollution SystemInstructions.md warns of): those touch protected
    // domains and are never reclaimed. Reclaimable: alice -prefers-> pref-x only (the
    // superseded link is history, the pending Event's link is extended).
    assert_eq!(h.expired.propositions, 12, "{h:?}");
    assert_eq!(h.expired.reclaimable_propositions, 1, "{h:?}");

    // A dry run lists the writes and changes nothing.
    let dry = sleep(&n, true);
    assert!(dry.statements.iter().all(|s| !s.applied));
    assert!(dry
        .statements
        .iter()
        .any(|s| s.command.starts_with("DELETE CONCEPT ?n DETACH")));
    assert_eq!(dry.deleted_concepts.len(), 6);
    assert!(exists(&n, "Event", "ev-done"));
    let log = run(
        &n,
        r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    assert!(
        !log.to_string().contains("timestamp"),
        "a dry run writes no log: {log}"
    );

    let r = sleep(&n, false);
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    let mut deleted: Vec<&str> = r.deleted_concepts.iter().map(|c| c.name.as_str()).collect();
    deleted.sort_unstable();
    assert_eq!(
        deleted,
        [
            "c-fulfilled",
            "ev-archived",
            "ev-done",
            "ev-shared",
            "scratch",
            "task-done"
        ]
    );
    for (t, name) in [
        ("Event", "ev-done"),
        ("Event", "ev-archived"),
        ("Event", "ev-shared"),
        ("SleepTask", "task-done"),
        ("Commitment", "c-fulfilled"),
        ("Person", "scratch"),
    ] {
        assert!(!exists(&n, t, name), "{name} should be gone");
    }
    for (t, name) in [
        ("Event", "ev-pending"),
        ("Event", "ev-future"),
        ("Event", "ev-evidence"),
        ("SleepTask", "task-pending"),
        ("Commitment", "c-pending"),
        ("Person", "bob"),
        ("Person", "alice"),
        ("Preference", "pref-x"),
        ("Preference", "pref-y"),
    ] {
        assert!(exists(&n, t, name), "{name} should stay");
    }
    // A pending Event and a sole evidence are extended, not deleted.
    for name in ["ev-pending", "ev-evidence"] {
        let e = expires(&n, "Event", name);
        assert!(e.as_str().is_some_and(|s| s > "2026"), "{name}: {e}");
    }
    assert_eq!(expires(&n, "Event", "ev-future"), json!(FUTURE));
    // Links: the expired one is gone, the superseded one stays, the pending Event's is
    // extended.
    let prefers = run(
        &n,
        r#"FIND(?o.name) WHERE { ?l ({type: "Person", name: "alice"}, "prefers", ?o) } ORDER BY ?o.name"#,
    );
    assert_eq!(prefers, json!(["pref-y"]));
    let pending_link = run(
        &n,
        r#"FIND(?l.metadata.expires_at) WHERE { ?l ({type: "Event", name: "ev-pending"}, "involves", ?o) }"#,
    );
    assert!(
        pending_link[0].as_str().is_some_and(|s| s > "2026"),
        "{pending_link}"
    );
    // With the concepts went their links (DETACH): ev-done 2, ev-archived 1, ev-shared 2
    // (its domain, pref-y's derived_from), task-done 1, c-fulfilled 1; plus the loose
    // expired link.
    assert_eq!(r.deleted_propositions, 8, "{r:?}");
    // Review tasks for expired nodes that are not TTL-deletable, assigned to $system.
    assert_eq!(r.review_tasks.len(), 3, "{:?}", r.review_tasks);
    let reviews = run(
        &n,
        r#"FIND(?t.attributes.target_name) WHERE { ?t {type: "SleepTask"} (?t, "assigned_to", {type: "Person", name: "$system"}) FILTER(?t.attributes.requested_action == "review") } ORDER BY ?t.attributes.target_name"#,
    );
    assert_eq!(reviews, json!(["bob", "c-pending", "task-pending"]));
    // The log: the plan before deleting, then the cycle's entry.
    let log = run(
        &n,
        r#"FIND(?s.attributes.maintenance_log, ?s.attributes.last_sleep_cycle) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    let entries = log[0][0].as_array().expect("maintenance_log");
    assert_eq!(entries.len(), 2, "{log}");
    assert_eq!(entries[0]["phase"], json!("ttl_reclamation"));
    assert_eq!(
        entries[0]["about_to_delete"]["concepts"]
            .as_array()
            .map(Vec::len),
        Some(6)
    );
    assert_eq!(entries[1]["trigger"], json!("on_demand"));
    assert_eq!(entries[1]["timestamp"], log[1][0]);
    assert!(entries[1]["actions_taken"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));

    // A second cycle deletes nothing more and creates no duplicate review task.
    let again = sleep(&n, false);
    assert!(again.deleted_concepts.is_empty(), "{again:?}");
    assert!(again.review_tasks.is_empty(), "{again:?}");
    let log = run(
        &n,
        r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    assert_eq!(
        log[0].as_array().map(Vec::len),
        Some(3),
        "appended, never replaced"
    );
}

#[test]
fn the_cap_bounds_deletions_per_cycle() {
    let n = common::nexus();
    for i in 0..12 {
        event(
            &n,
            &format!("old-{i:02}"),
            "completed",
            Some(PAST),
            "2020-01-01T00:00:00Z",
        );
    }
    let opts = SleepOptions {
        max_reclaim: 5,
        ..SleepOptions::default()
    };
    // Each Event has one link (its domain): a node and its links count, so 5 elements
    // are two Events (4 elements) per cycle.
    let r = n.brain().sleep(&opts).expect("cycle");
    assert_eq!(r.deleted_concepts.len(), 2);
    assert_eq!(r.deleted_propositions, 2);
    assert!(r.cap_reached);
    let left = run(&n, r#"FIND(COUNT(?e)) WHERE { ?e {type: "Event"} }"#);
    assert_eq!(left, json!(10));
    for _ in 0..4 {
        assert_eq!(
            n.brain()
                .sleep(&opts)
                .expect("cycle")
                .deleted_concepts
                .len(),
            2
        );
    }
    let r = n.brain().sleep(&opts).expect("cycle");
    assert_eq!(r.deleted_concepts.len(), 2);
    assert!(!r.cap_reached);
    let left = run(&n, r#"FIND(COUNT(?e)) WHERE { ?e {type: "Event"} }"#);
    assert_eq!(left, json!(0));
}

#[test]
fn decay_lowers_memory_strength_once_per_period() {
    let n = common::nexus();
    run(
        &n,
        r#"UPSERT {
            CONCEPT ?k { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "acquaintance", subject_types: ["*"], object_types: ["*"] } }
        }"#,
    );
    run(
        &n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "ann"} SET ATTRIBUTES { person_class: "Human" } }
            CONCEPT ?b { {type: "Person", name: "ben"} SET ATTRIBUTES { person_class: "Human" } }
            CONCEPT ?strong { {type: "Preference", name: "green tea"} SET ATTRIBUTES { description: "d", evidence_count: 5 } }
            CONCEPT ?weak { {type: "Preference", name: "jazz"} SET ATTRIBUTES { description: "d" } }
            CONCEPT ?a2 { {type: "Person", name: "ann"} SET PROPOSITIONS {
                ("knows", ?b) WITH METADATA { memory_strength: 1.0 }
                ("prefers", ?strong) WITH METADATA { memory_strength: 1.0 }
                ("prefers", ?weak)
                ("derived_from", ?b) WITH METADATA { memory_strength: 1.0 }
            } }
            CONCEPT ?b2 { {type: "Person", name: "ben"} SET PROPOSITIONS {
                ("knows", ?a) WITH METADATA { memory_strength: 0.04 }
                ("prefers", ?weak) WITH METADATA { memory_strength: 1.0, observed_at: "2099-01-01T00:00:00Z" }
            } }
        }"#,
    );
    let strength = |s: &str, p: &str, o: &str| -> Value {
        run_with(
            &n,
            &format!(
                "FIND(?l.metadata.memory_strength) WHERE {{ ?l ({{type: :st, name: :s}}, \"{p}\", {{type: :ot, name: :o}}) }}"
            ),
            json!({"st": "Person", "s": s, "ot": if p == "prefers" { "Preference" } else { "Person" }, "o": o}),
        )[0]
        .clone()
    };
    let r = sleep(&n, false);
    assert_eq!(r.decayed_links, 3, "{r:?}");
    assert_eq!(strength("ann", "knows", "ben"), json!(0.95));
    assert_eq!(strength("ann", "prefers", "green tea"), json!(0.98));
    // No strength yet: the default 0.7, decayed fast (never reinforced).
    let jazz = strength("ann", "prefers", "jazz").as_f64().expect("number");
    assert!((jazz - 0.63).abs() < 1e-9, "{jazz}");
    // Untouched: provenance, fully decayed, recently observed.
    assert_eq!(strength("ann", "derived_from", "ben"), json!(1.0));
    assert_eq!(strength("ben", "knows", "ann"), json!(0.04));
    assert_eq!(strength("ben", "prefers", "jazz"), json!(1.0));
    // A second cycle in the same period decays nothing again.
    let r = sleep(&n, false);
    assert_eq!(r.decayed_links, 0, "{r:?}");
    assert_eq!(strength("ann", "knows", "ben"), json!(0.95));
    // A dry run counts without writing.
    let later = SleepOptions {
        dry_run: true,
        now: std::time::SystemTime::now().checked_add(std::time::Duration::from_secs(8 * 86_400)),
        ..SleepOptions::default()
    };
    let r = n.brain().sleep(&later).expect("dry run");
    assert_eq!(r.decayed_links, 3, "{r:?}");
    assert_eq!(strength("ann", "knows", "ben"), json!(0.95));
}

#[test]
fn the_health_report_matches_a_hand_count() {
    let n = common::nexus();
    // A fresh nexus: everything bootstrapped is classified.
    let h = n.brain().health().expect("health");
    assert_eq!(h.orphans.count, 0, "{:?}", h.orphans.sample);
    assert_eq!(h.unsorted_backlog.count, 0);
    assert!(h.triggers.is_empty());
    let core = h
        .domains
        .iter()
        .find(|d| d.name == "CoreSchema")
        .expect("CoreSchema");
    assert!(core.members > 10);

    // 12 orphans (one over the trigger), 3 in Unsorted, 2 stale Events (one recent, one
    // consolidated), 2 pending tasks, a superseded link, confidences 0.5 and 1.0 on
    // links, a memory strength 0.4.
    for i in 0..12 {
        run_with(
            &n,
            "UPSERT { CONCEPT ?p { {type: \"Person\", name: :n} SET ATTRIBUTES { person_class: \"Human\" } } }",
            json!({"n": format!("orphan-{i}")}),
        );
    }
    for i in 0..3 {
        run_with(
            &n,
            "UPSERT { CONCEPT ?p { {type: \"Person\", name: :n} SET ATTRIBUTES { person_class: \"Human\" } SET PROPOSITIONS { (\"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) } } }",
            json!({"n": format!("inbox-{i}")}),
        );
    }
    event(&n, "old-1", "pending", None, "2020-01-01T00:00:00Z");
    event(&n, "old-2", "pending", None, "2021-01-01");
    let recent = kip_engine::brain::time::format(std::time::SystemTime::now());
    event(&n, "new-1", "pending", None, &recent);
    event(&n, "old-done", "completed", None, "2020-01-01T00:00:00Z");
    run(
        &n,
        r#"UPSERT {
            CONCEPT ?w { {type: "Preference", name: "w"} SET ATTRIBUTES { description: "d" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Archived"}) } }
            CONCEPT ?e { {type: "Event", name: "old-done"} SET PROPOSITIONS { ("consolidated_to", ?w) } }
            CONCEPT ?i { {type: "Person", name: "inbox-0"} SET PROPOSITIONS {
                ("prefers", ?w) WITH METADATA { confidence: 0.5, memory_strength: 0.4, superseded: true }
            } }
            CONCEPT ?t1 { {type: "SleepTask", name: "t1"} SET ATTRIBUTES { target_type: "Event", target_name: "old-1", requested_action: "archive", reason: "r", status: "pending" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "System"}) } }
            CONCEPT ?t2 { {type: "SleepTask", name: "t2"} SET ATTRIBUTES { target_type: "Event", target_name: "old-2", requested_action: "archive", reason: "r", status: "pending" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "System"}) } }
            CONCEPT ?t3 { {type: "SleepTask", name: "t3"} SET ATTRIBUTES { target_type: "Event", target_name: "old-2", requested_action: "archive", reason: "r", status: "completed" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "System"}) } }
        }"#,
    );
    let h = n.brain().health().expect("health");
    assert_eq!(h.orphans.count, 12);
    assert!(h.orphans.exceeded);
    assert_eq!(h.unsorted_backlog.count, 3);
    assert_eq!(h.stale_events.count, 2, "{:?}", h.stale_events.sample);
    assert_eq!(h.pending_sleep_tasks.count, 2);
    assert_eq!(h.superseded_propositions, 1);
    assert_eq!(h.memory_strength.count, 1);
    assert_eq!(h.memory_strength.average, Some(0.4));
    assert_eq!(h.triggers, ["orphans"]);
    let unsorted = h
        .domains
        .iter()
        .find(|d| d.name == "Unsorted")
        .expect("Unsorted");
    assert_eq!((unsorted.members, unsorted.status), (3, "small"));
    let table = h.table();
    assert!(
        table.contains("orphans") && table.contains("a sleep cycle is due: orphans"),
        "{table}"
    );
    let j = serde_json::to_value(&h).expect("json");
    assert_eq!(j["orphans"]["count"], json!(12));
    assert_eq!(
        j["unsorted_backlog"]["sample"].as_array().map(Vec::len),
        Some(3)
    );
}

#[test]
fn two_cycles_never_run_at_once() {
    let n = std::sync::Arc::new(common::nexus());
    for i in 0..200 {
        event(
            &n,
            &format!("e{i}"),
            "completed",
            Some(PAST),
            "2020-01-01T00:00:00Z",
        );
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let n = n.clone();
            std::thread::spawn(move || {
                n.brain()
                    .sleep(&SleepOptions::default())
                    .map(|r| r.deleted_concepts.len())
            })
        })
        .collect();
    let results: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let deleted: usize = results.iter().filter_map(|r| r.as_ref().ok()).sum();
    assert_eq!(deleted, 200, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(r.code.as_str(), "KIP_4002", "{r:?}");
    }
}
