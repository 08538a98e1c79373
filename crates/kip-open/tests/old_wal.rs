//! A data directory of storage format 2 whose write-ahead log holds writes the database
//! file never got: what a power loss after acknowledged writes leaves (the log is
//! synced before a write is acknowledged, the database file only at checkpoints).
//! The fixture, `crates/kip-store/tests/fixtures/format2-wal` (README there; written by
//! `examples/write_wal_fixture.rs`), pins the
//! log's record format: a later format must still replay it, so every acknowledged
//! write survives the upgrade.

mod common;

use common::ok;
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kip-store/tests/fixtures/format2-wal")
}

/// The write sent with a `request_id` among the logged ones (the fixture's writer,
/// `examples/write_wal_fixture.rs`, lists them all).
const REQUEST: &str = r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Once"} } }"#;
const REQUEST_ID: &str = "fixture-request-1";

fn copy(to: &Path) {
    for name in [kip_open::DB_FILE, kip_open::WAL_FILE] {
        std::fs::copy(fixture().join(name), to.join(name)).expect("copy");
    }
}

fn person(n: &Nexus, name: &str) -> Value {
    ok(
        n,
        &format!(
            r#"FIND(?p.attributes.rank, ?p.metadata._version) WHERE {{ ?p {{type: "Person", name: {name:?}}} }}"#
        ),
    )
}

#[test]
fn a_log_of_writes_the_database_file_never_got_is_replayed_at_open() {
    // The fixture is what it claims: its database file alone (the log moved away)
    // has none of the logged writes.
    let bare = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        fixture().join(kip_open::DB_FILE),
        bare.path().join(kip_open::DB_FILE),
    )
    .expect("copy");
    {
        let n = Nexus::open(bare.path()).expect("open the file alone");
        assert_eq!(person(&n, "Late"), json!([[], []]));
        assert_eq!(person(&n, "Early"), json!([[1], [1]]));
    }

    let dir = tempfile::tempdir().expect("tempdir");
    copy(dir.path());
    let n = Nexus::open(dir.path()).expect("open with the log");
    assert_eq!(person(&n, "Late"), json!([[3], [1]]));
    // The UPDATE applied once: 1 + 10, version 2.
    assert_eq!(person(&n, "Early"), json!([[11], [2]]));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?o.name) WHERE { ({type: "Person", name: "Early"}, "knows", ?o) }"#
        ),
        json!([]),
        "the deleted link stays deleted"
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?o.name) WHERE { ({type: "Person", name: "Late"}, "knows", ?o) }"#
        ),
        json!(["Early"])
    );
    // The request log came back with the graph: the request is answered from its
    // record, not run again.
    let again = n
        .execute_json(
            &json!({"command": REQUEST, "request_id": REQUEST_ID}),
            Access::ReadWrite,
        )
        .to_json();
    assert!(again.get("error").is_none(), "{again}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.metadata._version) WHERE { ?p {type: "Person", name: "Once"} }"#
        ),
        json!([1])
    );
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new(),
        "the integrity check is clean"
    );
}
