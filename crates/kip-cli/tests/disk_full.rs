//! A server that runs out of room for its files (here through the file size limit,
//! RLIMIT_FSIZE, which fails writes with EFBIG exactly as a full disk fails them with
//! ENOSPC, without needing a small file system): writes are refused with an error,
//! the warnings do not flood the log, a SIGINT exits non-zero saying the final
//! checkpoint failed, and every acknowledged write is there at the next start.

mod common;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// POSTs a JSON body to `/kip` over a raw connection (no HTTP client dependency).
fn post(port: u16, body: &Value) -> Option<Value> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    let text = body.to_string();
    let req = format!(
        "POST /kip HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let body = out.split("\r\n\r\n").nth(1)?;
    serde_json::from_str(body).ok()
}

#[test]
fn a_full_disk_is_reported_without_a_flood_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("nexus");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    // Files may grow to 8 MiB; SIGXFSZ ignored so that writes fail with EFBIG.
    let script = format!(
        "trap '' XFSZ; ulimit -f 8192; exec '{}' --data '{}' serve --http 127.0.0.1:{port} --no-prewarm",
        env!("CARGO_BIN_EXE_kip"),
        data.display()
    );
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kip serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "kip serve --http did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for i in 0..6000 {
        let cmd = format!(
            "UPSERT {{ CONCEPT ?p {{ {{type: \"Person\", name: \"p{i}\"}} SET ATTRIBUTES {{ bio: \"{}\" }} }} }}",
            "x".repeat(3000)
        );
        match post(port, &json!({ "command": cmd })) {
            Some(r) if r.get("error").is_none() => acknowledged.push(i),
            Some(r) => {
                assert_eq!(r["error"]["code"], "KIP_4003", "{r}");
                refused += 1;
                if refused > 30 {
                    break;
                }
            }
            None => panic!("the server stopped answering"),
        }
    }
    assert!(refused > 0, "the file size limit was never reached");
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().expect("wait");
    assert_eq!(
        status.code(),
        Some(1),
        "a failed final checkpoint is not a clean exit:\n{stderr}"
    );
    assert!(stderr.contains("final checkpoint failed"), "{stderr}");
    let warnings = stderr.matches(" WARN ").count();
    assert!(warnings <= 10, "{warnings} warnings:\n{stderr}");

    // Restarted without the limit: every acknowledged write is there.
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args([
            "exec",
            "--format",
            "json",
            "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"p\")) }",
        ])
        .output()
        .expect("kip exec");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let count = v["result"].as_u64().expect("count");
    // Exactly the acknowledged ones: a refused write left nothing.
    assert_eq!(count, acknowledged.len() as u64);
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .arg("check")
        .output()
        .expect("kip check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
