"""Which code runs a plan: the first handler that accepts it.

The two primitives are the defaults, behind the MCP pool's handler. Other handlers are put in front
of them without changing the runner: each decides from the plan's data alone whether
it takes the plan. Handlers are imported on first use, so a `kiwi run` of a script
never pays for loading the HTTP stack or the MCP SDK, and the reverse.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from ..core.plan import Plan
from ..errors import Refused
from ..primitives.base import Invocation, Outcome, Primitive


class LazyPrimitive:
    """A handler named by `module:Class`, created when a plan it accepts first runs: by
    default the plans ending in the primitive `name`, or those of `tool_type`."""

    def __init__(self, name: str, target: str, *, tool_type: str | None = None) -> None:
        self.name = name
        self._target = target
        self._tool_type = tool_type
        self._instance: Primitive | None = None

    def accepts(self, plan: Plan) -> bool:
        if self._tool_type is not None:
            return plan.tool_type == self._tool_type
        return plan.primitive == self.name

    def instance(self) -> Primitive:
        if self._instance is None:
            module, _, cls = self._target.partition(":")
            self._instance = getattr(importlib.import_module(module), cls)()
        return self._instance

    async def run(self, invocation: Invocation) -> Outcome:
        return await self.instance().run(invocation)

    async def aclose(self) -> None:
        if self._instance is not None:
            await self._instance.aclose()


def default_handlers() -> list[Primitive]:
    return [
        # MCP tools end in a primitive too (their server's), so they are matched first
        LazyPrimitive("mcp", "runner.handlers.mcp_tool:McpToolHandler", tool_type="mcp_tool"),
        LazyPrimitive("directive", "runner.handlers.directive:DirectiveHandler", tool_type="directive"),
        LazyPrimitive("thread", "runner.handlers.thread:ThreadHandler", tool_type="thread"),
        LazyPrimitive("subprocess", "runner.primitives.subprocess:SubprocessPrimitive"),
        LazyPrimitive("http_client", "runner.primitives.http_client:HttpClientPrimitive"),
    ]


class Dispatcher:
    def __init__(self, handlers: Iterable[Primitive] | None = None) -> None:
        self.handlers: list[Primitive] = list(default_handlers() if handlers is None else handlers)

    def add_first(self, handler: Primitive) -> None:
        """Give a handler priority over the primitives (e.g. MCP tools, whose chains also end in one)."""
        self.handlers.insert(0, handler)

    def find(self, plan: Plan) -> Primitive:
        for handler in self.handlers:
            if handler.accepts(plan):
                return handler
        raise Refused(
            f"no handler runs {plan.tool_id}: its chain ends at {plan.primitive!r}",
            hint="a runnable chain ends in the subprocess or http_client primitive",
        )

    async def aclose(self) -> None:
        for handler in self.handlers:
            await handler.aclose()
