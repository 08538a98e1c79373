//! Real MCP clients against `kip serve`: the official Python SDK (`mcp` from PyPI,
//! installed by scripts/setup-test-env.sh) drives the stdio server and the streamable
//! HTTP server through tests/mcp/kip_client.py.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with the MCP SDK, or `None` (with a visible notice) when the test
/// environment is not installed and not required.
fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("KIP_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/test-venv/bin/python"));
    if candidate.exists() {
        return Some(candidate);
    }
    if std::env::var_os("KIP_REQUIRE_MCP_CLIENT").is_some() {
        panic!("the Python MCP client is missing: run scripts/setup-test-env.sh");
    }
    eprintln!(
        "SKIPPED: no Python MCP client; run scripts/setup-test-env.sh (scripts/test.sh does)"
    );
    None
}

fn run_client(python: &PathBuf, args: &[&str]) {
    let out = Command::new(python)
        .arg(repo().join("tests/mcp/kip_client.py"))
        .args(args)
        .output()
        .expect("run the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "MCP client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

#[test]
fn python_mcp_client_over_stdio() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    run_client(
        &py,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_kip"),
            dir.path().to_str().expect("utf8 path"),
        ],
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

#[test]
fn python_mcp_client_over_streamable_http() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(dir.path())
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kip serve --http");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "kip serve --http did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let result = std::panic::catch_unwind(|| run_client(&py, &["http", &url]));
    let _ = server.kill();
    let _ = server.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
