//! Drop-in for the Knowledge Graph Memory Server: side by side with the official server
//! (same ~50 tool calls over MCP stdio, equal normalized results), JSONL migration in
//! both directions, MEMORY_FILE_PATH, and concurrent HTTP writers.

mod common;
use common::{python, repo, required, HttpServer};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn official_server() -> Option<PathBuf> {
    let p = repo()
        .join("target/test-node/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    if p.exists() {
        return Some(p);
    }
    assert!(
        !required(),
        "the official memory server is missing: run scripts/setup-test-env.sh"
    );
    eprintln!(
        "SKIPPED: no official memory server; run scripts/setup-test-env.sh (scripts/test.sh does)"
    );
    None
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
fn same_results_as_the_official_memory_server() {
    let (Some(py), Some(official)) = (python(), official_server()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let memfile = dir.path().join("official.jsonl");
    let data = dir.path().join("kip");
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
fn two_http_clients_writing_at_once_lose_nothing() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let server = HttpServer::start(dir.path());
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
    let data = dir.path().join("nexus");
    let (code, out) = kip(
        &data,
        &["import", "--memory-jsonl", file.to_str().expect("path")],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(
        v["result"],
        json!({"entities": 10_000, "relations": 30_000, "skipped_lines": 0})
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
    let data = dir.path().join("nexus");
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
    let data = dir.path().join("nexus");
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
    let data = dir.path().join("nexus");
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
