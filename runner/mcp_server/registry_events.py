"""The registry's changes, heard once per process and handed on in debounced batches.

The registry notifies the channel `kiwi_registry` at the commit of every change an agent
could see (migration 20261125000100_registry_notifications.sql): a publish, a yank or
deprecation, a new latest version, a changed name, description, visibility or namespace,
a deleted tool. Each payload is a `Change`: the kind of item (tool, directive, knowledge),
its namespace and visibility, and for knowledge its uuid, never its name.

`RegistryEvents` holds ONE listening connection for the whole process, however many
agents are connected (an MCP server's sessions share it), and calls `deliver` with a
batch of the changes heard: a burst (a bulk import of 500 tools) is gathered until the
channel has been quiet for QUIET_S, or at most MAX_DELAY_S after its first change, so it
becomes one or a few batches, not 500. Delivery runs in its own task, never in a request.

When the connection is lost (the database restarted, the backend was killed) it is made
again, first after RETRY_S and then doubling up to RETRY_MAX_S; whatever changed while it
was away was not heard, so the first batch after a reconnect is `EVERYTHING`.

    events = RegistryEvents(database_url, deliver)
    async with events.running():      # reference-counted: the first user starts it, the last stops it
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg

__all__ = ["CHANNEL", "EVERYTHING", "Change", "RegistryEvents"]

CHANNEL = "kiwi_registry"
QUIET_S = 0.3  # a batch is sent once the channel has been quiet this long ...
MAX_DELAY_S = 2.0  # ... or this long after its first change, whichever comes first
MAX_PENDING = 4096  # beyond this many distinct changes a batch is EVERYTHING
RETRY_S = 1.0
RETRY_MAX_S = 30.0
KINDS = frozenset({"tool", "directive", "knowledge"})

logger = logging.getLogger("kiwi.mcp.events")


@dataclass(frozen=True)
class Change:
    """One change to the registry, as much of it as may travel: `kind` is tool, directive or
    knowledge ("*": anything); `namespace` and `visibility` say who may see it; `id` is the
    knowledge entry's uuid (None for other kinds)."""

    kind: str
    namespace: str | None = None
    visibility: str | None = None
    id: str | None = None

    @property
    def public(self) -> bool:
        """Anyone may learn of it: public and unlisted items, or `EVERYTHING` (which says
        nothing about any one item)."""
        return self.kind == "*" or self.visibility != "private"

    @classmethod
    def parse(cls, payload: str) -> Change:
        """The change a notification's payload describes; a payload this code does not
        understand (a newer migration) counts as `EVERYTHING`, so nothing is missed."""
        try:
            data = json.loads(payload)
            kind = data["kind"]
            if kind not in KINDS:
                return EVERYTHING
            return cls(kind, data.get("namespace"), data.get("visibility") or "private", data.get("id"))
        except (ValueError, TypeError, KeyError):
            return EVERYTHING


EVERYTHING = Change("*")
"""Anything may have changed: after a reconnect, or a batch too large to hold."""

Deliver = Callable[[frozenset[Change]], Awaitable[None]]


class RegistryEvents:
    """One LISTEN connection on `kiwi_registry`, and the batches it hears, for `deliver`."""

    def __init__(
        self,
        url: str,
        deliver: Deliver,
        *,
        connect_timeout: float = 5.0,
        quiet_s: float = QUIET_S,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self._url = url
        self._deliver = deliver
        self._connect_timeout = connect_timeout
        self._quiet_s = quiet_s
        self._max_delay_s = max_delay_s
        self._pending: set[Change] = set()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._users = 0
        self.listening = asyncio.Event()
        """Set while LISTEN is in force (tests wait on it before they change the registry)."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[RegistryEvents]:
        """Listening while at least one user is inside: the first to enter starts the listener
        and the batcher, the last to leave stops them (an HTTP server enters once, each
        in-memory client connection once, stdio once)."""
        self._users += 1
        if self._users == 1:
            self._wake = asyncio.Event()
            self.listening = asyncio.Event()
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._listen_forever()), loop.create_task(self._batch_forever())]
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                await self.aclose()

    async def aclose(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._pending.clear()
        self.listening.clear()

    def heard(self, change: Change) -> None:
        """Add a change to the next batch (also how a reconnect adds EVERYTHING)."""
        if len(self._pending) >= MAX_PENDING:
            self._pending = {EVERYTHING}
        else:
            self._pending.add(change)
        self._wake.set()

    async def _listen_forever(self) -> None:
        retry_s = RETRY_S
        heard_before = False
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
                )
                await conn.execute(f"listen {CHANNEL}")
                self.listening.set()
                retry_s = RETRY_S
                if heard_before:  # what changed while the connection was away was not heard
                    self.heard(EVERYTHING)
                heard_before = True
                async for notice in conn.notifies():
                    self.heard(Change.parse(notice.payload))
            except (psycopg.Error, OSError) as exc:
                logger.info("registry notifications off: %s; listening again in %.0fs", type(exc).__name__, retry_s)
            finally:
                self.listening.clear()
                if conn is not None:
                    with contextlib.suppress(psycopg.Error, OSError):
                        await conn.close()
            await asyncio.sleep(retry_s)
            retry_s = min(retry_s * 2, RETRY_MAX_S)

    async def _batch_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            deadline = loop.time() + self._max_delay_s
            while True:  # gather until quiet, or until the deadline
                self._wake.clear()
                wait_s = min(self._quiet_s, deadline - loop.time())
                if wait_s <= 0:
                    break
                try:
                    await asyncio.wait_for(self._wake.wait(), wait_s)
                except TimeoutError:
                    break
            self._wake.clear()
            batch, self._pending = frozenset(self._pending), set()
            if not batch:
                continue
            try:
                await self._deliver(batch)
            except Exception:  # one failed delivery must not end the listener
                logger.exception("delivering registry changes failed")
