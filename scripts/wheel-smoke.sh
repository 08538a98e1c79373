#!/usr/bin/env bash
# Installs the `kip-nexus` wheel into a fresh virtual environment and runs the MCP smoke
# test (tests/mcp/kip_client.py over stdio) through the installed commands, so the
# packaging cannot rot.
#
#   scripts/wheel-smoke.sh          builds the wheel first (maturin, `bindings = "bin"`)
#                                   into target/wheels: the README's first step, needing
#                                   only Rust and Python 3 with venv
#   scripts/wheel-smoke.sh WHEEL    tests a wheel built already (scripts/release.sh, which
#                                   CI runs through scripts/test.sh, and the release
#                                   workflow on each platform)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
  WHEEL="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
else
  TOOLS="target/wheel-tools"
  MATURIN_PIN="$(grep '^maturin==' packaging/release-tools.txt)"
  if ! "$TOOLS/bin/python" -m pip show maturin 2>/dev/null | grep -qx "Version: ${MATURIN_PIN#maturin==}"; then
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check "$MATURIN_PIN"
  fi
  rm -rf target/wheels
  "$TOOLS/bin/maturin" build --release --locked --out target/wheels >&2
  WHEEL="$(ls target/wheels/kip_nexus-*.whl)"
fi
echo "testing $WHEEL ($(du -h "$WHEEL" | cut -f1))" >&2

VENV="target/wheel-venv"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL"
KIP="$VENV/bin/kip"
LAUNCHER="$VENV/bin/kip-nexus"
VERSION="$("$KIP" --version)"
echo "$VERSION" >&2
# `kip-nexus` (what `uvx kip-nexus` and MCP Registry clients run) is the same program.
if [ "$("$LAUNCHER" --version)" != "$VERSION" ]; then
  echo "kip-nexus --version says '$("$LAUNCHER" --version)', kip --version '$VERSION'" >&2
  exit 1
fi
SIZE=$(wc -c < "$KIP")
if [ "$SIZE" -gt $((40 * 1024 * 1024)) ]; then
  echo "the installed kip is $SIZE bytes: it should be stripped" >&2
  exit 1
fi

# The MCP smoke test through the installed launcher (which execs the installed kip),
# with the test client's Python (run alone, e.g. first thing in a fresh clone, the
# script makes the client's venv itself).
PY="${KIP_TEST_PYTHON:-}"
if [ -z "$PY" ]; then
  PY="$(scripts/setup-test-env.sh --mcp-client | tail -n 1)"
fi
DATA="$(mktemp -d)"
trap 'rm -rf "$DATA"' EXIT
"$PY" tests/mcp/kip_client.py stdio "$PWD/$LAUNCHER" "$DATA/nexus"
