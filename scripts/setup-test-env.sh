#!/usr/bin/env bash
# Installs what the end-to-end tests need besides Rust:
# - a Python venv with the official MCP SDK (the `mcp` package from PyPI), the real MCP
#   client driven against `kip serve`;
# - the official Knowledge Graph Memory Server (@modelcontextprotocol/server-memory from
#   npm), run side by side with kip-nexus by the differential test.
# Idempotent; called by scripts/test.sh. Prints the python path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="target/test-venv"
MCP_VERSION="2.3.0"

missing=()
command -v python3 >/dev/null 2>&1 || missing+=("python3 (with the venv module)")
command -v node >/dev/null 2>&1 || missing+=("node")
command -v npm >/dev/null 2>&1 || missing+=("npm")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-test-env.sh: the end-to-end tests need ${missing[*]}: install them (Debian: apt install python3-venv nodejs npm) and run again" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$MCP_VERSION'" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
fi
NODE_DIR="target/test-node"
MEMORY_SERVER_VERSION="2026.8.31"
if [ ! -f "$NODE_DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" ]; then
  mkdir -p "$NODE_DIR"
  npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "@modelcontextprotocol/server-memory@$MEMORY_SERVER_VERSION" >&2
fi
echo "$PWD/$VENV/bin/python"
