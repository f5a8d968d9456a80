"""The registry: search as agents search, a tool's page (versions, chain, files, signatures,
dependents), a diff between two versions, and yank, deprecate and restore for those allowed
(the registry decides who: the namespace's owners and admins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...errors import NotFound, UsageError
from ...principal import Principal
from ...registry.base import Select
from ...search.combined import search
from ...search.query import parse
from ..diff import version_diff
from .forms import text_field

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["PAGES"]

SEARCH_LIMIT = 25


async def registry_search(console: Console, request: Request, principal: Principal) -> Response:
    query = text_field(request.query_params, "q")
    found = await search(console.registry, parse(query), limit=SEARCH_LIMIT, embedder=console.embedder())
    return console.render(
        request,
        "registry.html",
        who=principal.describe(),
        q=query,
        results=found.rows,
        mode=found.search_mode,
    )


async def _rows(console: Console, view: str, args: dict[str, Any], order: tuple[str, ...]) -> list[dict[str, Any]]:
    return list(await console.registry.backend.call(view, args, returns=Select(order=order), read=True) or [])


async def tool(console: Console, request: Request, principal: Principal) -> Response:
    tool_id = str(request.path_params["tool_id"])
    catalog = await _rows(console, "tool_catalog", {"tool_id": tool_id}, ("tool_id",))
    if not catalog:
        raise NotFound(f"tool {tool_id} not found", hint="search the registry: only tools you may read are listed")
    item = catalog[0]
    versions = await _rows(console, "tool_version_history", {"tool_id": tool_id}, ("published_at",))
    versions.reverse()  # newest first
    version = text_field(request.query_params, "version") or item.get("latest_version")
    source = await console.registry.version_source(tool_id, version) if version else {}
    try:
        chain = await console.registry.chain(tool_id, version)
    except (NotFound, UsageError) as e:
        chain = [{"tool_id": f"(no chain: {e.message})"}]
    signatures = await console.registry.signature_states([tool_id])
    dependents = await _rows(console, "tool_dependents", {"executor_id": tool_id}, ("executor_id",))
    return console.render(
        request,
        "tool.html",
        who=principal.describe(),
        tool=item,
        versions=versions,
        version=version,
        source=source,
        chain=chain,
        signatures=signatures,
        dependents=dependents[0]["tools"] if dependents else [],
    )


async def diff(console: Console, request: Request, principal: Principal) -> Response:
    tool_id = str(request.path_params["tool_id"])
    old = text_field(request.query_params, "from")
    new = text_field(request.query_params, "to")
    if not old or not new:
        raise UsageError("a diff needs two versions", hint="choose them on the tool's page")
    before = await console.registry.version_source(tool_id, old)
    after = await console.registry.version_source(tool_id, new)
    return console.render(
        request,
        "diff.html",
        who=principal.describe(),
        tool_id=tool_id,
        old=old,
        new=new,
        parts=version_diff(before, after),
    )


async def lifecycle(console: Console, request: Request, principal: Principal) -> Response:
    from ..base import base_path

    tool_id = str(request.path_params["tool_id"])
    form = await request.form()
    action = text_field(form, "action")
    version = text_field(form, "version")
    message = text_field(form, "message") or None
    if not version:
        raise UsageError("which version? the form names none")
    if action == "yank":
        await console.registry.yank(tool_id, version, message)
    elif action == "deprecate":
        await console.registry.deprecate(tool_id, version, message)
    elif action == "restore":
        await console.registry.backend.call("unyank_tool_version", {"p_tool_id": tool_id, "p_version": version})
    else:
        raise UsageError("a version is yanked, deprecated or restored")
    return RedirectResponse(f"{base_path(request)}/tools/{tool_id}?version={version}", status_code=303)


PAGES = [
    ("/registry", registry_search, ("GET",)),
    ("/tools/{tool_id:path}/diff", diff, ("GET",)),
    ("/tools/{tool_id:path}/lifecycle", lifecycle, ("POST",)),
    ("/tools/{tool_id:path}", tool, ("GET",)),
]
