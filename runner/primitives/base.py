"""What the runner hands a primitive, and what it gets back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..core.limits import Allowance
from ..core.plan import Plan

if TYPE_CHECKING:
    from ..registry.base import Registry
    from ..sandbox.site import ToolSite

Status = Literal["success", "error", "timeout"]


class CallTool(Protocol):
    """Runs one tool as a call of `session` (within execution context `context`, under approval
    `approval_id`) through the runner's gate, exactly as MCP `execute run` does: the context's
    permissions, rate limits, approvals, an audit row; the version is `version`, else the
    project's lockfile's, else the latest. Returns the run's result (runner.harness.run.RunResult;
    a refusal is a result whose `failure` says why). Raises TimeoutError, the run cancelled,
    when it does not finish within `timeout_s` (None: no limit). `listener` follows the run as it
    runs (RunListener). `limits`: what the caller may still spend (core/limits.py), which a
    thread the call starts can only narrow."""

    def __call__(
        self,
        ref: str,
        version: str | None,
        params: dict[str, Any],
        *,
        session: str,
        context: str | None = None,
        approval_id: str | None = None,
        dry_run: bool = False,
        timeout_s: float | None = None,
        listener: RunListener | None = None,
        limits: Allowance | None = None,
    ) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class RunListener:
    """Who follows one run while it runs (Kiwi's MCP server: the request that asked for it), an
    optional seam that knows nothing of who listens. `line` gets each line the tool writes to
    stderr, as it is written; `progress` what the runner reports about preparing the run (an
    environment being built) and what a tool's server reports (a message, and numbers when the
    source has them). Plain callbacks on the event loop: they must return at once. The runner
    masks the run's secrets before either is called (runner/harness/listening.py)."""

    line: Callable[[str], None] | None = None
    progress: Callable[[str | None, float | None, float | None], None] | None = None


@dataclass
class Invocation:
    """One run of one plan.

    placeholders: run-time values for `{name}` in the config (`entrypoint`, `env_dir`,
    `workdir`), beside the parameters, which are also placeholders.
    environ: where `${VAR}` references are resolved (the runner's environment); only
    what the config declares reaches the tool.
    registry: the runner's registry, for handlers that look other tools up (directives).
    call_tool: how handlers that run other tools (threads) run them: the runner's gated call.
    listener: who follows the run as it runs (stderr lines, progress), if anyone.
    site: where the run's processes live (its sandbox and profile, runner/sandbox/site.py);
    None only for callers outside the runner's harness (tests of the primitive itself).
    session, context, limits: whose call this run is (the gate's Call): its session, the
    execution context it was made in, and what its caller may still spend; a thread started
    here is nested under them, and so is a call made through the kernel socket.
    kernel: the kernel socket's path as the run's processes see it, when the plan asks for one
    (runner/harness/kernel.py).
    """

    plan: Plan
    params: dict[str, Any]
    workdir: Path | None = None
    placeholders: dict[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)
    on_progress: Callable[[str], None] | None = None
    registry: Registry | None = None
    call_tool: CallTool | None = None
    listener: RunListener | None = None
    site: ToolSite | None = None
    # the runner's own environment, for the runner's own secrets (its OAuth token key): never
    # where a plan's ${VAR}s resolve (that is `environ`, its allowed variables only)
    runner_environ: Mapping[str, str] = field(default_factory=dict)
    session: str | None = None
    context: str | None = None
    limits: Allowance | None = None
    kernel: str | None = None

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


class Handler(Protocol):
    """A way of running a plan. Handlers are tried in order; the first that accepts runs it."""

    name: str

    def accepts(self, plan: Plan) -> bool: ...

    async def run(self, invocation: Invocation) -> Outcome: ...

    async def aclose(self) -> None: ...
