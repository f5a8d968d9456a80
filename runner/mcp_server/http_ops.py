"""An operator's view of `kiwi serve --transport http`: health, readiness, metrics, request logs.

Wrapped around the whole app (outside authentication), so the probes need no token:

* `GET /healthz`: 200 while the process serves (it checks nothing else);
* `GET /readyz`: 200 when the database answers and its schema is current (the registry's
  `operator_status()`, which the latest migrations made), else 503 saying why;
* `GET /metrics`: the runs' metrics in Prometheus's text format (runner/telemetry/prometheus.py),
  the queue's depth read from the database as it is asked for. They name tools: with
  KIWI_METRICS_TOKEN set, the page asks for it as `Authorization: Bearer <token>`.

Every HTTP request leaves one JSON line on the `kiwi.http` logger (stderr): method, path,
status, duration, its principal (a user's id, else a role) and the serving process's pid (with
`--processes N`, which of them; a request forwarded to its session's process is logged by
both, the second line with no client); a refusal (401, 403, 429) one
more, with why. No token, header or body of the request is ever written.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import telemetry
from ..principal import acting_as, admin
from ..registry.base import Registry
from ..telemetry.prometheus import CONTENT_TYPE_LATEST, PrometheusSink

__all__ = ["Operated", "json_log_handler", "registry_probes"]

logger = logging.getLogger("kiwi.http")

REFUSALS = (401, 403, 429)
PROBE_TIMEOUT_S = 3.0
REASON_BYTES = 4096  # of a refusal's body, read for its error_description

Status = Callable[[], Awaitable[dict[str, Any]]]


def json_log_handler() -> logging.Handler:
    """The request log on stderr, one JSON object a line (kiwi.http, at INFO)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    if not any(getattr(h, "kiwi_json", False) for h in logger.handlers):
        handler.kiwi_json = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return handler


class _Queue:
    """The run queue's depth by status, as an admin reads it: refreshed when /metrics is asked for
    (and by `watch` while telemetry exports), read by the gauges (runner/telemetry)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.depth: dict[str, float] = {}

    async def refresh(self) -> None:
        try:
            with acting_as(admin()):
                async with asyncio.timeout(PROBE_TIMEOUT_S):
                    found = await self.registry.operator_status()
        except Exception:  # a login that cannot act as an admin, a database away: no gauge
            self.depth = {}
            return
        queue = found.get("queue")
        self.depth = {str(k): float(v) for k, v in queue.items()} if isinstance(queue, dict) else {}

    async def watch(self, every_s: float = 15.0) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(every_s)


def registry_probes(registry: Registry) -> tuple[Status, Callable[[], Awaitable[None]], _Queue]:
    """The readiness check (operator_status as the process acts) and the queue gauge's refresh."""
    queue = _Queue(registry)
    telemetry.set_gauge_source("kiwi.queue.depth", lambda: queue.depth)
    return registry.operator_status, queue.refresh, queue


class Operated:
    """The app with /healthz, /readyz and /metrics in front of it, and its requests logged.

    status: the registry's operator_status() as the process acts (readiness); refresh: what reads
    the queue's depth before /metrics is made; principal: who requests act as when they carry no
    token (`--insecure-no-auth`), for the log."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        status: Status,
        metrics: PrometheusSink,
        refresh: Callable[[], Awaitable[None]] | None = None,
        metrics_token: str | None = None,
        principal: str | None = None,
    ) -> None:
        self.app = app
        self.status = status
        self.metrics = metrics
        self.refresh = refresh
        self.metrics_token = metrics_token or None
        self.principal = principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        probe = {"/healthz": self._healthz, "/readyz": self._readyz, "/metrics": self._metrics}.get(path)
        started = time.perf_counter()
        seen: dict[str, Any] = {"status": 500, "body": b""}

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body" and seen["status"] in REFUSALS:
                seen["body"] = (seen["body"] + message.get("body", b""))[:REASON_BYTES]
            await send(message)

        try:
            if probe is not None and scope.get("method") in ("GET", "HEAD"):
                await probe(scope, watched)
            else:
                await self.app(scope, receive, watched)
        finally:
            self._log(scope, seen, time.perf_counter() - started)

    async def _healthz(self, scope: Scope, send: Send) -> None:
        await _answer(send, 200, {"status": "up"})

    async def _readyz(self, scope: Scope, send: Send) -> None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                found = await self.status()
        except TimeoutError:
            await _answer(send, 503, {"status": "not ready", "database": f"no answer within {PROBE_TIMEOUT_S:g} s"})
            return
        except Exception as e:  # any failure is "not ready", said as what it was
            why = getattr(e, "message", None) or str(e) or type(e).__name__
            await _answer(send, 503, {"status": "not ready", "database": why[:500]})
            return
        if found.get("schema") != "current":
            await _answer(send, 503, {"status": "not ready", "database": "ok", "schema": "not current"})
            return
        await _answer(send, 200, {"status": "ready", "database": "ok", "schema": "current"})

    async def _metrics(self, scope: Scope, send: Send) -> None:
        if self.metrics_token is not None and not _bearer_matches(scope, self.metrics_token):
            await _answer(
                send, 401, {"error": "invalid_token", "error_description": "/metrics needs KIWI_METRICS_TOKEN"}
            )
            return
        if self.refresh is not None:
            await self.refresh()
        body = self.metrics.render()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", CONTENT_TYPE_LATEST.encode())]}
        )
        await send({"type": "http.response.body", "body": body})

    def _log(self, scope: Scope, seen: dict[str, Any], seconds: float) -> None:
        status = int(seen["status"])
        line: dict[str, Any] = {
            "event": "http_request",
            "method": scope.get("method"),
            "path": scope.get("path"),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "principal": self._principal_of(scope),
            "client": (scope.get("client") or (None,))[0],
            "pid": os.getpid(),
        }
        logger.info("%s", json.dumps(line))
        if status in REFUSALS:
            reason = _reason(seen["body"], _token_of(scope))
            logger.info("%s", json.dumps({**line, "event": "http_refused", "reason": reason}))

    def _principal_of(self, scope: Scope) -> str | None:
        """The caller as its verified token named it: the user's id, else its role."""
        user = scope.get("user")
        principal = getattr(getattr(user, "access_token", None), "principal", None)
        if principal is None:
            return self.principal if "user" not in scope else None
        return principal.user_id or principal.role


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _token_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return value.decode("latin-1").partition(" ")[2].strip() or None
    return None


def _bearer_matches(scope: Scope, expected: str) -> bool:
    return hmac.compare_digest((_token_of(scope) or "").encode(), expected.encode())


def _reason(body: bytes, token: str | None) -> str | None:
    """Why the answer refused: its error_description (or error), never the token it was sent."""
    try:
        said = json.loads(body)
    except ValueError:
        said = None
    if isinstance(said, dict):
        reason = said.get("error_description") or said.get("error")
        if isinstance(reason, dict):  # a JSON-RPC error
            reason = reason.get("message")
    else:
        reason = body.decode("utf-8", "replace")[:300] or None
    text = str(reason)[:500] if reason is not None else None
    if text and token:
        text = text.replace(token, "[token]")
    return text
