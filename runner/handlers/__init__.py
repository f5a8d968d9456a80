"""What runs a plan that is not a primitive: MCP tools, directives, threads and composites.

`standard_handlers()` is the full set the entry points (runner/cli) run with, in the order
the dispatcher tries them: MCP tools (whose chains end in their server's primitive, so they
go first), directives, threads, composites, then the two primitives. Building it is cheap: each handler
is made, and its module imported, when a plan first needs it, so `kiwi run` of a script
never loads the MCP SDK or the HTTP stack.

    runner = Runner(registry, settings, dispatcher=standard_dispatcher())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..core.plan import Plan
from ..harness.dispatch import NEEDS_A_HANDLER, Dispatcher, Lazy, default_primitives, of_type
from ..primitives.base import Handler

if TYPE_CHECKING:
    from ..core.plan import Plan
    from ..mcp_client.pool import McpPool
    from ..primitives.http_client import HttpClientPrimitive

__all__ = ["standard_dispatcher", "standard_handlers"]


def standard_dispatcher(*, mcp_pool: McpPool | None = None) -> Dispatcher:
    """A dispatcher of the standard handlers, as every entry point runs with."""
    return Dispatcher(standard_handlers(mcp_pool=mcp_pool))


def standard_handlers(*, mcp_pool: McpPool | None = None) -> list[Handler]:
    """MCP tools, directives, threads, composites, a script that asks for the kernel socket
    (handlers/kernel.py), then the primitives (subprocess, http_client).

    mcp_pool: the MCP client pool the mcp_tool handler runs on, when something else shares it
    (an MCP server's `execute import`: runner.mcp_server.server.build_server(mcp_pool=...)); the
    handler is then made now (the pool's caller has loaded the MCP SDK already), so closing
    the dispatcher closes the pool. By default the handler makes its own pool on first use.
    Threads send their model requests over the http_client primitive's pooled client."""
    subprocess, http = default_primitives()
    mcp: Handler = _mcp(mcp_pool) if mcp_pool is not None else Lazy("mcp", _mcp, _mcp_types)
    return [
        mcp,
        Lazy("directive", _directive, of_type("directive")),
        Lazy("thread", lambda: _thread(http), of_type("thread")),
        Lazy("kernel", lambda: _kernel(subprocess), _wants_kernel),
        Lazy("composite", _composite, of_type("composite")),
        subprocess,
        http,
    ]


def _mcp_types(plan: Plan) -> bool:
    return plan.tool_type in ("mcp_tool", "mcp_server")  # an mcp_server's run re-reads its tools


def _mcp(pool: McpPool | None = None) -> Handler:
    from .mcp_tool import McpToolHandler  # the MCP SDK: only when an mcp_tool runs

    return McpToolHandler(pool)


def _directive() -> Handler:
    from .directive import DirectiveHandler

    return DirectiveHandler()


def _wants_kernel(plan: Plan) -> bool:
    return plan.primitive == "subprocess" and plan.tool_type not in NEEDS_A_HANDLER and bool(plan.config.get("kernel"))


def _kernel(subprocess: Handler) -> Handler:
    from .kernel import KernelHandler

    return KernelHandler(subprocess)


def _composite() -> Handler:
    from .composite import CompositeHandler

    return CompositeHandler()


def _thread(http: Lazy) -> Handler:
    from .thread import ThreadHandler  # httpx and the MCP stack: only when a thread runs

    return ThreadHandler(http_client=lambda: cast("HttpClientPrimitive", http.instance()).client)
