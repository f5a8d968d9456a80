"""kiwi's governance commands: yank, deprecate, delete, approve, deny, approvals, whoami.

Each acts as the configured principal (runner/principal.py); the database decides who may:
members of a tool's namespace yank, deprecate and delete it, admins anything (`kiwi --admin`), and
approvals are decided by a namespace's owners or an admin, never by their requester.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..core.refs import split_ref
from ..errors import UsageError

if TYPE_CHECKING:
    from ..principal import Principal

__all__ = ["COMMAND_WRITE", "add_governance_commands", "audited"]

COMMAND_WRITE = "command write"  # the policy of an approval to publish what only an admin may (approvals.sql)


def opened() -> Any:
    """The configured registry, closed after the command's calls (one connection: registry.connect one_shot)."""
    from ..registry import opened

    return opened(one_shot=True)


async def audited(
    registry: Any, action: str, subject: str, inputs: dict[str, Any], work: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """`work` with the audit row its MCP counterpart leaves (runner/mcp_server/meta/audit.py), in
    a session of its own (cli-<uuid>), as the caller."""
    from ..mcp_server.meta.audit import audited_call

    session = f"cli-{uuid.uuid4()}"
    return await audited_call(registry, session=session, action=action, subject=subject, inputs=inputs, work=work)


def add_governance_commands(sub: Any) -> None:
    """Define the commands on the `kiwi` parser's subparsers."""
    for verb, does in (("approve", "approve a pending call: it may then run once"), ("deny", "deny a pending call")):
        decide = sub.add_parser(verb, help=does)
        decide.add_argument("approval_id", metavar="ID", help="the approval's id (see `kiwi approvals`)")
        decide.add_argument("--reason", metavar="R", help="why, kept with the decision")
        decide.add_argument("--json", action="store_true", help="print the approval as JSON")
        decide.set_defaults(handler=cmd_decide, approve=verb == "approve")

    yank = sub.add_parser("yank", help="withdraw a published version (readable by exact version, never latest)")
    yank.add_argument("tool", metavar="TOOL@VERSION", help="the version to withdraw")
    yank.add_argument("--reason", metavar="R", help="why, shown to those who pin it")
    yank.add_argument("--json", action="store_true", help="print the registry's answer as JSON")
    yank.set_defaults(handler=cmd_yank)

    deprecate = sub.add_parser("deprecate", help="mark a published version deprecated: it still runs, with a warning")
    deprecate.add_argument("tool", metavar="TOOL@VERSION", help="the version to deprecate")
    deprecate.add_argument("--message", metavar="M", help="what to use instead, shown whenever it runs")
    deprecate.add_argument("--json", action="store_true", help="print the registry's answer as JSON")
    deprecate.set_defaults(handler=cmd_deprecate)

    delete = sub.add_parser("delete", help="remove a tool and all its versions (refused while others run on it)")
    delete.add_argument("tool", metavar="TOOL", help="tool id or namespace/tool")
    delete.add_argument("--yes", action="store_true", help="really delete: without it, nothing is deleted")
    delete.add_argument("--json", action="store_true", help="print the registry's answer as JSON")
    delete.set_defaults(handler=cmd_delete)

    whoami = sub.add_parser("whoami", help="whom kiwi acts as: role, user id, namespaces")
    whoami.add_argument("--json", action="store_true", help="print one JSON object")
    whoami.set_defaults(handler=cmd_whoami)

    pending = sub.add_parser("approvals", help="calls waiting for approval, oldest first")
    pending.add_argument("--json", action="store_true", help="print a JSON array")
    pending.set_defaults(handler=cmd_approvals)


async def cmd_decide(args: argparse.Namespace) -> int:
    """kiwi approve ID / kiwi deny ID: decide a pending approval (public.decide_approval)."""
    async with opened() as registry:
        decided = await audited(
            registry,
            "approve" if args.approve else "deny",
            args.approval_id,
            {"approval_id": args.approval_id, "reason": args.reason},
            lambda: _decision(registry, args),
        )
    approval = decided["approval"]
    if args.json:
        print(json.dumps(approval, ensure_ascii=False, default=str))
        return 0
    print(f"{approval['status']}: {approval['id']}  {approval.get('tool_id')}@{approval.get('version') or '-'}")
    if args.approve and approval.get("policy") == COMMAND_WRITE:
        print(
            f"the requester may now publish exactly that content once, before {approval['expires_at']}: "
            f"kiwi publish DIR --approval {approval['id']}"
        )
    elif args.approve:
        print(f"the requester may now run it once, with approval_id {approval['id']}, before {approval['expires_at']}")
    return 0


async def _decision(registry: Any, args: argparse.Namespace) -> dict[str, Any]:
    return {"approval": await registry.decide_approval(args.approval_id, args.approve, args.reason)}


def _exact_version(ref: str, verb: str) -> tuple[str, str]:
    """`tool@1.0.0`: a version's lifecycle changes one exact version, never "the latest"."""
    tool, version = split_ref(ref, None)
    if version is None:
        raise UsageError(f"{verb} needs a version", hint=f"kiwi {verb} {tool}@1.0.0 (see kiwi show {tool})")
    return tool, version


async def cmd_yank(args: argparse.Namespace) -> int:
    """kiwi yank TOOL@VERSION: public.yank_tool_version, as the caller (members and admins)."""
    tool, version = _exact_version(args.tool, "yank")
    async with opened() as registry:
        inputs = {"item_id": tool, "version": version, "reason": args.reason}
        answer = await audited(registry, "yank", args.tool, inputs, lambda: registry.yank(tool, version, args.reason))
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
    else:
        print(
            f"yanked: {answer['tool_id']}@{answer['version']}; latest is now {answer.get('latest_version') or 'none'}"
        )
    return 0


async def cmd_deprecate(args: argparse.Namespace) -> int:
    """kiwi deprecate TOOL@VERSION: public.deprecate_tool_version, as the caller (members and admins)."""
    tool, version = _exact_version(args.tool, "deprecate")
    async with opened() as registry:
        inputs = {"item_id": tool, "version": version, "message": args.message}
        answer = await audited(
            registry, "deprecate", args.tool, inputs, lambda: registry.deprecate(tool, version, args.message)
        )
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
    else:
        said = f": {args.message}" if args.message else ""
        print(f"deprecated: {answer['tool_id']}@{answer['version']}{said}; runs of it now warn so")
    return 0


async def cmd_delete(args: argparse.Namespace) -> int:
    """kiwi delete TOOL --yes: public.delete_tool, as the caller (members and admins)."""
    tool, version = split_ref(args.tool, None)
    if version is not None:
        raise UsageError("delete removes a whole tool, not one version", hint=f"kiwi yank {args.tool} withdraws one")
    if not args.yes:
        raise UsageError(
            f"nothing deleted: {tool} and ALL its versions would be removed, which cannot be undone",
            hint=f"kiwi delete {tool} --yes",
        )
    async with opened() as registry:
        inputs = {"item_id": tool, "confirm": True}
        answer = await audited(registry, "delete", tool, inputs, lambda: registry.delete_tool(tool))
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
    else:
        print(f"deleted: {answer.get('tool_id', tool)} ({answer.get('versions')} version(s))")
    return 0


async def cmd_whoami(args: argparse.Namespace) -> int:
    """kiwi whoami: the principal this process acts as, as the database sees it (public.whoami)."""
    settings = Settings.load()
    principal = settings.principal()
    async with opened() as registry:
        seen = await registry.whoami()
    source = _source(principal)
    if args.json:
        print(json.dumps({**seen, "source": source}, ensure_ascii=False, default=str))
        return 0
    who = f"user {seen['user_id']}" if seen.get("user_id") else seen.get("role")
    if principal.claims.get("email"):
        who += f" <{principal.claims['email']}>"
    print(f"{who} ({seen.get('role')}, {source}){'  admin' if seen.get('is_admin') else ''}")
    owned = seen.get("namespaces") or []
    print("namespaces: " + (", ".join(f"{n['namespace']} ({n['role']})" for n in owned) or "none"))
    return 0


def _source(principal: Principal) -> str:
    """How the principal was chosen; a token that is the stored session's is named so (kiwi login)."""
    if principal.source != "token" or principal.token is None:
        return principal.source
    from .session import load, session_file

    stored = load(session_file())
    return "session, kiwi login" if stored is not None and stored.access_token == principal.token else "token"


async def cmd_approvals(args: argparse.Namespace) -> int:
    async with opened() as registry:
        rows = await registry.approvals()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print("no pending approvals", file=sys.stderr)
    for r in rows:
        print(
            f"{r['id']}  {r['tool_id']}@{r.get('version') or '-'}  by {r.get('requested_by')}  "
            f"expires in {r.get('expires_in_s')} s  ({r.get('approve')} | {r.get('deny')})"
        )
        if r.get("params") is not None:
            print(f"    parameters: {json.dumps(r['params'], ensure_ascii=False)}")
        if r.get("notice"):  # what became of the policy's notifier: queued, sent, not sent, failed and why
            print(f"    notice: {r['notice']}")
    return 0
