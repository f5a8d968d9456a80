"""The worker's ears: one LISTEN connection for `kiwi_runs` (a run was queued or put back:
take now) and `kiwi_run_cancel` (a run was cancelled: stop it if it is ours). Reconnects
with a growing pause when the database goes away; the worker's poll covers the gap."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["Notices"]

logger = logging.getLogger("kiwi.worker")


class Notices:
    def __init__(self, url: str, on_queued: Callable[[], None], on_cancel: Callable[[str], None]) -> None:
        self._url = url
        self._on_queued = on_queued
        self._on_cancel = on_cancel
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="kiwi-worker-notices")
        with contextlib.suppress(TimeoutError):  # no LISTEN yet: the poll still finds the runs
            await asyncio.wait_for(self.listening.wait(), timeout=5.0)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        pause = 0.5
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, connect_timeout=5)
                await conn.execute("listen kiwi_runs")
                await conn.execute("listen kiwi_run_cancel")
                self.listening.set()
                pause = 0.5
                self._on_queued()  # anything queued while not listening
                async for notice in conn.notifies():
                    if notice.channel == "kiwi_run_cancel":
                        self._on_cancel(notice.payload)
                    else:
                        self._on_queued()
            except (psycopg.Error, OSError) as e:
                logger.info("worker notices lost (%s); polling until they are back", type(e).__name__)
            finally:
                self.listening.clear()
                if conn is not None:
                    with contextlib.suppress(psycopg.Error, OSError):
                        await conn.close()
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
