#!/usr/bin/env bash
# Installs what the end-to-end tests need besides Rust: a Python venv with the official
# MCP SDK (the `mcp` package from PyPI), used as a real MCP client against `kip serve`.
# Idempotent; called by scripts/test.sh. Prints the python path to use on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="target/test-venv"
MCP_VERSION="2.3.0"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$MCP_VERSION'" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
fi
echo "$PWD/$VENV/bin/python"
