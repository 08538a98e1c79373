//! `kip serve --sleep-every`: the background thread runs a scheduled cycle, which
//! reclaims what is eligible and records itself in `$system`'s maintenance log.

use kip_engine::{Access, Nexus};
use kip_server::sleeper::{SleepSchedule, Sleeper};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn run(n: &Nexus, cmd: &str) -> Value {
    let r = n
        .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
        .to_json();
    assert!(r.get("error").is_none(), "{cmd}\n{r}");
    r["result"].clone()
}

#[test]
fn a_scheduled_cycle_runs_in_the_background() {
    let n = Arc::new(kip_open::testing::nexus().expect("nexus"));
    run(
        &n,
        r#"UPSERT { CONCEPT ?e { {type: "Event", name: "old"} SET ATTRIBUTES { event_class: "Conversation", start_time: "2020-01-01T00:00:00Z", content_summary: "x", consolidation_status: "completed" } } } WITH METADATA { expires_at: "2021-01-01T00:00:00Z" }"#,
    );
    let sleeper = Sleeper::start(
        kip_server::Backend::from(n.clone()),
        SleepSchedule {
            every: Duration::from_secs(3600),
            check: Duration::from_millis(100),
            threshold_gap: Duration::from_secs(3600),
        },
        None,
    )
    .expect("thread");
    // Never slept: the first check runs a scheduled cycle.
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let left = run(
            &n,
            r#"FIND(COUNT(?e)) WHERE { ?e {type: "Event", name: "old"} }"#,
        );
        if left == json!(0) {
            break;
        }
        assert!(Instant::now() < end, "the cycle did not run");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The cycle's entry lands after the deletion: wait for it too.
    let end = Instant::now() + Duration::from_secs(60);
    let log = loop {
        let log = run(
            &n,
            r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
        );
        if log[0].as_array().is_some_and(|a| a.len() == 2) {
            break log;
        }
        assert!(Instant::now() < end, "no log entry: {log}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(log[0][1]["trigger"], json!("scheduled"));
    // Not again within the hour.
    std::thread::sleep(Duration::from_millis(400));
    sleeper.stop();
    let log = run(
        &n,
        r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    assert_eq!(log[0].as_array().map(Vec::len), Some(2), "{log}");
}

#[test]
fn the_language_model_phases_run_under_the_cycle_claim() {
    use kip_brain::scripted::{kip_call, text, Script, ScriptedServer};
    let n = kip_open::testing::nexus().expect("nexus");
    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Rui\"} SET ATTRIBUTES { person_class: \"Human\" } SET PROPOSITIONS { (\"belongs_to_domain\", {type: \"Domain\", name: \"Archived\"}) } } } WITH METADATA { source: \"SleepCycle\", author: \"$system\" }"})),
            text("Done: one person filed."),
        ],
        repeat: None,
    })
    .expect("server");
    let llm = kip_server::brain::Llm {
        client: kip_brain::ChatClient::new(
            kip_brain::LlmSpec::parse(&format!("{}#scripted", server.url)).expect("spec"),
            None,
        ),
        limits: kip_brain::LoopLimits::default(),
    };
    // Another cycle holds the claim: this one starts nothing, the model is not called.
    {
        let _other = n.brain().begin_sleep().expect("claim");
        let e = kip_server::brain::sleep_cycle(&n, false, "on_demand", Some(&llm))
            .expect_err("refused");
        assert_eq!(e.code.as_str(), "KIP_4002");
        assert!(server.requests().is_empty());
    }
    // Free: the model's phases, then the deterministic ones, in one report and one log
    // entry; the wire form (forwarded cycles) carries the same model and bounds.
    let wire = kip_server::brain::Llm::from_wire(&llm.to_wire()).expect("wire");
    assert_eq!(wire.client.spec(), llm.client.spec());
    assert_eq!(wire.limits.max_writes, llm.limits.max_writes);
    let r = kip_server::brain::sleep_cycle(&n, false, "on_demand", Some(&wire)).expect("cycle");
    let l = r.llm_phase.expect("llm phase");
    assert_eq!(l["stop"], "done");
    assert_eq!(l["writes"], 1);
    let log = run(
        &n,
        r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
    );
    assert_eq!(
        log[0][0]["llm_phase"]["kml"].as_array().map(Vec::len),
        Some(1),
        "{log}"
    );
    assert_eq!(log[0][0]["llm_phase"]["summary"], "Done: one person filed.");
}
