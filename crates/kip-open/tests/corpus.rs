//! The public parse conformance corpus (`conformance/parse/`), executed: every valid
//! command (v1 and RC9+) runs, in file order, on one bootstrapped memory. None may end
//! in an internal error (`KIP_4003`) or a panic. On the test matrix's PostgreSQL leg
//! (scripts/test.sh) every command also runs on an in-memory embedded store, and the
//! two answers must agree: the same error code, or both a success with the same shape
//! (the number of rows of a list, the kind of any other value).

mod common;
use common::*;
use kip_open::Open;
use serde_json::Value;
use std::path::PathBuf;

fn files() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/parse");
    let mut out = Vec::new();
    for dir in ["valid", "valid_rc9plus"] {
        let entries = std::fs::read_dir(root.join(dir)).expect("the corpus directory");
        for path in entries.map(|e| e.expect("entry").path()) {
            if path.extension().is_some_and(|x| x == "kip") {
                let src = std::fs::read_to_string(&path).expect("a corpus file");
                out.push((format!("{dir}/{}", path.display()), src));
            }
        }
    }
    out.sort();
    out
}

/// An answer's code (`ok` for a success) and the shape of its result.
fn answer(r: &Value) -> (String, String) {
    if let Some(code) = r["error"]["code"].as_str() {
        return (code.to_owned(), String::new());
    }
    let shape = match &r["result"] {
        Value::Array(rows) => format!("{} rows", rows.len()),
        Value::Object(_) => "object".to_owned(),
        Value::Null => "null".to_owned(),
        other if other.is_number() => "number".to_owned(),
        _ => "scalar".to_owned(),
    };
    ("ok".to_owned(), shape)
}

#[test]
fn every_valid_corpus_command_executes_and_both_backends_agree() {
    let files = files();
    assert!(files.len() > 100, "the corpus is there: {}", files.len());
    let n = nexus();
    let reference = kip_open::testing::on_postgres()
        .then(|| kip_engine::Nexus::in_memory().expect("in-memory nexus"));
    let mut ok = 0;
    for (name, src) in &files {
        let r = run(&n, src);
        let got = answer(&r);
        assert_ne!(got.0, "KIP_4003", "{name}: internal error {r}");
        if got.0 == "ok" {
            ok += 1;
        }
        if let Some(m) = &reference {
            let want = answer(&run(m, src));
            assert_eq!(got, want, "{name}: PostgreSQL answered {r}");
        }
    }
    // Most of the corpus names things the standard bootstrap does not hold, so many
    // commands end in a KIP error; a good part must still succeed.
    assert!(ok >= files.len() / 4, "{ok} of {} succeeded", files.len());
}
