"""Running a composite tool: its declared steps, in order, each a call of another tool.

A composite's config (its contract: supabase/seed/composite_runtime/tool.yaml) declares

    steps:  [{id, tool, version, params}]   run in order
    output: a value                          what it answers (default: the last step's output)

Each step goes through the runner's `call_tool`, the gated call MCP `execute run` and threads
make: the registry is asked as the caller (the runner's principal), and the gate applies the
permissions, rate limits and approvals of the step's own tool and writes its audit row, in a
session of the composite run (`composite-<uuid>`). A step refused or failed ends the
composite with an error naming the step; the steps after it do not run.

Values move as data, never as text for a shell: a params value (or `output`) that is exactly
`"{params.NAME}"` or `"{steps.ID.output.PATH}"` (PATH: keys and list indices, dotted) is that
value, whatever its JSON type; inside a longer string it is its text (as_text). A composite
that calls itself, directly or through others, is stopped at MAX_DEPTH.
"""

from __future__ import annotations

import contextvars
import re
import uuid
from typing import Any

from ..core.expand import as_text
from ..core.plan import Plan
from ..errors import ConfigError
from ..primitives.base import CallTool, Invocation, Outcome

__all__ = ["CompositeHandler"]

MAX_DEPTH = 8
_REF = re.compile(r"\{((?:params|steps)(?:\.[A-Za-z0-9_-]+)+)\}")
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("kiwi_composite_depth", default=0)


class CompositeHandler:
    name = "composite"

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type == "composite"

    async def aclose(self) -> None:
        return None

    async def run(self, invocation: Invocation) -> Outcome:
        plan, call_tool = invocation.plan, invocation.call_tool
        if call_tool is None:
            raise ConfigError(
                f"{plan.tool_id}: a composite needs the runner to run its steps",
                hint="run it through runner.harness.run.Runner, which passes its call_tool",
            )
        steps = _steps(plan)
        depth = _depth.get()
        if depth >= MAX_DEPTH:
            raise ConfigError(
                f"{plan.tool_id}: composites nested {MAX_DEPTH} deep (does one call itself?)",
                hint="a composite's steps must not lead back to it",
            )
        token = _depth.set(depth + 1)
        try:
            return await _Run(plan, call_tool, invocation.params).steps(steps)
        finally:
            _depth.reset(token)


class _Run:
    def __init__(self, plan: Plan, call_tool: CallTool, params: dict[str, Any]) -> None:
        self.plan, self.call_tool = plan, call_tool
        self.session = f"composite-{uuid.uuid4()}"
        self.data: dict[str, Any] = {"params": params, "steps": {}}
        self.done: list[dict[str, Any]] = []

    async def steps(self, steps: list[dict[str, Any]]) -> Outcome:
        for n, step in enumerate(steps, 1):
            name = str(step.get("id") or f"step{n}")
            tool = str(step["tool"])
            try:
                params = resolve(step.get("params") or {}, self.data)
            except KeyError as e:
                return self._end(f"step {name} ({tool}): {e.args[0]}")
            result = await self.call_tool(tool, step.get("version"), params, session=self.session)
            entry = {
                "id": name,
                "tool_id": result.tool_id,
                "version": result.version,
                "status": result.status,
                "output": result.output,
            }
            self.done.append(entry)
            self.data["steps"][name] = entry
            if not result.ok:
                return self._end(f"step {name} ({tool}) {result.status}: {result.error or 'no output'}")
        if "output" not in self.plan.config:
            return Outcome(status="success", output=self.done[-1]["output"], detail=self._detail())
        try:
            output = resolve(self.plan.config["output"], self.data)
        except KeyError as e:
            return self._end(f"output: {e.args[0]}")
        return Outcome(status="success", output=output, detail=self._detail())

    def _detail(self) -> dict[str, Any]:
        return {"session": self.session, "steps": self.done}

    def _end(self, error: str) -> Outcome:
        """The composite stopped: the steps run so far, the last the one that failed."""
        return Outcome(
            status="error", error=f"{self.plan.tool_id}: {error}", output={"steps": self.done}, detail=self._detail()
        )


def _steps(plan: Plan) -> list[dict[str, Any]]:
    steps = plan.config.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ConfigError(f"{plan.tool_id}: config.steps lists no step", hint="steps: [{tool: ..., params: {...}}]")
    names: set[str] = set()
    for n, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str) or not step["tool"].strip():
            raise ConfigError(f"{plan.tool_id}: step {n} names no tool", hint="each step is {tool: namespace/tool_id}")
        name = str(step.get("id") or f"step{n}")
        if name in names:
            raise ConfigError(f"{plan.tool_id}: two steps are named {name!r}", hint="give each step its own id")
        names.add(name)
    return steps


def resolve(value: Any, data: dict[str, Any]) -> Any:
    """`value` with its references filled in from `data` (see the module's docstring)."""
    if isinstance(value, dict):
        return {k: resolve(v, data) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, data) for v in value]
    if not isinstance(value, str):
        return value
    whole = _REF.fullmatch(value)
    if whole:
        return _lookup(whole.group(1), data)
    return _REF.sub(lambda m: as_text(_lookup(m.group(1), data)), value)


def _lookup(path: str, data: dict[str, Any]) -> Any:
    here: Any = data
    walked: list[str] = []
    for part in path.split("."):
        walked.append(part)
        if isinstance(here, dict) and part in here:
            here = here[part]
        elif isinstance(here, list) and part.isdigit() and int(part) < len(here):
            here = here[int(part)]
        else:
            raise KeyError(f"{{{path}}}: {'.'.join(walked)} is not there")
    return here
