"""What the runner hands a primitive, and what it gets back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..core.plan import Plan

if TYPE_CHECKING:
    from ..registry.base import Registry

Status = Literal["success", "error", "timeout"]


@dataclass
class Invocation:
    """One run of one plan.

    placeholders: run-time values for `{name}` in the config (`entrypoint`, `env_dir`,
    `workdir`), beside the parameters, which are also placeholders.
    environ: where `${VAR}` references are resolved (the runner's environment); only
    what the config declares reaches the tool.
    registry: the runner's registry, for handlers that look other tools up (directives).
    runner: the Runner itself, for handlers that run other tools (threads).
    """

    plan: Plan
    params: dict[str, Any]
    workdir: Path | None = None
    placeholders: dict[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)
    on_progress: Callable[[str], None] | None = None
    registry: Registry | None = None
    runner: Any = None

    @property
    def config(self) -> dict[str, Any]:
        return self.plan.config

    def values(self) -> dict[str, Any]:
        """Every `{name}` value: parameters first, run-time placeholders win."""
        return {**self.params, **self.placeholders}


@dataclass
class Outcome:
    """What a run produced. `output` is structured (parsed JSON) when it can be, else text."""

    status: Status
    output: Any = None
    error: str | None = None
    exit_code: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class Primitive(Protocol):
    """A way of running a plan. Handlers are tried in order; the first that accepts runs it."""

    name: str

    def accepts(self, plan: Plan) -> bool: ...

    async def run(self, invocation: Invocation) -> Outcome: ...

    async def aclose(self) -> None: ...
