"""Differential test: the same scripted sequence of memory-server tool calls, sent over
MCP stdio to the official @modelcontextprotocol/server-memory and to `kip serve`; the
normalized results must be equal (ignoring createdAt/version and fields the official
server lacks).

Usage: memory_diff.py <kip binary> <kip data dir> <node> <server-memory dist/index.js> <memory.jsonl>
Prints "ok" and exits 0 when every result matches.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

E = lambda name, t, obs: {"name": name, "entityType": t, "observations": obs}
R = lambda a, b, t: {"from": a, "to": b, "relationType": t}

SCRIPT = [
    ("read_graph", {}),
    ("create_entities", {"entities": [E("Alice", "person", ["likes tea", "works remotely"]), E("Bob", "person", []), E("Acme Corp", "organization", ["makes anvils"])]}),
    ("create_entities", {"entities": [E("Alice", "person", ["duplicate"]), E("Carol", "software project", ["written in Rust"])]}),
    ("create_entities", {"entities": []}),
    ("create_relations", {"relations": [R("Alice", "Acme Corp", "works at"), R("Bob", "Alice", "knows"), R("Alice", "Bob", "knows")]}),
    ("create_relations", {"relations": [R("Alice", "Acme Corp", "works at"), R("Carol", "Acme Corp", "is maintained by")]}),
    ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["plays chess", "likes tea"]}, {"entityName": "Bob", "contents": ["lives in Paris"]}]}),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["never saved"]}, {"entityName": "Ghost", "contents": ["y"]}]}),
    ("search_nodes", {"query": "alice"}),
    ("search_nodes", {"query": "ACME"}),
    ("search_nodes", {"query": "tea"}),
    ("search_nodes", {"query": "PERSON"}),
    ("search_nodes", {"query": "zzz-nothing"}),
    ("search_nodes", {"query": "rust"}),
    ("open_nodes", {"names": ["Alice", "Acme Corp"]}),
    ("open_nodes", {"names": ["Nobody"]}),
    ("open_nodes", {"names": ["Bob"]}),
    ("read_graph", {}),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["works remotely", "not there"]}, {"entityName": "Nobody", "observations": ["x"]}]}),
    ("read_graph", {}),
    ("delete_relations", {"relations": [R("Bob", "Alice", "knows"), R("Nobody", "Alice", "knows")]}),
    ("read_graph", {}),
    ("create_entities", {"entities": [E("Dave", "person", ["new"]), E("Eve", "person", ["spy"])]}),
    ("create_relations", {"relations": [R("Dave", "Eve", "knows"), R("Eve", "Alice", "watches"), R("Dave", "Acme Corp", "works at")]}),
    ("search_nodes", {"query": "e"}),
    ("delete_entities", {"entityNames": ["Eve", "Ghost"]}),
    ("read_graph", {}),
    ("open_nodes", {"names": ["Dave", "Eve", "Alice"]}),
    ("add_observations", {"observations": [{"entityName": "Dave", "contents": ["moved to Berlin", "moved to Berlin"]}]}),
    ("search_nodes", {"query": "BERLIN"}),
    ("delete_entities", {"entityNames": []}),
    ("delete_relations", {"relations": []}),
    ("create_relations", {"relations": [R("Alice", "Alice", "admires")]}),
    ("read_graph", {}),
    ("delete_entities", {"entityNames": ["Alice"]}),
    ("read_graph", {}),
    ("create_entities", {"entities": [E("Alice", "person", ["is back"])]}),
    ("search_nodes", {"query": "back"}),
    ("open_nodes", {"names": ["Alice", "Dave"]}),
    ("create_entities", {"entities": [E("Ünïcödé 名前", "thing", ["émoji 🤖", "中文 observation"])]}),
    ("search_nodes", {"query": "ünïcödé"}),
    ("search_nodes", {"query": "中文"}),
    ("create_relations", {"relations": [R("Ünïcödé 名前", "Dave", "is owned by")]}),
    ("open_nodes", {"names": ["Ünïcödé 名前"]}),
    ("delete_observations", {"deletions": [{"entityName": "Dave", "observations": ["moved to Berlin"]}]}),
    ("open_nodes", {"names": ["Dave"]}),
    ("delete_relations", {"relations": [R("Dave", "Acme Corp", "works at")]}),
    ("search_nodes", {"query": "acme"}),
    # Relations to entities that do not exist are stored, with the valid ones sent with
    # them; the missing ends are no entities for the other tools.
    ("create_relations", {"relations": [R("Dave", "Nobody", "knows"), R("Dave", "Ünïcödé 名前", "likes"), R("Ghost A", "Ghost B", "haunts"), R("Dave", "Phantom", "fears")]}),
    ("read_graph", {}),
    ("search_nodes", {"query": "nobody"}),
    ("search_nodes", {"query": "unknown"}),
    ("search_nodes", {"query": "dave"}),
    ("open_nodes", {"names": ["Nobody", "Ghost A", "Dave"]}),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
    ("create_relations", {"relations": [R("Dave", "Nobody", "knows")]}),
    ("delete_observations", {"deletions": [{"entityName": "Nobody", "observations": ["x"]}]}),
    # The entity created later: the relations were waiting for it.
    ("create_entities", {"entities": [E("Nobody", "person", ["exists now"])]}),
    ("read_graph", {}),
    ("open_nodes", {"names": ["Nobody"]}),
    ("delete_relations", {"relations": [R("Ghost A", "Ghost B", "haunts")]}),
    ("delete_entities", {"entityNames": ["Phantom"]}),
    ("read_graph", {}),
    ("delete_entities", {"entityNames": ["Nobody"]}),
    ("read_graph", {}),
    # A name or relation sent twice in one call is stored twice (the official server
    # filters against the graph before the call only), listed where it was sent; a
    # relationType that differs only in spelling is another relation.
    ("create_entities", {"entities": [E("Twin", "person", ["first"]), E("Solo", "person", []), E("Twin", "robot", ["second"]), E("Dave", "person", ["again"])]}),
    ("create_relations", {"relations": [R("Twin", "Solo", "likes"), R("Solo", "Twin", "likes"), R("Twin", "Solo", "likes"), R("Twin", "Solo", "likes a lot")]}),
    ("create_relations", {"relations": [R("Twin", "Solo", "likes_a_lot"), R("Twin", "Solo", "likes")]}),
    ("read_graph", {}),
    ("search_nodes", {"query": "robot"}),
    ("search_nodes", {"query": "second"}),
    ("open_nodes", {"names": ["Twin"]}),
    ("add_observations", {"observations": [{"entityName": "Twin", "contents": ["third", "second"]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Twin", "observations": ["second", "first"]}]}),
    ("read_graph", {}),
    ("delete_relations", {"relations": [R("Twin", "Solo", "likes a lot")]}),
    ("read_graph", {}),
    ("delete_relations", {"relations": [R("Twin", "Solo", "likes")]}),
    ("open_nodes", {"names": ["Solo"]}),
    ("create_entities", {"entities": [E("Twin", "person", ["skipped"]), E("Trio", "x", []), E("Trio", "y", []), E("Trio", "z", ["3"])]}),
    ("search_nodes", {"query": "tri"}),
    ("delete_entities", {"entityNames": ["Twin"]}),
    ("read_graph", {}),
]

DROP = {"createdAt", "version", "notFound"}


def normalize(v):
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def outcome(result):
    is_error = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
    if is_error:
        return {"isError": True, "text": result.content[0].text if result.content else ""}
    sc = getattr(result, "structured_content", None)
    if sc is None:
        sc = getattr(result, "structuredContent", None)
    text = result.content[0].text if result.content else ""
    try:
        text_value = json.loads(text)
    except ValueError:
        text_value = text
    return {"isError": False, "structured": normalize(sc), "text": normalize(text_value)}


async def run(params):
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            for name, _ in SCRIPT:
                assert name in tools, f"missing tool {name}"
            for name, args in SCRIPT:
                out.append(outcome(await session.call_tool(name, args)))
            resources = [str(r.uri) for r in (await session.list_resources()).resources]
            assert "memory://knowledge-graph" in resources, resources
            res = await session.read_resource("memory://knowledge-graph")
            out.append({"resource": normalize(json.loads(res.contents[0].text))})
    return out


async def main():
    kip, data, node, official, memfile = sys.argv[1:6]
    ours = await run(StdioServerParameters(command=kip, args=["--data", data, "serve", "--tools", "memory"]))
    theirs = await run(StdioServerParameters(command=node, args=[official], env={"MEMORY_FILE_PATH": memfile, "PATH": "/usr/local/bin:/usr/bin:/bin"}))
    mismatches = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            step = SCRIPT[i] if i < len(SCRIPT) else ("resources/read", {})
            mismatches.append(f"step {i} {step[0]} {json.dumps(step[1], ensure_ascii=False)}\n  kip:      {json.dumps(a, ensure_ascii=False)}\n  official: {json.dumps(b, ensure_ascii=False)}")
    if len(ours) != len(theirs):
        mismatches.append(f"different lengths {len(ours)} vs {len(theirs)}")
    if mismatches:
        print("\n".join(mismatches))
        sys.exit(1)
    print(f"{len(ours)} results compared")
    print("ok")


if __name__ == "__main__":
    asyncio.run(main())
