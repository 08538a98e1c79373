//! Formation (`remember`) and Recall (`recall_memory`) against a scripted
//! OpenAI-compatible server and a real nexus.

use kip_brain::scripted::{kip_call, text, Script, ScriptedServer};
use kip_brain::{recall, remember, ChatClient, LlmSpec, LoopLimits};
use kip_engine::Access;
use serde_json::{json, Value};

fn client(server: &ScriptedServer) -> ChatClient {
    ChatClient::new(
        LlmSpec::parse(&format!("{}#scripted", server.url)).expect("spec"),
        None,
    )
}

#[test]
fn remember_writes_what_the_model_encodes() {
    let n = kip_open::testing::nexus().expect("nexus");
    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"alice_id\"} SET ATTRIBUTES { person_class: \"Human\", name_hint: \"Alice\" } } CONCEPT ?pref { {type: \"Preference\", name: \"Preference:2026-03-09:dark_mode\"} SET ATTRIBUTES { description: \"Alice prefers dark mode\" } SET PROPOSITIONS { (\"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) } } CONCEPT ?p2 { {type: \"Person\", name: \"alice_id\"} SET PROPOSITIONS { (\"prefers\", ?pref) } } } WITH METADATA { source: \"conversation\", author: \"$self\", confidence: 1.0 }"})),
            text("Status: success\n\nSummary:\nStored Alice's dark mode preference.\n\nWarnings:\n- None"),
        ],
        repeat: None,
    })
    .expect("server");
    let mut exec = |a: &Value| n.execute_json(a, Access::ReadWrite).to_json();
    let input = json!({"messages": [{"role": "user", "content": "I always prefer dark mode.", "name": "alice_id"}, {"role": "assistant", "content": "Got it!"}], "context": {"counterparty": "alice_id"}});
    let r = remember(
        &client(&server),
        &mut exec,
        &input,
        &LoopLimits::default(),
        "2026-03-09T10:30:00Z",
    )
    .expect("remember");
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["summary"], "Stored Alice's dark mode preference.");
    assert_eq!(r["writes"], 1);
    assert_eq!(r["warnings"], json!([]));
    let prefs = n
        .execute_json(&json!({"command": "FIND(?f.attributes.description) WHERE { ({type: \"Person\", name: \"alice_id\"}, \"prefers\", ?f) }"}), Access::ReadOnly)
        .to_json();
    assert_eq!(prefs["result"], json!(["Alice prefers dark mode"]));
    // The model saw the Formation instructions and the input, with a timestamp.
    let first = &server.requests()[0];
    assert!(first["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("Memory Formation")));
    assert!(first["messages"][1]["content"]
        .as_str()
        .is_some_and(|s| s.contains("2026-03-09T10:30:00Z") && s.contains("dark mode")));
    // Not a conversation: refused before any model call.
    assert!(remember(
        &client(&server),
        &mut exec,
        &json!({"messages": []}),
        &LoopLimits::default(),
        "now"
    )
    .is_err());
}

#[test]
fn recall_answers_with_its_sources_and_never_writes() {
    let n = kip_open::testing::nexus().expect("nexus");
    let up = n
        .execute_json(&json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Alice\"} SET ATTRIBUTES { person_class: \"Human\", description: \"likes dark mode\" } } }"}), Access::ReadWrite)
        .to_json();
    let id = up["result"]["upsert_concept_nodes"][0]
        .as_str()
        .expect("id")
        .to_string();
    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &json!({"command": "UPSERT { CONCEPT ?x { {type: \"Person\", name: \"Mallory\"} } }"})),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "b", "type": "function", "function": {"name": "execute_kip_readonly", "arguments": json!({"command": "SEARCH CONCEPT \"dark mode\""}).to_string()}}]}),
            text(&format!("Status: success\n\nAnswer:\nAlice prefers dark mode.\n\nGaps:\n- None\n\nSources: {id}, C:999999")),
        ],
        repeat: None,
    })
    .expect("server");
    // Recall runs the read-only tool: execute_kip_readonly semantics.
    let mut exec = |a: &Value| n.execute_json(a, Access::ReadOnly).to_json();
    let r = recall(
        &client(&server),
        &mut exec,
        &json!({"query": "What does Alice like?"}),
        &LoopLimits::default(),
    )
    .expect("recall");
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["answer"], "Alice prefers dark mode.");
    assert_eq!(r["gaps"], json!([]));
    assert_eq!(
        r["sources"],
        json!([{"id": id, "type": "Person", "name": "Alice"}]),
        "the unknown id is dropped"
    );
    // The first call used a tool it does not have (execute_kip): refused, nothing written.
    let answers = server.tool_answers();
    assert!(answers[0].contains("unknown tool"), "{answers:?}");
    let m = n
        .execute_json(&json!({"command": "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Mallory\"} }"}), Access::ReadOnly)
        .to_json();
    assert_eq!(m["result"], json!(0));
    assert!(recall(
        &client(&server),
        &mut exec,
        &json!({"query": " "}),
        &LoopLimits::default()
    )
    .is_err());
}
