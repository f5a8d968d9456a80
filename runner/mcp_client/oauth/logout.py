"""`kiwi mcp logout SERVER`: forget the caller's stored sign-in (tokens and client registration)
for a remote MCP server, the row `kiwi mcp login` stored.

The row is found as login finds it (the server's URL and how its config signs in,
provider.storage_key) and deleted as the caller (public.forget_mcp_oauth_token: only one's own
row). Deleting needs no KIWI_TOKEN_KEY, so a lost key is no obstacle. Nothing is sent to the
authorization server: its tokens stay valid until they expire, but Kiwi no longer holds them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import UsageError
from ..servers import server_spec
from .config import oauth_config
from .provider import storage_key

if TYPE_CHECKING:
    from ...registry.base import Registry

__all__ = ["LogoutResult", "logout", "logout_command"]


@dataclass(frozen=True)
class LogoutResult:
    server: str
    resource: str
    forgotten: bool  # False: there was no stored sign-in for this caller


async def logout(registry: Registry, server: str, environ: Mapping[str, str]) -> LogoutResult:
    """Forget the registry's caller's tokens for `server` (an mcp_server's tool id)."""
    plan = await registry.plan(server)  # NotFound names a bad server
    spec = server_spec(plan, environ)
    if spec.transport == "stdio" or spec.url is None:
        raise UsageError(f"{spec.ref} is a stdio MCP server: there is no sign-in to forget")
    cfg = oauth_config(plan.config, environ, spec.ref)
    if cfg is None:
        raise UsageError(f"{spec.ref} does not ask for OAuth (its config has no auth block): nothing is stored")
    found = await registry.backend.call("forget_mcp_oauth_token", {"p_resource": storage_key(cfg, spec.url)})
    return LogoutResult(server=spec.ref, resource=spec.url, forgotten=bool(found))


async def logout_command(server: str) -> int:
    """`kiwi mcp logout SERVER` as the CLI's principal; the exit code (errors propagate as KiwiErrors)."""
    from ...config import Settings
    from ...harness.run import runner_environ
    from ...registry import connect

    if not server.strip():
        raise UsageError("kiwi mcp logout needs the mcp_server's tool id")
    registry = connect(Settings.load())
    try:
        result = await logout(registry, server, runner_environ())
    finally:
        await registry.aclose()
    if result.forgotten:
        print(f"kiwi: signed out of {result.server} ({result.resource}): its tokens are forgotten", file=sys.stderr)
    else:
        print(f"kiwi: not signed in to {result.server} ({result.resource}): nothing to forget", file=sys.stderr)
    return 0
