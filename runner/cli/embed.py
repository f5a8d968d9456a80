"""`kiwi embed`: embed the searchable texts that have no vector yet for the configured model.

Semantic search (public.search_tools with the query's vector) finds a tool by meaning once
its searchable text (name, description, tags, parameters) has a vector for the model in use
(KIWI_EMBEDDINGS: runner/search/embedders.py). Publishing embeds what it published; this
command catches up on everything else the caller may embed: the texts of its namespaces'
tools, or every tool's with `--admin` (as `scripts/stack` does for the seeded tools after a
reset). A text already embedded for the model is never embedded again. With `--admin` it
also prunes stale vectors (public.prune_search_embeddings): those of texts no tool has any
more, and of other models that stored nothing for 30 days.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..config import Settings
from .args import whole_number

__all__ = ["add_embed_command"]


def _batch(text: str) -> int:
    return whole_number(text, 1000)  # what store_search_embeddings takes a call


def add_embed_command(sub: Any) -> None:
    """Define `kiwi embed` on the `kiwi` parser's subparsers."""
    embed = sub.add_parser(
        "embed",
        help="embed the tools' searchable texts that have no vector yet, for search by meaning (KIWI_EMBEDDINGS)",
    )
    embed.add_argument(
        "--batch", type=_batch, default=256, metavar="N", help="texts embedded and stored at once (default 256)"
    )
    embed.add_argument(
        "--progress",
        action="store_true",
        help="show the progress bar even when stderr is not a terminal (one line per batch)",
    )
    embed.add_argument(
        "--refresh",
        action="store_true",
        help="embed every text again, replacing the stored vectors (admins only: kiwi --admin embed --refresh)",
    )
    embed.add_argument("--json", action="store_true", help="print one JSON object {model, embedded, seconds}")
    embed.set_defaults(handler=cmd_embed)


async def cmd_embed(args: argparse.Namespace) -> int:
    from ..registry import opened
    from ..search import embed_pending, embedder_from_settings

    settings = Settings.load()
    embedder = embedder_from_settings(settings)
    if embedder is None:  # a choice, not a failure (scripts/stack runs this after every reset)
        if args.json:
            print(json.dumps({"model": None, "embedded": 0, "seconds": 0}))
        print(
            "kiwi: embeddings are off (KIWI_EMBEDDINGS=off), so search matches words only: nothing to embed",
            file=sys.stderr,
        )
        return 0
    started = time.monotonic()
    async with opened(settings) as registry:
        progress = True if args.progress else None
        count = await embed_pending(registry, embedder, batch=args.batch, progress=progress, refresh=args.refresh)
        # stale vectors (texts no tool has, models idle for 30 days) go; only an admin may
        pruned = await registry.prune_search_embeddings([embedder.model]) if settings.admin else 0
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({"model": embedder.model, "embedded": count, "pruned": pruned, "seconds": round(seconds, 3)}))
    else:
        gone = f"; pruned {pruned} stale vectors" if pruned else ""
        print(f"embedded {count} texts with {embedder.model} in {seconds:.1f} s{gone}")
    return 0
