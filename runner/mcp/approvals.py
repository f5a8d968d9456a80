"""Approvals in Kiwi's MCP server: calls that wait for a person.

A tool that an approval policy covers (public.approval_policies: a tool reference or an
MCP `server.tool` glob) does not run when `execute(action="run")` first asks for it:

1. without `approval_id`, a pending approval is recorded (public.request_approval: the
   tool, its exact version and content_hash, the session, and the parameters only as
   sha256 and size) and the call answers with a tool error of kind `approval_pending`
   whose structured content holds `approval` {id, status, expires_at, ...}. It is an
   error on purpose: nothing ran, and an agent that only looks at isError must not take
   it for a result. The audit row says `refused`, reason `pending approval <id>`.
2. a person decides: `kiwi approve ID` / `kiwi deny ID`, or `execute(action="approve"
   | "deny", approval_id=ID)` from another session (never from the session that asked).
3. the same call again with `approval_id=ID` and the same parameters runs once
   (public.use_approval marks it used atomically). Pending, denied, expired, used, or
   given for other parameters or another version: refused (kind `approval_refused`,
   saying why), audited as refused.

dry_run never needs approval: it does not run the tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent

from ..errors import NotFound, Refused, UsageError
from ..registry.base import Registry

__all__ = ["Held", "decide", "gate"]

APPROVE_HINT = (
    "ask a person to run `kiwi approve {id}` (or `kiwi deny {id}`); then call execute(action='run', "
    "item_id='{tool}', parameters=<exactly the same>, approval_id='{id}') before {expires_at}"
)


@dataclass(frozen=True)
class Held:
    """A run that must not go on: the answer to give, and the reason to audit."""

    result: CallToolResult
    reason: str


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


async def gate(
    reg: Registry,
    *,
    tool: str,
    audit: dict[str, Any],
    approval_id: str | None,
) -> Held | None:
    """None when the run may go on (no approval needed, or `approval_id` was just used for it);
    else the answer (a pending approval, or why the approval cannot be used) and its audit reason.
    `audit` is the call's audit entry: tool, version, content_hash, session, params hash and size."""
    if approval_id:
        try:
            await reg.use_approval(approval_id, tool, audit["params_sha256"], audit.get("content_hash"))
        except (Refused, NotFound, UsageError) as e:
            hint = e.hint or "call without approval_id for a new approval"
            return Held(
                _error("approval_refused", f"{tool} was not run: {e.message}", hint, approval_id=approval_id),
                f"approval refused: {e.message}"[:2000],
            )
        return None
    required = await reg.approval_required(tool)
    if not required.get("required"):
        return None
    approval = await reg.request_approval(
        {
            k: audit.get(k)
            for k in ("version", "content_hash", "params_sha256", "params_size", "session_id")
            if audit.get(k) is not None
        }
        | {"tool_id": tool}
    )
    aid = approval["id"]
    message = (
        f"{tool} needs approval before it runs (policy {required.get('policy')!r}); nothing ran. "
        f"Approval {aid} is pending until {approval.get('expires_at')}."
    )
    hint = APPROVE_HINT.format(id=aid, tool=tool, expires_at=approval.get("expires_at"))
    return Held(
        _error("approval_pending", message, hint, approval=_public(approval)),
        f"pending approval {aid} (policy {required.get('policy')})",
    )


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
