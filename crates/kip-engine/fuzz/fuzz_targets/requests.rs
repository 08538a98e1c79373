//! Fuzz target: arbitrary JSON as the arguments of a tool call, the way a client's
//! request body reaches the engine: `execute_kip` (`command` or `commands`,
//! `parameters`, `dry_run`, read-only and read-write access) and each memory-server
//! tool (every name in `memory::TOOLS`). Nothing may panic, and the store's invariants
//! must hold afterwards.
#![no_main]

use kip_open::Open;
use kip_engine::memory::TOOLS;
use kip_engine::{Access, Nexus};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(body) else { return };
    let nexus = Nexus::in_memory().expect("nexus");
    let _ = nexus.memory().call(
        "create_entities",
        &serde_json::json!({"entities": [
            {"name": "Ann", "entityType": "person", "observations": ["likes tea"]},
            {"name": "Bob", "entityType": "person", "observations": []}
        ]}),
    );
    match usize::from(which) % (TOOLS.len() + 2) {
        0 => drop(nexus.execute_json(&args, Access::ReadOnly)),
        1 => drop(nexus.execute_json(&args, Access::ReadWrite)),
        n => drop(nexus.memory().call(TOOLS[n - 2], &args)),
    }
    let problems = nexus.admin().check_integrity().expect("integrity");
    assert!(problems.is_empty(), "{problems:?}");
});
