"""What direct mode (direct.py) reads from a tools/call beyond its arguments, and how it words
`execute run`'s answers for a client that has only the listed tools: no `load` to read a
schema, no `approval_id` argument to pass an approval back.

    approval_of(ctx)                 # the approval id in the request's _meta, if any
    direct_answer(result, "deploy")  # execute's answer, its hint rewritten for this client

An approval id travels in the request's `_meta` under APPROVAL_META_KEY; the SDK keeps
unknown `_meta` keys (RequestParamsMeta is an open map) and hands them to the tool call
as `ctx.request_context.meta`.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent

from .meta.results import jsonable

__all__ = ["APPROVAL_META_KEY", "approval_in", "approval_of", "direct_answer"]

APPROVAL_META_KEY = "kiwi/approval_id"
"""The key of a tools/call request's `_meta` that carries an approved approval's id."""


def approval_of(ctx: Context[Any, Any] | None) -> str | None:
    """The approval id the request carries in its `_meta`, if any; anything but a non-empty
    string there is -32602 (nothing runs)."""
    try:
        meta = ctx.request_context.meta if ctx is not None else None
    except ValueError:  # outside a request
        return None
    return approval_in(meta)


def approval_in(meta: Any) -> str | None:
    """approval_of for a request's `_meta` as the low-level server reads it."""
    value = dict(meta).get(APPROVAL_META_KEY) if meta else None
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise MCPError(INVALID_PARAMS, f'_meta["{APPROVAL_META_KEY}"] must be an approval id (a string)')
    return value.strip()


def _retry_meta(approval_id: str) -> str:
    return json.dumps({"_meta": {APPROVAL_META_KEY: approval_id}})


def direct_answer(result: CallToolResult, tool: str) -> CallToolResult:
    """execute's answer for a call of `tool`, with a hint this client can follow."""
    structured = result.structured_content
    if not result.is_error or not isinstance(structured, dict):
        return result
    failure = structured.get("failure")
    said = structured.get("error")
    error: dict[str, Any] = said if isinstance(said, dict) else {}
    if isinstance(failure, dict) and failure.get("kind") == "invalid_parameters":
        hint = f"the input schema of {tool} is in tools/list; pass the arguments as one object that satisfies it"
        return _rehinted(result, structured.get("hint"), hint, {"hint": hint, "failure": {**failure, "hint": hint}})
    if error.get("kind") == "approval_pending":
        pending = structured.get("approval")
        approval: dict[str, Any] = pending if isinstance(pending, dict) else {}
        aid = str(approval.get("id"))
        hint = (
            f"ask a person to run `kiwi approve {aid}` (or `kiwi deny {aid}`); then call {tool} again with exactly "
            f"the same arguments and, in the tools/call params, {_retry_meta(aid)} before "
            f"{approval.get('expires_at')}; it runs once"
        )
        extra = {"error": {**error, "hint": hint}, "retry": {"_meta": {APPROVAL_META_KEY: aid}}}
        return _rehinted(result, error.get("hint"), hint, extra)
    if error.get("kind") == "approval_refused":
        old = error.get("hint")
        hint = f"call {tool} without {APPROVAL_META_KEY} in _meta for a new approval"
        hint = f"{old}; here: {hint}" if old and "approval_id" not in old else hint
        return _rehinted(result, old, hint, {"error": {**error, "hint": hint}})
    return result


def _rehinted(result: CallToolResult, old: Any, hint: str, fixed: dict[str, Any]) -> CallToolResult:
    """`result` with its hint line (and the structured fields in `fixed`) replaced."""
    text = "".join(c.text for c in result.content if isinstance(c, TextContent))
    text = text.replace(f"hint: {old}", f"hint: {hint}") if old else f"{text}\nhint: {hint}"
    structured = {**(result.structured_content or {}), **fixed}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=jsonable(structured), is_error=True
    )
