//! Fuzz target: long flat shapes (chains of `||`/`&&`, many patterns, many sibling
//! NOT/OPTIONAL/UNION blocks, mixed), built from the input's bytes, run on a thread with
//! the server's worker stack. Each must end in a result or a KIP error, never a stack
//! overflow or a panic.
#![no_main]

use kip_open::Open;
use kip_engine::{Access, Nexus};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

const PIECES: [&str; 10] = [
    "?a {type: \"Domain\"}",
    "(?a, \"belongs_to_domain\", ?b)",
    "(?b, \"belongs_to_domain\", ?a)",
    "FILTER(?a.name == \"x\" || ?a.name != \"y\" && !IS_NULL(?a.name))",
    "NOT { ?a {name: \"nothing\"} }",
    "OPTIONAL { (?a, \"belongs_to_domain\", ?c) }",
    "UNION { ?a {type: \"Domain\"} }",
    "?b {type: \"$ConceptType\"}",
    "FILTER(IN(?a.name, [\"CoreSchema\", \"Unsorted\"]))",
    "(?a, \"belongs_to_domain\"{1,3}, ?d)",
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // First two bytes: how many times the body repeats (up to 65,535 pieces).
    let reps = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let body: Vec<&str> = data[2..].iter().map(|b| PIECES[usize::from(*b) % PIECES.len()]).collect();
    if body.is_empty() {
        return;
    }
    let mut clauses = Vec::new();
    while clauses.len() < reps.max(1) {
        clauses.extend(body.iter().copied());
    }
    clauses.truncate(reps.max(1));
    let command = format!("FIND(?a) WHERE {{ {} }} LIMIT 5", clauses.join(" "));
    let result = std::thread::Builder::new()
        .stack_size(kip_engine::WORKER_STACK_BYTES)
        .spawn(move || {
            let nexus = Nexus::in_memory().expect("nexus");
            nexus.execute_json(&json!({ "command": command }), Access::ReadOnly).to_json()
        })
        .expect("thread")
        .join();
    assert!(result.is_ok(), "the command crashed its thread");
});
