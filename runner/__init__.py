"""Kiwi runner: turns a tool reference into a result through one RPC and two primitives.

The public API: what tests, benches and embedders import, from here and nowhere deeper.

    import runner

    settings = runner.Settings.load()
    async with runner.opened(settings) as registry:
        kiwi = runner.Runner(registry, settings, dispatcher=runner.standard_dispatcher())
        try:
            result = await kiwi.run("hello_world", {"name": "Ada"})
        finally:
            await kiwi.aclose()

Names load on first use (PEP 562), so `import runner` costs nothing and `kiwi run` of a
script never loads the MCP SDK or the HTTP stack. `tests/test_public_api.py` pins the names;
the layers they come from are in the README ("Layout").
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: `kiwi run` handed to an agent imports almost nothing
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# name -> (module under runner, attribute there)
_EXPORTS: dict[str, tuple[str, str]] = {
    # settings and identity
    "Settings": ("config", "Settings"),
    "TrustSettings": ("config", "TrustSettings"),
    "Principal": ("principal", "Principal"),
    "LOCAL_OWNER_ID": ("principal", "LOCAL_OWNER_ID"),
    "LOCAL_JWT_SECRET": ("principal", "LOCAL_JWT_SECRET"),
    "acting_as": ("principal", "acting_as"),
    "admin": ("principal", "admin"),
    "anon": ("principal", "anon"),
    "local_owner": ("principal", "local_owner"),
    "from_claims": ("principal", "from_claims"),
    "from_token": ("principal", "from_token"),
    "sign_token": ("principal", "sign"),
    # errors
    "KiwiError": ("errors", "KiwiError"),
    "UsageError": ("errors", "UsageError"),
    "InvalidParameters": ("errors", "InvalidParameters"),
    "NotFound": ("errors", "NotFound"),
    "Refused": ("errors", "Refused"),
    "IntegrityError": ("errors", "IntegrityError"),
    "ConfigError": ("errors", "ConfigError"),
    "RegistryUnavailable": ("errors", "RegistryUnavailable"),
    "PrimitiveError": ("errors", "PrimitiveError"),
    # the plan and references
    "Plan": ("core.plan", "Plan"),
    "ChainLink": ("core.plan", "ChainLink"),
    "PlanFile": ("core.plan", "PlanFile"),
    "ToolRef": ("core.refs", "ToolRef"),
    "ToolDir": ("core.tool_dir", "ToolDir"),
    "load_tool_dir": ("core.tool_dir", "load_tool_dir"),
    # the registry
    "Registry": ("registry", "Registry"),
    "PostgresRegistry": ("registry", "PostgresRegistry"),
    "RestRegistry": ("registry", "RestRegistry"),
    "MemoryBackend": ("registry.memory", "MemoryBackend"),
    "connect": ("registry", "connect"),
    "opened": ("registry", "opened"),
    # search: the embedding model seam, and storing what is pending
    "Embedder": ("search.embedders", "Embedder"),
    "EmbeddingError": ("search.embedders", "EmbeddingError"),
    "LocalWordLlama": ("search.embedders", "LocalWordLlama"),
    "OpenAICompatible": ("search.embedders", "OpenAICompatible"),
    "embedder_from_settings": ("search.embedders", "embedder_from_settings"),
    "embed_pending": ("search.sync", "embed_pending"),
    # running
    "Runner": ("harness.run", "Runner"),
    "RunResult": ("harness.run", "RunResult"),
    "Dispatcher": ("harness.dispatch", "Dispatcher"),
    "Handler": ("primitives.base", "Handler"),
    "Invocation": ("primitives.base", "Invocation"),
    "Outcome": ("primitives.base", "Outcome"),
    "CallTool": ("primitives.base", "CallTool"),
    "standard_handlers": ("handlers", "standard_handlers"),
    "standard_dispatcher": ("handlers", "standard_dispatcher"),
    "Call": ("policy", "Call"),
    "Denied": ("policy", "Denied"),
    # the sandbox every process a tool starts runs in
    "Sandbox": ("sandbox", "Sandbox"),
    "SandboxUnavailable": ("sandbox", "SandboxUnavailable"),
    # MCP: Kiwi as a server, MCP servers as tools
    "build_server": ("mcp_server.server", "build_server"),
    "McpPool": ("mcp_client.pool", "McpPool"),
    "ServerSpec": ("mcp_client.pool", "ServerSpec"),
    "import_server": ("mcp_client.importer", "import_server"),
}

__all__ = [
    "LOCAL_JWT_SECRET",
    "LOCAL_OWNER_ID",
    "Call",
    "CallTool",
    "ChainLink",
    "ConfigError",
    "Denied",
    "Dispatcher",
    "Embedder",
    "EmbeddingError",
    "Handler",
    "IntegrityError",
    "InvalidParameters",
    "Invocation",
    "KiwiError",
    "LocalWordLlama",
    "McpPool",
    "MemoryBackend",
    "NotFound",
    "OpenAICompatible",
    "Outcome",
    "Plan",
    "PlanFile",
    "PostgresRegistry",
    "PrimitiveError",
    "Principal",
    "Refused",
    "Registry",
    "RegistryUnavailable",
    "RestRegistry",
    "RunResult",
    "Runner",
    "Sandbox",
    "SandboxUnavailable",
    "ServerSpec",
    "Settings",
    "ToolDir",
    "ToolRef",
    "TrustSettings",
    "UsageError",
    "__version__",
    "acting_as",
    "admin",
    "anon",
    "build_server",
    "connect",
    "embed_pending",
    "embedder_from_settings",
    "from_claims",
    "from_token",
    "import_server",
    "load_tool_dir",
    "local_owner",
    "opened",
    "sign_token",
    "standard_dispatcher",
    "standard_handlers",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'runner' has no attribute {name!r}") from None
    import importlib  # on first use of a name, not at `import runner`

    value = getattr(importlib.import_module(f"runner.{module}"), attribute)
    globals()[name] = value  # the next lookup is a plain global
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and editors see; nothing here runs
    from .config import Settings, TrustSettings
    from .core.plan import ChainLink, Plan, PlanFile
    from .core.refs import ToolRef
    from .core.tool_dir import ToolDir, load_tool_dir
    from .errors import (
        ConfigError,
        IntegrityError,
        InvalidParameters,
        KiwiError,
        NotFound,
        PrimitiveError,
        Refused,
        RegistryUnavailable,
        UsageError,
    )
    from .handlers import standard_dispatcher, standard_handlers
    from .harness.dispatch import Dispatcher
    from .harness.run import Runner, RunResult
    from .mcp_client.importer import import_server
    from .mcp_client.pool import McpPool, ServerSpec
    from .mcp_server.server import build_server
    from .policy import Call, Denied
    from .primitives.base import CallTool, Handler, Invocation, Outcome
    from .principal import (
        LOCAL_JWT_SECRET,
        LOCAL_OWNER_ID,
        Principal,
        acting_as,
        admin,
        anon,
        from_claims,
        from_token,
        local_owner,
    )
    from .principal import sign as sign_token
    from .registry import PostgresRegistry, Registry, RestRegistry, connect, opened
    from .registry.memory import MemoryBackend
    from .sandbox import Sandbox, SandboxUnavailable
    from .search.embedders import Embedder, EmbeddingError, LocalWordLlama, OpenAICompatible, embedder_from_settings
    from .search.sync import embed_pending
