"""Embedding in the background: what a long-lived `kiwi serve` or `kiwi worker` does so that a
tool published by any path (SQL, the dashboard, another runner) is found by meaning without
anyone running `kiwi embed`.

`BackgroundEmbedder.running()` starts one task that embeds the texts pending for the model in
use (public.pending_search_texts) in small batches, each embedded off the event loop, with a
pause between batches as long as the batch took (at least PAUSE_S), so that requests keep
their turn; then prunes stale vectors
(public.prune_search_embeddings: texts no tool has any more, models idle for long), and
waits. It wakes on the registry's notification of a publish (the channel `kiwi_registry`,
over its own LISTEN connection, Postgres only), and at the latest every `poll_s` seconds.

It acts as service_role on the Postgres backend (the process holds the database password,
which may take that role anyway: runner/principal.py), so it embeds every tool's text; over
REST, as the settings' principal (its namespaces). It only ever stores what the configured
model computes from the registry's own texts. Nothing it meets fails the process: an error
is logged and the next round comes after a back-off; leaving `running()` cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..principal import Principal, acting_as, admin
from .embedders import Embedder, embedder_from_settings
from .sync import _embed_and_store

if TYPE_CHECKING:
    from ..config import Settings
    from ..registry.base import Registry

__all__ = ["BackgroundEmbedder", "background_embedding"]

logger = logging.getLogger("kiwi.search.background")

CHANNEL = "kiwi_registry"  # what the registry notifies at a publish's commit (340_registry_notifications.sql)
BATCH = 32  # texts embedded and stored at once: a few milliseconds of the model's time
PAUSE_S = 0.05  # between two batches: the event loop's requests come first
POLL_S = 30.0  # the latest a text published while no notification was heard is embedded
RETRY_MAX_S = 60.0
PRUNE_EVERY_S = 3600.0


class BackgroundEmbedder:
    """Embeds what is pending for `embedder.model` through `registry`, acting as `principal`."""

    def __init__(
        self,
        registry: Registry,
        embedder: Embedder,
        principal: Principal,
        *,
        listen_url: str | None = None,
        batch: int = BATCH,
        pause_s: float = PAUSE_S,
        poll_s: float = POLL_S,
    ) -> None:
        self.registry = registry
        self.embedder = embedder
        self.principal = principal
        self.listen_url = listen_url
        self.batch = batch
        self.pause_s = pause_s
        self.poll_s = poll_s
        self.stored = 0
        self.pruned = 0
        self.idle = asyncio.Event()
        """Set whenever a round found nothing left to embed (tests wait on it)."""
        self._wake = asyncio.Event()
        self._pruned_at: float | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[BackgroundEmbedder]:
        """The embedder and its listener as tasks while inside; cancelled and awaited on leaving."""
        with acting_as(self.principal):  # the tasks copy the context: every call acts as the principal
            tasks = [asyncio.create_task(self._embed_forever(), name="kiwi-background-embed")]
            if self.listen_url is not None:
                tasks.append(asyncio.create_task(self._listen_forever(), name="kiwi-background-listen"))
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def wake(self) -> None:
        self._wake.set()

    async def round(self) -> int:
        """Embed every pending text, a batch at a time -> how many vectors were stored; then prune
        (at most every PRUNE_EVERY_S, and only as service_role)."""
        stored = 0
        seen: set[str] = set()
        while True:
            rows = await self.registry.pending_search_texts(self.embedder.model, limit=self.batch)
            fresh = [r for r in rows if r["text_hash"] not in seen]
            if not fresh:  # nothing pending, or only texts another vector already holds for us
                break
            seen.update(r["text_hash"] for r in fresh)
            began = time.monotonic()
            stored += await _embed_and_store(self.registry, self.embedder, fresh)
            # at most half the time: as long a pause as the batch took, so requests keep their turn
            await asyncio.sleep(max(self.pause_s, time.monotonic() - began))
        self.stored += stored
        await self._prune()
        return stored

    async def _prune(self) -> None:
        now = asyncio.get_running_loop().time()
        if not self.principal.is_admin or (self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY_S):
            return
        self._pruned_at = now
        self.pruned += await self.registry.prune_search_embeddings([self.embedder.model])

    async def _embed_forever(self) -> None:
        retry_s = 1.0
        while True:
            self._wake.clear()
            try:
                stored = await self.round()
                if stored:
                    logger.info("embedded %d searchable texts with %s", stored, self.embedder.model)
                retry_s = 1.0
                self.idle.set()
                wait_s = self.poll_s
            except Exception as exc:  # never the server's failure: the tools are found by words meanwhile
                logger.warning(
                    "background embedding failed (%s: %s); again in %.0f s", type(exc).__name__, exc, retry_s
                )
                wait_s, retry_s = retry_s, min(retry_s * 2, RETRY_MAX_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)
            self.idle.clear()

    async def _listen_forever(self) -> None:
        import psycopg

        retry_s = 1.0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.listen_url or "", autocommit=True, connect_timeout=5)
                try:
                    await conn.execute(f"listen {CHANNEL}")
                    retry_s = 1.0
                    self.wake()  # what was published while nobody listened
                    async for _ in conn.notifies():
                        self.wake()
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
            except Exception as exc:  # the database restarted: the poll still runs; listen again later
                logger.info("publish notifications off (%s); listening again in %.0f s", type(exc).__name__, retry_s)
            await asyncio.sleep(retry_s)
            retry_s = min(retry_s * 2, RETRY_MAX_S)


@contextlib.asynccontextmanager
async def background_embedding(settings: Settings) -> AsyncIterator[BackgroundEmbedder | None]:
    """A BackgroundEmbedder for the settings' model while inside (None when embeddings are off or
    the model cannot be made: said once in the log), on a registry connection of its own."""
    try:
        embedder = embedder_from_settings(settings)
    except Exception as exc:
        logger.warning("no background embedding: %s", getattr(exc, "message", None) or exc)
        embedder = None
    if embedder is None:
        yield None
        return
    registry, principal, url = _registry_for(settings)
    try:
        async with BackgroundEmbedder(registry, embedder, principal, listen_url=url).running() as running:
            yield running
    finally:
        await registry.aclose()


def _registry_for(settings: Settings) -> tuple[Any, Principal, str | None]:
    """The registry the background embedder uses, whom it acts as, and where it listens."""
    if settings.backend == "postgres":
        from ..registry.postgres import PostgresRegistry

        principal = admin()
        registry = PostgresRegistry(settings.database_url, principal=principal, max_size=1, cache_plans=False)
        return registry, principal, settings.database_url
    from ..registry import connect

    return connect(settings, one_shot=True), settings.principal(), None
