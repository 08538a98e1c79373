#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL backend's tests.
#
#   scripts/pg-test-cluster.sh start [--fresh]  # prints the connection URL on its last line
#                                               # (--fresh: the kip_test database emptied)
#   scripts/pg-test-cluster.sh stop
#
# `start` installs Debian's PostgreSQL server (apt) when no `initdb` is found, creates a
# cluster under target/pg (initdb; trust authentication on a Unix socket in
# target/pg/run and on 127.0.0.1 at a free port), starts it and creates the database
# `kip_test`. Idempotent: a running cluster is reused. As root, the server runs as the
# `postgres` user (PostgreSQL refuses to run as root). TLS is on, with a certificate
# signed by a throwaway CA whose certificate is target/pg/ca.crt; the role kip_cert
# logs in with the client certificate target/pg/client.crt (key client.key) only. `stop` stops it (fast shutdown);
# the data stays until `rm -rf target/pg`.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT="$PWD/target/pg"
DATA="$ROOT/data"
RUN="$ROOT/run"
LOG="$ROOT/server.log"

find_bin() {
  local name="$1"
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return
  fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/$name" ]; then
      echo "$d/$name"
      return
    fi
  done
  return 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

cmd="${1:-start}"
if [ "$cmd" = stop ]; then
  if [ -f "$DATA/postmaster.pid" ]; then
    as_owner "$(find_bin pg_ctl)" -D "$DATA" -m fast -w stop >&2 || true
  fi
  exit 0
fi

if ! find_bin initdb >/dev/null || ! find_bin pg_ctl >/dev/null; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; }; then
    echo "pg-test-cluster.sh: installing Debian's postgresql for the PostgreSQL backend's tests" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -q postgresql >&2; then
      $SUDO apt-get update -q >&2
      $SUDO apt-get install -y -q postgresql >&2
    fi
  else
    echo "pg-test-cluster.sh: the PostgreSQL backend's tests need a PostgreSQL server: install Debian's postgresql and run again" >&2
    exit 1
  fi
fi
INITDB="$(find_bin initdb)"
PG_CTL="$(find_bin pg_ctl)"
PSQL="$(find_bin psql)"

mkdir -p "$ROOT"
if [ "$(id -u)" = 0 ]; then
  # The server's user must reach its directory.
  chown postgres "$ROOT"
  chmod 0755 "$ROOT"
fi
if [ ! -f "$DATA/PG_VERSION" ]; then
  as_owner "$INITDB" -D "$DATA" -A trust -U kip -E UTF8 --no-locale >"$ROOT/initdb.log" 2>&1 || {
    cat "$ROOT/initdb.log" >&2
    exit 1
  }
fi
as_owner mkdir -p "$RUN"
# TLS: a throwaway CA (target/pg/ca.crt, its key discarded), a server certificate it
# signed for 127.0.0.1 and localhost, and a client certificate for the role kip_cert
# (target/pg/client.crt and client.key), which may log in over TLS with that
# certificate only. The TLS test connects with sslmode=verify-full and ca.crt as
# sslrootcert, and as kip_cert with the client certificate.
if [ ! -f "$DATA/server.key" ] || [ ! -f "$ROOT/client.key" ]; then
  tmp="$(mktemp -d)"
  openssl req -new -x509 -days 3650 -nodes -subj "/CN=kip test CA" \
    -keyout "$tmp/ca.key" -out "$ROOT/ca.crt" >/dev/null 2>&1
  openssl req -new -nodes -subj "/CN=localhost" -keyout "$tmp/server.key" \
    -out "$tmp/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$tmp/ext"
  openssl x509 -req -days 3650 -in "$tmp/server.csr" -CA "$ROOT/ca.crt" -CAkey "$tmp/ca.key" \
    -CAcreateserial -CAserial "$tmp/ca.srl" -extfile "$tmp/ext" -out "$tmp/server.crt" >/dev/null 2>&1
  openssl req -new -nodes -subj "/CN=kip_cert" -keyout "$ROOT/client.key" \
    -out "$tmp/client.csr" >/dev/null 2>&1
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$tmp/cext"
  openssl x509 -req -days 3650 -in "$tmp/client.csr" -CA "$ROOT/ca.crt" -CAkey "$tmp/ca.key" \
    -CAserial "$tmp/ca.srl" -extfile "$tmp/cext" -out "$ROOT/client.crt" >/dev/null 2>&1
  chmod 0600 "$tmp/server.key" "$ROOT/client.key"
  cp "$ROOT/ca.crt" "$tmp/root.crt"
  if [ "$(id -u)" = 0 ]; then chown postgres "$tmp/server.key" "$tmp/server.crt" "$tmp/root.crt"; chmod 0755 "$tmp"; fi
  as_owner cp -p "$tmp/server.key" "$tmp/server.crt" "$tmp/root.crt" "$DATA/"
  rm -rf "$tmp"
  chmod 0644 "$ROOT/ca.crt"
  # Certificate authentication for kip_cert, before initdb's trust lines (first match).
  if ! grep -q kip_cert "$DATA/pg_hba.conf"; then
    as_owner sed -i '1i hostssl all kip_cert 127.0.0.1/32 cert' "$DATA/pg_hba.conf"
  fi
  if as_owner "$PG_CTL" -D "$DATA" status >/dev/null 2>&1; then
    as_owner "$PG_CTL" -D "$DATA" reload >&2
  fi
fi
port_file="$ROOT/port"
if ! as_owner "$PG_CTL" -D "$DATA" status >/dev/null 2>&1; then
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  echo "$port" >"$port_file"
  as_owner "$PG_CTL" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-p $port -k $RUN -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on -c ssl=on -c ssl_ca_file=root.crt" start >&2
fi
port="$(cat "$port_file")"
if [ "${2:-}" = --fresh ]; then
  "$PSQL" -h "$RUN" -p "$port" -U kip -d postgres -qc "drop database if exists kip_test" >&2
fi
if ! "$PSQL" -h "$RUN" -p "$port" -U kip -d postgres -tAc "select 1 from pg_database where datname='kip_test'" | grep -q 1; then
  "$PSQL" -h "$RUN" -p "$port" -U kip -d postgres -qc "create database kip_test" >&2
fi
if ! "$PSQL" -h "$RUN" -p "$port" -U kip -d postgres -tAc "select 1 from pg_roles where rolname='kip_cert'" | grep -q 1; then
  "$PSQL" -h "$RUN" -p "$port" -U kip -d postgres -qc "create role kip_cert login superuser" >&2
fi
echo "postgres://kip@127.0.0.1:$port/kip_test"
