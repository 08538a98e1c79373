//! Helpers shared by the CLI's end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// The tests that drive real MCP clients and the official memory server are
// `#[ignore]`d, so a plain `cargo test` reports them as ignored rather than passing
// them unchecked: they need the Python and Node packages `scripts/setup-test-env.sh`
// installs. `scripts/test.sh` (what CI runs) installs them and runs every test with
// `--include-ignored`; a test that runs without what it needs fails.

/// The Python with the MCP SDK. A test that runs without it fails: it must never pass
/// by skipping its checks.
pub fn python() -> PathBuf {
    let p = std::env::var_os("KIP_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/test-venv/bin/python"));
    assert!(
        p.exists(),
        "the Python MCP client is missing ({}): run scripts/setup-test-env.sh",
        p.display()
    );
    p
}

/// A `kip serve --http` on a free loopback port, killed on drop.
pub struct HttpServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl HttpServer {
    /// Starts the server over `data` and waits until it accepts connections.
    pub fn start(data: &Path) -> HttpServer {
        HttpServer::start_with(data, &[])
    }

    /// [`HttpServer::start`] with more `kip serve` arguments.
    pub fn start_with(data: &Path, extra: &[&str]) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_kip"))
            .arg("--data")
            .arg(data)
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kip serve --http");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "kip serve --http did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer { child, port }
    }

    /// The server's root URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a test's memory goes when it would be the data directory `dir`: `dir`, or
/// on the test matrix's PostgreSQL leg (`KIP_TEST_BACKEND=postgres`, scripts/test.sh)
/// the URL of a schema named after it. `--data` takes either.
pub fn location(dir: &Path) -> PathBuf {
    kip_open::testing::location(dir).expect("a test memory")
}
