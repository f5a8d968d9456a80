"""Knowledge entries as MCP resources, by stable URIs:

    kiwi://knowledge/<ref>@<version>   that version, for ever (versions are immutable)
    kiwi://knowledge/<ref>             the latest version, whichever it is when read

`<ref>` is the entry's reference, with its namespace when it has one
(`kiwi://knowledge/acme/style_guide@1.0.0`); a client that percent-encodes it (`acme%2Fstyle_guide`,
as RFC 6570's simple expansion does for the templates) is read the same.

resources/list lists the latest version of each entry the caller can see, by its versioned URI;
resources/templates/list gives both forms as templates; resources/read answers the entry's
text (its entrypoint file, with that file's media type; an entry without one, each text file,
as `<uri>#<path>`). Anything else (another scheme, a tool that is not knowledge, an entry
the caller may not read, a version that does not exist) is -32602 "resource not found",
the same answer whether it is missing or invisible, so nothing leaks.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from mcp.server.context import ServerRequestContext
from mcp_types import (
    BlobResourceContents,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from ...core.plan import Plan
from ...errors import UsageError
from ..meta.state import ServerState
from .listing import answered, invalid_params, page

__all__ = [
    "PREFIX",
    "TEMPLATES",
    "contents_of",
    "knowledge_uri",
    "list_resource_templates",
    "list_resources",
    "parse_uri",
    "read_resource",
    "resource_of",
]

PREFIX = "kiwi://knowledge/"
KNOWLEDGE = "knowledge"
DEFAULT_MIME = "text/plain"

TEMPLATES = (
    ResourceTemplate(
        name="knowledge",
        title="A knowledge entry, one version",
        uri_template=PREFIX + "{ref}@{version}",
        description=(
            "A knowledge entry of the Kiwi registry at one version (immutable). ref is its reference, "
            "namespace/tool_id outside the public namespace; find entries with resources/list or search."
        ),
    ),
    ResourceTemplate(
        name="knowledge_latest",
        title="A knowledge entry, latest version",
        uri_template=PREFIX + "{ref}",
        description="A knowledge entry of the Kiwi registry at its latest version, whichever it is when read.",
    ),
)


def knowledge_uri(ref: str, version: str | None = None) -> str:
    return PREFIX + ref + (f"@{version}" if version else "")


def parse_uri(uri: str) -> tuple[str, str | None] | None:
    """(ref, version or None for the latest) of a knowledge URI; None for any other URI."""
    if not uri.startswith(PREFIX):
        return None
    rest = unquote(uri[len(PREFIX) :].split("#", 1)[0].split("?", 1)[0])
    ref, at, version = rest.rpartition("@")
    if not at:
        ref, version = version, ""
    if not ref.strip() or (at and not version.strip()):
        return None
    return ref.strip(), version.strip() or None


def resource_of(row: dict[str, Any]) -> Resource:
    """One list_items row (a knowledge entry) as a resource: its latest version's URI."""
    return Resource(
        name=row["tool_id"],
        title=row.get("name") or None,
        uri=knowledge_uri(row["tool_id"], row["latest_version"]),
        description=row.get("description") or None,
        mime_type=row.get("media_type") or None,
        size=row.get("size_bytes"),
    )


async def list_resources(
    state: ServerState, ctx: ServerRequestContext[Any], params: PaginatedRequestParams
) -> ListResourcesResult:
    async def call() -> ListResourcesResult:
        got = await page(state.registry, KNOWLEDGE, params.cursor)
        return ListResourcesResult(resources=[resource_of(r) for r in got.rows], next_cursor=got.next_cursor)

    return await answered("resources/list", call, not_found=invalid_params("invalid cursor"))


async def list_resource_templates(
    state: ServerState, ctx: ServerRequestContext[Any], params: PaginatedRequestParams
) -> ListResourceTemplatesResult:
    """Two templates, on one page (a cursor is not needed, and any cursor is refused)."""
    if params.cursor:
        raise invalid_params("invalid cursor: resources/templates/list has one page", cursor=params.cursor)
    return ListResourceTemplatesResult(resource_templates=list(TEMPLATES))


async def read_resource(
    state: ServerState, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
) -> ReadResourceResult:
    uri = str(params.uri)
    not_found = invalid_params(f"resource not found: {uri}", uri=uri)

    async def call() -> ReadResourceResult:
        named = parse_uri(uri)
        if named is None:
            raise not_found
        try:
            plan = await state.registry.plan(*named)
        except UsageError:  # a reference or version no entry can have
            raise not_found from None
        if plan.tool_type != KNOWLEDGE:
            raise not_found
        return ReadResourceResult(contents=contents_of(uri, plan))

    return await answered("resources/read", call, not_found=not_found)


def contents_of(uri: str, plan: Plan) -> list[TextResourceContents | BlobResourceContents]:
    """A knowledge entry's text as resource contents read by `uri`."""
    versioned = knowledge_uri(plan.tool_id, plan.version)
    meta = {"version": plan.version, "content_hash": plan.content_hash, "uri": versioned}
    entry = plan.entrypoint
    if entry is not None and entry.content_text is not None:
        return [TextResourceContents(uri=uri, text=entry.content_text, mime_type=_mime(entry.media_type), _meta=meta)]
    base = uri.split("#", 1)[0]
    return [
        TextResourceContents(uri=f"{base}#{f.path}", text=f.content_text, mime_type=_mime(f.media_type), _meta=meta)
        for f in plan.files
        if f.content_text is not None
    ]


def _mime(media_type: str | None) -> str:
    return media_type or DEFAULT_MIME
