"""A queued run's kept result read back as the RunResult it was: what lets an MCP task's
`tasks/result`, answered by any `kiwi serve` instance, render the same tool answer as the
direct call would have (runner/harness/mcp_answer.py `rendered`).

The worker keeps the result as JSON (worker.py `_answer`): the run's fields, and the
deliberate error that stopped it as {kind, message, hint, ...}. The error comes back as a
KiwiError of that kind (a gate's refusal as Denied, with what the caller needs to act), so
its rendering, hint and structured content are the ones the direct call gets."""

from __future__ import annotations

from typing import Any

from ..errors import KiwiError
from ..harness.run import RunResult
from ..policy import Denied

__all__ = ["DENIED_KINDS", "failure_of", "result_of"]

DENIED_KINDS = ("permission_denied", "rate_limited", "approval_pending", "approval_refused")
"""The kinds of the gate's refusals (runner/policy/gate.py `Denied`)."""


class _Kept(KiwiError):
    """A deliberate error read back from a kept result: its kind is the one it was raised with."""

    def __init__(self, kind: str, message: str, hint: str | None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


def failure_of(kept: Any) -> KiwiError | None:
    """The error of a kept result's `failure` ({kind, message, hint, ...}); None if there is none."""
    if not isinstance(kept, dict) or not isinstance(kept.get("message"), str):
        return None
    kind = str(kept.get("kind") or "error")
    message: str = kept["message"]
    hint = kept.get("hint") if isinstance(kept.get("hint"), str) else None
    if kind in DENIED_KINDS:
        extra = {k: v for k, v in kept.items() if k not in ("kind", "message", "hint")}
        return Denied(kind, message, hint=hint, reason=message, extra=extra)
    return _Kept(kind, message, hint)


def result_of(run: dict[str, Any]) -> RunResult | None:
    """The RunResult a queued run's worker kept; None when no worker ran it to an answer
    (cancelled before it ran, its approval denied or expired, dead-lettered unanswered)."""
    answer = run.get("result")
    if not isinstance(answer, dict) or not isinstance(answer.get("tool_id"), str):
        return None
    source = answer.get("source")
    return RunResult(
        tool_id=answer["tool_id"],
        version=answer.get("version"),
        status=str(answer.get("status") or "error"),
        output=answer.get("output"),
        error=answer.get("error"),
        exit_code=answer.get("exit_code"),
        duration_ms=float(answer.get("duration_ms") or 0.0),
        executor_chain=[str(link) for link in answer.get("executor_chain") or []],
        warnings=[str(w) for w in answer.get("warnings") or []],
        detail={"source": source} if isinstance(source, dict) and source else {},
        failure=failure_of(answer.get("failure")),
        run_id=answer.get("run_id"),
        context=answer.get("context") if isinstance(answer.get("context"), dict) else None,
        output_schema=answer.get("output_schema") if isinstance(answer.get("output_schema"), dict) else None,
    )
