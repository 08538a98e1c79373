//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

pub mod kip2;

use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

/// A fresh in-memory nexus (bootstrapped); with `KIP_TEST_BACKEND=postgres` (the
/// PostgreSQL leg of the test matrix, run by scripts/test.sh), a fresh nexus in a schema
/// of its own in the database at `KIP_TEST_PG_URL` instead.
pub fn nexus() -> Nexus {
    kip_open::testing::nexus().expect("a test nexus")
}

/// Runs one command; returns the whole response object.
pub fn run(n: &Nexus, cmd: &str) -> Value {
    n.execute_json(&json!({ "command": cmd }), Access::ReadWrite)
        .to_json()
}

/// Runs one command with parameters; returns the whole response object.
pub fn run_with(n: &Nexus, cmd: &str, params: Value) -> Value {
    n.execute_json(
        &json!({ "command": cmd, "parameters": params }),
        Access::ReadWrite,
    )
    .to_json()
}

/// Runs one command that must succeed; returns its `result`.
pub fn ok(n: &Nexus, cmd: &str) -> Value {
    let r = run(n, cmd);
    assert!(r.get("error").is_none(), "{cmd}\n=> {r}");
    r["result"].clone()
}

/// Runs one command that must fail; returns the error code.
pub fn err(n: &Nexus, cmd: &str) -> String {
    let r = run(n, cmd);
    r["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error from {cmd}, got {r}"))
        .to_string()
}

/// Runs one command that must fail; returns the error object.
pub fn err_obj(n: &Nexus, cmd: &str) -> Value {
    let r = run(n, cmd);
    assert!(
        r.get("error").is_some(),
        "expected an error from {cmd}, got {r}"
    );
    r["error"].clone()
}

/// Registers the small medical schema used across tests.
pub fn medical_schema(n: &Nexus) {
    ok(
        n,
        r#"UPSERT {
            CONCEPT ?drug { {type: "$ConceptType", name: "Drug"} SET ATTRIBUTES { description: "A medicine" } }
            CONCEPT ?symptom { {type: "$ConceptType", name: "Symptom"} SET ATTRIBUTES { description: "A symptom" } }
            CONCEPT ?class { {type: "$ConceptType", name: "DrugClass"} SET ATTRIBUTES { description: "A class of drugs" } }
            CONCEPT ?treats { {type: "$PropositionType", name: "treats"} SET ATTRIBUTES { description: "Drug treats symptom", subject_types: ["Drug"], object_types: ["Symptom"] } }
            CONCEPT ?side { {type: "$PropositionType", name: "has_side_effect"} SET ATTRIBUTES { description: "Side effect", subject_types: ["Drug"], object_types: ["Symptom"] } }
            CONCEPT ?is_class { {type: "$PropositionType", name: "is_class_of"} SET ATTRIBUTES { description: "Drug class", subject_types: ["Drug"], object_types: ["DrugClass"] } }
            CONCEPT ?stated { {type: "$PropositionType", name: "stated"} SET ATTRIBUTES { description: "A person stated a fact", subject_types: ["Person"], object_types: ["*"] } }
            CONCEPT ?follows { {type: "$PropositionType", name: "follows"} SET ATTRIBUTES { description: "follows", subject_types: ["*"], object_types: ["*"] } }
        }"#,
    );
}

/// The medical facts used across tests (after [`medical_schema`]).
pub fn medical_facts(n: &Nexus) {
    ok(
        n,
        r#"UPSERT {
            CONCEPT ?headache { {type: "Symptom", name: "Headache"} }
            CONCEPT ?fever { {type: "Symptom", name: "Fever"} }
            CONCEPT ?upset { {type: "Symptom", name: "Stomach Upset"} }
            CONCEPT ?nsaid { {type: "DrugClass", name: "NSAID"} }
            CONCEPT ?aspirin { {type: "Drug", name: "Aspirin"}
                SET ATTRIBUTES { risk_level: 2, description: "Acetylsalicylic acid" }
                SET PROPOSITIONS { ("treats", ?headache) ("treats", ?fever) ("is_class_of", ?nsaid) ("has_side_effect", ?upset) } }
            CONCEPT ?ibuprofen { {type: "Drug", name: "Ibuprofen"}
                SET ATTRIBUTES { risk_level: 3 }
                SET PROPOSITIONS { ("treats", ?headache) ("is_class_of", ?nsaid) } }
            CONCEPT ?paracetamol { {type: "Drug", name: "Paracetamol"}
                SET ATTRIBUTES { risk_level: 1 }
                SET PROPOSITIONS { ("treats", ?fever) } }
            CONCEPT ?vitc { {type: "Drug", name: "Vitamin C"} }
        } WITH METADATA { source: "test", confidence: 0.9 }"#,
    );
}
