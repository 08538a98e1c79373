//! The `kip` binary end to end: output JSON and exit codes.

mod common;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `kip` on a fresh data directory and parses its stdout as JSON. Each call gets its
/// own directory: tests run in parallel and a data directory is opened by one process.
fn kip(args: &[&str], stdin: &[u8]) -> (i32, Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, text) = kip_in(dir.path(), args, stdin);
    (
        code,
        serde_json::from_str(text.trim()).unwrap_or(Value::Null),
    )
}

#[test]
fn parse_reports_ok_or_the_error_object() {
    let (code, v) = kip(
        &["parse", "-"],
        b"FIND(?x.name) WHERE { ?x {type: \"Drug\"} }",
    );
    assert_eq!((code, v), (0, json!({"result": "ok"})));
    let (code, v) = kip(
        &["parse", "-"],
        b"DELETE CONCEPT ?d\nWHERE { ?d {type: \"Drug\", name: \"X\"} }",
    );
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "KIP_1001");
    assert_eq!(
        (v["error"]["line"].clone(), v["error"]["column"].clone()),
        (json!(2), json!(1))
    );
    assert!(v["error"]["hint"]
        .as_str()
        .expect("hint")
        .contains("DETACH"));
}

#[test]
fn parse_accepts_capsules_with_several_commands() {
    let genesis = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/capsules/Genesis.kip"
    ))
    .expect("genesis");
    let (code, v) = kip(&["parse", "-"], &genesis);
    assert_eq!((code, v), (0, json!({"result": "ok"})));
}

#[test]
fn parse_rejects_invalid_utf8() {
    let (code, v) = kip(&["parse", "-"], b"DESCRIBE \xff");
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "KIP_1001");
}

#[test]
fn exec_json_dry_run_validates_single_and_batch_requests() {
    let req = json!({"command": "FIND(?d.name) WHERE { ?d {type: \"Person\", name: :n} }", "parameters": {"n": "$self"}, "dry_run": true});
    let (code, v) = kip(&["exec", "--json", "-"], req.to_string().as_bytes());
    assert_eq!(code, 0);
    assert_eq!(
        v,
        json!({"result": {"dry_run": true, "valid": true, "kind": "KQL"}})
    );

    let req = json!({"commands": ["DESCRIBE PRIMER", "FIND(", {"command": "SEARCH CONCEPT :q", "parameters": {}}], "dry_run": true});
    let (code, v) = kip(&["exec", "--json", "-"], req.to_string().as_bytes());
    assert_eq!(code, 1);
    let results = v["result"].as_array().expect("batch");
    assert_eq!(results.len(), 3);
    assert_eq!(results[1]["error"]["code"], "KIP_1001");
    assert_eq!(results[2]["error"]["code"], "KIP_3001");
}

#[test]
fn exec_envelope_errors() {
    let (code, v) = kip(
        &["exec", "--json", "-"],
        br#"{"command": "DESCRIBE PRIMER", "commands": []}"#,
    );
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "KIP_1001");
    let (code, v) = kip(&["exec", "--json", "-"], b"{not json");
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "KIP_1001");
}

/// DECISIONS.md item 38: `kip exec --json` answers a `"kip": "2.0"` request with a 2.0
/// response envelope, exit 0 only when its status is `succeeded`.
#[test]
fn exec_json_answers_a_kip2_request_with_a_kip2_envelope() {
    let req = json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PROTOCOL"}]});
    let (code, v) = kip(&["exec", "--json", "-"], req.to_string().as_bytes());
    assert_eq!(
        (code, &v["kip"], &v["status"]),
        (0, &json!("2.0"), &json!("succeeded"))
    );
    assert_eq!(v["results"][0]["result"]["kip"], "2.0");
    let req = json!({"kip": "2.0", "operations": [{"command": "FIND(?x) WHERE {"}]});
    let (code, v) = kip(&["exec", "--json", "-"], req.to_string().as_bytes());
    assert_eq!((code, &v["status"]), (1, &json!("failed")));
    assert_eq!(v["results"][0]["error"]["code"], "InvalidSyntax");
}

/// `kip exec --kip 2.0`: a command text or a file of 2.0 statements (one operation each,
/// in sequence) answered with a 2.0 envelope.
#[test]
fn exec_kip2_runs_command_texts_as_kip2_operations() {
    let (code, v) = kip(&["exec", "--kip", "2.0", "DESCRIBE PROTOCOL"], b"");
    assert_eq!((code, &v["status"]), (0, &json!("succeeded")));
    let (code, v) = kip(
        &["exec", "--kip", "2.0", "--file", "-"],
        b"DESCRIBE PROTOCOL\nDESCRIBE PRIMER MODE :m\n",
    );
    assert_eq!(code, 1);
    assert_eq!(v["execution"]["mode"], "sequence");
    assert_eq!(v["results"][1]["error"]["details"]["parameter"], "m");
    let (code, v) = kip(
        &[
            "exec",
            "--kip",
            "2.0",
            "--param",
            "m=full",
            "DESCRIBE PRIMER MODE :m",
        ],
        b"",
    );
    assert_eq!(
        (code, &v["results"][0]["result"]["mode"]),
        (0, &json!("full"))
    );
    let (code, _) = kip(&["exec", "--kip", "3", "DESCRIBE PROTOCOL"], b"");
    assert_eq!(code, 2);
}

#[test]
fn usage_errors_exit_2() {
    let (code, _) = kip(&["exec"], b"");
    assert_eq!(code, 2);
    let (code, _) = kip(&["no-such-subcommand"], b"");
    assert_eq!(code, 2);
}

fn kip_in(dir: &std::path::Path, args: &[&str], stdin: &[u8]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir))
        .arg("--quiet")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kip");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf8"),
    )
}

#[test]
fn exec_renders_find_columns_as_a_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = kip_in(
        dir.path(),
        &[
            "exec",
            "--param",
            "n=$self",
            r#"FIND(?p.name, ?p.attributes.person_class) WHERE { ?p {type: "Person", name: :n} }"#,
        ],
        b"",
    );
    assert_eq!(code, 0);
    let expected = "\
┌─────────┬────────────────────────────┐
│ ?p.name ┆ ?p.attributes.person_class │
╞═════════╪════════════════════════════╡
│ $self   ┆ AI                         │
└─────────┴────────────────────────────┘
1 row(s)
";
    assert_eq!(out, expected);
    let (code, out) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(COUNT(?p)) WHERE { ?p {type: "Person"} }"#,
        ],
        b"",
    );
    assert_eq!((code, out.trim()), (0, r#"{"result":2}"#));
    let (code, _) = kip_in(
        dir.path(),
        &["exec", r#"FIND(?p) WHERE { ?p {type: "person"} }"#],
        b"",
    );
    assert_eq!(code, 1);
}

const RICH: &str = r#"
UPSERT {
  CONCEPT ?t { {type: "$ConceptType", name: "Drug"} SET ATTRIBUTES { description: "A drug", aliases: ["medicine"] } }
  CONCEPT ?p { {type: "$PropositionType", name: "treats"} SET ATTRIBUTES { description: "treats", subject_types: ["Drug"], object_types: ["*"] } }
  CONCEPT ?s { {type: "$PropositionType", name: "stated"} SET ATTRIBUTES { description: "stated", subject_types: ["*"], object_types: ["*"] } }
  CONCEPT ?a { {type: "Drug", name: "Aspirin \"A\" 阿司匹林"} SET ATTRIBUTES { dose: 1.5e2, tags: ["x", null, {k: [1, 2]}], empty: {} } }
  CONCEPT ?h { {type: "Person", name: "Héloïse"} }
  PROPOSITION ?f { (?a, "treats", ?h) SET ATTRIBUTES { efficacy: "high" } } WITH METADATA { confidence: 0.5 }
  PROPOSITION ?st { (?h, "stated", ?f) }
  PROPOSITION ?meta { ({type: "Person", name: "$self"}, "stated", ?st) }
} WITH METADATA { source: "golden" }
"#;

/// A data directory holding the `RICH` capsule.
fn rich_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _) = kip_in(dir.path(), &["capsule", "load", "-"], RICH.as_bytes());
    assert_eq!(code, 0);
    dir
}

#[test]
fn export_import_export_is_identical() {
    let a = rich_store();
    let (code, first) = kip_in(a.path(), &["export"], b"");
    assert_eq!(code, 0);
    assert!(first.contains("阿司匹林") && first.contains("\"stated\""));
    let b = tempfile::tempdir().expect("tempdir");
    let (code, summary) = kip_in(b.path(), &["import", "-"], first.as_bytes());
    assert_eq!(code, 0);
    let summary: serde_json::Value = serde_json::from_str(summary.trim()).expect("json");
    // Counts, not ids: one per block of the export.
    let concepts = first.matches("\n  CONCEPT {").count() as u64;
    let links = first.matches("\n  PROPOSITION ").count() as u64;
    assert!(links >= 3);
    assert_eq!(
        summary["result"],
        json!({"statements": 1, "blocks": concepts + links, "upsert_concept_nodes": concepts, "upsert_proposition_links": links}),
    );
    let (_, second) = kip_in(b.path(), &["export"], b"");
    assert_eq!(first, second);
    let (code, out) = kip_in(b.path(), &["check"], b"");
    assert_eq!(
        (code, out.trim()),
        (0, r#"{"result":{"ok":true,"problems":[]}}"#)
    );
}

/// `kip export --query` runs an EXPORT and follows its pages: the output is a script of
/// one UPSERT per page that `kip import` loads into a fresh directory.
#[test]
fn export_query_writes_every_page_and_re_imports() {
    let a = tempfile::tempdir().expect("tempdir");
    let capsule = r#"UPSERT {
        CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } }
        CONCEPT ?a { {type: "Note", name: "n1"} SET ATTRIBUTES { text: "one" } }
        CONCEPT ?b { {type: "Note", name: "n2"} SET ATTRIBUTES { text: "two" } }
        CONCEPT ?c { {type: "Note", name: "n3"} SET ATTRIBUTES { text: "three" } }
    }"#;
    let (code, _) = kip_in(a.path(), &["capsule", "load", "-"], capsule.as_bytes());
    assert_eq!(code, 0);
    let (code, out) = kip_in(
        a.path(),
        &[
            "export",
            "--query",
            r#"EXPORT ?n WHERE { ?n {type: "Note"} } LIMIT 2"#,
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("UPSERT {").count(), 2, "two pages:\n{out}");
    assert!(!out.contains("_version"), "{out}");
    let b = tempfile::tempdir().expect("tempdir");
    let (code, _) = kip_in(
        b.path(),
        &["capsule", "load", "-"],
        br#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#,
    );
    assert_eq!(code, 0);
    let (code, summary) = kip_in(b.path(), &["import", "-"], out.as_bytes());
    assert_eq!(code, 0, "{summary}");
    let (code, found) = kip_in(
        b.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(?n.attributes.text) WHERE { ?n {type: "Note"} } ORDER BY ?n.name"#,
        ],
        b"",
    );
    assert_eq!(code, 0);
    assert!(found.contains(r#"["one","two","three"]"#), "{found}");
    // Anything but an EXPORT is refused.
    let (code, _) = kip_in(a.path(), &["export", "--query", "DESCRIBE PRIMER"], b"");
    assert_ne!(code, 0);
}

#[test]
fn read_and_maintenance_commands_refuse_a_directory_without_a_database_and_create_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("typo");
    let out = dir.path().join("out.kip");
    let out = out.to_string_lossy().to_string();
    for args in [
        vec!["check"],
        vec!["export"],
        vec!["export", "-o", out.as_str()],
        vec!["export", "--memory-jsonl", "-"],
        vec!["explain", "FIND(?p) WHERE { ?p {type: \"Person\"} }"],
        vec!["reindex"],
        vec!["health"],
        vec!["sleep"],
    ] {
        let (code, stdout) = kip_in(&missing, &args, b"");
        assert_eq!(code, 2, "kip {args:?} on a missing directory");
        assert_eq!(stdout, "", "kip {args:?} prints nothing on stdout");
        assert!(!missing.exists(), "kip {args:?} must not create a store");
    }
    assert!(!std::path::Path::new(&out).exists());
}

#[test]
fn export_to_a_file_writes_the_same_capsule_and_fails_cleanly() {
    let a = rich_store();
    let (_, to_stdout) = kip_in(a.path(), &["export"], b"");
    let out = tempfile::tempdir().expect("tempdir");
    let file = out.path().join("backup.kip");
    let file_arg = file.to_string_lossy().to_string();
    let (code, _) = kip_in(a.path(), &["export", "-o", &file_arg], b"");
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&file).expect("written"), to_stdout);
    // Only the capsule is left in the directory (the temporary file was renamed).
    assert_eq!(std::fs::read_dir(out.path()).expect("dir").count(), 1);
    let missing = out.path().join("no-such-dir").join("backup.kip");
    let missing_arg = missing.to_string_lossy().to_string();
    let (code, _) = kip_in(a.path(), &["export", "-o", &missing_arg], b"");
    assert_ne!(code, 0);
    assert!(!missing.exists());
}

#[test]
fn exec_file_with_several_commands_runs_a_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("two.kip");
    std::fs::write(&file, "DESCRIBE DOMAINS\n// second\nFIND(?d.name) WHERE { ?d {type: \"Domain\", name: \"Archived\"} }\n").expect("write");
    let (code, out) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            "--file",
            file.to_str().expect("path"),
        ],
        b"",
    );
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(v["result"][1]["result"], json!(["Archived"]));
}

/// `kip exec` runs commands on the engine's worker stack: the flat shapes that used
/// to overflow the stack (3,000 `||`, thousands of patterns) end in KIP_4002.
#[test]
fn exec_refuses_flat_shapes_instead_of_crashing() {
    let terms: Vec<String> = (0..3000).map(|i| format!("?a.name == \"x{i}\"")).collect();
    let chain = format!(
        "FIND(?a) WHERE {{ ?a {{type: \"Domain\"}} FILTER({}) }}",
        terms.join(" || ")
    );
    let patterns: Vec<String> = (0..3000)
        .map(|i| format!("(?a{i}, \"belongs_to_domain\", ?a{})", i + 1))
        .collect();
    let chained = format!("FIND(?a0) WHERE {{ {} }}", patterns.join(" "));
    for cmd in [chain, chained] {
        let (code, v) = kip(&["exec", "--format", "json", "--file", "-"], cmd.as_bytes());
        assert_eq!(code, 1, "{v}");
        assert_eq!(v["error"]["code"], "KIP_4002", "{v}");
    }
}

/// `kip exec ... | head`: the reader going away ends kip quietly (status 0), without a
/// panic message.
#[test]
fn a_closed_pipe_ends_exec_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut capsule = String::from("UPSERT {");
    for i in 0..3000 {
        capsule.push_str(&format!(
            " CONCEPT ?p{i} {{ {{type: \"Person\", name: \"person number {i}\"}} }}"
        ));
    }
    capsule.push('}');
    let (code, _) = kip_in(dir.path(), &["capsule", "load", "-"], capsule.as_bytes());
    assert_eq!(code, 0);
    for format in ["table", "json"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
            .arg("--data")
            .arg(common::location(dir.path()))
            .args([
                "exec",
                "--format",
                format,
                "FIND(?p, ?p.name) WHERE { ?p {type: \"Person\"} } LIMIT 5000",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut first = [0u8; 16];
        let mut stdout = child.stdout.take().expect("stdout");
        std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(out.status.code(), Some(0), "{format}: {err}");
    }
}

/// `kip exec --jsonl ... | head -n 1`: the reader going away ends the stream quietly
/// (status 0), after closing the directory as at the end: no `kip.sock` is left in it.
#[test]
fn a_closed_pipe_ends_a_jsonl_stream_quietly_and_closes_the_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("memory");
    let requests: String = (0..5000)
        .map(|i| format!("{{\"command\": \"DESCRIBE DOMAINS\", \"parameters\": {{\"n\": {i}}}}}\n"))
        .collect();
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, requests).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["--quiet", "exec", "--jsonl"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = [0u8; 16];
    let mut stdout = child.stdout.take().expect("stdout");
    std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    assert!(!data.join("kip.sock").exists(), "kip.sock was left behind");
}

/// REPL dot-commands belong to the shell: `.help` prints help, an unknown one says so;
/// neither is sent as KIP.
#[test]
fn repl_dot_commands_are_not_kip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir.path()))
        .arg("repl")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b".help\n.json\n.nope\nDESCRIBE DOMAINS;\n.quit\n")?;
            c.wait_with_output()
        })
        .expect("repl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".primer") && stderr.contains("unknown command .nope"),
        "{stderr}"
    );
    assert!(!stdout.contains("KIP_1001"), "{stdout}");
    // .json switched the output: the DESCRIBE answer is one JSON line.
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON answer");
    let v: Value = serde_json::from_str(line).expect("json");
    assert!(v["result"].is_array(), "{v}");
}

/// `kip repl --kip 2.0`: typed statements are KIP 2.0, answered with 2.0 envelopes.
#[test]
fn repl_kip2_answers_with_kip2_envelopes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir.path()))
        .args(["repl", "--kip", "2.0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"DESCRIBE PROTOCOL;\n.quit\n")?;
            c.wait_with_output()
        })
        .expect("repl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON answer");
    let v: Value = serde_json::from_str(line).expect("json");
    assert_eq!(
        (&v["kip"], &v["status"]),
        (&json!("2.0"), &json!("succeeded")),
        "{v}"
    );
}

/// Whole nodes in a table are readable (name, type, id, description), not JSON blobs,
/// and tables fit the width in $COLUMNS.
#[test]
fn tables_render_nodes_readably_and_fit_the_width() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir.path()))
        .args(["exec", "FIND(?d, ?l) WHERE { ?d {type: \"$ConceptType\", name: \"Domain\"} ?l (?d, \"belongs_to_domain\", ?x) }"])
        .env("COLUMNS", "60")
        .output()
        .expect("exec");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Domain ($ConceptType, C:3)"), "{text}");
    assert!(text.contains("-belongs_to_domain->"), "{text}");
    assert!(!text.contains("\"attributes\""), "{text}");
    for line in text.lines().filter(|l| l.starts_with('│')) {
        assert!(line.chars().count() <= 60, "{line}");
    }
}

/// The default log level keeps the libraries quiet: a client connecting does not print
/// its whole peer info (rmcp logs it at info).
#[test]
fn serve_logs_quietly_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir.path()))
        .args([
            "serve",
            "--no-prewarm",
            "--http",
            &format!("127.0.0.1:{port}"),
        ])
        .env_remove("KIP_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut conn = loop {
        if let Ok(c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quiet-test-client", "version": "1"}}}).to_string();
    let req = format!("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    conn.write_all(req.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut conn, &mut answer);
    assert!(answer.contains("kip-nexus"), "{answer}");
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("serving MCP"),
        "our own start message is kept: {err}"
    );
    assert!(!err.contains("quiet-test-client"), "{err}");
}

#[test]
fn health_and_sleep_report_and_reclaim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _) = kip_in(
        dir.path(),
        &[
            "exec",
            r#"UPSERT { CONCEPT ?e { {type: "Event", name: "old"} SET ATTRIBUTES { event_class: "Conversation", start_time: "2020-01-01T00:00:00Z", content_summary: "x", consolidation_status: "completed" } } } WITH METADATA { expires_at: "2021-01-01T00:00:00Z" }"#,
        ],
        b"",
    );
    assert_eq!(code, 0);
    let (code, table) = kip_in(dir.path(), &["health"], b"");
    assert_eq!(code, 0);
    assert!(
        table.contains("expired concepts") && table.contains("1 (1 reclaimable)"),
        "{table}"
    );
    let (code, dry) = kip_in(dir.path(), &["sleep", "--dry-run"], b"");
    assert_eq!(code, 0);
    assert!(
        dry.contains("would be deleted") && dry.contains("DELETE CONCEPT ?n DETACH"),
        "{dry}"
    );
    let count = |d: &std::path::Path| {
        let (_, out) = kip_in(
            d,
            &[
                "exec",
                "--format",
                "json",
                r#"FIND(COUNT(?e)) WHERE { ?e {type: "Event"} }"#,
            ],
            b"",
        );
        out.trim().to_string()
    };
    assert_eq!(count(dir.path()), r#"{"result":1}"#);
    let (code, json) = kip_in(
        dir.path(),
        &["sleep", "--json", "--trigger", "scheduled"],
        b"",
    );
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&json).expect("report json");
    assert_eq!(report["deleted_concepts"][0]["name"], "old", "{report}");
    assert_eq!(report["trigger"], "scheduled");
    assert_eq!(count(dir.path()), r#"{"result":0}"#);
    let (_, json) = kip_in(dir.path(), &["health", "--json"], b"");
    let h: Value = serde_json::from_str(&json).expect("health json");
    assert_eq!(h["expired"]["concepts"], 0, "{h}");
}

#[test]
fn sleep_with_a_language_model_applies_the_scripted_writes_and_stops_at_the_write_cap() {
    use kip_brain::scripted::{kip_call, Script, ScriptedServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _) = kip_in(
        dir.path(),
        &[
            "exec",
            r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Grace"} SET ATTRIBUTES { person_class: "Human" } SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Unsorted"}) } } }"#,
        ],
        b"",
    );
    assert_eq!(code, 0);
    let move_grace = json!({"commands": [
        "UPSERT { CONCEPT ?d { {type: \"Domain\", name: \"Computing\"} SET ATTRIBUTES { description: \"computing pioneers\" } } CONCEPT ?g { {type: \"Person\", name: \"Grace\"} SET PROPOSITIONS { (\"belongs_to_domain\", ?d) } } } WITH METADATA { source: \"SleepReclassification\", author: \"$system\" }",
        "DELETE PROPOSITIONS ?l WHERE { ?l ({type: \"Person\", name: \"Grace\"}, \"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) }"
    ]});
    let runaway = json!({"command": "UPSERT { CONCEPT ?x { {type: \"Person\", name: \"Loop\"} SET ATTRIBUTES { person_class: \"Human\" } } }"});
    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &move_grace),
            kip_call(
                "b",
                &json!({"command": "UPSERT { CONCEPT ?x { {type: \"Nope\", name: \"x\"} } }"}),
            ),
        ],
        repeat: Some(kip_call("c", &runaway)),
    })
    .expect("server");
    let llm = format!("{}#scripted", server.url);
    let (code, out) = kip_in(
        dir.path(),
        &["sleep", "--llm", &llm, "--max-writes", "5", "--json"],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    let r: Value = serde_json::from_str(&out).expect("report");
    let l = &r["llm_phase"];
    assert_eq!(l["stop"], "max_writes", "{l}");
    assert_eq!(l["writes"], 5, "2 + 1 failed + 2 runaway");
    assert_eq!(l["model"], "scripted");
    let (_, domains) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(?d.name) WHERE { ({type: "Person", name: "Grace"}, "belongs_to_domain", ?d) }"#,
        ],
        b"",
    );
    assert_eq!(domains.trim(), r#"{"result":["Computing"]}"#);
    // The log entry lists the model's KML statements.
    let (_, log) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(?s.attributes.maintenance_log) WHERE { ?s {type: "Person", name: "$system"} }"#,
        ],
        b"",
    );
    let log: Value = serde_json::from_str(log.trim()).expect("log");
    let entry = log["result"][0]
        .as_array()
        .and_then(|a| a.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        entry["llm_phase"]["kml"].as_array().map(Vec::len),
        Some(5),
        "{entry}"
    );
    assert_eq!(entry["llm_phase"]["stop"], "max_writes");
    // The model was told about its invalid command.
    assert!(
        server.tool_answers().iter().any(|a| a.contains("KIP_2")),
        "{:?}",
        server.tool_answers()
    );
}

#[test]
fn remember_and_recall_from_the_command_line() {
    use kip_brain::scripted::{kip_call, text, Script, ScriptedServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _) = kip_in(dir.path(), &["remember", "--text", "hi"], b"");
    assert_eq!(code, 2, "without --llm: a usage error");
    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Noor\"} SET ATTRIBUTES { person_class: \"Human\", description: \"allergic to peanuts\" } } } WITH METADATA { source: \"conversation\", author: \"$self\" }"})),
            text("Status: success\n\nSummary:\nStored Noor's allergy.\n\nWarnings:\n- None"),
        ],
        repeat: None,
    })
    .expect("server");
    let llm = format!("{}#scripted", server.url);
    let (code, out) = kip_in(
        dir.path(),
        &[
            "--llm",
            &llm,
            "remember",
            "--text",
            "I'm Noor, allergic to peanuts",
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Status: success") && out.contains("Stored Noor's allergy."),
        "{out}"
    );
    let (_, id) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(?p) WHERE { ?p {type: "Person", name: "Noor"} }"#,
        ],
        b"",
    );
    let id: Value = serde_json::from_str(id.trim()).expect("json");
    let id = id["result"][0]["id"]
        .as_str()
        .expect("Noor's id")
        .to_string();
    let recall_llm = ScriptedServer::start(Script {
        steps: vec![
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "b", "type": "function", "function": {"name": "execute_kip_readonly", "arguments": json!({"command": "SEARCH CONCEPT \"peanuts\""}).to_string()}}]}),
            text(&format!("Status: success\n\nAnswer:\nNoor is allergic to peanuts.\n\nGaps:\n- None\n\nSources: {id}")),
        ],
        repeat: None,
    })
    .expect("server");
    let recall_url = format!("{}#scripted", recall_llm.url);
    let (code, out) = kip_in(
        dir.path(),
        &[
            "--llm",
            &recall_url,
            "recall",
            "What is Noor allergic to?",
            "--json",
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    let r: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(r["answer"], "Noor is allergic to peanuts.");
    let first = &server.requests()[0];
    assert!(first["messages"][1]["content"]
        .as_str()
        .is_some_and(|c| c.contains("allergic to peanuts")));
    assert_eq!(
        r["sources"],
        json!([{"id": id, "type": "Person", "name": "Noor"}])
    );
}

/// A stored name and a command text that carry terminal escapes (erase the line, move
/// up, retitle the window, bell) are printed escaped by the tables and by `kip logs`,
/// and left as they are in JSON output.
#[test]
fn terminal_escapes_are_printed_escaped_in_tables_and_logs_but_not_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let evil = "\u{1b}[2K\u{1b}[1A\u{1b}]0;title\u{7}forged";
    let (code, _) = kip_in(
        dir.path(),
        &[
            "exec",
            "--param",
            &format!("n={evil}"),
            r#"UPSERT { CONCEPT ?p { {type: "Person", name: :n} } }"#,
        ],
        b"",
    );
    assert_eq!(code, 0);
    // A command text with the escapes in it (an unknown name: no rows).
    let find_evil = format!(r#"FIND(?p.name) WHERE {{ ?p {{type: "Person", name: "{evil}"}} }}"#);
    kip_in(dir.path(), &["exec", &find_evil], b"");
    let raw = |out: &str| out.contains('\u{1b}') || out.contains('\u{7}');

    let (code, table) = kip_in(
        dir.path(),
        &[
            "exec",
            r#"FIND(?p.name, ?p) WHERE { ?p {type: "Person"} FILTER(CONTAINS(?p.name, "forged")) }"#,
        ],
        b"",
    );
    assert_eq!(code, 0, "{table}");
    assert!(!raw(&table), "a raw escape reached the terminal: {table:?}");
    assert!(
        table.contains(r"\u{1b}[2K\u{1b}[1A\u{1b}]0;title\u{7}forged"),
        "{table}"
    );

    let (code, logs) = kip_in(dir.path(), &["logs"], b"");
    assert_eq!(code, 0, "{logs}");
    assert!(!raw(&logs), "a raw escape reached the terminal: {logs:?}");
    assert!(logs.contains(r"\u{1b}]0;title"), "{logs}");

    // JSON output is unchanged: the exact name comes back.
    let (_, json_out) = kip_in(
        dir.path(),
        &[
            "exec",
            "--format",
            "json",
            r#"FIND(?p.name) WHERE { ?p {type: "Person"} FILTER(CONTAINS(?p.name, "forged")) }"#,
        ],
        b"",
    );
    let v: Value = serde_json::from_str(json_out.trim()).expect("json");
    assert_eq!(v["result"], json!([evil]), "{json_out}");
    let (_, json_logs) = kip_in(dir.path(), &["logs", "--json"], b"");
    let commands: Vec<String> = json_logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| r["command"].as_str().map(str::to_string))
        .collect();
    assert!(commands.contains(&find_evil), "{json_logs}");
}

/// `kip storage stats` measures what the store takes: every table with its entries
/// (the concept and link tables hold exactly the graph's elements), and on local files
/// the database and the log, whose sizes add up to the total.
#[test]
fn storage_stats_measures_every_table_and_file() {
    let dir = rich_store();
    let (code, text) = kip_in(dir.path(), &["storage", "stats", "--json"], b"");
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(text.trim()).expect("json");
    let r = &v["result"];
    let concepts = r["concepts"].as_u64().expect("concepts");
    let links = r["links"].as_u64().expect("links");
    assert!(concepts > 0 && links > 0, "{r}");
    let tables = r["tables"].as_array().expect("tables");
    let entries = |name: &str| {
        tables
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["entries"].as_u64())
    };
    let total = r["total_bytes"].as_u64().expect("total");
    let table_bytes: u64 = tables
        .iter()
        .map(|t| {
            ["stored_bytes", "metadata_bytes", "fragmented_bytes"]
                .iter()
                .map(|k| t[*k].as_u64().expect("bytes"))
                .sum::<u64>()
        })
        .sum();
    if r["backend"] == "postgresql" {
        assert_eq!(entries("kip_concepts"), Some(concepts), "{r}");
        assert_eq!(entries("kip_props"), Some(links), "{r}");
        // An index counts its table's rows.
        assert_eq!(entries("kip_props_pos"), Some(links), "{r}");
        assert_eq!(total, table_bytes, "{r}");
        assert_eq!(r["files"], json!([]));
    } else {
        assert_eq!(entries("concepts"), Some(concepts), "{r}");
        for index in ["props", "spo", "pos", "osp"] {
            assert_eq!(entries(index), Some(links), "{index}: {r}");
        }
        let files = r["files"].as_array().expect("files");
        let names: Vec<&str> = files.iter().filter_map(|f| f["name"].as_str()).collect();
        assert_eq!(names, ["nexus.redb", "nexus.wal"], "{r}");
        let sizes: u64 = files.iter().filter_map(|f| f["bytes"].as_u64()).sum();
        assert_eq!(total, sizes, "{r}");
        // The database file's allocated pages hold every table's bytes.
        let used = files[0]["used_bytes"].as_u64().expect("used");
        assert!(table_bytes <= used && used <= total, "{r}");
        assert!(files[0]["disk_bytes"].as_u64().expect("blocks") > 0, "{r}");
    }
    // The table form names the graph and each table.
    let (code, text) = kip_in(dir.path(), &["storage", "stats"], b"");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("{concepts} concepts, {links} links")),
        "{text}"
    );
}

/// `kip storage compact` cuts the database file to its pages in use and keeps every
/// element; a database URL is refused with the server's own tool named.
#[test]
fn storage_compact_keeps_the_graph() {
    let dir = rich_store();
    let count = |dir: &std::path::Path| {
        let (_, text) = kip_in(
            dir,
            &[
                "exec",
                "--format",
                "json",
                "FIND(COUNT(?c)) WHERE { ?c {type: \"Person\"} }",
            ],
            b"",
        );
        serde_json::from_str::<Value>(text.trim()).expect("json")["result"].clone()
    };
    let people = count(dir.path());
    let (code, text) = kip_in(dir.path(), &["storage", "compact"], b"");
    let location = common::location(dir.path());
    if location.to_string_lossy().starts_with("postgres") {
        assert_ne!(code, 0, "{text}");
        return;
    }
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(text.trim()).expect("json");
    let before = v["result"]["file_bytes_before"].as_u64().expect("before");
    let after = v["result"]["file_bytes_after"].as_u64().expect("after");
    assert!(0 < after && after <= before, "{v}");
    assert_eq!(count(dir.path()), people);
}
/// `kip-nexus`, the launcher the wheel installs beside `kip` (what `uvx kip-nexus serve`
/// and MCP Registry clients run), is `kip`: the same output, stderr and exit status, found
/// through a symbolic link to the launcher too (`uv tool install` links commands into
/// ~/.local/bin), and a clear failure where no `kip` is beside it.
#[cfg(unix)]
#[test]
fn kip_nexus_launcher_runs_the_kip_beside_it() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    // A copied executable can be "busy" for a moment: a child another test thread forked
    // between the copy's open and its close holds the written file open until it execs
    // (ETXTBSY). Trying again once that child has exec'd is the usual remedy.
    let run = |exe: &std::path::Path, arg: &str| {
        let mut tries = 0;
        loop {
            match Command::new(exe).arg(arg).output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.expect("run the launcher"),
            }
        }
    };
    // An installed layout: the launcher and kip in one scripts directory.
    let scripts = dir.path().join("bin");
    std::fs::create_dir(&scripts).expect("mkdir");
    symlink(env!("CARGO_BIN_EXE_kip"), scripts.join("kip")).expect("link kip");
    let launcher = scripts.join("kip-nexus");
    std::fs::copy(env!("CARGO_BIN_EXE_kip-nexus"), &launcher).expect("copy the launcher");

    let kip_version = run(std::path::Path::new(env!("CARGO_BIN_EXE_kip")), "--version");
    let version = run(&launcher, "--version");
    assert!(version.status.success(), "{version:?}");
    assert_eq!(version.stdout, kip_version.stdout);
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("kip "));

    // kip's own usage error: status 2, its message on stderr.
    let bad = run(&launcher, "--no-such-flag");
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--no-such-flag"));

    // Through a link from another directory, which holds no kip.
    let elsewhere = dir.path().join("local-bin");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    symlink(&launcher, elsewhere.join("kip-nexus")).expect("link the launcher");
    let linked = run(&elsewhere.join("kip-nexus"), "--version");
    assert_eq!(linked.stdout, kip_version.stdout, "{linked:?}");

    // A launcher alone: 127 and a message that says what to do.
    let lonely = dir.path().join("lonely");
    std::fs::create_dir(&lonely).expect("mkdir");
    std::fs::copy(env!("CARGO_BIN_EXE_kip-nexus"), lonely.join("kip-nexus")).expect("copy");
    let alone = run(&lonely.join("kip-nexus"), "--version");
    assert_eq!(alone.status.code(), Some(127), "{alone:?}");
    let message = String::from_utf8_lossy(&alone.stderr);
    assert!(
        message.contains("no kip binary beside it") && message.contains("reinstall kip-nexus"),
        "{message}"
    );
}

#[test]
fn schema_install_activates_a_package_for_kip_2_0_and_lists_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = br#"{"format": "KIP-Schema-Package", "manifest": {"package_id": "kip://test/robots", "version": "1.0.0"},
                  "definitions": {"concept_types": {"Robot": {"kind": "ConceptType"}}}}"#;
    let (code, out) = kip_in(dir.path(), &["schema", "install", "-", "--activate"], pkg);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kip://test/robots@1.0.0"), "{out}");
    let (code, out) = kip_in(
        dir.path(),
        &[
            "exec",
            "--kip",
            "2.0",
            r#"CREATE CONCEPT ?r { TYPE "Robot" NAME "R2" }"#,
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = kip_in(dir.path(), &["schema", "list"], b"");
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(v["result"][2]["status"], "active", "{v}");
    let (code, out) = kip_in(
        dir.path(),
        &["schema", "install", "-"],
        b"{\"format\": \"nope\"}",
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ConstraintViolation"), "{out}");
    let (code, _) = kip_in(
        dir.path(),
        &["schema", "install", "-", "--space", "other"],
        pkg,
    );
    assert_ne!(code, 0);
}

#[test]
fn migrate_dry_run_reports_how_2_0_reads_a_1x_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = kip_in(
        dir.path(),
        &[
            "exec",
            r#"UPSERT { CONCEPT ?t { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "d", subject_types: ["*"], object_types: ["*"] } } CONCEPT ?a { {type: "Person", name: "Ada"} } CONCEPT ?b { {type: "Person", name: "Bo"} } PROPOSITION ?l { (?a, "knows", ?b) } } WITH METADATA { confidence: 7, author: "Nobody" }"#,
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = kip_in(dir.path(), &["migrate", "--dry-run"], b"");
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(out.trim()).expect("json");
    let r = &v["result"];
    assert_eq!(r["changed"], false);
    assert_eq!(
        r["concepts"]["types"]["Person"]["symbol"],
        "kip://profiles/cognitive-memory@2.0.0/Person"
    );
    assert_eq!(r["assertions"]["founding_from_1x_links"], 1);
    assert_eq!(r["assertions"]["confidence_kept_in_facet"], 1);
    let codes: Vec<&str> = r["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert!(
        codes.contains(&"confidence_out_of_range") && codes.contains(&"author_not_a_person"),
        "{r}"
    );
}
