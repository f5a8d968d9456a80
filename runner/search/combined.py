"""One search over the registry and the local spaces, as `kiwi search` and the MCP server's
`search` answer it.

The caller computes the query's embedding here, in its own process (the registry never
embeds): the words alone, without modifiers, embedded off the event loop. When there is no
embedder (KIWI_EMBEDDINGS=off), no words, or the embedder fails, the registry answers by
words and the answer says why (`search_mode`); a failure is one warning, never an error.

The local spaces' tools (runner/search/local.py) are ranked on the registry's scale and
listed among its rows, each marked with its `source` (`local:project`, `local:user`;
registry rows say `registry`). A local tool shadows the registry's tool of the same id, as
`kiwi run` resolves: that id is listed once, as the local tool (`shadows: true`), at the
better of the two ranks. A `local:` modifier searches the local spaces only and the registry
is not asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KiwiError
from .embedders import DIMENSIONS, Embedder, embedder_from_settings
from .local import LISTING, list_tools, rank, tool_vectors
from .query import Query

if TYPE_CHECKING:
    from ..config import Settings
    from ..registry.base import Registry

REGISTRY = "registry"
MAX_REGISTRY_LIMIT = 200  # what search_tools serves at most
LOCAL_SIGNATURE: dict[str, Any] = {
    "state": "local",
    "detail": "a tool of a local space: not published, so not signed",
    "key_fingerprints": [],
}


@dataclass
class Found:
    """The rows, best first; how the answer was ranked (`search_mode`: hybrid, `lexical: why`,
    or `listing: ...`); warnings for the person asking (skipped tool.yaml files); and, when the
    embedder failed, why (`search_mode` says it too)."""

    rows: list[dict[str, Any]]
    search_mode: str
    warnings: list[str] = field(default_factory=list)
    embedding_failed: str | None = None  # why the embedder failed, when it did (the answer is then lexical)
    unembedded: list[str] = field(default_factory=list)  # registry rows with no vector for the model: words only

    @property
    def lexical_because(self) -> str | None:
        """Why the answer is by words only, when it is."""
        mode, _, why = self.search_mode.partition(": ")
        return (why or "no reason given") if mode == "lexical" else None


class _Unusable:
    """The embedder the settings name, when it cannot be made (its key's ${VAR} is unset):
    each embed fails saying why, so a search goes by words and says so, and keeps working."""

    dimensions = DIMENSIONS

    def __init__(self, model: str, error: KiwiError) -> None:
        self.model = model
        self.error = error

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise self.error


QUERY_EMBEDDING_TIMEOUT = 5.0  # s: a provider that does not answer delays a search by this, then words answer


def search_embedder(settings: Settings) -> Embedder | None:
    """The embedder for queries: the one the settings name (None: off), or, when it cannot be
    made, one whose every embed fails saying why (search never fails for its embedder). A
    hosted provider gets QUERY_EMBEDDING_TIMEOUT, not the bulk embedder's 30 s: a search
    waits that long at most before it answers by words."""
    try:
        return embedder_from_settings(settings, timeout=QUERY_EMBEDDING_TIMEOUT)
    except KiwiError as e:
        return _Unusable(settings.embeddings, e)


@dataclass(frozen=True)
class QueryVector:
    """The query's embedding, or why there is none (`failed`: the embedder was asked and failed)."""

    vector: list[float] | None
    why_none: str | None = None
    failed: bool = False


async def embed_query(embedder: Embedder | None, text: str) -> QueryVector:
    """The query's vector, or why there is none: no words, no embedder, or one that failed
    (any failure: the search then goes by words, and says why)."""
    if not text.strip():
        return QueryVector(None, "no words to embed")
    if embedder is None:
        return QueryVector(None, "embeddings are off (KIWI_EMBEDDINGS=off)")
    try:
        if getattr(embedder, "inline", False):  # a loaded local model: no thread hop
            vectors = embedder.embed([text])
        else:  # a model still to load, or a hosted one (its own timeout bounds the wait)
            vectors = await asyncio.to_thread(embedder.embed, [text])
        vector = [float(x) for x in vectors[0]]
    except Exception as e:  # a model that would not load, an API down: words still answer
        said = getattr(e, "message", None) or str(e) or type(e).__name__
        return QueryVector(None, f"the query could not be embedded by {embedder.model}: {said}", failed=True)
    if len(vector) != embedder.dimensions:
        return QueryVector(None, f"{embedder.model} embedded the query in {len(vector)} numbers", failed=True)
    if not any(vector):
        return QueryVector(None, f"no word of the query is known to {embedder.model}")
    return QueryVector(vector)


async def search(
    registry: Registry | None,
    query: Query,
    *,
    limit: int = 20,
    embedder: Embedder | None = None,
    spaces: Sequence[tuple[str, Path]] | None = None,
) -> Found:
    """Search the registry (unless `query` is local: or `registry` is None) and the local
    `spaces` (None: none; `kiwi serve` without --local-spaces), merged as the module says."""
    if spaces is None:  # nothing to read meanwhile: no task of its own
        listing, embedded = None, await embed_query(embedder, query.text)
    else:
        embedding = asyncio.create_task(embed_query(embedder, query.text))  # in a thread, while the spaces are read
        try:
            listing = list_tools(spaces, query)
        finally:
            embedded = await embedding
    vector = embedded.vector
    entries = listing.entries if listing else []
    warnings = list(listing.warnings) if listing else []
    rows: list[dict[str, Any]] = []
    mode = None
    if registry is not None and not query.local_only:
        rows = await registry.search(
            query.registry_query,
            tool_type=query.tool_type,
            category=query.category,
            limit=min(limit + len(entries), MAX_REGISTRY_LIMIT),  # room for the rows local tools shadow
            embedding=vector,
            model=embedder.model if vector is not None and embedder is not None else None,
        )
        rows = [{**r, "source": REGISTRY} for r in rows]
        mode = next((r.get("search_mode") for r in rows if r.get("search_mode")), None)
    vectors = None
    if vector is not None and embedder is not None and entries:
        try:
            vectors = await tool_vectors(embedder, entries)
        except Exception as e:  # as for the query: the local tools are then ranked by words
            warnings.append(f"local tools ranked by words only: their texts could not be embedded ({e})")
    # the registry's scale: fused ranks when its answer is hybrid (or, not asked, would be)
    fused = mode == "hybrid" or (mode is None and vector is not None)
    local_rows = rank(entries, query, query_vector=vector, vectors=vectors, fused=fused, limit=limit) if entries else []
    if not query.text.strip():
        mode = mode or LISTING
    elif vector is None:
        mode = f"lexical: {embedded.why_none}"
    elif mode is None:
        mode = "hybrid" if vectors is not None or not entries else "lexical: the local tools could not be embedded"
    merged = _merge(rows, local_rows, {e.ref: e for e in entries}, listing=not query.text.strip())
    failure = embedded.why_none if embedded.failed else None
    rows = [{**r, "search_mode": mode} for r in merged[:limit]]
    unembedded = await _unembedded(registry, embedder, rows) if vector is not None and registry is not None else []
    if unembedded:
        warnings.append(words_only_warning(len(unembedded), embedder.model if embedder else "the model"))
    return Found(rows, mode, warnings, failure, unembedded)


def words_only_warning(count: int, model: str) -> str:
    these = "1 of these tools has" if count == 1 else f"{count} of these tools have"
    return (
        f"{these} no vector for {model} yet, so could be matched by words only "
        "(a running `kiwi serve` or `kiwi worker` embeds new tools, as does `kiwi embed`)"
    )


async def _unembedded(registry: Registry, embedder: Embedder | None, rows: list[dict[str, Any]]) -> list[str]:
    """The registry rows found by words alone whose tool has no vector for the model (a row
    found by meaning has one). Asking costs one short query; failing to ask costs nothing."""
    refs = [r["tool_id"] for r in rows if r.get("source") == REGISTRY and r.get("matched_by") in ("words", "id")]
    if not refs or embedder is None:
        return []
    try:
        return await registry.unembedded_tools(embedder.model, refs)
    except Exception:  # a registry without the function (older migration): the answer stands
        return []


def _merge(
    registry_rows: list[dict[str, Any]],
    local_rows: list[dict[str, Any]],
    local: dict[str, Any],
    *,
    listing: bool,
) -> list[dict[str, Any]]:
    """The two lists as one, best first (a listing: the local tools, then the registry's). A
    registry row of an id a local tool has becomes that local tool (`shadows`)."""
    by_id = {r["tool_id"]: r for r in local_rows}
    kept: list[dict[str, Any]] = []
    for row in registry_rows:
        entry = local.get(row["tool_id"])
        if entry is None:
            kept.append(row)
            continue
        mine = by_id.get(row["tool_id"])
        if mine is None:  # the local tool did not match by itself: it shows where the registry's did
            by_id[row["tool_id"]] = {**entry.row(), "rank": row.get("rank"), "matched_by": row.get("matched_by")}
        elif (row.get("rank") or 0) > (mine.get("rank") or 0):
            mine["rank"] = row.get("rank")
        by_id[row["tool_id"]]["shadows"] = True
    locals_ = list(by_id.values())
    if listing:
        return locals_ + kept
    both = [(r, 0) for r in locals_] + [(r, 1) for r in kept]
    both.sort(key=lambda rs: (-(rs[0].get("rank") or 0.0), rs[1], rs[0]["tool_id"]))
    return [r for r, _ in both]
