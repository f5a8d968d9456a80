"""What the MCP transport specification and JSON-RPC 2.0 ask of the HTTP endpoint, checked
before the SDK's streamable HTTP app sees a request, where the SDK answers otherwise.

    app = ProtocolChecks(sdk_app)        # an ASGI app: the checks at /mcp, then the SDK

* An `MCP-Protocol-Version` header naming a version this server does not speak is 400, with
  a message naming the versions it does (the SDK sends any unknown version to its 2026
  single-exchange path, which complains about missing "params._meta envelope keys").
* A POST whose Content-Type is not `application/json` is 415 Unsupported Media Type (the
  SDK's DNS-rebinding guard answers 400 "Invalid Content-Type header", in plain text).
* A POST body nested deeper than MAX_JSON_DEPTH arrays and objects is -32600 Invalid Request
  naming the limit, measured by a linear scan before anything parses it (the parsers recurse
  per level: 10,000 levels were a RecursionError and a 500 with a traceback).
* A POST body that is JSON but not a JSON-RPC message (no `method`, and not a response; a
  batch; `jsonrpc` other than "2.0"; a request id that is null or not a string or integer)
  is -32600 Invalid Request (the SDK answers -32602 Invalid params with pydantic's text).

An error answer to a request that named no session names none either (the SDK names the
session it opened for the request and at once discarded, which a client could adopt).

Every refusal is a JSON-RPC error object with `id` null unless the request's id could be
read. Anything these checks do not refuse goes to the SDK untouched, its body replayed:
parse errors (-32700), the Accept header (406), sessions (400/404) stay the SDK's. The body
is read only up to the SDK's own size limit; a larger one is passed on unread, for the
SDK's 413.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.text import is_utf8

__all__ = ["MAX_JSON_DEPTH", "SUPPORTED_VERSIONS", "ProtocolChecks", "invalid_request", "json_depth", "too_deep"]

SUPPORTED_VERSIONS: tuple[str, ...] = tuple(SUPPORTED_PROTOCOL_VERSIONS)
"""The protocol versions the SDK serves, and so this endpoint."""

JSON = "application/json"

MAX_JSON_DEPTH = 64
"""How deep a request body's arrays and objects may nest: far more than any MCP message or
tool manifest needs, and far less than what makes a parser recurse past Python's limit."""

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 down a level, -1 (as a signed byte) up
# a \uD800-\uDFFF escape: the only way JSON text spells a surrogate (a pair is fine, a lone one is not text)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class ProtocolChecks:
    """An ASGI wrapper answering, at `path`, the protocol errors the SDK gets wrong."""

    def __init__(self, app: ASGIApp, *, path: str = "/mcp", max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.path = path
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if MCP_SESSION_ID_HEADER not in headers:
            send = _without_stray_session(send)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version.strip() not in SUPPORTED_VERSIONS:
            message = (
                f"Bad Request: unsupported MCP-Protocol-Version {version!r}; "
                f"this server supports {', '.join(SUPPORTED_VERSIONS)}"
            )
            data = {"supported": list(SUPPORTED_VERSIONS), "requested": version}
            await _error(400, message, data=data)(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if not is_json(headers.get("content-type")):
            message = f"Unsupported Media Type: a POST to {self.path} is one JSON-RPC message, Content-Type: {JSON}"
            await _error(415, message)(scope, receive, send)
            return
        body, complete, rest = await _read(receive, self.max_body)
        if complete and (depth := too_deep(body)) is not None:
            message = (
                f"Invalid Request: the body nests {depth} levels deep; "
                f"arrays and objects may nest at most {MAX_JSON_DEPTH} levels"
            )
            await _error(400, message, data={"max_depth": MAX_JSON_DEPTH})(scope, receive, send)
            return
        if complete and (problem := invalid_request(body)) is not None:
            message, request_id = problem
            await _error(400, f"Invalid Request: {message}", request_id=request_id)(scope, receive, send)
            return
        await self.app(scope, _replaying(body, complete, rest, receive), send)


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type names application/json (parameters such as charset allowed)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == JSON


def json_depth(body: bytes) -> int:
    """How deep `body`'s arrays and objects nest, read as JSON text without parsing it: strings
    (and what looks like structure inside them) removed, then the running count of the brackets
    left, at its highest. No recursion; a few linear passes in C, whatever the body holds. For
    valid JSON it is exact; for anything else it is exact up to the first error, where every
    parser stops, so no parser goes deeper than it says (a string left open runs to the end)."""
    # Outside strings JSON has no backslash, inside each starts an escape: escaped backslashes
    # first, then escaped quotes, leave only the quotes that open and close strings.
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    if not structure:
        return 0
    return max(0, max(accumulate(array("b", structure.translate(_STEPS)))))


def too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> int | None:
    """The body's depth when it nests deeper than `limit`, else None (at once when it has too
    few brackets to, as nearly every request has)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return None
    depth = json_depth(body)
    return depth if depth > limit else None


def invalid_request(body: bytes) -> tuple[str, Any] | None:
    """Why `body`, valid JSON, is not one JSON-RPC message (and the request id to answer with),
    or None: a message, or not JSON at all (the SDK's parse error answers that)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, list):
        return "a batch (JSON array) is not accepted: send one JSON-RPC message per POST", None
    if not isinstance(message, dict):
        return "the body is not a JSON-RPC message (a JSON object)", None
    request_id = message.get("id")
    known_id = request_id if _is_id(request_id) else None
    if _SURROGATE_ESCAPE.search(body) and (where := _lone_surrogate(message)) is not None:
        return f"{where}: must be valid Unicode text (it holds a lone surrogate escape)", known_id
    if message.get("jsonrpc") != "2.0":
        return 'a JSON-RPC message has "jsonrpc": "2.0"', known_id
    if "method" in message:
        if not isinstance(message["method"], str):
            return '"method" is a string', known_id
        if "id" in message and not _is_id(request_id):
            return "a request's id is a string or an integer, never null", None
        if "params" in message and not isinstance(message["params"], dict | list):
            return '"params", when given, is a structured value (MCP: an object)', known_id
        return None
    if "id" in message and ("result" in message) != ("error" in message):
        return None  # a response to a request this server sent
    return (
        'the message has no "method": a request or notification names its method, and a response '
        'carries the "id" it answers with either "result" or "error"',
        None,
    )


def _lone_surrogate(message: dict[str, Any]) -> str | None:
    """Where the first lone surrogate of a parsed message is (`params.arguments.query`), else
    None. The SDK's parser refuses one as a misleading "unexpected end of hex escape" and
    loses the request id; walked without recursion (the depth is bounded before this runs)."""
    stack: list[tuple[str, Any]] = [("", message)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not is_utf8(item):
                return path or "(message)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not is_utf8(key):
                    return f"{path or '(message)'}: a key"
                stack.append((f"{path}.{key}" if path else key, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def _is_id(value: Any) -> bool:
    """A JSON-RPC id this server can echo (a string that is text, or an integer)."""
    return (isinstance(value, str) and is_utf8(value)) or (isinstance(value, int) and not isinstance(value, bool))


def _error(status: int, message: str, *, request_id: Any = None, data: Any = None) -> JSONResponse:
    error: dict[str, Any] = {"code": INVALID_REQUEST, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status)


def _without_stray_session(send: Send) -> Send:
    """`send` minus the Mcp-Session-Id header of an error response: the SDK opens a session for
    every request that names none, and on an error it discards it but still names it."""
    session = MCP_SESSION_ID_HEADER.lower().encode()

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != session]
            message = {**message, "headers": kept}
        await send(message)

    return sending


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool, list[Message]]:
    """The body, up to just past `limit` bytes: (what was read, whether that is all of it,
    any other message received meanwhile, such as a disconnect, to pass on after it)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), False, [message]
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), True, []
        if len(body) > limit:
            return bytes(body), False, []


def _replaying(body: bytes, complete: bool, rest: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives what was read first, then the rest of the request's messages."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": not complete or bool(rest)}, *rest]

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
