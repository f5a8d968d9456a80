"""Approvals in Kiwi's MCP server: deciding calls that wait for a person (the gate that holds
them is runner/policy/gate.py, for every entry point).

A tool that an approval policy covers (public.approval_policies: a tool reference or an
MCP `server.tool` glob) does not run when `execute(action="run")` first asks for it:

1. without `approval_id`, a pending approval is recorded (public.check_call, as
   request_approval records one: the tool, its exact version and content_hash, the session, and the parameters only as
   sha256 and size) and the call answers with a tool error of kind `approval_pending`
   whose structured content holds `approval` {id, status, expires_at, ...}. It is an
   error on purpose: nothing ran, and an agent that only looks at isError must not take
   it for a result. The audit row says `refused`, reason `pending approval <id>`.
2. a person decides (an owner of the tool's namespace other than the requester, or an
   admin): `kiwi approve ID` / `kiwi deny ID`, or `execute(action="approve"
   | "deny", approval_id=ID)` from another session (never from the session that asked).
3. the same call again with `approval_id=ID` and the same parameters runs once
   (public.check_call uses it, as use_approval does: marked used atomically). Pending, denied, expired, used, or
   given for other parameters or another version: refused (kind `approval_refused`,
   saying why), audited as refused.

dry_run never needs approval: it does not run the tool.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from ..errors import UsageError
from ..registry.base import Registry

__all__ = ["decide"]


def _result(text: str, structured: dict[str, Any], *, is_error: bool) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=json.loads(json.dumps(structured, default=str, ensure_ascii=False)),
        is_error=is_error,
    )


def _error(kind: str, message: str, hint: str | None, **extra: Any) -> CallToolResult:
    text = f"error: {message}" + (f"\nhint: {hint}" if hint else "")
    return _result(text, {"error": {"kind": kind, "message": message, "hint": hint}, **extra}, is_error=True)


def _public(approval: dict[str, Any]) -> dict[str, Any]:
    """The approval as the database answered it (no parameter values: it never holds any)."""
    return dict(approval)


async def decide(
    reg: Registry, *, approval_id: str | None, approve: bool, reason: str | None, session: str
) -> CallToolResult:
    """execute(action="approve" | "deny", approval_id=ID): decide a pending approval. Never from
    the session that requested it (the database refuses; denying one's own request is allowed)."""
    if not approval_id:
        raise UsageError(
            f"{'approve' if approve else 'deny'} needs the approval's id",
            hint="give approval_id='...' (or item_id='...'); a pending run answers with it",
        )
    if reason is not None and not isinstance(reason, str):
        raise UsageError("reason must be a string", hint="parameters={'reason': 'why'}")
    approval = await reg.decide_approval(approval_id, approve, reason, session)
    verb = "approved" if approve else "denied"
    text = f"{verb}: approval {approval['id']} for {approval.get('tool_id')}"
    if approve:
        text += (
            f"\nnext: the requester calls execute(action='run', item_id='{approval.get('tool_id')}', "
            f"parameters=<the same>, approval_id='{approval['id']}') before {approval.get('expires_at')}; "
            "it runs once"
        )
    return _result(text, {"action": "approve" if approve else "deny", "approval": _public(approval)}, is_error=False)
