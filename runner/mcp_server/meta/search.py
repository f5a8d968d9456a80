"""The `search` meta-tool: the registry's ranked search, grouped into item types, with each
item's signature state, so an agent can pick what to load next.

The query is embedded here, in the server's process, by the server's embedder
(`ServerState.embedder`), and the registry fuses words and meaning (runner/search/combined.py);
each item says how it matched (`matched_by`) and the answer how it was ranked (`search_mode`).
The local spaces' tools are searched too when the server serves them (`--local-spaces`), as
`kiwi run` would run them; a `local:` modifier searches only them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

from mcp_types import CallToolResult
from pydantic import Field

from ...core.text import first_line
from ...registry.spaces import spaces
from ...search.combined import LOCAL_SIGNATURE, REGISTRY
from ...search.combined import search as search_everywhere
from ...search.query import parse
from ...trust.states import signature_labels
from .args import ITEM_TYPES, check_item_type, item_type_of
from .results import guarded, ok, ok_built
from .state import ServerState

if TYPE_CHECKING:
    from ...search.combined import Found

logger = logging.getLogger("kiwi.mcp.server")

__all__ = ["MAX_LIMIT", "search"]

MAX_LIMIT = 200  # what search_tools serves at most
FETCH_FOR_FILTER = 4  # item_type "tool" is filtered here: ask the registry for this many times the limit

Query = Annotated[
    str,
    Field(
        description=(
            "What you need, in words or a sentence: matched against ids, names, descriptions, tags and "
            "parameters (typos are tolerated) and by meaning. "
            "Modifiers: type:T (a tool type, or tools on runtime T, e.g. type:python), category:C, "
            "mcp:SERVER (tools of an MCP server), namespace:N, local: (only the local spaces' tools, "
            "when this server serves them). Empty: everything, most used first."
        )
    ),
]
ItemType = Annotated[
    str | None,
    Field(
        description=(
            "Only this kind of item: directive, tool, knowledge or mcp (MCP servers and their tools). "
            "Leave out for all."
        ),
        json_schema_extra={"enum": [*ITEM_TYPES, None]},
    ),
]
Limit = Annotated[int, Field(description="At most this many results.", ge=1, le=MAX_LIMIT)]


async def search(
    state: ServerState, query: Query = "", item_type: ItemType = None, limit: Limit = 20
) -> CallToolResult:
    """Search the Kiwi registry for directives, tools and knowledge: describe what you need in
    words or a sentence. Returns ranked items with their item_id, item_type, tool_type, latest
    version, description and how each matched (matched_by: id, words, meaning). Next: load(item_id)."""

    async def call() -> CallToolResult:
        reg = state.registry
        kind = check_item_type(item_type)
        query_ = parse(query, tool_type=kind if kind not in (None, "tool", "mcp") else None)
        local = spaces(state.runner.settings) if state.runner.local_spaces else None
        fetch = min(MAX_LIMIT, limit * FETCH_FOR_FILTER) if kind in ("tool", "mcp") else limit
        found = await search_everywhere(reg, query_, limit=fetch, embedder=state.embedder, spaces=local)
        rows = found.rows
        if kind is not None:  # a type: modifier in the query wins in SQL; item_type still holds
            rows = [r for r in rows if _kind_of(r.get("tool_type"), kind) == kind]
        rows = rows[:limit]
        signed = await signature_labels(reg, [r for r in rows if r["source"] == REGISTRY], state.runner.settings.trust)
        items = [_item(r, signed[r["tool_id"]] if r["source"] == REGISTRY else LOCAL_SIGNATURE) for r in rows]
        warnings = list(found.warnings)
        if query_.local_only and local is None:
            warnings.append("this server does not serve local spaces (kiwi serve --local-spaces)")
        for warning in warnings + ([found.embedding_failed] if found.embedding_failed else []):
            logger.warning("search: %s", warning)
        structured: dict[str, Any] = {
            "query": query,
            "item_type": kind,
            "count": len(items),
            "search_mode": found.search_mode,
            "items": items,
        }
        if found.unembedded:  # found by words only: no vector for the model yet
            structured["unembedded"] = len(found.unembedded)
        if warnings:
            structured["warnings"] = warnings
        text = _search_text(query, kind, items, found, warnings)
        if all(r["source"] == REGISTRY for r in rows):  # columns of search_tools (text, real, jsonb): JSON already
            return ok_built(text, structured)
        return ok(text, structured)  # a local tool's manifest may hold any YAML value

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
        "matched_by": r.get("matched_by"),
        "source": r.get("source"),
        "signature": {**signature, "key_fingerprints": list(signature.get("key_fingerprints") or [])},  # its own
    }


def _kind_of(tool_type: Any, wanted: str) -> str:
    """A row's item type, where an MCP server or tool counts as `mcp` when that is asked for."""
    return "mcp" if wanted == "mcp" and tool_type in ("mcp_server", "mcp_tool") else item_type_of(tool_type)


def _search_text(query: str, kind: str | None, items: list[dict[str, Any]], found: Found, warnings: list[str]) -> str:
    notes = [f"warning: {w}" for w in warnings]
    if found.lexical_because and query.strip():
        notes.append(f"matched by words only: {found.lexical_because}")
    if not items:
        text = f"no items found for {query!r}" + (f" (item_type {kind})" if kind else "")
        text += "\nhint: try fewer or other words, drop a modifier, or search with an empty query"
        return "\n".join([text, *notes])
    width = max(len(i["item_id"]) for i in items)
    how = max(len(i["matched_by"] or "") for i in items)
    lines = [
        f"{i['item_id']:<{width}}  {i['tool_type'] or '-':<10} {i['latest_version'] or '-':<8} "
        f"{i['signature']['state']:<9}  "
        + (f"{i['matched_by'] or '':<{how}}  " if how else "")
        + first_line(i["description"])[:100]
        for i in items
    ]
    body = f"{len(items)} item(s):\n" + "\n".join(lines)
    return "\n".join([body, *notes]) + "\n\nnext: load(item_id=...) to see one"
