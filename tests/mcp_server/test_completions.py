"""completion/complete on Kiwi's MCP server (issue 17): a prompt's argument completes to its
directive input's enum values (or examples and default) that start with what was typed, the
knowledge templates' `{ref}` to the references of the entries the caller can see, at most 100
with `hasMore`; an unknown prompt or template is -32602. The SDK's own client, in memory, on the
real database, as the local owner."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Completion, PromptReference, ResourceTemplateReference
from psycopg.types.json import Jsonb

from runner.mcp_server.catalog.completions import MAX_VALUES
from tests.mcp_server.catalog_items import Items, catalog_server, items, unique

__all__ = ["catalog_server", "items"]  # fixtures

VERSIONED = ResourceTemplateReference(type="ref/resource", uri="kiwi://knowledge/{ref}@{version}")
LATEST = ResourceTemplateReference(type="ref/resource", uri="kiwi://knowledge/{ref}")
INPUTS = [
    {"name": "topic", "type": "string", "required": True, "description": "No values declared."},
    {"name": "depth", "type": "string", "enum": ["quick", "deep", "deeper", "Detailed"], "default": "quick"},
    {"name": "level", "type": "integer", "enum": [1, 2, 10]},
]
SCHEMA = {
    "type": "object",
    "properties": {
        "language": {"type": "string", "examples": ["python", "perl", "go"], "default": "python"},
        "style": {"type": "string", "default": "terse"},
    },
}


def prompt(name: str) -> PromptReference:
    return PromptReference(type="ref/prompt", name=name)


async def values(client: Client, ref: PromptReference | ResourceTemplateReference, name: str, typed: str) -> Completion:
    return (await client.complete(ref, {"name": name, "value": typed})).completion


async def refused(call: object) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call  # type: ignore[misc]
    return info.value


async def test_the_server_declares_completions(catalog_server: MCPServer) -> None:
    async with Client(catalog_server) as client:
        assert client.server_capabilities.completions is not None


async def test_a_prompt_argument_completes_to_its_enum_values_that_start_with_the_typed_text(
    catalog_server: MCPServer, items: Items
) -> None:
    ref = items.directive(unique("review"), "Review {topic}.", parameters=INPUTS)
    async with Client(catalog_server) as client:
        everything = await values(client, prompt(ref), "depth", "")
        assert everything.values == ["quick", "deep", "deeper", "Detailed"] and everything.has_more is False
        assert (await values(client, prompt(ref), "depth", "dee")).values == ["deep", "deeper"]
        assert (await values(client, prompt(ref), "depth", "DE")).values == ["deep", "deeper", "Detailed"]
        assert (await values(client, prompt(ref), "depth", "x")).values == []
        assert (await values(client, prompt(ref), "level", "1")).values == ["1", "10"], "as prompts/get takes them"
        pinned = await values(client, prompt(f"{ref}@1.0.0"), "depth", "q")
        assert pinned.values == ["quick"]
        assert (await values(client, prompt(ref), "topic", "")).values == [], "nothing declared, nothing offered"
        assert (await values(client, prompt(ref), "no_such_input", "")).values == []
        got = await client.get_prompt(ref, {"topic": "x", "level": "10"})
        assert "- level: 10" in str(got.messages[0].content), "a completed value is one prompts/get accepts"


async def test_without_an_enum_the_examples_and_the_default_are_offered(
    catalog_server: MCPServer, items: Items
) -> None:
    ref = items.directive(unique("lang"), "Write {language}.", parameters=SCHEMA)
    async with Client(catalog_server) as client:
        assert (await values(client, prompt(ref), "language", "")).values == ["python", "perl", "go"]
        assert (await values(client, prompt(ref), "language", "p")).values == ["python", "perl"]
        assert (await values(client, prompt(ref), "style", "te")).values == ["terse"]


async def test_an_unknown_prompt_or_template_is_invalid_params(catalog_server: MCPServer, items: Items) -> None:
    knowledge = items.knowledge(unique("notes"), "Notes.")
    async with Client(catalog_server) as client:
        for name in ("no_such_directive_x", "hello_world", knowledge, "bad name!", ""):
            error = await refused(values(client, prompt(name), "any", ""))
            assert error.code == INVALID_PARAMS, (name, error.code)
            assert error.message.startswith(f"unknown prompt: {name!r}")
        bad = ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data")
        error = await refused(values(client, bad, "id", ""))
        assert error.code == INVALID_PARAMS and "unknown resource template" in error.message


async def test_the_ref_of_a_knowledge_template_completes_to_visible_references(
    catalog_server: MCPServer, items: Items, other_tenant_knowledge: str
) -> None:
    stem = unique("kb")
    made = [items.knowledge(f"{stem}_{name}", "text") for name in ("alpha", "alps", "beta")]
    items.directive(f"{stem}_also_a_directive", "not knowledge")
    async with Client(catalog_server) as client:
        for template in (VERSIONED, LATEST):
            every = await values(client, template, "ref", stem)
            assert every.values == made and every.has_more is False and every.total == 3
        assert (await values(client, LATEST, "ref", f"{stem}_al")).values == made[:2]
        encoded = stem.replace("/", "%2F") + "_b"
        assert (await values(client, LATEST, "ref", encoded)).values == made[2:], "a percent-encoded / is read"
        assert (await values(client, LATEST, "ref", f"{stem}_x")).values == []
        assert (await values(client, VERSIONED, "version", "1")).values == [], "only {ref} completes"
        namespace = other_tenant_knowledge.split("/")[0]
        assert (await values(client, LATEST, "ref", namespace)).values == [], "another tenant's private entry"
        public = await values(client, LATEST, "ref", "")
        assert all("/" not in v or v.startswith("local/") for v in public.values)


async def test_at_most_100_references_and_has_more_beyond(catalog_server: MCPServer, items: Items) -> None:
    stem = unique("many")
    made = [items.knowledge(f"{stem}_{i:03d}", "text") for i in range(MAX_VALUES + 1)]
    async with Client(catalog_server) as client:
        got = await values(client, LATEST, "ref", stem)
        assert got.values == made[:MAX_VALUES] and got.has_more is True and got.total is None
        last = await values(client, LATEST, "ref", f"{stem}_1")
        assert last.values == [made[MAX_VALUES]] and last.has_more is False


@pytest.fixture
def other_tenant_knowledge(conn: psycopg.Connection) -> Iterator[str]:
    """A private knowledge entry in a namespace the local owner is not a member of."""
    ns = f"comp_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, str(uuid.uuid4())))
    manifest = {"tool_id": "secret_notes", "namespace": ns, "tool_type": "knowledge", "version": "1.0.0"}
    manifest |= {"visibility": "private", "entrypoint": "text.md"}
    files = [{"path": "text.md", "content_text": "secret", "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    assert conn.execute("select 1 from tools where ref = %s", (f"{ns}/secret_notes",)).fetchone(), "published"
    yield f"{ns}/secret_notes"
    conn.execute("delete from tools where namespace = %s", (ns,))
    conn.execute("delete from namespaces where namespace = %s", (ns,))
