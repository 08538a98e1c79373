//! The memory explorer in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, installed by scripts/setup-test-env.sh) driven by Selenium from
//! the test venv, against two `kip serve --http` processes on one seeded memory (one
//! with an API key, one without). The checks are in `tests/browser/explorer.py`;
//! screenshots land in `target/explorer-screenshots/` (docs/explorer.md shows them).

mod common;

use common::{python, repo, HttpServer};
use std::process::Command;

#[test]
#[ignore = "needs Chromium, chromedriver and Selenium: scripts/setup-test-env.sh installs them (scripts/test.sh runs ignored tests)"]
fn explorer_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::location(&dir.path().join("memory"));
    let seed = repo().join("crates/kip-cli/tests/browser/seed.kip");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["exec", "-q", "-f"])
        .arg(&seed)
        .output()
        .expect("run kip exec");
    assert!(
        out.status.success(),
        "seeding failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A sleep cycle: its statements (by $system) fill the audit log, which the log view
    // hides unless asked, and its decay leaves strengths like 0.6649999999999999
    // (0.7 x 0.95), which the page shows rounded.
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["--quiet", "sleep"])
        .output()
        .expect("run kip sleep");
    assert!(
        out.status.success(),
        "the sleep cycle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = "explorer-test-key";
    let keyed = HttpServer::start_with(&data, &["--api-key", key]);
    // A second server on the same directory (it forwards to the first), without a key.
    let open = HttpServer::start(&data);
    let shots = repo().join("target/explorer-screenshots");
    let status = Command::new(python())
        .arg(repo().join("crates/kip-cli/tests/browser/explorer.py"))
        .args([
            "--url",
            &keyed.url(),
            "--key",
            key,
            "--open-url",
            &open.url(),
        ])
        .arg("--shots")
        .arg(&shots)
        .status()
        .expect("run the browser test");
    assert!(status.success(), "the browser checks failed (see the output above and target/explorer-screenshots/failure.png)");
}
