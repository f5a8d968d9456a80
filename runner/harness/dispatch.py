"""Which code runs a plan: the first handler that accepts it.

The harness knows only this: an ordered list of handlers, each deciding from the plan's
data alone whether it takes the plan. By default that is the two primitives; the entry
points put the handlers of MCP tools, directives and threads in front of them
(runner.handlers.standard_handlers). Handlers are made, and their modules imported, on
first use (`Lazy`), so a `kiwi run` of a script never pays for loading the HTTP stack or
the MCP SDK, and the reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..core.plan import Plan
from ..errors import Refused
from ..primitives.base import Handler, Invocation, Outcome

Accepts = Callable[[Plan], bool]


class Lazy:
    """A handler made by `factory` (a function importing its module) when a plan it
    `accepts` first runs; until then nothing of it is loaded."""

    def __init__(self, name: str, factory: Callable[[], Handler], accepts: Accepts) -> None:
        self.name = name
        self._factory = factory
        self._accepts = accepts
        self._instance: Handler | None = None

    def accepts(self, plan: Plan) -> bool:
        return self._accepts(plan)

    def instance(self) -> Handler:
        if self._instance is None:
            self._instance = self._factory()
        return self._instance

    async def run(self, invocation: Invocation) -> Outcome:
        return await self.instance().run(invocation)

    async def aclose(self) -> None:
        if self._instance is not None:
            await self._instance.aclose()


# Tool types a primitive must never run directly: their chains end in a primitive (an MCP tool's
# in its server's), but running that primitive would spawn the server, or print the directive,
# instead of doing what the tool is. runner/handlers runs them (standard_handlers).
NEEDS_A_HANDLER = frozenset({"mcp_tool", "directive", "thread"})


def ends_in(primitive: str) -> Accepts:
    """Accepts the plans whose chain ends in `primitive`, except the types only a handler runs."""
    return lambda plan: plan.primitive == primitive and plan.tool_type not in NEEDS_A_HANDLER


def of_type(tool_type: str) -> Accepts:
    """Accepts the plans of `tool_type` (their chains may end in a primitive too)."""
    return lambda plan: plan.tool_type == tool_type


def default_primitives() -> list[Lazy]:
    """The two primitives, subprocess then http_client, each made on first use."""
    return [
        Lazy("subprocess", _subprocess, ends_in("subprocess")),
        Lazy("http_client", _http_client, ends_in("http_client")),
    ]


def _subprocess() -> Handler:
    from ..primitives.subprocess import SubprocessPrimitive

    return SubprocessPrimitive()


def _http_client() -> Handler:
    from ..primitives.http_client import HttpClientPrimitive  # httpx: only when an http_client plan runs

    return HttpClientPrimitive()


class Dispatcher:
    def __init__(self, handlers: Iterable[Handler] | None = None) -> None:
        self.handlers: list[Handler] = list(default_primitives() if handlers is None else handlers)

    def add_first(self, handler: Handler) -> None:
        """Give a handler priority over the others (e.g. MCP tools, whose chains also end in a primitive)."""
        self.handlers.insert(0, handler)

    def find(self, plan: Plan) -> Handler:
        for handler in self.handlers:
            if handler.accepts(plan):
                return handler
        if plan.tool_type in NEEDS_A_HANDLER:
            raise Refused(
                f"no handler runs {plan.tool_id}: a {plan.tool_type} needs its handler, and this runner has none",
                hint="build the Runner with dispatcher=runner.standard_dispatcher()",
            )
        raise Refused(
            f"no handler runs {plan.tool_id}: its chain ends at {plan.primitive!r}",
            hint="a runnable chain ends in the subprocess or http_client primitive",
        )

    async def aclose(self) -> None:
        for handler in self.handlers:
            await handler.aclose()
