""" "did you mean local/shout?": the tools a caller can see that a reference it could not find
probably meant, added to the not-found error's hint.

A bare name resolves in `public` only, so `shout` misses `local/shout`, and `echo` misses the
imported MCP tool `local/everything_mcp.echo`; the registry's own search (acting as the caller,
so only tools it may see) finds the same name in other namespaces and the tools whose name ends
with `.<name>` (an MCP server's tools, `<server>.<tool>`), else names close to it.
"""

from __future__ import annotations

import difflib

from ..core.refs import ToolRef, tool_name
from ..errors import KiwiError, NotFound
from .base import Registry

MAX_SUGGESTIONS = 3


async def suggestions(registry: Registry, ref: str) -> list[str]:
    """Refs the caller can see that `ref` may have meant: the same name in any namespace first,
    then an MCP server's tool of that name (`<server>.<name>`), then close names (at most
    MAX_SUGGESTIONS); [] when the search itself fails."""
    name = tool_name(ref)
    if not name:
        return []
    try:
        rows = await registry.search(name.replace("_", " "), limit=50)
    except KiwiError:  # a suggestion is a courtesy: never a second failure
        return []
    seen = [str(r["tool_id"]) for r in rows if r.get("tool_id") and str(r["tool_id"]) != ref]
    same = [r for r in seen if tool_name(r) == name]
    same += [r for r in seen if tool_name(r).endswith(f".{name}")]
    close = difflib.get_close_matches(name, [tool_name(r) for r in seen], n=MAX_SUGGESTIONS, cutoff=0.75)
    near = [r for c in close for r in seen if tool_name(r) == c and r not in same]
    return list(dict.fromkeys([*same, *near]))[:MAX_SUGGESTIONS]


async def suggest_for(registry: Registry, ref: str, error: NotFound) -> None:
    """Add "did you mean ...?" to `error`'s hint when the tool itself (not a version, not an
    executor) was not found and the caller can see tools it may have meant."""
    named = ToolRef.parse(ref, strict=False)
    if not error.message.startswith(f'tool "{named.ref}" not found'):
        return
    found = await suggestions(registry, named.ref)
    if not found:
        return
    meant = "did you mean " + " or ".join(found) + "?"
    error.hint = meant if not error.hint else f"{meant} ({error.hint})"
