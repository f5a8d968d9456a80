"""A connected agent learns of the registry's changes: tools, prompts and resources
`list_changed`, and `resources/updated` for a knowledge entry it subscribed to, driven by
Postgres NOTIFY (schema file 340_registry_notifications.sql) through one LISTEN
connection per server (runner/mcp_server/registry_events.py, agent_notifications.py).

The real database; the changes are made by another connection, as another agent's publish
would be. Clients are the SDK's own, in memory: the handshake era (mode="legacy",
resources/subscribe) and the 2026-07-28 era (subscriptions/listen).
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

from runner import Runner, build_server
from runner.testing.http_serving import ROOT, serve_env
from tests.mcp_server.registry_changes import Inbox, listening, publish, unique

TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
RESOURCES = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"


@pytest.fixture
async def server(make_runner: Callable[..., Runner]) -> MCPServer:
    return build_server(make_runner(), embedder=None)


@pytest.fixture
def made(conn: psycopg.Connection) -> Iterator[list[str]]:
    refs: list[str] = []
    yield refs
    for ref in reversed(refs):
        conn.execute("delete from tools where ref = %s", (ref,))


def legacy(server: MCPServer, inbox: Inbox) -> Client:
    return Client(server, mode="legacy", message_handler=inbox)


async def subscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():  # deprecated at 2026-07-28, the era this client does not speak
        warnings.simplefilter("ignore")
        await client.subscribe_resource(uri)


async def unsubscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.unsubscribe_resource(uri)


async def test_the_server_declares_list_changed_and_subscribe(server: MCPServer) -> None:
    async with legacy(server, Inbox()) as client:
        caps = client.server_capabilities
        assert caps.tools and caps.tools.list_changed
        assert caps.prompts and caps.prompts.list_changed
        assert caps.resources and caps.resources.list_changed and caps.resources.subscribe


async def test_a_publish_elsewhere_tells_the_agent_the_tool_list_changed(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    inbox = Inbox()
    async with legacy(server, inbox), legacy(server, Inbox()):
        assert await listening(database_url) == 1, "one LISTEN connection per server, not per session"
        publish(conn, unique("notified"), made=made)
        await inbox.wait_for(TOOLS)
        assert inbox.count(PROMPTS) == inbox.count(RESOURCES) == 0, inbox.got
        # a yank and a delete are changes too
        seen = inbox.count(TOOLS)
        conn.execute("select yank_tool_version(%s, '1.0.0', 'bad')", (made[0],))
        await inbox.wait_for(TOOLS, after=seen)
        seen = inbox.count(TOOLS)
        conn.execute("select delete_tool(%s)", (made[0],))
        await inbox.wait_for(TOOLS, after=seen)


async def test_directives_are_prompts_and_knowledge_resources(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    inbox = Inbox()
    async with legacy(server, inbox):
        await listening(database_url)
        publish(conn, unique("a_directive"), "directive", made=made)
        await inbox.wait_for(PROMPTS)
        publish(conn, unique("a_knowledge"), "knowledge", made=made)
        await inbox.wait_for(RESOURCES)
        assert inbox.count(TOOLS) == 0, inbox.got


async def test_a_subscribed_entry_tells_updated_until_unsubscribed(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    ref = publish(conn, unique("watched"), "knowledge", made=made)
    other = publish(conn, unique("unwatched"), "knowledge", made=made)
    uri, other_uri = f"kiwi://knowledge/{ref}", f"kiwi://knowledge/{other}@1.0.0"
    inbox = Inbox()
    async with legacy(server, inbox) as client:
        await listening(database_url)
        await subscribe(client, uri)
        await subscribe(client, "test://not-ours")  # honoured, never fires
        publish(conn, ref, "knowledge", version="1.1.0")
        await inbox.wait_for(UPDATED, uri)
        conn.execute("select deprecate_tool_version(%s, '1.0.0', 'old')", (ref,))
        await inbox.wait_for(UPDATED, uri, after=1)
        lists = inbox.count(RESOURCES)
        publish(conn, other, "knowledge", version="1.1.0")  # not subscribed
        await inbox.wait_for(RESOURCES, after=lists)
        assert inbox.count(UPDATED, other_uri) == 0, inbox.got

        await unsubscribe(client, uri)
        before, lists = inbox.count(UPDATED), inbox.count(RESOURCES)
        publish(conn, ref, "knowledge", version="1.2.0")
        await inbox.wait_for(RESOURCES, after=lists)  # the same batch would have carried it
        await asyncio.sleep(0.5)
        assert inbox.count(UPDATED) == before, inbox.got


async def test_a_subscription_made_before_the_entry_exists_fires_once_it_is_published(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    ref = unique("later")
    uri = f"kiwi://knowledge/{ref}@1.0.0"
    inbox = Inbox()
    async with legacy(server, inbox) as client:
        await listening(database_url)
        await subscribe(client, uri)
        publish(conn, ref, "knowledge", made=made)
        await inbox.wait_for(UPDATED, uri)


async def test_a_burst_of_publishes_is_a_few_notifications(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    inbox = Inbox()
    async with legacy(server, inbox):
        await listening(database_url)
        for _ in range(60):  # sixty transactions, as a bulk import makes them
            publish(conn, unique("burst"), made=made)
        await inbox.wait_for(TOOLS)
        await asyncio.sleep(2.5)  # the longest a batch waits
        assert 1 <= inbox.count(TOOLS) <= 4, f"{inbox.count(TOOLS)} notifications for 60 publishes"


async def test_a_2026_client_hears_through_subscriptions_listen(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    ref = publish(conn, unique("listened"), "knowledge", made=made)
    uri = f"kiwi://knowledge/{ref}"
    async with (
        Client(server, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True, resource_subscriptions=[uri]) as stream,
    ):
        await listening(database_url)
        publish(conn, unique("listened_tool"), made=made)
        publish(conn, ref, "knowledge", version="2.0.0")
        got: set[object] = set()
        async with asyncio.timeout(10):
            async for event in stream:
                got.add(event)
                if {ToolsListChanged(), ResourceUpdated(uri=uri)} <= got:
                    break


async def test_the_listener_comes_back_after_its_connection_is_killed(
    server: MCPServer, conn: psycopg.Connection, database_url: str, made: list[str]
) -> None:
    inbox = Inbox()
    async with legacy(server, inbox):
        await listening(database_url)
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where datname = current_database() and query = 'listen kiwi_registry'"
        )
        # after the reconnect (about a second), anything may have changed: every list is told
        await inbox.wait_for(TOOLS)
        assert await listening(database_url) == 1
        seen = inbox.count(PROMPTS)
        publish(conn, unique("after_restart"), "directive", made=made)
        await inbox.wait_for(PROMPTS, after=seen)


async def test_kiwi_serve_over_stdio_tells_its_agent(
    conn: psycopg.Connection, database_url: str, made: list[str], tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio"],
        env=serve_env(database_url, tmp_path),
        cwd=str(ROOT),
    )
    inbox = Inbox()
    async with Client(params, mode="legacy", message_handler=inbox) as client:
        assert client.server_capabilities.tools and client.server_capabilities.tools.list_changed
        await listening(database_url)
        publish(conn, unique("stdio"), made=made)
        await inbox.wait_for(TOOLS)
