"""What makes a run's record (core/records.run_record), taken from a run as it ends.

The record is made behind the run, or at once when the runner journals it (recorder.py), so
what it needs of the run is taken now: the parameters copied when a shallow copy is a whole
one, else their digest; the payload's parts as the result has them, masked already.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from .. import telemetry
from ..core.payloads import run_payload
from ..core.plan import Plan
from ..core.records import params_digest, params_snapshot, run_record
from ..principal import requested
from ..registry.base import Registry
from .result import RunResult


def record_maker(
    registry: Registry,
    keep_payload: bool,
    result: RunResult,
    plan: Plan | None,
    params: Any,
    started_at: str,
    secrets: list[str],
    digest: tuple[str, int] | None = None,
) -> Callable[[], dict[str, Any]] | None:
    """What makes the run's record, made behind the run (recorder.py) or by a record_to. A
    caller may reuse its parameters once the run returns, so they are copied now when a
    shallow copy is a whole one, else their digest is taken now (unless `digest`, the
    gate's, is theirs already). None for an anonymous call: the database keeps no run
    record for callers who are nobody (its audit row says how it ended). keep_payload: the
    runner keeps run payloads (Settings.run_payloads)."""
    if _anonymous(registry):
        return None
    snapshot = params_snapshot(params)
    return partial(
        run_record,
        tool_id=result.tool_id,
        version=result.version,
        content_hash=plan.content_hash if plan else None,
        status=result.status,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        error=result.error,
        chain=result.executor_chain,
        primitive=plan.primitive if plan else None,
        source=plan.source if plan else "registry",
        warnings=list(result.warnings),
        sandbox=result.detail.get("sandbox") if isinstance(result.detail, dict) else None,
        digest=digest or (params_digest(params) if snapshot is None else None),
        params=snapshot,
        started_at=started_at,
        trace_id=telemetry.trace_id(),  # now, while the run's span is current: the record is made later
        payload=_payload(result, params, snapshot, secrets) if keep_payload else None,
    )


def _payload(
    result: RunResult, params: Any, snapshot: dict[str, Any] | None, secrets: list[str]
) -> Callable[[], dict[str, Any]]:
    """What makes the record's payload behind the run. The output and stderr are the result's,
    masked already (Runner._result); the parameters are masked there."""
    kept = snapshot if snapshot is not None else _copied(params)
    stderr = result.detail.get("stderr") if isinstance(result.detail, dict) else None
    stderr = stderr if isinstance(stderr, str) else None
    return partial(run_payload, kept, result.output, stderr, secrets, masked=("output", "stderr"))


def _copied(params: Any) -> Any:
    """Nested parameters as they are now (a caller may reuse them once the run returns)."""
    try:
        return json.loads(json.dumps(params))
    except (TypeError, ValueError):
        return repr(params)


def _anonymous(registry: Registry) -> bool:
    """Whether the running call acts as nobody: the request's principal, else the registry's own."""
    who = requested() or getattr(registry, "principal", None)
    return getattr(who, "role", None) == "anon"
