//! One data directory, several users of it: the first [`SharedNexus`] owns the
//! directory, later ones forward to it, and the next one takes over when it closes.

use kip_engine::{Access, Budget};
use kip_server::{Backend, SharedNexus};
use serde_json::{json, Value};

fn kip(b: &Backend, command: &str) -> Value {
    b.execute_json(
        json!({ "command": command }),
        Access::ReadWrite,
        &Budget::default(),
    )
}

#[test]
fn later_users_forward_to_the_owner_and_take_over_when_it_closes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = SharedNexus::open(dir.path(), None).expect("first");
    assert!(first.is_owner());
    let second = SharedNexus::open(dir.path(), None).expect("second");
    assert!(
        !second.is_owner(),
        "the directory is in use: the second forwards"
    );
    let (a, b) = (Backend::from(first.clone()), Backend::from(second.clone()));

    // A write through the forwarder is seen by the owner, and the other way round.
    let w = kip(
        &b,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Ada"} SET ATTRIBUTES { born: 1815 } } }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    let find = r#"FIND(?p.attributes.born) WHERE { ?p {type: "Person", name: "Ada"} }"#;
    assert_eq!(kip(&a, find), kip(&b, find));
    assert_eq!(kip(&a, find)["result"], json!([1815]));

    // Errors come back whole, with code and hint.
    let bad = kip(&b, "FIND(?x WHERE");
    assert_eq!(bad["error"]["code"], "KIP_1001", "{bad}");
    assert!(bad["error"]["hint"].is_string());

    // The memory tools and the totals are forwarded too.
    let created = b
        .memory_tool("create_entities", json!({"entities": [{"name": "kip", "entityType": "project", "observations": ["shared"]}]}), false)
        .expect("create_entities");
    assert_eq!(created["entities"][0]["name"], "kip");
    assert_eq!(a.totals().expect("totals"), b.totals().expect("totals"));
    // A read-only caller cannot write through the owner.
    let refused = b
        .memory_tool("delete_entities", json!({"entityNames": ["kip"]}), true)
        .expect_err("read-only");
    assert_eq!(refused.code.as_str(), "KIP_3004");
    let readonly = b.execute_json(
        json!({"command": r#"DELETE CONCEPT ?p DETACH WHERE { ?p {type: "Person", name: "Ada"} }"#}),
        Access::ReadOnly,
        &Budget::default(),
    );
    assert_eq!(readonly["error"]["code"], "KIP_3004", "{readonly}");

    // The owner closes: the forwarder opens the directory itself on its next call.
    first.close().expect("close");
    drop(a);
    drop(first);
    assert_eq!(kip(&b, find)["result"], json!([1815]));
    assert!(second.is_owner(), "the forwarder took the directory over");
    let third = SharedNexus::open(dir.path(), None).expect("third");
    assert!(!third.is_owner());
    assert_eq!(kip(&Backend::from(third), find)["result"], json!([1815]));
}

#[test]
fn a_cancelled_forwarded_request_answers_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _owner = SharedNexus::open(dir.path(), None).expect("owner");
    let client = Backend::from(SharedNexus::open(dir.path(), None).expect("client"));
    let budget = Budget::with_timeout(std::time::Duration::from_secs(60));
    if let Some(i) = &budget.interrupt {
        i.cancel();
    }
    let r = client.execute_json(
        json!({"command": "DESCRIBE PRIMER"}),
        Access::ReadOnly,
        &budget,
    );
    assert_eq!(r["error"]["code"], "KIP_4001", "{r}");
}
