"""Directives as MCP prompts (issue 17): prompts/list pages through the directives the caller can
see, prompts/get renders one with its declared inputs, and every refusal is -32602 with a clear
message, never error code 0 and a traceback. The SDK's own client, in memory, on the real
database."""

from __future__ import annotations

import logging

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmbeddedResource, Prompt, TextContent, TextResourceContents

from runner.mcp_server.catalog.listing import PAGE_SIZE
from tests.mcp_server.catalog_items import Items, catalog_server, items, unique

__all__ = ["catalog_server", "items"]  # fixtures

INPUTS = [
    {"name": "topic", "type": "string", "required": True, "description": "What to review."},
    {"name": "depth", "type": "string", "enum": ["quick", "deep"], "default": "quick", "description": "How far."},
    {"name": "audience", "type": "string", "description": "Who reads it."},
]


async def all_prompts(client: Client) -> tuple[list[Prompt], int]:
    """Every prompt, page by page (and how many pages it took)."""
    prompts: list[Prompt] = []
    cursor: str | None = None
    pages = 0
    while True:
        result = await client.list_prompts(cursor=cursor) if cursor else await client.list_prompts()
        pages += 1
        assert len(result.prompts) <= PAGE_SIZE
        prompts += result.prompts
        cursor = result.next_cursor
        if cursor is None:
            return prompts, pages


async def refused(call: object) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call  # type: ignore[misc]
    return info.value


async def test_a_directive_is_listed_as_a_prompt_with_its_inputs_as_arguments(
    catalog_server: MCPServer, items: Items
) -> None:
    ref = items.directive(unique("review"), "Review {topic}.", parameters=INPUTS, visibility="private")
    async with Client(catalog_server) as client:
        prompts = {p.name: p for p in (await all_prompts(client))[0]}
        assert "create_script_tool" in prompts, "the seed's directive is a prompt too"
        assert "kiwi_tool_authoring" not in prompts and "hello_world" not in prompts, "only directives"
        mine = prompts[ref]
        assert mine.title == f"Directive {ref}" and mine.description == f"test directive {ref}"
        args = [(a.name, a.required) for a in mine.arguments or []]
        assert args == [("topic", True), ("audience", False), ("depth", False)], "required first, then by name"
        depth = next(a for a in mine.arguments or [] if a.name == "depth")
        assert depth.description == 'How far. (one of quick, deep; default "quick")'


async def test_get_renders_the_instructions_with_the_arguments_and_defaults(
    catalog_server: MCPServer, items: Items
) -> None:
    knowledge = items.knowledge(unique("style"), "Be brief.")
    ref = items.directive(
        unique("review"),
        "Review {topic} ({depth}); keep ${HOME} and {unknown} as written.",
        parameters=INPUTS,
        cites=[knowledge, "no_such_knowledge_x", "hello_world"],
    )
    async with Client(catalog_server) as client:
        got = await client.get_prompt(ref, {"topic": "the parser"})
    assert got.description == f"test directive {ref}"
    first, cite = got.messages
    assert first.role == "user" and isinstance(first.content, TextContent)
    text = first.content.text
    assert text.startswith("Review the parser (quick); keep ${HOME} and {unknown} as written.")
    assert f"Directive: {ref}@1.0.0" in text and "- topic: the parser" in text and "- depth: quick" in text
    assert "audience" not in text, "an optional input without a default and not given is left out"
    assert f"execute(action='run', item_id='{ref}'" in text
    assert "Cited knowledge not available: no_such_knowledge_x, hello_world" in text, "a tool is not knowledge"
    assert isinstance(cite.content, EmbeddedResource), "the cited entry's text comes with the prompt"
    embedded = cite.content.resource
    assert isinstance(embedded, TextResourceContents) and embedded.text == "Be brief."
    assert embedded.uri == f"kiwi://knowledge/{knowledge}@1.0.0" and embedded.mime_type == "text/markdown"


async def test_get_takes_a_version_and_defaults_to_the_latest(catalog_server: MCPServer, items: Items) -> None:
    ref = items.directive(unique("versions"), "first")
    items.directive(ref, "second", version="1.1.0")
    async with Client(catalog_server) as client:
        latest = await client.get_prompt(ref)
        pinned = await client.get_prompt(f"{ref}@1.0.0")
    assert isinstance(latest.messages[0].content, TextContent) and latest.messages[0].content.text.startswith("second")
    assert isinstance(pinned.messages[0].content, TextContent) and pinned.messages[0].content.text.startswith("first")


async def test_wrong_arguments_are_invalid_params_naming_them(catalog_server: MCPServer, items: Items) -> None:
    ref = items.directive(unique("strict"), "Review {topic}.", parameters=INPUTS)
    async with Client(catalog_server) as client:
        missing = await refused(client.get_prompt(ref, {"depth": "deep"}))
        assert missing.code == INVALID_PARAMS and "missing required argument(s) topic" in missing.message
        empty = await refused(client.get_prompt(ref, {"topic": ""}))
        assert empty.code == INVALID_PARAMS and "topic" in empty.message
        unknown = await refused(client.get_prompt(ref, {"topic": "x", "colour": "red"}))
        assert unknown.code == INVALID_PARAMS and "unknown argument(s) colour" in unknown.message
        assert "audience, depth, topic" in unknown.message, "it says which arguments there are"
        outside = await refused(client.get_prompt(ref, {"topic": "x", "depth": "sideways"}))
        assert outside.code == INVALID_PARAMS and "depth must be one of quick, deep" in outside.message


async def test_an_unknown_prompt_is_invalid_params_not_code_0_and_logs_no_traceback(
    catalog_server: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (issue 17): prompts/get of an unknown name answered error code 0 and logged a
    full traceback; it is -32602, saying what to do, and the log stays quiet."""
    caplog.set_level(logging.DEBUG)
    async with Client(catalog_server) as client:
        for name in ("no_such_directive_x", "local/no_such_directive_x", "hello_world", "kiwi_tool_authoring"):
            error = await refused(client.get_prompt(name))
            assert error.code == INVALID_PARAMS, (name, error.code)
            assert error.message == f"unknown prompt: {name!r} (prompts/list names the directives you can use)"
        for name in ("", "create_script_tool@not-a-version", "bad name!"):
            bad = await refused(client.get_prompt(name))
            assert bad.code == INVALID_PARAMS and bad.message.startswith(f"unknown prompt: {name!r}")
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    assert "Traceback" not in caplog.text


async def test_list_pages_through_every_directive_once(catalog_server: MCPServer, items: Items) -> None:
    """More directives than one page: each is listed exactly once, across pages, in a stable
    order, and one published between two pages neither repeats nor skips the others."""
    stem = unique("paged")
    refs = [items.directive(f"{stem}_{i:03d}", f"directive {i}") for i in range(PAGE_SIZE + 7)]
    async with Client(catalog_server) as client:
        first = await client.list_prompts()
        assert len(first.prompts) == PAGE_SIZE and first.next_cursor
        items.directive(f"{stem}_000a", "published while paging")  # sorts into the first page: not seen
        seen = [p.name for p in first.prompts]
        cursor: str | None = first.next_cursor
        while cursor:
            page = await client.list_prompts(cursor=cursor)
            seen += [p.name for p in page.prompts]
            cursor = page.next_cursor
    assert len(seen) == len(set(seen)), "no prompt is listed twice"
    assert [r for r in seen if r.startswith(stem)] == refs, "every one, in order, once"
    assert seen == sorted(seen, key=lambda s: s.encode())


async def test_a_cursor_the_server_did_not_make_is_invalid_params(catalog_server: MCPServer) -> None:
    async with Client(catalog_server) as client:
        for cursor in ("not-a-cursor", "eyJ2IjogMn0", "%%%"):
            error = await refused(client.list_prompts(cursor=cursor))
            assert error.code == INVALID_PARAMS and "invalid cursor" in error.message
