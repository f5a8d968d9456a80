"""MCP servers: each server the person may read, the tools imported from it, a cheap health
signal (its chain resolves; how its tools' recent runs ended), and whether the person is signed
in to it (OAuth), with sign-in (server_signin.py: the console's own OAuth redirect) and
sign-out; `kiwi mcp login SERVER` signs in from a terminal alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...errors import KiwiError
from ...harness.run import runner_environ
from ...mcp_client.oauth.config import oauth_config
from ...mcp_client.oauth.logout import logout
from ...mcp_client.oauth.provider import storage_key
from ...mcp_client.servers import server_spec
from ...principal import Principal
from ...registry.base import Select

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["PAGES"]


async def _sign_in_state(console: Console, ref: str, principal: Principal) -> str:
    """signed in, not signed in, no sign-in (stdio, or no auth block), or why it is unknown."""
    try:
        plan = await console.registry.plan(ref)
        environ = runner_environ()
        spec = server_spec(plan, environ)
        if spec.transport == "stdio" or spec.url is None:
            return "no sign-in (stdio)"
        cfg = oauth_config(plan.config, environ, spec.ref)
        if cfg is None:
            return "no sign-in (no OAuth)"
        if principal.user_id is None:
            return "unknown (sign-ins are kept per user)"
        row = await console.registry.backend.call("mcp_oauth_token", {"p_resource": storage_key(cfg, spec.url)})
        return "signed in" if row and row.get("tokens") else "not signed in"
    except KiwiError as e:
        return f"unknown ({e.message})"


def _health(item: dict[str, Any], summaries: list[dict[str, Any]]) -> str:
    if item.get("chain_error"):
        return f"broken chain: {item['chain_error']}"
    if not summaries:
        return "no runs of its tools in 7 days"
    runs = sum(int(s.get("runs") or 0) for s in summaries)
    failures = sum(int(s.get("errors") or 0) + int(s.get("timeouts") or 0) for s in summaries)
    return f"{runs - failures} of {runs} recent runs of its tools succeeded"


async def servers(console: Console, request: Request, principal: Principal) -> Response:
    backend = console.registry.backend
    by_ref = Select(order=("tool_id",))
    found = await backend.call("tool_catalog", {"tool_type": "mcp_server"}, returns=by_ref, read=True) or []
    summary = await backend.call("run_summary", {}, returns=by_ref, read=True) or []
    shown = []
    for item in found:
        ref = str(item["tool_id"])
        dependents = await backend.call(
            "tool_dependents", {"executor_id": ref}, returns=Select(order=("executor_id",)), read=True
        )
        tools = list(dependents[0]["tools"]) if dependents else []
        mine = [s for s in summary if s["tool_id"] in tools]
        shown.append(
            {
                **item,
                "tools": tools,
                "health": _health(item, mine),
                "sign_in": await _sign_in_state(console, ref, principal),
            }
        )
    return console.render(request, "servers.html", who=principal.describe(), servers=shown)


async def sign_out(console: Console, request: Request, principal: Principal) -> Response:
    from ..base import base_path

    await logout(console.registry, str(request.path_params["ref"]), runner_environ())
    return RedirectResponse(f"{base_path(request)}/servers", status_code=303)


PAGES = [
    ("/servers", servers, ("GET",)),
    ("/servers/{ref:path}/signout", sign_out, ("POST",)),
]
