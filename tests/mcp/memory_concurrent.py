"""Two MCP clients over streamable HTTP write memory at the same time; nothing is lost.

Usage: memory_concurrent.py <url of /mcp>. Prints "ok".
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

PER_CLIENT = 40


async def client(url, tag):
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            for i in range(PER_CLIENT):
                r = await s.call_tool("create_entities", {"entities": [{"name": f"{tag}-{i}", "entityType": "note", "observations": [f"written by {tag}"]}]})
                assert not (getattr(r, "is_error", None) or getattr(r, "isError", None)), r
                if i > 0:
                    r = await s.call_tool("create_relations", {"relations": [{"from": f"{tag}-{i}", "to": f"{tag}-{i-1}", "relationType": "follows"}]})
                    assert not (getattr(r, "is_error", None) or getattr(r, "isError", None)), r


async def main():
    url = sys.argv[1]
    await asyncio.gather(client(url, "a"), client(url, "b"))
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            g = await s.call_tool("read_graph", {})
            sc = getattr(g, "structured_content", None) or getattr(g, "structuredContent", None)
            assert len(sc["entities"]) == 2 * PER_CLIENT, len(sc["entities"])
            assert len(sc["relations"]) == 2 * (PER_CLIENT - 1), len(sc["relations"])
    print("ok")


if __name__ == "__main__":
    asyncio.run(main())
