"""Prompts and resources are read as the caller (issue 17): over `kiwi serve --transport http`,
each request as its verified JWT, user A's private (and unlisted) directives and knowledge never
appear in user B's prompts/list or resources/list, and B's prompts/get and resources/read of the
private ones get exactly the answer a name that does not exist gets, so B cannot even learn that
they exist (an unlisted one is read by whoever has its name, as everywhere in the registry). A
sees and reads them all. And an unknown prompt is -32602 over HTTP too, with no traceback in the
server's log (it was error code 0 and a traceback)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, TextContent
from psycopg.types.json import Jsonb

from runner.testing.http_serving import Served, kiwi_http_server, mcp_client, two_tenants


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("catalog")) as s:
        yield s


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    with two_tenants(conn, "c") as made:
        yield made


def publish(
    conn: psycopg.Connection, ns: str, tool_id: str, tool_type: str, visibility: str, text: str, **extra: Any
) -> str:
    manifest: dict[str, Any] = {
        "tool_id": tool_id,
        "namespace": ns,
        "tool_type": tool_type,
        "version": "1.0.0",
        "visibility": visibility,
        "description": f"{ns}'s {visibility} {tool_type}",
        "entrypoint": "text.md",
        **({"executor": "directive_runtime"} if tool_type == "directive" else {}),
        **extra,
    }
    files = [{"path": "text.md", "content_text": text, "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    return f"{ns}/{tool_id}"


async def every_name(client: Client, kind: str) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        if kind == "prompts":
            got = await client.list_prompts(cursor=cursor)
            names += [p.name for p in got.prompts]
        else:
            res = await client.list_resources(cursor=cursor)
            names += [r.name for r in res.resources]
            got = res  # type: ignore[assignment]
        cursor = got.next_cursor
        if cursor is None:
            return names


async def error_of(call: object) -> tuple[int, str]:
    with pytest.raises(MCPError) as info:
        await call  # type: ignore[misc]
    return info.value.code, info.value.message


async def test_a_tenant_s_directives_and_knowledge_are_invisible_to_another(
    served: Served, tenants: dict[str, dict[str, str]], conn: psycopg.Connection
) -> None:
    a, b = tenants["a"], tenants["b"]
    secret = "the secret text of A"
    mine = {
        (kind, vis): publish(conn, a["ns"], f"{kind[:3]}_{vis}", kind, vis, f"{secret} ({kind}, {vis})")
        for kind in ("directive", "knowledge")
        for vis in ("private", "unlisted")
    }
    knowledge = mine["knowledge", "private"]
    own_citing = publish(conn, a["ns"], "cites_own", "directive", "private", "Follow it.", cites=[knowledge])
    ghost = f"{a['ns']}/no_such_item"  # in A's namespace, but never published
    async with mcp_client(served.url, a["token"]) as as_a, mcp_client(served.url, b["token"]) as as_b:
        # lists: A sees its own, B nothing of A's namespace
        assert {mine["directive", v] for v in ("private", "unlisted")} <= set(await every_name(as_a, "prompts"))
        assert {mine["knowledge", v] for v in ("private", "unlisted")} <= set(await every_name(as_a, "resources"))
        for kind in ("prompts", "resources"):
            leaked = [n for n in await every_name(as_b, kind) if n.startswith(a["ns"] + "/")]
            assert leaked == [], f"B's {kind}/list shows A's {leaked}"

        # prompts/get: A renders its own; B gets what a name that does not exist gets
        got = await as_a.get_prompt(mine["directive", "private"])
        assert isinstance(got.messages[0].content, TextContent) and secret in got.messages[0].content.text
        code, message = await error_of(as_b.get_prompt(ghost))
        ref = mine["directive", "private"]
        assert await error_of(as_b.get_prompt(ref)) == (code, message.replace(ghost, ref))
        assert code == INVALID_PARAMS
        # unlisted means what it means in the registry: never listed, read by whoever has its name
        assert (await as_b.get_prompt(mine["directive", "unlisted"])).messages
        # B's own directive citing A's private knowledge does not bring A's text along
        citing = publish(conn, b["ns"], "cites_a", "directive", "private", "Follow it.", cites=[knowledge])
        as_cited = (await as_b.get_prompt(citing)).messages
        assert len(as_cited) == 1 and secret not in str(as_cited) and f"not available: {knowledge}" in str(as_cited)
        assert secret in str((await as_a.get_prompt(own_citing)).messages), "A's own citation embeds its text"

        # resources/read: the same for knowledge, by versioned and latest URIs
        read = await as_a.read_resource(f"kiwi://knowledge/{mine['knowledge', 'private']}@1.0.0")
        assert secret in getattr(read.contents[0], "text", "")
        code, message = await error_of(as_b.read_resource(f"kiwi://knowledge/{ghost}"))
        assert code == INVALID_PARAMS
        ref = mine["knowledge", "private"]
        for uri in (f"kiwi://knowledge/{ref}", f"kiwi://knowledge/{ref}@1.0.0"):
            same = message.replace(f"kiwi://knowledge/{ghost}", uri)
            assert await error_of(as_b.read_resource(uri)) == (code, same)
        assert (await as_b.read_resource(f"kiwi://knowledge/{mine['knowledge', 'unlisted']}")).contents
    assert secret not in served.stderr(), "nothing of A's text reaches the server's log"


async def test_an_unknown_prompt_over_http_is_invalid_params_and_logs_no_traceback(
    served: Served, tenants: dict[str, dict[str, str]]
) -> None:
    """Regression (issue 17): error code 0 and a full traceback in the server's log."""
    async with mcp_client(served.url, tenants["a"]["token"]) as client:
        code, message = await error_of(client.get_prompt("no_such_prompt_anywhere"))
        assert (code, message) == (
            INVALID_PARAMS,
            "unknown prompt: 'no_such_prompt_anywhere' (prompts/list names the directives you can use)",
        )
        code, _ = await error_of(client.read_resource("kiwi://knowledge/no_such_entry_anywhere"))
        assert code == INVALID_PARAMS
    assert "Traceback" not in served.stderr(), served.stderr()
