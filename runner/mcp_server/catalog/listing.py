"""What prompts and resources share: a page of the registry's directives or knowledge entries
(public.list_items, under the caller's RLS), its opaque cursor, and how a failure becomes the
protocol's answer.

A cursor is the last reference of the previous page, wrapped so that clients treat it as
opaque; a page never repeats or skips an entry because another was published meanwhile
(keyset pagination, supabase/migrations/*_item_listing.sql). Every handler runs as the
caller (over HTTP its verified JWT, runner/mcp_server/auth.py), so RLS decides what exists.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from ...errors import KiwiError, NotFound, RegistryUnavailable, UsageError
from ...registry.base import Registry
from ..auth import acting_as_caller

__all__ = ["PAGE_SIZE", "Page", "answered", "decode_cursor", "encode_cursor", "invalid_params", "page"]

logger = logging.getLogger("kiwi.mcp.server")

PAGE_SIZE = 50
"""Entries per page of prompts/list and resources/list (list_items serves at most 200)."""
_CURSOR_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """One page of list_items rows, and the cursor of the next (None on the last page)."""

    rows: list[dict[str, Any]]
    next_cursor: str | None


def invalid_params(message: str, **data: Any) -> MCPError:
    """-32602, the answer to a request naming something the caller cannot have."""
    return MCPError(code=INVALID_PARAMS, message=message, data=data or None)


def encode_cursor(after: str) -> str:
    raw = json.dumps({"v": _CURSOR_VERSION, "after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The reference a page starts after; None for the first page. A cursor this server did not
    make is -32602, as the specification asks for an invalid cursor."""
    if cursor is None or cursor == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        value = None
    if not isinstance(value, dict) or value.get("v") != _CURSOR_VERSION or not isinstance(value.get("after"), str):
        raise invalid_params("invalid cursor: pass back the nextCursor of the previous page unchanged", cursor=cursor)
    return str(value["after"])


async def page(registry: Registry, tool_type: str, cursor: str | None, size: int = PAGE_SIZE) -> Page:
    """The page of `tool_type` entries (directive or knowledge) the caller can see after `cursor`."""
    args: dict[str, Any] = {"p_tool_type": tool_type, "p_limit": size + 1}
    after = decode_cursor(cursor)
    if after is not None:
        args["p_after"] = after
    rows = list(await registry.backend.call("list_items", args, returns="rows", read=True) or [])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1]["tool_id"]) if more and rows else None)


async def answered(what: str, call: Callable[[], Awaitable[T]], *, not_found: MCPError) -> T:
    """`call` as the request's caller, its failures as protocol errors: an item the caller cannot
    read (missing or invisible alike, so nothing leaks) is `not_found`; a request Kiwi cannot read
    -32602; the registry down -32603 saying so; anything else -32603 and a traceback in the log
    (a bug). MCPErrors pass through, unlogged: they are answers, not failures."""
    try:
        with acting_as_caller():
            return await call()
    except MCPError:
        raise
    except NotFound:
        raise not_found from None
    except UsageError as e:
        raise invalid_params(e.message + (f" ({e.hint})" if e.hint else "")) from None
    except RegistryUnavailable as e:
        logger.warning("kiwi MCP %s: %s", what, e.message)
        raise MCPError(code=INTERNAL_ERROR, message=f"{what}: the registry is unavailable") from None
    except KiwiError as e:
        raise MCPError(code=INTERNAL_ERROR, message=f"{what}: {e.message}") from None
    except Exception as e:
        logger.exception("kiwi MCP %s failed unexpectedly", what)
        raise MCPError(code=INTERNAL_ERROR, message=f"{what} failed unexpectedly: {type(e).__name__}") from e
