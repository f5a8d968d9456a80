"""Embedding what the registry has not embedded yet: `embed_pending`.

The registry keeps each searchable text's vector by (model, sha256 of the text), so an
unchanged text is never embedded twice. `embed_pending` asks it for the texts still without
a vector for the embedder's model (public.pending_search_texts), embeds them in batches and
stores the vectors (public.store_search_embeddings), until nothing is pending. It stops as
well when a round stores nothing or brings back only texts it already embedded (the caller
may not replace a vector another stored first): it never loops forever, and never embeds a
text twice.

The embedding itself runs in a worker thread: an API call or a large batch does not stall
the event loop (an MCP server answering others meanwhile).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from ..config import Settings
from ..errors import KiwiError
from ..registry.base import Registry
from .embedders import Embedder, EmbeddingError, embedder_from_settings

__all__ = ["ProgressBar", "embed_pending", "embed_published"]

ROUND = 1000  # texts asked for at once, the most either function takes: a total known for most imports

Progress = Callable[[int, int, bool], None]
"""Told after each stored batch: texts done, texts known so far, and whether more may follow."""


class ProgressBar:
    """A progress bar on a stream (stderr): redrawn in place on a terminal, else a line per
    update (a log file): `[#####.....] 1024/4096 texts, 2100/s`; a `+` after the total says
    more may follow (the registry is asked a round at a time)."""

    def __init__(self, stream: IO[str] | None = None, *, live: bool | None = None, label: str = "embedding") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = _isatty(self.stream) if live is None else live
        self.label = label
        self.started = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int, more: bool) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        width = 24
        filled = width if total <= 0 else min(width, done * width // total)
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.label} [{bar}] {done}/{total}{'+' if more else ''} texts, {done / elapsed:.0f}/s"
        self.stream.write(("\r" + line) if self.live else line + "\n")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the bar's line (on a terminal), so what follows starts on its own."""
        if self.live and self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


async def embed_pending(
    registry: Registry,
    embedder: Embedder,
    *,
    batch: int = 256,
    progress: bool | Progress | None = None,
    refresh: bool = False,
) -> int:
    """Embed every text pending for `embedder.model` that the caller may embed, `batch` texts per
    store -> how many vectors were stored. `progress`: None, a bar on stderr when it is a
    terminal; True, a bar on stderr anyway; False, none; or a function told (done, total, more).
    `refresh` (service_role only: the registry refuses others): every text, embedded or not,
    in hash order, each vector replaced."""
    if not 1 <= batch <= ROUND:
        raise ValueError(f"batch is from 1 to {ROUND}, not {batch}")
    bar = ProgressBar() if progress is True or (progress is None and _isatty(sys.stderr)) else None
    report: Progress | None = bar if bar is not None else progress if callable(progress) else None
    seen: set[str] = set()
    stored = 0
    after: str | None = None  # refreshing pages on by hash: no text stops being listed
    try:
        while True:
            rows = await registry.pending_search_texts(embedder.model, limit=ROUND, after=after, every=refresh)
            after = rows[-1]["text_hash"] if refresh and rows else None
            fresh = [r for r in rows if r["text_hash"] not in seen]
            if not fresh:
                return stored
            more = len(rows) >= ROUND
            known = len(seen) + len(fresh)
            before = stored
            for start in range(0, len(fresh), batch):
                chunk = fresh[start : start + batch]
                stored += await _embed_and_store(registry, embedder, chunk)
                seen.update(r["text_hash"] for r in chunk)
                if report is not None:
                    report(len(seen), known, more)
            if stored == before or not more:
                return stored
    finally:
        if bar is not None:
            bar.close()


async def _embed_and_store(registry: Registry, embedder: Embedder, rows: list[dict[str, Any]]) -> int:
    texts = [str(r["search_text"]) for r in rows]
    vectors = await asyncio.to_thread(embedder.embed, texts)
    if len(vectors) != len(texts):
        raise EmbeddingError(f"{embedder.model} answered {len(vectors)} vectors for {len(texts)} texts")
    items = [
        {"text_hash": r["text_hash"], "embedding": [round(x, 8) for x in vector]}  # float4 in the column
        for r, vector in zip(rows, vectors, strict=True)
    ]
    return await registry.store_search_embeddings(embedder.model, items)


async def embed_published(
    registry: Registry, embedder: Embedder | Settings | None, *, progress: bool | Progress | None = False
) -> tuple[int, str | None]:
    """Right after a publish: embed what is pending for the model (what was just published, and
    anything of the caller's left unembedded before) -> (texts stored, a warning or None).
    `embedder`: the model, or the settings that name one (made here, so that a bad setting
    cannot fail the publish either), or None (KIWI_EMBEDDINGS=off: words only, by choice).
    Never raises: the publish went through, and its tools are found by their words until
    `kiwi embed` runs, which the warning says."""
    try:
        model = embedder_from_settings(embedder) if isinstance(embedder, Settings) else embedder
        if model is None:
            return 0, None
        return await embed_pending(registry, model, progress=progress), None
    except Exception as exc:  # nothing here may fail a publish that succeeded
        why = exc.message if isinstance(exc, KiwiError) else f"{type(exc).__name__}: {exc}"
        return 0, f"not embedded for search ({why}); found by words only until `kiwi embed` runs"
