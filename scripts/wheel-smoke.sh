#!/usr/bin/env bash
# Builds the `kip-nexus` wheel (maturin, `bindings = "bin"`), installs it into a fresh
# virtual environment and runs the MCP smoke test (tests/mcp/kip_client.py over stdio)
# through the installed `kip`, so the packaging cannot rot. Called by scripts/test.sh;
# needs only Rust and Python 3 with venv when run by itself (the README's first step).
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="target/wheel-tools"
MATURIN_VERSION="1.9.6"
if [ ! -x "$TOOLS/bin/maturin" ]; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
fi

rm -rf target/wheels
"$TOOLS/bin/maturin" build --release --locked --out target/wheels >&2
WHEEL="$(ls target/wheels/kip_nexus-*.whl)"
echo "built $WHEEL ($(du -h "$WHEEL" | cut -f1))" >&2

VENV="target/wheel-venv"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL"
KIP="$VENV/bin/kip"
"$KIP" --version >&2
SIZE=$(stat -c %s "$KIP")
if [ "$SIZE" -gt $((40 * 1024 * 1024)) ]; then
  echo "the installed kip is $SIZE bytes: it should be stripped" >&2
  exit 1
fi

# The MCP smoke test through the installed binary, with the test client's Python
# (scripts/test.sh passes it; run alone, e.g. first thing in a fresh clone, the script
# makes the client's venv itself).
PY="${KIP_TEST_PYTHON:-}"
if [ -z "$PY" ]; then
  PY="$(scripts/setup-test-env.sh --mcp-client | tail -n 1)"
fi
DATA="$(mktemp -d)"
trap 'rm -rf "$DATA"' EXIT
"$PY" tests/mcp/kip_client.py stdio "$PWD/$KIP" "$DATA/nexus"
