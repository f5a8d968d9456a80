"""What a run returns: its result, and the fields of it `kiwi run --json` shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import KiwiError

__all__ = ["RESULT_KEYS", "RunResult"]

RESULT_KEYS = ("tool_id", "version", "status", "output", "error", "exit_code", "duration_ms", "executor_chain")


@dataclass
class RunResult:
    tool_id: str
    version: str | None
    status: str  # success | error | timeout
    output: Any = None
    error: str | None = None
    exit_code: int | None = None
    duration_ms: float = 0.0
    executor_chain: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    failure: KiwiError | None = None  # the deliberate error that stopped the run, if any
    run_id: str | None = None
    context: dict[str, Any] | None = None  # the execution context a directive's run opened
    output_schema: dict[str, Any] | None = None  # the declared outputs the output was checked against

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def as_json(self) -> dict[str, Any]:
        """The `kiwi run --json` object (DESIGN.md, Runner contract)."""
        return {k: getattr(self, k) for k in RESULT_KEYS}
