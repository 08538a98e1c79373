//! Fuzz target: arbitrary text runs as a KIP command against an in-memory nexus (with
//! a small schema), first as a dry run, then for real. Nothing may panic, and the
//! store's invariants must hold afterwards.
#![no_main]

use kip_open::Open;
use kip_engine::{Access, Nexus};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let nexus = Nexus::in_memory().expect("nexus");
    let _ = nexus.load_capsule(
        r#"UPSERT {
            CONCEPT ?d { {type: "$ConceptType", name: "Drug"} SET ATTRIBUTES { description: "d" } }
            CONCEPT ?t { {type: "$PropositionType", name: "treats"} SET ATTRIBUTES { description: "t", subject_types: ["*"], object_types: ["*"] } }
            CONCEPT ?a { {type: "Drug", name: "A"} SET PROPOSITIONS { ("treats", {type: "Domain", name: "Unsorted"}) } }
        }"#,
    );
    for dry in [true, false] {
        let _ = nexus.execute_json(&json!({"command": text, "dry_run": dry}), Access::ReadWrite);
    }
    let problems = nexus.admin().check_integrity().expect("integrity");
    assert!(problems.is_empty(), "{problems:?}");
});
