"""How every meta-tool answers: structured content plus readable text, and every failure, a
KiwiError or not, as a tool error (isError) that says what went wrong and what to do, so
nothing escapes to the protocol layer. The answer's shapes (ok, fail, ...) are the harness's
(runner/harness/mcp_answer.py), shared with threads; guarded() is the server's: it acts as the
request's caller."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import CallToolResult, TextContent

from ...errors import KiwiError
from ...harness.mcp_answer import default_hint, fail, jsonable, ok
from ..auth import acting_as_caller

__all__ = ["default_hint", "error_result", "fail", "guarded", "jsonable", "ok", "ok_built"]

logger = logging.getLogger("kiwi.mcp.server")


def ok_built(text: str, structured: dict[str, Any]) -> CallToolResult:
    """ok() for structured content built for this answer alone out of JSON values (str, int, float,
    bool, None, lists, dicts with str keys), sharing nothing: as jsonable() would give it back, so
    the round trip through JSON (a third of a search's own time) is skipped."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def error_result(e: KiwiError) -> CallToolResult:
    hint = e.hint or default_hint(e)
    return fail(e.message, hint, kind=e.kind)


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
