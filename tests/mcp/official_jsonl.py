"""Makes the official @modelcontextprotocol/server-memory write a JSONL memory file the
way a real user's server does, relations to entities that were never created included
(the official server accepts and stores them).

Usage: official_jsonl.py <node> <server-memory dist/index.js> <memory.jsonl>
Prints "ok" and exits 0 when the file was written.
"""

import asyncio
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

E = lambda name, t, obs: {"name": name, "entityType": t, "observations": obs}
R = lambda a, b, t: {"from": a, "to": b, "relationType": t}

CALLS = [
    ("create_entities", {"entities": [E("Alice", "person", ["likes tea", "works remotely"]), E("Bob", "person", []), E("Acme Corp", "organization", ["makes anvils"])]}),
    ("create_relations", {"relations": [R("Alice", "Acme Corp", "works at"), R("Bob", "Alice", "knows")]}),
    # Ends that do not exist: the official server keeps these relations.
    ("create_relations", {"relations": [R("Alice", "Ghost", "haunted by"), R("Phantom", "Bob", "follows"), R("Ghost", "Phantom", "knows")]}),
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["lives in Paris"]}]}),
]


async def main(node, server, memfile):
    env = dict(os.environ)
    env["MEMORY_FILE_PATH"] = memfile
    params = StdioServerParameters(command=node, args=[server], env=env)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for name, args in CALLS:
                res = await s.call_tool(name, args)
                if res.is_error:
                    print(f"{name} failed: {res.content}")
                    sys.exit(1)
    print("ok")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
