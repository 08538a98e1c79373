"""create_entities / search_nodes latency: kip-nexus against the official Knowledge
Graph Memory Server, in the same run, over MCP stdio, at several graph sizes.

Usage: memory_server_bench.py <kip binary> <official dist/index.js> <work dir> [sizes...]
Both servers start from the same generated graph (the official one from its JSONL file,
kip-nexus from `kip import --memory-jsonl` of the same file). Prints medians and ratios.
"""

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

CALLS = 40


def graph_file(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"type": "entity", "name": f"entity {i}", "entityType": "note", "observations": [f"observation number {i}", "common text"]}) + "\n")
        for i in range(n):
            f.write(json.dumps({"type": "relation", "from": f"entity {i}", "to": f"entity {(i * 7 + 1) % n}", "relationType": "links to"}) + "\n")


async def timed_calls(params):
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            creates, searches = [], []
            for i in range(CALLS):
                t = time.perf_counter()
                await s.call_tool("create_entities", {"entities": [{"name": f"new {i}", "entityType": "note", "observations": ["fresh"]}]})
                creates.append(time.perf_counter() - t)
            for i in range(CALLS):
                t = time.perf_counter()
                await s.call_tool("search_nodes", {"query": f"number {i * 13}"})
                searches.append(time.perf_counter() - t)
            return statistics.median(creates) * 1e3, statistics.median(searches) * 1e3


async def main():
    kip, official, work = sys.argv[1], sys.argv[2], sys.argv[3]
    sizes = [int(x) for x in sys.argv[4:]] or [10000, 100000]
    rows = []
    for n in sizes:
        d = os.path.join(work, f"mem-{n}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        src = os.path.join(d, "graph.jsonl")
        graph_file(src, n)
        shutil.copy(src, os.path.join(d, "official.jsonl"))
        subprocess.run([kip, "--data", os.path.join(d, "kip"), "--quiet", "import", "--memory-jsonl", src], check=True, capture_output=True)
        ours = await timed_calls(StdioServerParameters(command=kip, args=["--data", os.path.join(d, "kip"), "serve", "--tools", "memory"]))
        theirs = await timed_calls(StdioServerParameters(command="node", args=[official], env={"MEMORY_FILE_PATH": os.path.join(d, "official.jsonl"), "PATH": os.environ.get("PATH", "")}))
        rows.append((n, ours, theirs))
        shutil.rmtree(d, ignore_errors=True)
    print(f"{'entities':>9} {'tool':<16} {'kip-nexus':>12} {'official':>12} {'official/kip':>13}")
    for n, ours, theirs in rows:
        for i, tool in enumerate(["create_entities", "search_nodes"]):
            print(f"{n:>9} {tool:<16} {ours[i]:>9.2f} ms {theirs[i]:>9.2f} ms {theirs[i] / ours[i]:>12.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
