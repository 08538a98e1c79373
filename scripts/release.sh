#!/usr/bin/env bash
# Builds and checks kip-nexus's release artifacts into target/release-artifacts/
# (docs/release.md says what each one is and how a release is cut):
#
#   kip-VERSION-TRIPLE.tar.gz    the stripped `kip` binary (+ README.md), one per target
#   kip_nexus-VERSION-*.whl      the wheels (`pip install kip-nexus`, `uvx kip-nexus serve`)
#   kip_nexus-VERSION.tar.gz     the source distribution (pip builds it where no wheel fits)
#   server.json                  the MCP Registry entry, validated against the registry's schema
#   SHA256SUMS                   `sha256sum -c SHA256SUMS` checks every file above
#
# Modes:
#   scripts/release.sh --ci              the host target, what CI runs (scripts/test.sh):
#       one release build (the wheel, by maturin; its binary is the tarball's), the
#       artifacts assembled and checked, the wheel installed into a fresh venv and asked
#       over MCP (scripts/wheel-smoke.sh), server.json validated and its package
#       arguments run, the Dockerfile linted (hadolint) and its runtime stage's command
#       run as the container would run it (MCP over HTTP, API key, uid, PID 1), the
#       release workflow parsed.
#   scripts/release.sh --assemble DIR    the release workflow: the wheels (and sdist) its
#       jobs built on each platform, in DIR, checked and assembled the same way.
#   scripts/release.sh --tag TAG         the workflow's first job: TAG is v<version> and
#       the workflow runs in the repository Cargo.toml names.
#
# What this machine cannot build, and the release workflow (.github/workflows/release.yml)
# does: Linux aarch64 and macOS. Cross-compiling needs Rust's standard library for the
# other target (`rustup target add`), which rustup downloads from its own server, and
# package registries are the only network here; macOS binaries also need Apple's SDK and
# linker. A fully static musl binary is out for the same reason (no musl target). The
# host build links glibc dynamically: the oldest glibc it runs on is printed below and
# must be within the wheel's manylinux tag (checked). The workflow builds its Linux
# wheels in manylinux_2_28 containers, so the published binaries need glibc 2.28.
# The Docker image is not built here either: Docker's engine does not run on this machine
# and base images come from a registry it cannot reach; the Dockerfile is linted and its
# command run instead, and the workflow builds, runs and pushes the image.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="target/release-artifacts"
TOOLS="target/wheel-tools"

tools() {
  # The pinned Python tools (packaging/release-tools.txt), reinstalled when the pins change.
  local stamp="$TOOLS/.release-tools.sha256"
  local want
  want="$(sha256sum packaging/release-tools.txt | cut -d' ' -f1)"
  if [ ! -x "$TOOLS/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check -r packaging/release-tools.txt
    echo "$want" > "$stamp"
  fi
}

check() { "$TOOLS/bin/python" scripts/release_check.py "$@"; }

host_kip() {
  # The host target's binary, from its tarball (what a user downloads), into $1.
  local triple
  triple="$(uname -m)-unknown-linux-gnu"
  tar -xzf "$OUT"/kip-*-"$triple".tar.gz -C "$1" --strip-components=1
  echo "$1/kip"
}

case "${1:-}" in
  --tag)
    [ $# -eq 2 ] || { echo "usage: scripts/release.sh --tag TAG" >&2; exit 2; }
    tools
    check tag "$2"
    ;;

  --assemble)
    [ $# -eq 2 ] || { echo "usage: scripts/release.sh --assemble WHEEL_DIR" >&2; exit 2; }
    tools
    check assemble "$2" "$OUT"
    ls -l "$OUT" >&2
    ;;

  --ci)
    [ $# -eq 1 ] || { echo "usage: scripts/release.sh --ci" >&2; exit 2; }
    # The container check runs the image's command in Linux namespaces (util-linux's
    # unshare and setpriv, iproute2's ip); elsewhere, scripts/wheel-smoke.sh tests a wheel.
    for tool in unshare setpriv ip objdump; do
      command -v "$tool" >/dev/null 2>&1 || { echo "release.sh --ci checks the Linux host target and needs $tool (Debian: util-linux, iproute2, binutils)" >&2; exit 1; }
    done
    start=$(date +%s)
    tools
    WHEELS="target/release-wheels"
    rm -rf "$WHEELS"
    echo "== release: the wheel (the one release build) and the sdist" >&2
    "$TOOLS/bin/maturin" build --release --locked --out "$WHEELS" >&2
    "$TOOLS/bin/maturin" sdist --out "$WHEELS" >&2

    echo "== release: artifacts assembled and checked into $OUT" >&2
    check assemble "$WHEELS" "$OUT"
    BIN="$(mktemp -d)"
    trap 'rm -rf "$BIN"' EXIT
    KIP="$(host_kip "$BIN")"
    VERSION="$("$TOOLS/bin/python" -c 'import json; print(json.load(open("server.json"))["version"])')"
    if [ "$("$KIP" --version)" != "kip $VERSION" ]; then
      echo "the released kip says '$("$KIP" --version)', not 'kip $VERSION'" >&2
      exit 1
    fi

    echo "== release: server.json (our schema of the registry format, the project's facts, its arguments run)" >&2
    check server-json --kip "$KIP"

    echo "== release: Dockerfile (hadolint, the stages' wiring, the image's command run)" >&2
    "$TOOLS/bin/hadolint" Dockerfile
    PY="${KIP_TEST_PYTHON:-}"
    if [ -z "$PY" ]; then
      PY="$(scripts/setup-test-env.sh --mcp-client | tail -n 1)"
    fi
    check dockerfile --kip "$KIP" --python "$PY"

    echo "== release: the release workflow" >&2
    check workflow

    echo "== release: the wheel installed into a fresh venv, MCP over stdio through kip-nexus" >&2
    KIP_TEST_PYTHON="$PY" scripts/wheel-smoke.sh "$(ls "$OUT"/kip_nexus-*.whl)"

    check sums "$OUT"
    echo "release: artifacts in $OUT ($(($(date +%s) - start)) s):" >&2
    ls -l "$OUT" >&2
    ;;

  *)
    echo "usage: scripts/release.sh --ci | --assemble WHEEL_DIR | --tag TAG (see the comment at its top)" >&2
    exit 2
    ;;
esac
