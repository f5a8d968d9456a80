"""How every meta-tool answers: structured content plus readable text, and every failure, a
KiwiError or not, as a tool error (isError) that says what went wrong and what to do, so
nothing escapes to the protocol layer."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import CallToolResult, TextContent

from ...errors import KiwiError, NotFound, Refused, UsageError
from ..auth import acting_as_caller

__all__ = ["default_hint", "error_result", "fail", "guarded", "jsonable", "ok", "ok_built"]

logger = logging.getLogger("kiwi.mcp.server")


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def ok(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=jsonable(structured))


def ok_built(text: str, structured: dict[str, Any]) -> CallToolResult:
    """ok() for structured content built for this answer alone out of JSON values (str, int, float,
    bool, None, lists, dicts with str keys), sharing nothing: as jsonable() would give it back, so
    the round trip through JSON (a third of a search's own time) is skipped."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def fail(message: str, hint: str | None, *, kind: str = "error", extra: dict[str, Any] | None = None) -> CallToolResult:
    text = f"error: {message}" + (f"\nhint: {hint}" if hint else "")
    structured = {"error": {"kind": kind, "message": message, "hint": hint}, **(extra or {})}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=jsonable(structured), is_error=True
    )


def error_result(e: KiwiError) -> CallToolResult:
    hint = e.hint or default_hint(e)
    return fail(e.message, hint, kind=e.kind)


def default_hint(e: KiwiError) -> str:
    if isinstance(e, NotFound):
        return "find the right id with search(query=...); ids are tool_id or namespace/tool_id"
    if isinstance(e, UsageError):
        return "see help(topic='execute') for the arguments each action takes"
    if isinstance(e, Refused):
        return "the registry refused the change; read the message, fix the cause, and try again"
    return "see help(topic='errors')"


async def guarded(what: str, call: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """Every failure as a tool error: KiwiErrors with their hint, anything else as an internal error.
    Over HTTP the call acts as the request's verified caller (runner/mcp_server/auth.py)."""
    try:
        with acting_as_caller():
            return await call()
    except KiwiError as e:
        return error_result(e)
    except Exception as e:
        logger.exception("kiwi MCP %s failed unexpectedly", what)
        return fail(
            f"{what} failed unexpectedly: {type(e).__name__}: {e}",
            "this is a bug in Kiwi's MCP server, not in your request; the server keeps answering, "
            "so another call (or the kiwi CLI) may work",
            kind="internal",
        )
