"""Drives kip-nexus with the official Python MCP SDK (the `mcp` package).

Usage:
  kip_client.py stdio <kip binary> <data dir>
  kip_client.py http <url of /mcp>      (sends KIP_API_KEY, when set, as the bearer token)

Lists tools, resources and prompts, calls both KIP tools, checks that a bad command is
an isError tool result with a KIP error object, and runs a batch. Exits non-zero with a
message on the first mismatch; prints "ok" on success.
"""

import asyncio
import contextlib
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def payload(result):
    """The response object of a tool result: structured content, else the text."""
    sc = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if sc is not None:
        return sc
    text = result.content[0].text
    return json.loads(text)


def is_error(result):
    v = getattr(result, "is_error", None)
    if v is None:
        v = getattr(result, "isError", None)
    return bool(v)


async def exercise(session):
    init = await session.initialize()
    instructions = getattr(init, "instructions", "") or ""
    check("DESCRIBE PRIMER" in instructions, f"server instructions lack DESCRIBE PRIMER: {instructions!r}")

    tools = {t.name: t for t in (await session.list_tools()).tools}
    check({"execute_kip", "execute_kip_readonly"} <= set(tools), f"tools: {sorted(tools)}")
    ro = tools["execute_kip_readonly"].annotations
    check(ro is not None and getattr(ro, "read_only_hint", getattr(ro, "readOnlyHint", None)) is True, f"readonly annotations: {ro}")
    rw = tools["execute_kip"].annotations
    check(getattr(rw, "destructive_hint", getattr(rw, "destructiveHint", None)) is True, f"execute_kip annotations: {rw}")
    schema = tools["execute_kip"].input_schema if hasattr(tools["execute_kip"], "input_schema") else tools["execute_kip"].inputSchema
    check("commands" in schema.get("properties", {}), f"execute_kip schema: {schema}")

    for name in ("execute_kip", "execute_kip_readonly"):
        check("COLUMNAR" in (tools[name].description or ""), f"{name} description does not say results are columnar")

    resources = [str(r.uri) for r in (await session.list_resources()).resources]
    check("kip://docs/syntax" in resources, f"resources: {resources}")
    doc = await session.read_resource("kip://docs/syntax")
    check("KQL" in doc.contents[0].text, "syntax reference text")
    check("kip://docs/responses" in resources, f"resources: {resources}")
    doc = await session.read_resource("kip://docs/responses")
    check("FIND(?d.name, ?s.name)" in doc.contents[0].text, "the responses document shows a two-column example")
    check("list_logs" in tools, f"tools: {sorted(tools)}")
    check("kip://memory/health" in resources, f"resources: {resources}")
    health = json.loads((await session.read_resource("kip://memory/health")).contents[0].text)
    check("count" in health["orphans"] and health["concepts"] > 0, f"memory health: {health}")

    prompts = [p.name for p in (await session.list_prompts()).prompts]
    check("kip_system_instructions" in prompts, f"prompts: {prompts}")
    prompt = await session.get_prompt("kip_system_instructions")
    check(len(prompt.messages) >= 1, "prompt messages")

    primer = await session.call_tool("execute_kip_readonly", {"command": "DESCRIBE PRIMER"})
    check(not is_error(primer), f"DESCRIBE PRIMER failed: {primer}")
    check("domain_map" in payload(primer)["result"], f"primer: {payload(primer)}")

    up = await session.call_tool(
        "execute_kip",
        {"command": 'UPSERT { CONCEPT ?p { {type: "Person", name: :n} SET ATTRIBUTES { role: "tester" } } }', "parameters": {"n": "Ada"}},
    )
    check(not is_error(up), f"UPSERT failed: {up}")
    check(payload(up)["result"]["blocks"] == 1, f"upsert result: {payload(up)}")

    found = await session.call_tool("execute_kip_readonly", {"command": 'FIND(?p.attributes.role) WHERE { ?p {type: "Person", name: "Ada"} }'})
    check(payload(found)["result"] == ["tester"], f"find: {payload(found)}")

    logs = payload(await session.call_tool("list_logs", {"limit": 2}))
    check(len(logs["result"]) == 2 and logs["result"][0]["interface"] == "mcp", f"list_logs: {logs}")
    check(logs["result"][0]["method"] == "execute_kip_readonly" and "Ada" in logs["result"][0]["command"], f"list_logs: {logs}")
    check(logs["next_cursor"] is not None, f"list_logs: {logs}")

    bad = await session.call_tool("execute_kip", {"command": 'FIND(?x) WHERE { ?x {type: "Nope"} }'})
    check(is_error(bad), f"a KIP error must be an isError result: {bad}")
    check(payload(bad)["error"]["code"] == "KIP_2001", f"error payload: {payload(bad)}")

    refused = await session.call_tool("execute_kip_readonly", {"command": "DELETE CONCEPT ?x DETACH WHERE { ?x {type: \"Person\", name: \"Ada\"} }"})
    check(is_error(refused) and payload(refused)["error"]["code"] == "KIP_3004", f"readonly refusal: {payload(refused)}")

    batch = await session.call_tool(
        "execute_kip",
        {"commands": ["DESCRIBE DOMAINS", "FIND(", {"command": 'SEARCH CONCEPT :q', "parameters": {"q": "ada"}}]},
    )
    results = payload(batch)["result"]
    check(len(results) == 3, f"batch: {results}")
    check(results[1]["error"]["code"] == "KIP_1001", f"batch syntax error inline: {results[1]}")
    check(results[2]["result"][0]["name"] == "Ada", f"batch search: {results[2]}")


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=["--data", sys.argv[3], "serve"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await exercise(session)
    else:
        async with contextlib.AsyncExitStack() as stack:
            key = os.environ.get("KIP_API_KEY")
            http = None
            if key:
                http = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}))
            streams = await stack.enter_async_context(streamable_http_client(sys.argv[2], http_client=http))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await exercise(session)
    print("ok")


if __name__ == "__main__":
    asyncio.run(main())
