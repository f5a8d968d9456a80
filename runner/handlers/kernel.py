"""The kernel socket: a tool's own calls to other tools, as its caller, through the same gate.

A tool whose merged config says `kernel` gets, for the length of its run, a Unix socket the
runner listens on, mounted into its sandbox at /run/kiwi/kernel.sock (its path is
$KIWI_KERNEL; without the sandbox, a host path). It speaks the smallest HTTP a client needs
(`curl --unix-socket "$KIWI_KERNEL" --data @- http://kiwi/execute`, or Python's http.client):

    POST /execute   {"item_id": ref, "version"?: v, "parameters"?: {...},
                     "permissions"?: {...narrower}, "limits"?: {tokens, tool_calls, seconds, cost_usd}}
    -> 200          the answer MCP `execute run` gives: the run's result, or `error` {kind,
                    message, hint} for a refusal, and `is_error`

Each request is a call of the run's own session, as the run's caller (the principal the run
was made for, never the runner's own), in the run's execution context: the caller's, narrowed
by the tool's `kernel: {permissions}` and then by the request's `permissions`, each a child
context that may only narrow (the database refuses a widening). `limits` narrow what the caller
may still spend (core/limits.py), so a thread started here is nested under the caller's. The
socket closes when the run ends; calls still running are cancelled with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from ..core.limits import MAX_DEPTH, Allowance
from ..core.plan import Plan
from ..errors import ConfigError, KiwiError
from ..harness.mcp_answer import jsonable, rendered_call
from ..primitives.base import CallTool, Handler, Invocation, Outcome
from ..principal import acting_as, requested
from ..registry.base import Registry
from ..sandbox.site import KERNEL_SOCKET

__all__ = ["KernelHandler"]

_MAX_BODY = 8 * 1024 * 1024


class KernelHandler:
    """Runs a script that asks for the kernel socket (config.kernel: true, or {permissions: {...}},
    which narrows the context its calls are made in): the socket served while `inner` (the
    subprocess primitive) runs it."""

    name = "kernel"

    def __init__(self, inner: Handler) -> None:
        self.inner = inner

    def accepts(self, plan: Plan) -> bool:
        return plan.primitive == "subprocess" and bool(plan.config.get("kernel"))

    async def aclose(self) -> None:
        return None  # the primitive is closed by the dispatcher, which holds it too

    async def run(self, invocation: Invocation) -> Outcome:
        if invocation.call_tool is None or invocation.registry is None or invocation.session is None:
            raise ConfigError(
                f"{invocation.plan.tool_id}: the kernel socket needs the runner's gated calls",
                hint="run it through runner.harness.run.Runner, which passes its call_tool, registry and session",
            )
        async with _serving(invocation, invocation.call_tool, invocation.registry):
            return await self.inner.run(invocation)


@contextlib.asynccontextmanager
async def _serving(invocation: Invocation, call_tool: CallTool, registry: Registry) -> AsyncIterator[None]:
    """The kernel socket, listening while the block runs."""
    wanted = invocation.plan.config.get("kernel")
    kernel = _Kernel(call_tool, registry, invocation, wanted if isinstance(wanted, dict) else {})
    folder = tempfile.mkdtemp(prefix="kiwi-kernel-")  # 0700: only the runner reaches it on the host
    path = os.path.join(folder, "kernel.sock")
    server = await asyncio.start_unix_server(kernel.serve, path=path)
    os.chmod(path, 0o666)  # the sandbox's own user connects through the bind mount
    site = invocation.site
    confined = site is not None and site.confined
    if site is not None:
        site.kernel = path
    invocation.kernel = KERNEL_SOCKET if confined else path
    try:
        yield
    finally:
        server.close()
        for task in list(kernel.tasks):
            task.cancel()
        await asyncio.gather(*kernel.tasks, return_exceptions=True)
        if site is not None:
            site.kernel = None
        shutil.rmtree(folder, ignore_errors=True)


class _Kernel:
    def __init__(self, call_tool: CallTool, registry: Registry, invocation: Invocation, wanted: dict[str, Any]) -> None:
        self.call_tool, self.registry, self.invocation = call_tool, registry, invocation
        self.narrowing = wanted.get("permissions")
        self.principal = requested()  # the run's caller: every call is made as them
        self.context: str | None = invocation.context
        self.opened = not self.narrowing
        self.tasks: set[asyncio.Task[Any]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            with acting_as(self.principal):
                while (request := await _read(reader)) is not None:
                    status, answer = await self.answer(*request)
                    _write(writer, status, answer)
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if task is not None:
                self.tasks.discard(task)
            writer.close()

    async def answer(self, method: str, target: str, body: bytes) -> tuple[int, dict[str, Any]]:
        if (method, target.split("?")[0]) != ("POST", "/execute"):
            return 404, _error("not_found", f"{method} {target}: the kernel answers POST /execute")
        try:
            asked = json.loads(body or b"{}")
        except ValueError as e:
            return 400, _error("invalid_request", f"the body is not JSON: {e}")
        ref = asked.get("item_id") if isinstance(asked, dict) else None
        if not isinstance(ref, str) or not ref.strip():
            return 400, _error("invalid_request", 'name the tool: {"item_id": ref, "parameters": {...}}')
        params = asked.get("parameters") or {}
        if not isinstance(params, dict):
            return 400, _error("invalid_request", "parameters is an object")
        try:
            context = await self.context_for(asked.get("permissions"))
        except KiwiError as e:
            return 403, _error("permission_denied", e.message, e.hint)
        allowance = (self.invocation.limits or Allowance()).narrowed(asked.get("limits"))
        if allowance.depth > MAX_DEPTH:
            return 403, _error(
                "nested_too_deep",
                f"{ref} was not run: runs started from runs are nested {MAX_DEPTH} deep at most",
                "a tool that calls itself through the kernel needs a way to stop",
            )
        answer = await rendered_call(
            self.call_tool,
            session=str(self.invocation.session),
            ref=ref,
            ver=asked.get("version"),
            params=params,
            context=context,
            run_timeout_s=None,
            limits=allowance,
        )
        structured = answer.structured_content or {}
        text = "\n".join(getattr(block, "text", "") for block in answer.content)
        return 200, jsonable({**structured, "is_error": bool(answer.is_error), "text": text})

    async def context_for(self, permissions: Any) -> str | None:
        """The context a call is made in: the run's, narrowed by the tool's kernel permissions
        (opened once) and by the request's own."""
        registry, session = self.registry, str(self.invocation.session)
        if not self.opened:
            opened = await registry.open_context(session, None, self.context, self.narrowing)
            self.context, self.opened = str(opened["id"]), True
        if isinstance(permissions, dict) and permissions:
            return str((await registry.open_context(session, None, self.context, permissions))["id"])
        return self.context


def _error(kind: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message, "hint": hint}, "is_error": True}


async def _read(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    """One HTTP/1.1 request (request line, headers, a Content-Length body); None at the end."""
    line = await reader.readline()
    if not line.strip():
        return None
    parts = line.decode("latin-1").split()
    length = 0
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip() or 0)
    if length > _MAX_BODY:
        raise ConnectionError("request too large")
    body = await reader.readexactly(length) if length else b""
    return (parts[0] if parts else "", parts[1] if len(parts) > 1 else "/", body)


def _write(writer: asyncio.StreamWriter, status: int, answer: dict[str, Any]) -> None:
    data = json.dumps(answer, ensure_ascii=False, default=str).encode()
    reason = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}.get(status, "OK")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
