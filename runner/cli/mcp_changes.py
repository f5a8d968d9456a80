"""`kiwi mcp changes [SERVER]`, `kiwi mcp approve CHANGE`, `kiwi mcp reject CHANGE`: the
upstream changes of imported MCP tools held for review (supabase/schemas/620_mcp_tool_changes.sql),
each shown as a diff of what changed, and the decision on one. Approving publishes the held
version as the caller; until then every caller keeps the approved one.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping
from typing import Any

from ..config import Settings

__all__ = ["add_change_commands", "change_diff"]


def add_change_commands(sub: Any) -> None:
    """Add `changes`, `approve` and `reject` to the `kiwi mcp` subparsers."""
    changes = sub.add_parser("changes", help="upstream changes of MCP tools held for review, with their diffs")
    changes.add_argument("server", metavar="SERVER", nargs="?", help="only this mcp_server's tools")
    changes.add_argument("--all", action="store_true", help="decided and superseded changes too")
    changes.add_argument("--json", action="store_true", help="print the changes as one JSON array")
    changes.set_defaults(handler=cmd_mcp_changes)
    for verb, text in (("approve", "publish a held change as its new version"), ("reject", "keep the approved one")):
        decide = sub.add_parser(verb, help=f"{verb} a held upstream change of an MCP tool: {text}")
        decide.add_argument("change", metavar="CHANGE", help="the change's id (kiwi mcp changes lists them)")
        decide.add_argument("--reason", help="why, kept with the decision")
        decide.add_argument("--json", action="store_true", help="print the decision as one JSON object")
        decide.set_defaults(handler=cmd_mcp_decide, approve=verb == "approve")


async def cmd_mcp_changes(args: argparse.Namespace) -> int:
    from ..core.refs import normalize_ref
    from ..registry import connect

    registry = connect(Settings.load())
    try:
        server = normalize_ref(args.server) if args.server else None
        rows = await registry.mcp_changes(server=server, status=None if args.all else "pending")
    finally:
        await registry.aclose()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    if not rows:
        print("no MCP tool changes wait for review" if not args.all else "no MCP tool changes")
        return 0
    for row in rows:
        print(
            f"{row['id']}  {row['tool_id']}  {row['from_version']} -> {row['version']}  {row['status']}"
            f"  ({', '.join(row['changed'])} changed upstream; seen {str(row['detected_at'])[:19]})"
        )
        print(change_diff(row))
        if row["status"] == "pending":
            print(f"decide: kiwi mcp approve {row['id']}   (or: kiwi mcp reject {row['id']})\n")
    return 0


async def cmd_mcp_decide(args: argparse.Namespace) -> int:
    from ..registry import connect

    registry = connect(Settings.load())
    try:
        row = await registry.decide_mcp_change(args.change, args.approve, args.reason)
    finally:
        await registry.aclose()
    if args.json:
        print(json.dumps(row, ensure_ascii=False))
    elif args.approve:
        print(f"approved: {row['tool_id']}@{row['version']} published (was {row['from_version']})")
    else:
        print(f"rejected: {row['tool_id']} stays at {row['from_version']}")
    return 0


def change_diff(change: Mapping[str, Any]) -> str:
    """Each changed field as a unified diff of its old and new value (JSON, keys sorted)."""
    out: list[str] = []
    for name, sides in sorted((change.get("diff") or {}).items()):
        old, new = (_lines(sides.get(k)) for k in ("old", "new"))
        before, after = f"{name} ({change['from_version']})", f"{name} ({change['version']})"
        out += difflib.unified_diff(old, new, before, after, n=2)
    return "\n".join(line.rstrip("\n") for line in out)


def _lines(value: Any) -> list[str]:
    if value is None:
        return []
    text = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return text.splitlines()
