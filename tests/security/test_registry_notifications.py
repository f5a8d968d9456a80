"""Registry notifications do not leak one tenant's private items to another (issue 17, item 4).

One `kiwi serve --transport http` process (one LISTEN connection) serves two tenants, A and
B, each with its own namespace and token. A change to A's private items is told to A's
sessions and to nobody else's: not as `list_changed`, not as `resources/updated` for a URI
B subscribed to by guessing it, in either era of the protocol. Public changes reach both.
And the NOTIFY payload itself, which any database login may LISTEN to, names no tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged

from runner.testing.http_serving import Served, kiwi_http_server, two_tenants
from tests.mcp_server.registry_changes import Inbox, listening, publish

TOOLS = "notifications/tools/list_changed"
RESOURCES = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"
SETTLE_S = 1.0  # after A heard a batch, how long B is given to (wrongly) hear it too


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("notify")) as s:
        yield s


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    with two_tenants(conn, "n") as made:
        yield made


@pytest.fixture
def made(conn: psycopg.Connection) -> Iterator[list[str]]:
    refs: list[str] = []
    yield refs
    for ref in reversed(refs):
        conn.execute("delete from tools where ref = %s", (ref,))


@contextlib.asynccontextmanager
async def client(url: str, token: str, inbox: Inbox | None = None, mode: str = "legacy") -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, message_handler=inbox) as c:
        yield c


async def subscribe(c: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await c.subscribe_resource(uri)


async def test_another_tenants_private_changes_are_not_told(
    served: Served, tenants: dict[str, dict[str, str]], conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    a, b = tenants["a"], tenants["b"]
    secret = publish(conn, f"{a['ns']}/secret_{uuid.uuid4().hex[:6]}", "knowledge", visibility="private")
    uri = f"kiwi://knowledge/{secret}"
    heard_a, heard_b = Inbox(), Inbox()
    async with client(served.url, a["token"], heard_a) as as_a, client(served.url, b["token"], heard_b) as as_b:
        await listening(database_url)
        await subscribe(as_a, uri)
        await subscribe(as_b, uri)  # B guessed the URI: honoured, as any URI is, but it must never fire
        # a private tool and a new version of the private entry
        publish(conn, f"{a['ns']}/hidden_{uuid.uuid4().hex[:6]}", visibility="private")
        publish(conn, secret, "knowledge", version="1.1.0", visibility="private")
        await heard_a.wait_for(TOOLS)
        await heard_a.wait_for(UPDATED, uri)
        await heard_a.wait_for(RESOURCES)
        await asyncio.sleep(SETTLE_S)
        assert heard_b.got == [], f"B heard of A's private changes: {heard_b.got}"
        # B's channel works: a public change reaches it, and still nothing of A's entry
        publish(conn, f"local/open_{uuid.uuid4().hex[:6]}", made=made)
        await heard_b.wait_for(TOOLS)
        assert heard_b.count(UPDATED) == 0 and heard_b.count(RESOURCES) == 0, heard_b.got


async def test_a_2026_listen_stream_hears_nothing_of_another_tenants_private_changes(
    served: Served, tenants: dict[str, dict[str, str]], conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    a, b = tenants["a"], tenants["b"]
    secret = publish(conn, f"{a['ns']}/secret_{uuid.uuid4().hex[:6]}", "knowledge", visibility="private")
    uri = f"kiwi://knowledge/{secret}"
    flags: dict[str, Any] = {"tools_list_changed": True, "resources_list_changed": True}
    async with (
        client(served.url, b["token"], mode="2026-07-28") as as_b,
        as_b.listen(**flags, resource_subscriptions=[uri]) as stream,
    ):
        await listening(database_url)
        publish(conn, secret, "knowledge", version="1.1.0", visibility="private")
        conn.execute("select deprecate_tool_version(%s, '1.0.0', 'old')", (secret,))
        await asyncio.sleep(SETTLE_S + 2.0)  # past the longest batch wait
        publish(conn, f"local/open_{uuid.uuid4().hex[:6]}", made=made)  # the first thing B may hear
        async with asyncio.timeout(10):
            first = await anext(aiter(stream))
        # had B heard A's entry change, ResourcesListChanged or ResourceUpdated would come first
        assert first == ToolsListChanged(), f"B's first event should be the public publish, got {first}"


def test_the_notify_payload_names_no_tool(conn: psycopg.Connection, database_url: str) -> None:
    ns = f"np_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, str(uuid.uuid4())))
    try:
        with psycopg.connect(database_url, autocommit=True) as ear:
            ear.execute("listen kiwi_registry")
            tool_id = f"confidential_{uuid.uuid4().hex[:8]}"
            publish(conn, f"{ns}/{tool_id}", "knowledge", visibility="private")
            payloads = [n.payload for n in ear.notifies(timeout=2.0)]
    finally:
        conn.execute("delete from tools where namespace = %s", (ns,))
        conn.execute("delete from namespaces where namespace = %s", (ns,))
    assert payloads, "a publish notifies kiwi_registry"
    for payload in payloads:
        assert tool_id not in payload, payload
        assert set(json.loads(payload)) == {"kind", "namespace", "visibility", "id"}, payload
