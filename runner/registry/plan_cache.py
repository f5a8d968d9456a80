"""Execution plans kept in memory, dropped the moment the database says they may be stale.

The registry notifies the channel `kiwi_plans` at the commit of anything that can change
a plan (schema file 220_plan_notifications.sql). A PlanCache listens on its
own connection and serves plans only while it is listening: before LISTEN has
succeeded, and after the connection is lost, every call goes to the database. It is the
PostgresBackend's `cache` (base.py's seam): Registry.execution_plan keeps plans in it, and
Registry.check_call the gate's untouched verdicts.

A plan fetched while a notification arrives is not kept (a generation counter moves
on each notification), so a plan read just before a commit can never outlive it. What
remains is the notification's own delay: a run that starts within it uses the plan of
a moment ago, as it would have had it started a moment earlier.

The listener starts on the second plan a registry is asked for, so a one-shot process
(`kiwi run`) never opens the extra connection. When its connection is lost (the database
restarted), the next plan asked for starts it again; while connecting keeps failing it
is tried again at most every RETRY_S, doubling up to RETRY_MAX_S, and only while plans
are asked for, so an idle registry makes no attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import psycopg

CHANNEL = "kiwi_plans"
MAX_PLANS = 4096
RETRY_S = 1.0  # the first wait before reconnecting after a failed attempt
RETRY_MAX_S = 60.0

logger = logging.getLogger("kiwi.registry")


class PlanCache:
    def __init__(self, url: str, connect_timeout: float) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._plans: dict[Hashable, dict[str, Any]] = {}
        self._generation = 0
        self._listening = False
        self._asked = 0
        self._task: asyncio.Task[None] | None = None
        self._retry_s = RETRY_S
        self._next_try = 0.0  # loop time before which no new listener is started

    @property
    def live(self) -> bool:
        """True while plans are being served from memory."""
        return self._listening

    def peek(self, key: Hashable) -> dict[str, Any] | None:
        """The answer `key` names if it is known to be current, else None (no I/O, no await)."""
        return self._plans.get(key) if self._listening else None

    async def get(
        self,
        key: Hashable,
        fetch: Callable[[], Awaitable[dict[str, Any]]],
        keep: Callable[[dict[str, Any]], bool] | None = None,
        alias: Callable[[dict[str, Any]], Hashable | None] | None = None,
    ) -> dict[str, Any]:
        """The answer `key` names (for a plan: the caller, the tool and its version: plans are
        cached per caller, since what one may read another may not), from memory when it is
        known to be current, else fetched, and kept unless `keep` says otherwise; when kept,
        also under the key `alias` gives for it, if any."""
        if self._listening and key in self._plans:
            return self._plans[key]
        self._asked += 1
        if self._asked >= 2 and (self._task is None or self._task.done()):
            loop = asyncio.get_running_loop()
            if loop.time() >= self._next_try:
                self._task = loop.create_task(self._listen())
        generation = self._generation
        plan = await fetch()
        if self._listening and generation == self._generation and (keep is None or keep(plan)):
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
            if alias is not None and (other := alias(plan)) is not None:
                self._plans[other] = plan
        return plan

    def _drop_all(self) -> None:
        self._generation += 1
        self._plans.clear()

    async def _listen(self) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
            )
            await conn.execute(f"listen {CHANNEL}")
            self._drop_all()  # nothing fetched before LISTEN can be trusted
            self._listening = True
            self._retry_s = RETRY_S
            async for _ in conn.notifies():
                self._drop_all()
        except (psycopg.Error, OSError) as exc:
            logger.info("plan cache off: %s", type(exc).__name__)
            if not self._listening:  # could not connect: wait before the next attempt, longer each time
                self._next_try = asyncio.get_running_loop().time() + self._retry_s
                self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
        finally:
            self._listening = False
            self._drop_all()
            if conn is not None:
                with contextlib.suppress(psycopg.Error, OSError):
                    await conn.close()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._asked = 0
