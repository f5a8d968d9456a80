"""The client command the MCP conformance suite drives (`conformance client --command ...`).

    .venv/bin/python -m runner.mcp_client.oauth.conformance_client SERVER_URL

The suite starts a test server per scenario, appends its URL, and names the scenario in
MCP_CONFORMANCE_SCENARIO (with credentials and such in MCP_CONFORMANCE_CONTEXT, JSON). This
command connects the way a Kiwi run does: through the client pool (pool.py) with the OAuth
provider of an mcp_server's `auth` config (config.py, provider.py), then lists the tools
and calls each. Tokens live in memory (the database storage is tested on its own), and the
browser step is headless: the authorization URL is fetched and the code taken from its
redirect, as the suite's authorization servers approve at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult

from ..pool import McpPool, ServerSpec
from .config import oauth_config
from .provider import make_provider
from .storage import MemoryTokenStorage

# What the suite's CIMD scenario expects as the client's metadata document URL.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://127.0.0.1:18599/callback"  # never listened on: the code is caught headless
_SECRET_VAR = "CONFORMANCE_CLIENT_SECRET"
_KEY_VAR = "CONFORMANCE_PRIVATE_KEY"


class HeadlessBrowser:
    """Follows an authorization URL with one GET and keeps the code from its redirect."""

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10.0) as client:
            response = await client.get(authorization_url)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"the authorization endpoint answered {response.status_code}, not a redirect")
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        if "code" not in query:
            raise RuntimeError(f"the redirect carried no code: {query.get('error', 'no error either')}")
        self._result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise RuntimeError("no authorization code was caught")
        result, self._result = self._result, None
        return result


def server_config(scenario: str, context: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The mcp_server config (its `auth` block) this scenario calls for, and the environment
    its ${VAR}s come from."""
    if not scenario.startswith("auth/"):
        return {}, {}
    auth: dict[str, Any] = {"type": "oauth"}
    environ: dict[str, str] = {}
    if context.get("client_id"):
        auth["client_id"] = context["client_id"]
        if context.get("client_secret"):
            environ[_SECRET_VAR] = str(context["client_secret"])
            auth["client_secret"] = "${" + _SECRET_VAR + "}"
        if context.get("private_key_pem"):
            environ[_KEY_VAR] = str(context["private_key_pem"])
            auth["private_key"] = "${" + _KEY_VAR + "}"
            auth["signing_algorithm"] = context.get("signing_algorithm") or "RS256"
        if scenario.startswith("auth/client-credentials"):
            auth["grant"] = "client_credentials"
    else:
        auth["client_metadata_url"] = CLIENT_METADATA_URL
    return {"auth": auth}, environ


async def run(url: str, scenario: str, context: Mapping[str, Any]) -> None:
    config, environ = server_config(scenario, context)
    cfg = oauth_config(config, environ, "conformance")
    auth = None
    if cfg is not None:
        browser = HeadlessBrowser()
        auth = make_provider(
            cfg,
            url,
            MemoryTokenStorage(),
            redirect_uri=REDIRECT_URI,
            redirect_handler=browser.redirect,
            callback_handler=browser.callback,
        )
    spec = ServerSpec(ref="conformance", key=f"conformance:{scenario}", transport="streamable_http", url=url, auth=auth)
    pool = McpPool()
    try:
        for tool in await pool.list_tools(spec):
            arguments = _arguments(tool.input_schema)
            result, _ = await pool.call_tool(spec, tool.name, arguments, retries=0)
            print(f"{tool.name}: {'error' if result.is_error else 'ok'}", file=sys.stderr)
    finally:
        await pool.aclose()


def _arguments(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Placeholder arguments of the declared types (the suite's tools check only that they run)."""
    out: dict[str, Any] = {}
    for name, prop in ((schema or {}).get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        out[name] = 1 if kind in ("number", "integer") else True if kind == "boolean" else "test"
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m runner.mcp_client.oauth.conformance_client SERVER_URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    asyncio.run(run(args[0], scenario, context))
    return 0


if __name__ == "__main__":
    sys.exit(main())
