#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test of the workspace.
# CI (.ci/run) runs exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== test environment (Python MCP client)"
KIP_TEST_PYTHON="$(scripts/setup-test-env.sh | tail -n 1)"
export KIP_TEST_PYTHON

echo "== cargo test (the tests that need Python/Node are #[ignore]d in a plain cargo test; included here)"
cargo test --workspace --locked -- --include-ignored

echo "== wheel: build it, pip install it into a fresh venv, MCP smoke test through the installed kip"
scripts/wheel-smoke.sh
