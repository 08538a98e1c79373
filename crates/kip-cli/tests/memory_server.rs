//! Drop-in for the Knowledge Graph Memory Server: side by side with the official server
//! (same ~50 tool calls over MCP stdio, equal normalized results), JSONL migration in
//! both directions, MEMORY_FILE_PATH, and concurrent HTTP writers.

mod common;
use common::{python, repo, HttpServer};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The official memory server's entry point. A test that runs without it fails.
fn official_server() -> PathBuf {
    let p = repo()
        .join("target/test-node/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    assert!(
        p.exists(),
        "the official memory server is missing ({}): run scripts/setup-test-env.sh",
        p.display()
    );
    p
}

fn kip(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kip"));
    cmd.arg("--data")
        .arg(dir)
        .arg("--quiet")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kip");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[ignore = "needs the Python MCP client and Node: run scripts/test.sh"]
fn same_results_as_the_official_memory_server() {
    let (py, official) = (python(), official_server());
    let dir = tempfile::tempdir().expect("tempdir");
    let memfile = dir.path().join("official.jsonl");
    let data = common::location(&dir.path().join("kip"));
    let out = Command::new(&py)
        .arg(repo().join("tests/mcp/memory_diff.py"))
        .arg(env!("CARGO_BIN_EXE_kip"))
        .arg(&data)
        .arg("node")
        .arg(&official)
        .arg(&memfile)
        .output()
        .expect("run the differential script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs the Python MCP client and Node: run scripts/test.sh"]
fn two_http_clients_writing_at_once_lose_nothing() {
    let py = python();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = HttpServer::start(&common::location(dir.path()));
    let out = Command::new(&py)
        .arg(repo().join("tests/mcp/memory_concurrent.py"))
        .arg(server.mcp_url())
        .output()
        .expect("run the concurrency script");
    drop(server);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const ETYPES: [&str; 3] = ["person", "software project", "city"];
const RTYPES: [&str; 3] = ["knows", "works at", "depends on"];

fn lines_set(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .expect("json line")
                .to_string()
        })
        .collect()
}

#[test]
fn jsonl_import_and_export_round_trip_at_10k_entities_30k_relations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut input = String::new();
    for i in 0..10_000 {
        let e = json!({"type": "entity", "name": format!("entity {i}"), "entityType": ETYPES[i % 3],
            "observations": [format!("observation {i}"), "shared"], "createdAt": "2026-01-01T00:00:00.000Z", "version": 1 + (i % 3)});
        input.push_str(&e.to_string());
        input.push('\n');
    }
    for i in 0..30_000usize {
        let (a, b) = (i % 10_000, (i * 7 + 1) % 10_000);
        let r = json!({"type": "relation", "from": format!("entity {a}"), "to": format!("entity {b}"), "relationType": RTYPES[i / 10_000],
            "createdAt": "2026-01-01T00:00:00.000Z", "version": 1});
        input.push_str(&r.to_string());
        input.push('\n');
    }
    // No trailing newline, as the official server writes it.
    let input = input.trim_end().to_string();
    let file = dir.path().join("memory.jsonl");
    std::fs::write(&file, &input).expect("write");
    let data = common::location(&dir.path().join("nexus"));
    let (code, out) = kip(
        &data,
        &["import", "--memory-jsonl", file.to_str().expect("path")],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(
        v["result"],
        json!({"entities": 10_000, "relations": 30_000, "placeholder_entities": [], "already_present": 0, "skipped_lines": []})
    );
    let (code, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    assert_eq!(code, 0);
    assert_eq!(lines_set(&exported), lines_set(&input));
}

#[test]
fn jsonl_accepts_the_official_format_and_reports_bad_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("m.jsonl");
    let official = "{\"type\":\"entity\",\"name\":\"A\",\"entityType\":\"person\",\"observations\":[\"x\"]}\n{\"type\":\"entity\",\"name\":\"B\",\"entityType\":\"person\",\"observations\":[]}\n{\"type\":\"relation\",\"from\":\"A\",\"to\":\"B\",\"relationType\":\"knows\"}";
    std::fs::write(&file, format!("{official}\nnot json\n")).expect("write");
    let data = common::location(&dir.path().join("nexus"));
    let (code, out) = kip(
        &data,
        &["import", "--memory-jsonl", file.to_str().expect("p")],
        &[],
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("m")
            .starts_with("line 4:"),
        "{v}"
    );
    let (_, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    assert_eq!(exported, "", "nothing is written when a line is bad");
    let (code, out) = kip(
        &data,
        &[
            "import",
            "--memory-jsonl",
            file.to_str().expect("p"),
            "--skip-bad-lines",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    let (_, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    let got: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0]["name"], "A");
    assert_eq!(got[0]["version"], 1);
    assert!(got[0]["createdAt"].is_string());
    assert_eq!(got[2]["relationType"], "knows");
}

#[test]
fn memory_file_path_is_imported_once_by_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    std::fs::write(
        &file,
        "{\"type\":\"entity\",\"name\":\"Z\",\"entityType\":\"thing\",\"observations\":[\"z\"]}\n",
    )
    .expect("write");
    let data = common::location(&dir.path().join("nexus"));
    for _ in 0..2 {
        // `serve` on stdio ends at end of input, after the import.
        let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
            .arg("--data")
            .arg(&data)
            .arg("serve")
            .env("MEMORY_FILE_PATH", &file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve");
        drop(child.stdin.take());
        child.wait().expect("wait");
        // Edit the file after the first import: later starts ignore it.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open");
        writeln!(f, "{{\"type\":\"entity\",\"name\":\"Late\",\"entityType\":\"thing\",\"observations\":[]}}").expect("append");
    }
    let (_, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    let names: Vec<String> = exported
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(names, vec!["Z"]);
}

/// A read-only server writes nothing, ever: not even the first import of
/// MEMORY_FILE_PATH.
#[test]
fn a_read_only_server_does_not_import_the_memory_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    std::fs::write(
        &file,
        "{\"type\":\"entity\",\"name\":\"Z\",\"entityType\":\"thing\",\"observations\":[\"z\"]}\n",
    )
    .expect("write");
    let data = common::location(&dir.path().join("nexus"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["serve", "--read-only"])
        .env("MEMORY_FILE_PATH", &file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    drop(child.stdin.take());
    child.wait().expect("wait");
    let (_, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    assert_eq!(exported.trim(), "", "nothing was imported");
}

/// Strips the fields the official server does not write, so lines compare by content.
fn without_stamps(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("json line");
            if let Some(o) = v.as_object_mut() {
                o.remove("createdAt");
                o.remove("version");
            }
            v.to_string()
        })
        .collect()
}

/// A user's file as the official server writes it, relations to entities that were
/// never created included, moves over whole: every line is in the nexus (the missing
/// ends as placeholder entities, reported), and exporting gives the file back. The
/// same file through MEMORY_FILE_PATH is imported by `kip serve`.
#[test]
#[ignore = "needs the Python MCP client and Node: run scripts/test.sh"]
fn a_file_written_by_the_official_server_moves_over_whole() {
    let (py, official) = (python(), official_server());
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    let out = Command::new(&py)
        .arg(repo().join("tests/mcp/official_jsonl.py"))
        .arg("node")
        .arg(&official)
        .arg(&file)
        .output()
        .expect("run the official server");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .trim_end()
            .ends_with("ok"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = std::fs::read_to_string(&file).expect("the official file");
    assert!(original.contains("\"Ghost\""), "{original}");
    let file_s = file.to_str().expect("path");

    // Without the flag: recognised, and the right command suggested.
    let data = common::location(&dir.path().join("a"));
    let (code, text) = kip(&data, &["import", file_s], &[]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(text.trim()).expect("json");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("--memory-jsonl"),
        "{v}"
    );

    let (code, text) = kip(&data, &["import", "--memory-jsonl", file_s], &[]);
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(text.trim()).expect("json");
    assert_eq!(v["result"]["relations"], 5, "{v}");
    assert_eq!(
        v["result"]["placeholder_entities"],
        json!(["Ghost", "Phantom"]),
        "{v}"
    );
    let (_, exported) = kip(&data, &["export", "--memory-jsonl", "-"], &[]);
    assert_eq!(without_stamps(&exported), without_stamps(&original));

    // MEMORY_FILE_PATH: the server imports it whole.
    let served = common::location(&dir.path().join("b"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&served)
        .arg("serve")
        .env("MEMORY_FILE_PATH", &file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    drop(child.stdin.take());
    child.wait().expect("wait");
    let (_, exported) = kip(&served, &["export", "--memory-jsonl", "-"], &[]);
    assert_eq!(without_stamps(&exported), without_stamps(&original));
}

/// A MEMORY_FILE_PATH that cannot be imported stops the server with the reason
/// (line numbers included) instead of serving an empty memory; `--skip-bad-lines`
/// reports each line it leaves out.
#[test]
fn a_bad_memory_file_stops_the_server_and_bad_lines_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    std::fs::write(
        &file,
        "{\"type\":\"entity\",\"name\":\"A\",\"entityType\":\"thing\",\"observations\":[]}\nnot json\n{\"type\":\"entity\",\"name\":\"B\",\"entityType\":\"thing\",\"observations\":[]}\n{\"type\":\"widget\"}\n",
    )
    .expect("write");
    let data = common::location(&dir.path().join("nexus"));
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .arg("serve")
        .env("MEMORY_FILE_PATH", &file)
        .stdin(Stdio::null())
        .output()
        .expect("serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("was not imported") && err.contains("line 2"),
        "{err}"
    );
    assert!(err.contains("lines 2, 4"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["--quiet", "import", "--memory-jsonl"])
        .arg(&file)
        .arg("--skip-bad-lines")
        .output()
        .expect("import");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["result"]["entities"], 2);
    assert_eq!(v["result"]["skipped_lines"], json!([2, 4]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2 left out") && err.contains("line 4 left out"),
        "{err}"
    );
}
