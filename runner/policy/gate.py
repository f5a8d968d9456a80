"""The gate every run passes: permissions, rate limits, approvals, then an audit row.

One place decides whether a call may go on, whoever makes it: `kiwi run`, Kiwi's MCP
`execute`, a thread's tool calls, a directive. The Runner calls `admit` once the plan
is resolved and the parameters are valid; a refusal is raised as `Denied`, a KiwiError
each entry point renders in its own way (an MCP tool error of that kind, a CLI message
and exit code 4). Every call is audited, allowed or refused (`public.audit_log`),
behind the reply, by the run recorder.

    1. permissions: the execution context's (a directive's) tools, mcp, shell, fs_read,
       fs_write and net globs, against the tool and what its sandbox reaches (permissions.py);
       contexts never change, so each is read once
    2. the rate limits (all or none taken) and, unless a dry run, the approval: an
       approval_id is used once, or a tool under an approval policy is held with a pending
       approval a person decides
    3. running a directive (or thread) opens the child context its calls are made in

One database round trip at most decides all three. A call under a context the gate holds
(each context a directive run opened here, and each one read before) is checked against it
in memory, then asks `public.check_call`, answered from memory while no limit or policy
covers the call. Running a directive, or a call under a context the gate does not hold
yet, is one `public.admit_call`: the context read and what the call needs of it checked,
check_call's decision, and the directive's child context opened, all or nothing; the
contexts it returns are held. With the decision remembered, only what is missing is asked:
the child opened (`open_context`) or the context read (`get_context`). A call naming paths
under a context not yet held reads the context first, and then asks check_call: a parameter
value never goes to the database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..core.clock import utc_now_iso
from ..core.limits import Allowance
from ..core.plan import Plan
from ..core.records import params_digest
from ..errors import KiwiError, Refused
from ..principal import requested
from ..registry.base import Registry
from . import permissions

__all__ = ["APPROVE_HINT", "Admission", "Call", "Denied", "Gate"]

logger = logging.getLogger("kiwi.gate")

APPROVE_HINT = (
    "ask a person to run `kiwi approve {id}` (or `kiwi deny {id}`); then call again with exactly the same "
    "parameters and approval_id '{id}' (kiwi run --approval {id}) before {expires_at}"
)


@dataclass(frozen=True)
class Call:
    """Who asks and under what: the session (audited, counted by per-session limits), the
    execution context whose permissions apply, an approval to use, the id the run's record
    will have when its caller chose it (a queued run's), and what the caller may still spend
    (core/limits.py: handed to a thread the call starts; the gate does not read it)."""

    session: str
    context: str | None = None
    approval_id: str | None = None
    run_id: str | None = None
    limits: Allowance | None = None


class Denied(Refused):
    """The gate refused a call; `kind` says why (permission_denied, rate_limited,
    approval_pending, approval_refused) and `extra` carries what the caller needs to act:
    retry_after_s, the pending approval, the missing permission."""

    def __init__(self, kind: str, message: str, *, hint: str | None, reason: str, extra: dict[str, Any]) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind
        self.reason = reason[:2000]
        self.extra = extra

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), **self.extra}


@dataclass(frozen=True)
class _Ask:
    """One call before the gate, as its parts need it: the plan and parameters, the plan as the
    permissions read it, the audit entry so far, what check_call is asked, the context named,
    and whether the call opens a directive's child context."""

    plan: Plan
    params: dict[str, Any]
    shape: dict[str, Any]
    audit: dict[str, Any]
    checked: dict[str, Any]
    context_id: str | None
    opens: bool


@dataclass
class Admission:
    """A call the gate let through: its audit entry so far, and the context a directive opened."""

    audit: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    child_context: dict[str, Any] | None = None
    names: int = -1  # how many parameters the digest in `audit` was taken of

    def digest_for(self, given: Any) -> tuple[str, int] | None:
        """The audit's parameter digest, when `given` are the parameters it was taken of: the
        validated ones are the given ones with defaults filled in, so equal when as many."""
        if isinstance(given, dict) and len(given) == self.names:
            return self.audit["params_sha256"], self.audit["params_size"]
        return None


class Gate:
    def __init__(self, registry: Registry, audit: Any) -> None:
        """`audit` takes one audit entry to write behind the call (the run recorder's submit_audit)."""
        self._registry = registry
        self._write = audit
        self._contexts: dict[tuple[Any, str], dict[str, Any]] = {}

    def entry(
        self, call: Call, plan: Plan | None, tool: str, params: Any, dry_run: bool, at: str | None = None
    ) -> dict[str, Any]:
        """The audit entry of a call, before its decision (`at`: when it was called, ISO 8601; now
        when not given)."""
        digest, size = params_digest(params)
        return {
            "at": at or utc_now_iso(),  # the row is written later, in a batch
            "session_id": call.session,
            "action": "dry_run" if dry_run else "run",
            "tool_id": plan.tool_id if plan else tool,
            "server": plan.mcp_server if plan else None,
            "version": plan.version if plan else None,
            "content_hash": plan.content_hash if plan else None,
            "params_sha256": digest,
            "params_size": size,
        }

    async def admit(
        self, plan: Plan, params: dict[str, Any], call: Call, dry_run: bool, at: str | None = None
    ) -> Admission:
        """Let the call go on (an Admission), or raise Denied after auditing the refusal (`at`:
        when it was called, as entry() takes it)."""
        audit = self.entry(call, plan, plan.tool_id, params, dry_run, at)
        asked = {**audit, "approval_id": call.approval_id, "dry_run": dry_run}
        ask = _Ask(
            plan,
            params,
            permissions.view(plan),
            audit,
            {k: asked[k] for k in _CHECKED if asked.get(k) is not None},
            (str(call.context).strip() or None) if call.context is not None else None,
            plan.tool_type in permissions.DIRECTIVE_TYPES and not dry_run,
        )
        context = self._contexts.get((requested(), ask.context_id)) if ask.context_id else None
        remembered = self._registry.remembered_verdict(ask.checked)
        reads = permissions.names_paths(ask.shape, params) or (remembered is not None and not ask.opens)
        if ask.context_id and context is None and reads:  # the context alone: paths never leave the runner
            context = self._hold(ask.context_id, await self._registry.get_context(ask.context_id))
        if context is not None:
            self._check(ask, context)
        held = ask.context_id is None or context is not None
        if held and not ask.opens and remembered is not None and ask.context_id is None:
            verdict = remembered  # what check_call answers from memory: nothing was awaited since
        elif held and not ask.opens:
            verdict = await self._registry.check_call(ask.checked)  # from memory while nothing covers the call
        elif held and remembered is not None:
            verdict = {**remembered, "opened": await self._open(ask, context)}
        else:
            verdict = await self._folded(ask, context)
        if not verdict.get("allowed", False):
            if verdict.get("kind") == "approval_pending":
                await self._show_parameters(verdict, params)
            self._refused_by_database(audit, plan.tool_id, verdict, call)
        admission = Admission(audit, names=len(params))
        child = verdict.get("opened")
        if child:
            admission.child_context = self._hold(str(child["id"]), child)
            audit["directive"] = audit.get("directive") or child.get("directive")
        return admission

    def refused(self, call: Call, plan: Plan | None, tool: str, params: Any, dry_run: bool, error: KiwiError) -> None:
        """Audit a call that failed before the gate could judge it (unknown tool, bad parameters)."""
        entry = self.entry(call, plan, tool, params, dry_run)
        self._write({**entry, "decision": "refused", "reason": error.message[:2000]})

    def finished(
        self,
        admission: Admission,
        *,
        status: str,
        run_id: str | None,
        version: str | None,
        write: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Audit how an admitted call ended (`write`: who writes the row, if not the recorder)."""
        (write or self._write)(self.ended(admission, status=status, run_id=run_id, version=version))

    @staticmethod
    def ended(admission: Admission, *, status: str, run_id: str | None, version: str | None) -> dict[str, Any]:
        """The audit row of an admitted call that ended, for whoever writes it with its run's record."""
        return {
            **admission.audit,
            "version": version or admission.audit.get("version"),
            "decision": "allowed",
            "outcome": status,
            "duration_ms": round((time.perf_counter() - admission.started) * 1000, 3),
            "run_id": run_id,
        }

    # -- the parts ------------------------------------------------------------------------

    async def _folded(self, ask: _Ask, context: dict[str, Any] | None) -> dict[str, Any]:
        """public.admit_call: the context (and what the call needs of it, unless held), check_call's
        decision and a directive's child context, in one round trip, all or nothing."""
        needs = permissions.needs(ask.shape) if context is None and ask.context_id else None
        folded = {
            **ask.checked,
            "context_id": ask.context_id,
            "needs": needs or None,
            "open_context": ask.opens or None,
        }
        verdict = await self._registry.admit_call({k: v for k, v in folded.items() if v is not None})
        if ask.context_id and verdict.get("context"):
            context = self._hold(ask.context_id, verdict["context"])
            ask.audit["directive"] = context.get("directive")
        if verdict.get("kind") == "permission_denied":
            if context is not None:
                self._check(ask, context)  # the need it lacks, named as check names it
            self._deny(ask, str(verdict.get("permission") or "refused"), context)  # a child wider than its parent
        return verdict

    async def _open(self, ask: _Ask, parent: dict[str, Any] | None) -> dict[str, Any]:
        """A directive's child context, its decision known (remembered): open_context alone."""
        ref = f"{ask.plan.tool_id}@{ask.plan.version}"
        try:
            return await self._registry.open_context(ask.audit["session_id"], ref, ask.context_id, None)
        except Refused as e:  # the directive would widen its parent's permissions
            self._deny(ask, e.message, parent)

    async def _show_parameters(self, verdict: dict[str, Any], params: dict[str, Any]) -> None:
        """Attach the call's parameters to the approval it now waits for, so whoever decides sees
        them (the database keeps them only if they hash to the approval's digest). Best effort:
        the refusal is the answer either way."""
        approval_id = (verdict.get("approval") or {}).get("id")
        if not approval_id:
            return
        try:
            await self._registry.attach_approval_parameters(str(approval_id), params)
        except KiwiError as e:
            logger.info("approval %s: its parameters could not be attached (%s)", approval_id, e.message)

    def _check(self, ask: _Ask, context: dict[str, Any]) -> None:
        """Refuse a call `context`'s permissions do not allow, naming the permission it lacks."""
        ask.audit["directive"] = context.get("directive")
        lacking = permissions.check(context["permissions"], ask.shape, ask.params)
        if lacking is not None:
            self._deny(ask, lacking, context)

    def _deny(self, ask: _Ask, lacking: str, context: dict[str, Any] | None) -> NoReturn:
        reason, message, hint = permissions.refusal(lacking, ask.plan.tool_id, context or {})
        self._refuse(ask.audit, "permission_denied", message, hint, reason, {"permission": lacking})

    def _hold(self, context_id: str, context: dict[str, Any]) -> dict[str, Any]:
        """Keep a context the database read or opened for the caller: contexts never change (an
        expired one is refused by the database when it is first read)."""
        if len(self._contexts) >= 4096:
            self._contexts.clear()
        self._contexts[(requested(), context_id)] = context
        return context

    def _refused_by_database(self, audit: dict[str, Any], tool: str, verdict: dict[str, Any], call: Call) -> None:
        kind = str(verdict.get("kind") or "refused")
        reason = str(verdict.get("reason") or "refused")
        if kind == "rate_limited":
            retry = verdict.get("retry_after_s")
            audit["retry_after_s"] = retry
            self._refuse(
                audit,
                kind,
                f"{tool} was not run: {reason}",
                f"retry after {retry} s; rate limits are declared in public.rate_limits",
                reason,
                {"retry_after_s": retry, "limit": verdict.get("limit")},
            )
        if kind == "approval_pending":
            approval = verdict.get("approval") or {}
            aid = approval.get("id")
            message = (
                f"{tool} needs approval before it runs (policy {verdict.get('policy')!r}); nothing ran. "
                f"Approval {aid} is pending until {approval.get('expires_at')}."
            )
            hint = APPROVE_HINT.format(id=aid, expires_at=approval.get("expires_at"))
            self._refuse(audit, kind, message, hint, reason, {"approval": approval})
        hint = verdict.get("hint") or "call without an approval_id for a new approval"
        message = f"{tool} was not run: {reason}"
        self._refuse(audit, kind, message, hint, f"approval refused: {reason}", {"approval_id": call.approval_id})

    def _refuse(
        self, audit: dict[str, Any], kind: str, message: str, hint: str | None, reason: str, extra: dict[str, Any]
    ) -> NoReturn:
        self._write({**audit, "decision": "refused", "reason": reason[:2000]})
        raise Denied(kind, message, hint=hint, reason=reason, extra=extra)


_CHECKED = (
    "tool_id",
    "server",
    "session_id",
    "version",
    "content_hash",
    "params_sha256",
    "params_size",
    "approval_id",
    "dry_run",
)
