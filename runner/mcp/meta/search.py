"""The `search` meta-tool: the registry's ranked search, grouped into item types, with each
item's signature state, so an agent can pick what to load next."""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import Field

from ...core.text import first_line
from ...trust.states import signature_labels
from .args import ITEM_TYPES, check_item_type, item_type_of
from .results import guarded, ok
from .state import ServerState

__all__ = ["MAX_LIMIT", "search"]

MAX_LIMIT = 200  # what search_tools serves at most
FETCH_FOR_FILTER = 4  # item_type "tool" is filtered here: ask the registry for this many times the limit

Query = Annotated[
    str,
    Field(
        description=(
            "Words to look for in ids, names, descriptions and tags (typos are tolerated). "
            "Modifiers: type:T (a tool type, or tools on runtime T, e.g. type:python), category:C, "
            "mcp:SERVER (tools of an MCP server), namespace:N. Empty: everything, most used first."
        )
    ),
]
ItemType = Annotated[
    str | None,
    Field(
        description="Only this kind of item: directive, tool or knowledge. Leave out for all.",
        json_schema_extra={"enum": [*ITEM_TYPES, None]},
    ),
]
Limit = Annotated[int, Field(description="At most this many results.", ge=1, le=MAX_LIMIT)]


async def search(
    state: ServerState, query: Query = "", item_type: ItemType = None, limit: Limit = 20
) -> CallToolResult:
    """Search the Kiwi registry for directives, tools and knowledge. Returns ranked items with
    their item_id, item_type, tool_type, latest version and description. Next: load(item_id)."""

    async def call() -> CallToolResult:
        reg = state.registry
        kind = check_item_type(item_type)
        if kind == "tool":
            fetch = min(MAX_LIMIT, limit * FETCH_FOR_FILTER)
            rows = await reg.search(query, limit=fetch)
        else:
            rows = await reg.search(query, tool_type=kind, limit=limit)
        if kind is not None:  # a type: modifier in the query wins in SQL; item_type still holds
            rows = [r for r in rows if item_type_of(r.get("tool_type")) == kind]
        rows = rows[:limit]
        signed = await signature_labels(reg, rows, state.runner.settings.trust)
        items = [_item(r, signed[r["tool_id"]]) for r in rows]
        return ok(
            _search_text(query, kind, items), {"query": query, "item_type": kind, "count": len(items), "items": items}
        )

    return await guarded("search", call)


def _item(r: dict[str, Any], signature: dict[str, Any]) -> dict[str, Any]:
    return {
        "item_id": r["tool_id"],
        "item_type": item_type_of(r.get("tool_type")),
        "tool_type": r.get("tool_type"),
        "name": r.get("name"),
        "description": r.get("description"),
        "latest_version": r.get("latest_version"),
        "executor_id": r.get("executor_id"),
        "category": r.get("category"),
        "namespace": r.get("namespace"),
        "rank": r.get("rank"),
        "signature": signature,
    }


def _search_text(query: str, kind: str | None, items: list[dict[str, Any]]) -> str:
    if not items:
        text = f"no items found for {query!r}" + (f" (item_type {kind})" if kind else "")
        return text + "\nhint: try fewer or other words, drop a modifier, or search with an empty query"
    width = max(len(i["item_id"]) for i in items)
    lines = [
        f"{i['item_id']:<{width}}  {i['tool_type']:<10} {i['latest_version'] or '-':<8} "
        f"{i['signature']['state']:<9}  {first_line(i['description'])[:100]}"
        for i in items
    ]
    return f"{len(items)} item(s):\n" + "\n".join(lines) + "\n\nnext: load(item_id=...) to see one"
