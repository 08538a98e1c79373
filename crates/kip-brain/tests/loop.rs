//! The `$system` loop against a scripted OpenAI-compatible server (a small HTTP server
//! in this file answering pre-written tool calls) and a real nexus: the intended writes
//! are applied, errors and malformed calls are fed back, and every bound stops a
//! runaway model.

use kip_brain::llm::{ChatClient, LlmSpec};
use kip_brain::scripted::{Script, ScriptedServer};
use kip_brain::{run_phases, LoopLimits};
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::time::Duration;

fn fake_llm(script: Script) -> (String, ScriptedServer) {
    let server = ScriptedServer::start(script).expect("scripted server");
    (server.url.clone(), server)
}

fn call(id: &str, args: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "execute_kip", "arguments": args.to_string()}})
}

fn tool_calls(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn client(url: &str) -> ChatClient {
    ChatClient::new(
        LlmSpec::parse(&format!("{url}#fake-model")).expect("spec"),
        Some("k".into()),
    )
}

fn nexus() -> Nexus {
    let n = kip_open::testing::nexus().expect("nexus");
    let r = n.execute_json(
        &json!({"command": r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "Ada Lovelace"} SET ATTRIBUTES { person_class: "Human" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Unsorted"}) } }
            CONCEPT ?b { {type: "Person", name: "Ada"} SET ATTRIBUTES { person_class: "Human", aliases: ["Countess"] } }
        }"#}),
        Access::ReadWrite,
    );
    assert!(!r.has_error(), "{}", r.to_json());
    n
}

fn exec(n: &Nexus) -> impl FnMut(&Value) -> Value + '_ {
    move |args: &Value| n.execute_json(args, Access::ReadWrite).to_json()
}

#[test]
fn the_scripted_cycle_applies_exactly_the_intended_writes() {
    let n = nexus();
    let script = Script {
        steps: vec![
            tool_calls(vec![call(
                "c1",
                json!({"command": "FIND(?n.name) WHERE { (?n, \"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) }"}),
            )]),
            // Reclassification: the new domain, the item moved, the Unsorted link dropped.
            tool_calls(vec![call(
                "c2",
                json!({"commands": [
                    {"command": "UPSERT { CONCEPT ?d { {type: \"Domain\", name: \"People\"} SET ATTRIBUTES { description: \"persons\" } } CONCEPT ?i { {type: \"Person\", name: :n} SET PROPOSITIONS { (\"belongs_to_domain\", ?d) } } } WITH METADATA { source: \"SleepReclassification\", author: \"$system\", confidence: 0.85 }", "parameters": {"n": "Ada Lovelace"}},
                    {"command": "DELETE PROPOSITIONS ?link WHERE { ?link ({type: \"Person\", name: :n}, \"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) }", "parameters": {"n": "Ada Lovelace"}}
                ]}),
            )]),
            // A malformed call and an unknown tool.
            tool_calls(vec![
                json!({"id": "c3", "type": "function", "function": {"name": "execute_kip", "arguments": "{not json"}}),
                json!({"id": "c4", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}}),
            ]),
            // An invalid KIP command: the error object goes back.
            tool_calls(vec![call(
                "c5",
                json!({"command": "UPSERT { CONCEPT ?x { {type: \"NoSuchType\", name: \"x\"} } }"}),
            )]),
            // A merge of duplicates.
            tool_calls(vec![call(
                "c6",
                json!({"command": "MERGE CONCEPT ?dup INTO ?keep WHERE { ?dup {type: \"Person\", name: \"Ada\"} ?keep {type: \"Person\", name: \"Ada Lovelace\"} }"}),
            )]),
            json!({"role": "assistant", "content": "Reclassified 1 item, merged 1 duplicate."}),
        ],
        repeat: None,
    };
    let (url, seen) = fake_llm(script);
    let context = json!({"trigger": "on_demand", "timestamp": "2026-01-01T00:00:00Z"});
    let r = run_phases(
        &client(&url),
        &mut exec(&n),
        &context,
        &LoopLimits::default(),
        false,
    );
    assert_eq!(r.stop, "done", "{r:?}");
    assert_eq!(r.turns, 6);
    assert_eq!(
        r.summary.as_deref(),
        Some("Reclassified 1 item, merged 1 duplicate.")
    );
    // Commands: 1 read, 2 writes, 1 failed write, 1 merge.
    assert_eq!(r.statements.len(), 5, "{r:?}");
    assert_eq!(r.writes, 4);
    assert_eq!(r.statements.iter().filter(|s| s.applied).count(), 3);
    assert_eq!(r.tool_errors, 3, "malformed, unknown tool, KIP error");
    // The graph: Ada Lovelace in People, not Unsorted; Ada merged into her.
    let q = |cmd: &str| {
        n.execute_json(&json!({"command": cmd}), Access::ReadOnly)
            .to_json()["result"]
            .clone()
    };
    assert_eq!(
        q(
            r#"FIND(?d.name) WHERE { ({type: "Person", name: "Ada Lovelace"}, "belongs_to_domain", ?d) }"#
        ),
        json!(["People"])
    );
    assert_eq!(
        q(r#"FIND(COUNT(?p)) WHERE { ?p {type: "Person", name: "Ada"} }"#),
        json!(0)
    );
    let aliases =
        q(r#"FIND(?p.attributes.aliases) WHERE { ?p {type: "Person", name: "Ada Lovelace"} }"#);
    assert!(aliases.to_string().contains("Countess"), "{aliases}");
    // What the model was told: the instructions, the tool, and each answer.
    let reqs = seen.requests();
    assert_eq!(reqs.len(), 6);
    assert_eq!(reqs[0]["model"], "fake-model");
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "execute_kip");
    let system = reqs[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("System Sleep Cycle Instructions") && system.contains("do not run them"),
        "system prompt"
    );
    let primer = reqs[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(primer.contains("domain_map"), "the primer is injected");
    let answers = seen.tool_answers();
    assert!(
        answers.iter().any(|a| a.contains("not valid JSON")),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a.contains("unknown tool") && a.contains("rm_rf")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|a| a.contains("KIP_2")),
        "the KIP error object: {answers:?}"
    );
    let j = r.to_json();
    assert_eq!(
        j["statements"][3]["outcome"]
            .as_str()
            .map(|c| c.starts_with("KIP_")),
        Some(true),
        "{j}"
    );
}

fn runaway(step: Value, limits: LoopLimits) -> (kip_brain::LoopReport, Nexus) {
    let n = nexus();
    let (url, _) = fake_llm(Script {
        steps: Vec::new(),
        repeat: Some(step),
    });
    let r = run_phases(&client(&url), &mut exec(&n), &json!({}), &limits, false);
    (r, n)
}

#[test]
fn every_bound_stops_a_runaway_model() {
    let read = tool_calls(vec![call("r", json!({"command": "DESCRIBE DOMAINS"}))]);
    let limits = LoopLimits {
        max_turns: 5,
        ..LoopLimits::default()
    };
    let (r, _) = runaway(read.clone(), limits);
    assert_eq!(
        (r.stop.as_str(), r.turns, r.statements.len()),
        ("max_turns", 5, 5)
    );

    let limits = LoopLimits {
        max_statements: 3,
        ..LoopLimits::default()
    };
    let (r, _) = runaway(read, limits);
    assert_eq!((r.stop.as_str(), r.statements.len()), ("max_statements", 3));

    // The write cap: exactly that many statements applied, then refused.
    let write = tool_calls(vec![call(
        "w",
        json!({"command": "UPSERT { CONCEPT ?n { {type: \"Person\", name: \"Echo\"} SET ATTRIBUTES { person_class: \"Human\" } } } WITH METADATA { source: \"SleepCycle\", author: \"$system\" }"}),
    )]);
    let limits = LoopLimits {
        max_writes: 4,
        ..LoopLimits::default()
    };
    let (r, n) = runaway(write.clone(), limits);
    assert_eq!((r.stop.as_str(), r.writes), ("max_writes", 4));
    assert_eq!(r.statements.iter().filter(|s| s.applied).count(), 4);
    let v = n.execute_json(&json!({"command": "FIND(?p.metadata._version) WHERE { ?p {type: \"Person\", name: \"Echo\"} }"}), Access::ReadOnly).to_json();
    assert_eq!(v["result"], json!([1]), "4 identical UPSERTs: one version");

    let limits = LoopLimits {
        budget: Duration::ZERO,
        ..LoopLimits::default()
    };
    let (r, _) = runaway(write, limits);
    assert_eq!((r.stop.as_str(), r.turns), ("time_budget", 0));
}

#[test]
fn a_dry_run_proposes_writes_and_applies_none() {
    let n = nexus();
    let (url, _) = fake_llm(Script {
        steps: vec![
            tool_calls(vec![call(
                "c",
                json!({"commands": [
                    "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\"} }",
                    "UPSERT { CONCEPT ?n { {type: \"Person\", name: \"Proposed\"} SET ATTRIBUTES { person_class: \"Human\" } } }"
                ]}),
            )]),
            json!({"role": "assistant", "content": "proposed one person"}),
        ],
        repeat: None,
    });
    let r = run_phases(
        &client(&url),
        &mut exec(&n),
        &json!({}),
        &LoopLimits::default(),
        true,
    );
    assert_eq!(r.stop, "done");
    assert_eq!(r.writes, 1);
    assert!(r.statements.iter().all(|s| !s.applied));
    assert!(
        r.statements[1].outcome.get("error").is_none(),
        "{:?}",
        r.statements[1]
    );
    let c = n.execute_json(&json!({"command": "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Proposed\"} }"}), Access::ReadOnly).to_json();
    assert_eq!(c["result"], json!(0));
}

#[test]
fn an_unreachable_or_failing_endpoint_ends_the_loop_with_its_error() {
    let n = nexus();
    let (url, _) = fake_llm(Script {
        steps: Vec::new(),
        repeat: None,
    });
    let r = run_phases(
        &client(&url),
        &mut exec(&n),
        &json!({}),
        &LoopLimits::default(),
        false,
    );
    assert_eq!(r.stop, "llm_error");
    assert!(
        r.summary
            .as_deref()
            .is_some_and(|s| s.contains("script exhausted")),
        "{r:?}"
    );
}
