#!/usr/bin/env python3
"""Throughput of 1, 2 and 4 `kip serve` processes on one PostgreSQL database.

    python3 bench/pg_servers.py KIP_BINARY POSTGRES_URL [SECONDS]

For each server count N, a fresh schema gets 2,000 concepts; N servers are started on
it (`kip serve --http`), and 32 client threads (spread over the servers) run for
SECONDS (default 10) either small UPSERTs (the write run) or point-lookup FINDs (the
read run). Prints commits/s and reads/s per N, and the ratio to N = 1. Only the
standard library is used; every request is a new HTTP/1.1 connection (as the
tests' clients), so the client side costs the same for every N.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, cmd):
    body = json.dumps({"command": cmd}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/kip", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def schema_url(url, name):
    base, _, query = url.partition("?")
    parts = [p for p in query.split("&") if p and not p.startswith("options=")]
    parts.append(f"options=-csearch_path%3D{name}")
    return base + "?" + "&".join(parts)


QUIET = {**os.environ, "PGOPTIONS": "-c client_min_messages=warning"}


def run(kip, url, n_servers, seconds, mode):
    name = f"kip_servers_{n_servers}_{mode}"
    subprocess.run(
        ["psql", url.split("?")[0], "-qc", f"drop schema if exists {name} cascade; create schema {name}"],
        check=True, env=QUIET,
    )
    data = schema_url(url, name)
    blocks = " ".join(
        f'CONCEPT ?c{i} {{ {{type: "Person", name: "p{i}"}} SET ATTRIBUTES {{ n: {i} }} }}'
        for i in range(2000)
    )
    subprocess.run([kip, "--data", data, "-q", "exec", "-f", "-"], input=f"UPSERT {{ {blocks} }}".encode(),
                   check=True, stdout=subprocess.DEVNULL)
    ports = [free_port() for _ in range(n_servers)]
    procs = [
        subprocess.Popen([kip, "--data", data, "serve", "--no-prewarm", "--http", f"127.0.0.1:{p}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in ports
    ]
    try:
        for p in ports:
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", p), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
        done = [0] * 32
        errors = [0] * 32
        stop = time.time() + seconds

        def client(t):
            port = ports[t % n_servers]
            i = 0
            while time.time() < stop:
                i += 1
                k = (t * 7919 + i * 104729) % 2000
                if mode == "write":
                    cmd = f'UPSERT {{ CONCEPT ?c {{ {{type: "Person", name: "p{k}"}} SET ATTRIBUTES {{ n: {i} }} }} }}'
                else:
                    cmd = f'FIND(?c.attributes.n) WHERE {{ ?c {{type: "Person", name: "p{k}"}} }}'
                try:
                    r = post(port, cmd)
                    if "error" in r:
                        errors[t] += 1
                    else:
                        done[t] += 1
                except OSError:
                    errors[t] += 1

        threads = [threading.Thread(target=client, args=(t,)) for t in range(32)]
        start = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.time() - start
        return sum(done) / elapsed, sum(errors)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["psql", url.split("?")[0], "-qc", f"drop schema if exists {name} cascade"],
                       check=False, env=QUIET)


def main():
    kip, url = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    base = {}
    print(f"{'servers':>7} {'mode':>6} {'ops/s':>9} {'vs 1':>6} {'errors':>7}")
    for mode in ["write", "read"]:
        for n in [1, 2, 4]:
            rate, errs = run(kip, url, n, seconds, mode)
            base.setdefault(mode, rate)
            print(f"{n:>7} {mode:>6} {rate:>9.0f} {rate / base[mode]:>5.2f}x {errs:>7}", flush=True)


if __name__ == "__main__":
    main()
