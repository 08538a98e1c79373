#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test of the workspace.
# CI (.ci/run) runs exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# A one-shot build (CI) gains nothing from incremental compilation and its cache costs
# gigabytes of disk.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== rustdoc (the workspace's crates: broken links and bad HTML are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

echo "== dependencies: no unused ones (cargo-machete), licenses and bans (cargo-deny, deny.toml)"
# Pinned versions, built once into target/tools (about 6 minutes on 2 cores the first time).
TOOLS="$PWD/target/tools"
if [ ! -x "$TOOLS/bin/cargo-machete" ]; then
  cargo install --quiet --locked --root "$TOOLS" cargo-machete@0.9.2
fi
if [ ! -x "$TOOLS/bin/cargo-deny" ]; then
  cargo install --quiet --locked --root "$TOOLS" cargo-deny@0.20.2
fi
"$TOOLS/bin/cargo-machete"
# The advisories database cannot be fetched from the build machines: licenses and bans.
"$TOOLS/bin/cargo-deny" --log-level error check licenses bans

echo "== test environment (Python MCP client, official memory server, embedding model)"
KIP_TEST_PYTHON="$(scripts/setup-test-env.sh | tail -n 1)"
export KIP_TEST_PYTHON
KIP_TEST_MODEL="$PWD/target/models/all-MiniLM-L6-v2"
export KIP_TEST_MODEL

echo "== PostgreSQL: a throwaway cluster under target/pg (scripts/pg-test-cluster.sh; installs Debian's postgresql when missing)"
KIP_TEST_PG_URL="$(scripts/pg-test-cluster.sh start --fresh | tail -n 1)"
export KIP_TEST_PG_URL
KIP_TEST_PG_CERT="$PWD/target/pg/ca.crt"
export KIP_TEST_PG_CERT
trap 'scripts/pg-test-cluster.sh stop' EXIT

echo "== cargo test (the tests that need Python/Node/PostgreSQL are #[ignore]d in a plain cargo test; included here)"
cargo test --workspace --locked -- --include-ignored

echo "== the test matrix's PostgreSQL leg: the suites again, every memory a test makes in a schema of its own (kip_open::testing)"
# The engine's statement suites (with the real-model semantic and recall tests), the
# executed conformance corpus (whose answers are also compared with an in-memory
# embedded store), the differential test against the naive evaluator, the brain, the
# in-process server (HTTP API, explorer, connections) and the end-to-end CLI suites
# (memory-server differential against the official server, real MCP clients, the
# explorer in Chromium). Left out: what only the embedded store has (its log, file
# format, crash simulation, HNSW files, kip.sock sharing, disk-full), postgres.rs
# (ran above), the benchmark smoke test and the parser-only suites.
# (--workspace, not -p: the same feature set as the run above, so nothing is rebuilt.)
KIP_TEST_BACKEND=postgres cargo test --workspace --locked \
  --test kql --test kml --test meta --test rc11 --test memory --test hardening \
  --test robustness --test scans --test attr_index --test export --test semantic --test sleep_safety --test exactly_once \
  --test brain --test audit --test concurrency --test corpus --test differential \
  --test recall_quality --test conversation_recall --test newcomer --test kip2_runtime --test kip2_fixtures --test kip2_core --test kip2_search --test kip2_belief --test kip2_records --test kip2_transactions --test kip2_spec_examples --test kip2_retention --test kip2_plans --test kip2_cursors --test kip2_conformance_core --test kip2_conformance_kql --test kip2_conformance_meta --test kip2_conformance_kml --test kip2_conformance_rt --test kip2_history --test kip2_capsules --test loop --test connections --test explorer --test http_api \
  --test sleeper --test cli --test memory_server --test mcp_clients --test mcp_app \
  --test explorer_browser -- --include-ignored

echo "== the test matrix's memory leg: the engine's statement suites on the contract-only in-memory backend (kip-store-mem), the proof that a backend needs no engine change"
KIP_TEST_BACKEND=memory cargo test --workspace --locked \
  --test kql --test kml --test meta --test rc11 --test memory --test hardening \
  --test robustness --test export --test attr_index --test brain --test audit \
  --test concurrency --test sleep_safety --test exactly_once --test kip2_runtime --test kip2_fixtures --test kip2_core --test kip2_search --test kip2_belief --test kip2_records --test kip2_transactions --test kip2_spec_examples --test kip2_retention --test kip2_plans --test kip2_cursors --test kip2_conformance_core --test kip2_conformance_kql --test kip2_conformance_meta --test kip2_conformance_kml --test kip2_conformance_rt --test kip2_history --test kip2_capsules

echo "== release artifacts of this machine's target: the wheel (the one release build), the binary tarball, server.json, SHA256SUMS, the Dockerfile; the wheel pip-installed into a fresh venv and asked over MCP (scripts/release.sh --ci, docs/release.md)"
# Without KIP_TEST_PYTHON, as a newcomer runs it: the script sets up its own MCP client.
env -u KIP_TEST_PYTHON scripts/release.sh --ci
