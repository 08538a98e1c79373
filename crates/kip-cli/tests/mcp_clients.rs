//! Real MCP clients against `kip serve`: the official Python SDK (`mcp` from PyPI,
//! installed by scripts/setup-test-env.sh) drives the stdio server and the streamable
//! HTTP server through tests/mcp/kip_client.py.

mod common;
use common::{python, repo, HttpServer};
use std::path::PathBuf;
use std::process::Command;

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
#[ignore = "needs the Python MCP client: run scripts/test.sh"]
fn python_mcp_client_over_stdio() {
    let py = python();
    let dir = tempfile::tempdir().expect("tempdir");
    run_client(
        &py,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_kip"),
            common::location(dir.path()).to_str().expect("utf8 path"),
        ],
    );
}

#[test]
#[ignore = "needs the Python MCP client: run scripts/test.sh"]
fn python_mcp_client_over_streamable_http() {
    let py = python();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = HttpServer::start(&common::location(dir.path()));
    run_client(&py, &["http", &server.mcp_url()]);
}
