"""Kiwi's own MCP server: the registry as four meta-tools an agent can follow.

    search(query, item_type?, limit?)          find items (query modifiers pass through)
    load(item_id, item_type?, version?, ...)   manifest, executor chain, parameters, files
    execute(action, item_id, ...)              run | dry_run | create | update | publish | delete | import
    help(topic?)                               the whole surface, explained

server = build_server(runner)      # an MCPServer; serve it over stdio or streamable HTTP

Item types group the registry's tool types: `directive` and `knowledge` are themselves,
`tool` is every other type (script, api, runtime, primitive, mcp_server, mcp_tool,
composite, thread). Every answer is structured content plus readable text. Every
failure, deliberate (a KiwiError) or not, comes back as a tool error (isError) whose
text says what went wrong and what to do; nothing escapes to the protocol layer.

The meta-tools themselves are module-level functions in runner/mcp_server/meta/ that take the
server's state (`ServerState`) first; this module only binds that state and registers them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import EllipsisType

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations

from ..harness.run import Runner
from ..mcp_client.pool import McpPool
from ..registry.base import Registry
from ..search.embedders import Embedder
from .agent_notifications import attach_notifications
from .catalog import register_catalog
from .log_level import install as install_logging
from .meta.args import ACTIONS, ITEM_TYPES, item_type_of
from .meta.audit import audited_action
from .meta.execute import execute
from .meta.help import help
from .meta.load import load
from .meta.run import guarded_run
from .meta.search import search
from .meta.state import Deleter, ServerState, default_deleter
from .meta.task_calls import ExecuteTasks
from .sdk_trims import trim_per_call_work
from .tasks import install_tasks

__all__ = [
    "ACTIONS",
    "ITEM_TYPES",
    "Deleter",
    "audited_action",
    "build_server",
    "default_deleter",
    "guarded_run",
    "item_type_of",
]

INSTRUCTIONS = """\
Kiwi is a registry of versioned tools, directives and knowledge. Use `search` to find an
item, `load` to read it (parameters, files, executor chain), and `execute` to run it
(action=run, or dry_run to validate first) or to create/update/publish/delete items.
Directives are also prompts, knowledge entries resources (kiwi://knowledge/<ref>[@<version>]);
a run's stderr comes as log notifications (logging/setLevel), registry changes as list_changed.
A long run can be a task: send `task` with execute(action="run") and poll tasks/get, then tasks/result.
Call `help` for the full guide (help(topic="protocol") for prompts, resources and notifications)."""

MetaTool = Callable[..., Awaitable[CallToolResult]]

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
META_TOOLS: tuple[tuple[MetaTool, str, ToolAnnotations], ...] = (
    (search, "Search the Kiwi registry", _READ_ONLY),
    (load, "Load an item", _READ_ONLY),
    (execute, "Run, validate, publish, delete or import items", _WRITES),
    (help, "How to use Kiwi", _READ_ONLY),
)
"""Each meta-tool with its title and hints, in the order the server lists them."""


def build_server(
    runner: Runner,
    registry: Registry | None = None,
    *,
    delete: Deleter | None = None,
    run_timeout_s: float | None = 900.0,
    name: str = "kiwi",
    session_id: str | None = None,
    allow_command_writes: bool = False,
    local_spaces: bool = False,
    mcp_pool: McpPool | None = None,
    embedder: Embedder | EllipsisType | None = ...,
) -> MCPServer:
    """Kiwi's MCP server over `runner` (and `registry`, by default the runner's).

    Writes that choose a command for others (publishing or deleting a runtime, primitive or
    mcp_server, a builtin or official tool, anything in `public`) are off over MCP unless
    `allow_command_writes`; even then the database lets only an admin make them.

    `delete` removes a tool (default: `public.delete_tool` through the registry's connection).
    `run_timeout_s` bounds one `execute` run as a last resort (tools have their own timeouts;
    on expiry the run is cancelled, which kills its process group). The caller owns the runner
    and closes it after serving.

    Every run and dry_run passes the runner's gate (runner/policy: the context's permissions,
    then `public.check_call` for the rate limits and the approval) and is audited behind the
    reply, allowed or refused; every other execute action is audited too (`audited_action`).
    `session_id` names this server's session in both (over HTTP, with each client
    connection's own); by default a new one per server instance.

    Local spaces (.ai/tools of the directory the server runs in, ~/.ai/tools) are ignored
    unless `local_spaces`: the runner's plans then all come from the registry, and `search`
    finds the registry's tools only.

    `embedder` embeds `search` queries here, in the server's process (default: the one the
    runner's settings name, KIWI_EMBEDDINGS; made once, its model loaded at the first search;
    None: search by words only).

    `mcp_pool` is what `execute import` reaches MCP servers through: the pool the runner's
    mcp_tool handler runs on (runner.handlers.standard_handlers(mcp_pool=...)), so imported
    tools then run on the import's sessions. Without one, import is refused.
    """
    runner.local_spaces = local_spaces
    state = ServerState.of(
        runner,
        registry,
        delete=delete,
        run_timeout_s=run_timeout_s,
        session_id=session_id,
        allow_command_writes=allow_command_writes,
        mcp_pool=mcp_pool,
        embedder=embedder,
    )
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")
    for fn, title, hints in META_TOOLS:
        doc = inspect.cleandoc(fn.__doc__ or "")
        server.add_tool(bound(fn, state), name=fn.__name__, title=title, description=doc, annotations=hints)
    install_logging(server)  # logging/setLevel; execute's runs stream their stderr (notify_run.py)
    register_catalog(server, state)  # directives as prompts, knowledge as resources
    attach_notifications(server, state.registry)  # list_changed and subscriptions, from the registry's NOTIFY
    install_tasks(server, runner, state.registry, ExecuteTasks(state))  # execute run as a queued task (tasks.py)
    trim_per_call_work(server)  # the SDK's per-call work Kiwi has no use for (sdk_trims.py)
    return server


def bound(fn: MetaTool, state: ServerState) -> MetaTool:
    """`fn` with `state` bound, as the SDK sees a tool: the same name, docstring and signature
    minus `state`, so the input schema comes from `fn`'s own Annotated parameters (and `ctx`,
    typed Context, stays out of it). functools.partial would not do: the SDK reads the
    function's name and type hints, which a partial does not carry."""
    signature = inspect.signature(fn, eval_str=True)
    params = list(signature.parameters.values())[1:]

    async def tool(**arguments: object) -> CallToolResult:
        return await fn(state, **arguments)

    tool.__name__ = tool.__qualname__ = fn.__name__
    tool.__doc__ = fn.__doc__
    tool.__module__ = fn.__module__
    tool.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
    return tool
