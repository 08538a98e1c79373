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

echo "== the test matrix's PostgreSQL leg: the engine's statement suites again (with the real-model semantic test), each test on a nexus in a schema of its own"
# (--workspace, not -p kip-engine: the same feature set as the run above, so nothing is
# rebuilt; only kip-engine has these test targets.)
KIP_TEST_BACKEND=postgres cargo test --workspace --locked \
  --test kql --test kml --test meta --test rc11 --test memory --test hardening \
  --test robustness --test scans --test attr_index --test export --test semantic \
  --test brain --test audit --test concurrency -- --include-ignored

echo "== wheel: build it, pip install it into a fresh venv, MCP smoke test through the installed kip"
scripts/wheel-smoke.sh
