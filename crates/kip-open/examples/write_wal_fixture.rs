//! Writes the fixture `crates/kip-store/tests/fixtures/format2-wal` (its README says
//! why): a data directory's database file as of a checkpoint, and the write-ahead log
//! of the writes made after it, as a power loss would leave them.
//!
//! ```sh
//! cargo run -p kip-open --example write_wal_fixture -- crates/kip-store/tests/fixtures/format2-wal
//! ```
//!
//! `crates/kip-open/tests/old_wal.rs` opens a copy and checks every logged write.

use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::json;
use std::path::PathBuf;

/// Before the checkpoint: a predicate and two people linked.
const BEFORE: &[&str] = &[
    r#"UPSERT { CONCEPT ?k { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows someone", subject_types: ["Person"], object_types: ["Person"] } } }"#,
    r#"UPSERT { CONCEPT ?g { {type: "Person", name: "Gone"} } CONCEPT ?e { {type: "Person", name: "Early"} SET ATTRIBUTES {rank: 1} SET PROPOSITIONS { ("knows", ?g) } } }"#,
];

/// Only in the log: an UPSERT with attributes and links, an arithmetic UPDATE, a DELETE
/// of a link, then a write with a `request_id` (the request log's own records).
const LOGGED: &[&str] = &[
    r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Late"} SET ATTRIBUTES {role: "writer", rank: 3} SET PROPOSITIONS { ("knows", {type: "Person", name: "Early"}) } } }"#,
    r#"UPDATE ?p SET ATTRIBUTES { rank: ADD(?p.attributes.rank, 10) } WHERE { ?p {type: "Person", name: "Early"} }"#,
    r#"DELETE PROPOSITIONS ?l WHERE { ?l ({type: "Person", name: "Early"}, "knows", {type: "Person", name: "Gone"}) }"#,
];
const REQUEST: &str = r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Once"} } }"#;
const REQUEST_ID: &str = "fixture-request-1";

fn run(n: &Nexus, args: serde_json::Value) -> Result<(), String> {
    let r = n.execute_json(&args, Access::ReadWrite).to_json();
    match r.get("error") {
        None => Ok(()),
        Some(e) => Err(format!("{args}: {e}")),
    }
}

fn main() -> Result<(), String> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: write_wal_fixture <output directory>")?,
    );
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let n = Nexus::open(dir.path()).map_err(|e| e.message)?;
    let log = n
        .admin()
        .backend()
        .local_log()
        .ok_or("no write-ahead log")?;
    // No checkpoint but the one below, however slow the writes.
    log.set_checkpoint_age(std::time::Duration::from_secs(24 * 3600));
    for cmd in BEFORE {
        run(&n, json!({ "command": cmd }))?;
    }
    n.admin().checkpoint().map_err(|e| e.message)?;
    std::fs::copy(
        dir.path().join(kip_open::DB_FILE),
        out.join(kip_open::DB_FILE),
    )
    .map_err(|e| e.to_string())?;
    for cmd in LOGGED {
        run(&n, json!({ "command": cmd }))?;
    }
    run(&n, json!({"command": REQUEST, "request_id": REQUEST_ID}))?;
    // The log as written, without its preallocated tail of zeros.
    let used = usize::try_from(log.log_len()).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(dir.path().join(kip_open::WAL_FILE)).map_err(|e| e.to_string())?;
    let logged = bytes
        .get(..used)
        .ok_or("the log is shorter than its length")?;
    std::fs::write(out.join(kip_open::WAL_FILE), logged).map_err(|e| e.to_string())?;
    println!(
        "wrote {} and {} into {}",
        kip_open::DB_FILE,
        kip_open::WAL_FILE,
        out.display()
    );
    Ok(())
}
