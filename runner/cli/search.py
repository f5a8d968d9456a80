"""`kiwi search`: the registry's and the local spaces' tools, found from a sentence.

Its parser is defined by `add_search_command`; what the search needs (the registry's driver,
the embedder, cryptography for signature states) is imported when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .args import whole_number

MAX_SEARCH_LIMIT = 200  # search_tools' own cap on a page


SEARCH_HELP = """\
Find tools from a sentence: by its words and, with an embedding model (KIWI_EMBEDDINGS:
local, the default, openai or off), by meaning. The tools of the local spaces (.ai/tools,
~/.ai/tools) are listed among the registry's; a local tool with a registry tool's id shows
once, as the local tool (the one `kiwi run` runs).

modifiers, written in the query:
  type:T        a tool type, or tools running on runtime T (type:python)
  category:C    a category or subcategory
  mcp:SERVER    tools of an MCP server (mcp:* any MCP tool)
  namespace:N   tools of namespace N
  local:        only the local spaces' tools, the registry is not asked (local:project, local:user)

columns: tool_id, tool type, version, signature state (local: a local space's tool), how it
matched (id, words, meaning, words+meaning), description. When the answer is by words only,
stderr says why; --json rows carry matched_by, search_mode and source (registry, local:project,
local:user)."""


def add_search_command(sub: Any) -> None:
    """Define `kiwi search` on the `kiwi` parser's subparsers."""
    search = sub.add_parser(
        "search",
        help="search the registry and the local spaces (modifiers: type:, category:, mcp:, namespace:, local:)",
        description=SEARCH_HELP.split("\n\n", 1)[0],
        epilog=SEARCH_HELP.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument("query", nargs="*", help="words and modifiers; no words lists by popularity")
    search.add_argument("--type", dest="tool_type", metavar="TYPE", help="only this tool type")
    search.add_argument("--category", metavar="C", help="only this category")
    search.add_argument(
        "--limit",
        type=search_limit,
        default=20,
        metavar="N",
        help=f"at most N results (default 20, at most {MAX_SEARCH_LIMIT})",
    )
    search.add_argument("--json", action="store_true", help="print a JSON array")
    search.set_defaults(handler=cmd_search)


def search_limit(text: str) -> int:
    """search's --limit: search_tools serves at most MAX_SEARCH_LIMIT rows a query."""
    return whole_number(text, MAX_SEARCH_LIMIT)


async def cmd_search(args: argparse.Namespace) -> int:
    from ..config import Settings
    from ..core.text import first_line
    from ..registry import opened
    from ..registry.spaces import spaces
    from ..search.combined import LOCAL_SIGNATURE, search, search_embedder
    from ..search.query import parse
    from ..trust.states import signature_labels  # cryptography only for commands that show signatures

    settings = Settings.load()
    query = parse(" ".join(args.query), tool_type=args.tool_type, category=args.category)
    embedder = search_embedder(settings) if query.text.strip() else None
    local = spaces(settings)
    if query.local_only:  # the registry is not asked
        found = await search(None, query, limit=args.limit, embedder=embedder, spaces=local)
        signed: dict[str, dict[str, Any]] = {}
    else:
        async with opened(settings, one_shot=True) as registry:
            found = await search(registry, query, limit=args.limit, embedder=embedder, spaces=local)
            published = [r for r in found.rows if r["source"] == "registry"]
            signed = await signature_labels(registry, published, settings.trust)
    rows = [  # the signature's state for people, not the raw signatures it was judged from
        {k: v for k, v in r.items() if k != "signatures"}
        | {"signature": signed[r["tool_id"]] if r["source"] == "registry" else LOCAL_SIGNATURE}
        for r in found.rows
    ]
    for warning in found.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if found.embedding_failed:
        print(f"warning: searching by words only: {found.embedding_failed}", file=sys.stderr)
    elif found.lexical_because and query.text.strip():
        print(f"note: matched by words only: {found.lexical_because}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print("no tools found", file=sys.stderr)
        return 0
    width = max(len(r["tool_id"]) for r in rows)
    matched = max((len(r.get("matched_by") or "") for r in rows), default=0)
    for r in rows:
        desc = first_line(r.get("description"))
        state = r["signature"]["state"]
        how = f"{r.get('matched_by') or '':<{matched}}  " if matched else ""
        print(
            f"{r['tool_id']:<{width}}  {r['tool_type'] or '-':<10} {r.get('latest_version') or '-':<8} {state:<9}  "
            f"{how}{desc[:80]}"
        )
    return 0
