"""Knowledge as MCP resources (issue 17): resources/list pages through the knowledge entries the
caller can see by stable URIs (kiwi://knowledge/<ref>@<version>), resources/read answers their
text with its media type (kiwi://knowledge/<ref> is the latest), resources/templates/list gives
both forms, and anything else is -32602 "resource not found". The SDK's own client, in memory,
on the real database."""

from __future__ import annotations

import logging

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Resource, TextResourceContents

from runner.mcp_server.catalog.listing import PAGE_SIZE
from tests.mcp_server.catalog_items import Items, catalog_server, items, unique

__all__ = ["catalog_server", "items"]  # fixtures


async def all_resources(client: Client) -> list[Resource]:
    resources: list[Resource] = []
    cursor: str | None = None
    while True:
        result = await client.list_resources(cursor=cursor) if cursor else await client.list_resources()
        assert len(result.resources) <= PAGE_SIZE
        resources += result.resources
        cursor = result.next_cursor
        if cursor is None:
            return resources


async def refused(call: object) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call  # type: ignore[misc]
    return info.value


def only_text(contents: list[object]) -> TextResourceContents:
    [one] = contents
    assert isinstance(one, TextResourceContents)
    return one


async def test_knowledge_is_listed_by_its_versioned_uri_with_its_media_type(
    catalog_server: MCPServer, items: Items
) -> None:
    ref = items.knowledge(unique("guide"), "# Guide\n\nRead me.", visibility="private")
    items.knowledge(ref, "# Guide\n\nRead me, v2.", version="1.1.0")
    async with Client(catalog_server) as client:
        listed = {r.name: r for r in await all_resources(client)}
    assert "kiwi_tool_authoring" in listed and "create_script_tool" not in listed, "only knowledge"
    mine = listed[ref]
    assert str(mine.uri) == f"kiwi://knowledge/{ref}@1.1.0", "the latest version, by its stable URI"
    assert mine.mime_type == "text/markdown" and mine.size == len(b"# Guide\n\nRead me, v2.")
    assert mine.title == f"Knowledge {ref}" and mine.description == f"test knowledge {ref}"


async def test_read_answers_a_version_for_ever_and_the_latest_without_one(
    catalog_server: MCPServer, items: Items
) -> None:
    ref = items.knowledge(unique("notes"), "first text")
    async with Client(catalog_server) as client:
        before = only_text((await client.read_resource(f"kiwi://knowledge/{ref}")).contents)
        items.knowledge(ref, "second text", version="1.1.0")
        pinned = only_text((await client.read_resource(f"kiwi://knowledge/{ref}@1.0.0")).contents)
        latest = only_text((await client.read_resource(f"kiwi://knowledge/{ref}")).contents)
        encoded = only_text((await client.read_resource(f"kiwi://knowledge/{ref.replace('/', '%2F')}@1.1.0")).contents)
    assert before.text == "first text" and pinned.text == "first text"
    assert latest.text == "second text" and encoded.text == "second text"
    assert str(pinned.uri) == f"kiwi://knowledge/{ref}@1.0.0" and pinned.mime_type == "text/markdown"
    assert latest.meta is not None and latest.meta["uri"] == f"kiwi://knowledge/{ref}@1.1.0"
    assert latest.meta["version"] == "1.1.0" and len(latest.meta["content_hash"]) == 64


async def test_an_entry_without_an_entrypoint_is_read_file_by_file(catalog_server: MCPServer, items: Items) -> None:
    ref = items.knowledge(unique("bundle"), {"a.md": "alpha", "b.txt": "beta"})
    uri = f"kiwi://knowledge/{ref}@1.0.0"
    async with Client(catalog_server) as client:
        contents = (await client.read_resource(uri)).contents
    by_uri = {str(c.uri): c for c in contents if isinstance(c, TextResourceContents)}
    assert by_uri[f"{uri}#a.md"].text == "alpha" and by_uri[f"{uri}#a.md"].mime_type == "text/markdown"
    assert by_uri[f"{uri}#b.txt"].text == "beta" and by_uri[f"{uri}#b.txt"].mime_type == "text/plain"


async def test_templates_give_both_uri_forms(catalog_server: MCPServer) -> None:
    async with Client(catalog_server) as client:
        templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["kiwi://knowledge/{ref}@{version}", "kiwi://knowledge/{ref}"]
    assert all(t.description for t in templates)


async def test_what_is_not_a_readable_knowledge_entry_is_resource_not_found(
    catalog_server: MCPServer, items: Items, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ref = items.knowledge(unique("exists"), "text")
    async with Client(catalog_server) as client:
        for uri in (
            "kiwi://knowledge/no_such_entry_x",
            f"kiwi://knowledge/{ref}@9.9.9",  # a version that does not exist
            "kiwi://knowledge/hello_world@1.0.0",  # a tool, not knowledge
            "kiwi://knowledge/create_script_tool",  # a directive is a prompt, not a resource
            "kiwi://knowledge/",
            f"kiwi://knowledge/{ref}@",
            f"kiwi://knowledge/{ref}@not-a-version",
            "kiwi://knowledge/bad ref!@1.0.0",
            "kiwi://tools/hello_world",
            "test://static-text",
            "file:///etc/passwd",
        ):
            error = await refused(client.read_resource(uri))
            assert error.code == INVALID_PARAMS, (uri, error.code, error.message)
            assert error.message == f"resource not found: {uri}"
    assert not [r for r in caplog.records if r.exc_info], "no traceback for an ordinary refusal"


async def test_list_pages_through_every_entry_once(catalog_server: MCPServer, items: Items) -> None:
    stem = unique("paged_k")
    refs = [items.knowledge(f"{stem}_{i:03d}", f"entry {i}") for i in range(PAGE_SIZE + 3)]
    async with Client(catalog_server) as client:
        first = await client.list_resources()
        assert len(first.resources) == PAGE_SIZE and first.next_cursor
        seen = [r.name for r in await all_resources(client)]
        error = await refused(client.list_resources(cursor="bogus"))
        assert error.code == INVALID_PARAMS and "invalid cursor" in error.message
        error = await refused(client.list_resource_templates(cursor="bogus"))
        assert error.code == INVALID_PARAMS
    assert len(seen) == len(set(seen)) and [r for r in seen if r.startswith(stem)] == refs
