"""`kiwi mcp import SERVER [--json]`: publish an MCP server's tools as mcp_tool rows (changes
upstream are held for review: `kiwi mcp changes|approve|reject`, mcp_changes.py);
`kiwi mcp login SERVER` / `kiwi mcp logout SERVER`: keep or forget the caller's OAuth tokens.

Wired into runner/cli/main.py with `add_mcp_commands(sub)` (which imports nothing of the
MCP SDK: `kiwi run` must not pay for it); each parser sets `handler`, an
async function of the parsed arguments returning the exit code, like the other commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import KiwiError
from .mcp_changes import add_change_commands

if TYPE_CHECKING:
    from ..mcp_client.importer import ImportReport
    from ..registry.base import Registry


def add_mcp_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `mcp` (with `import`, `login`, `logout`) to the `kiwi` subparsers; returns the `mcp` parser."""
    mcp = subparsers.add_parser("mcp", help="MCP servers: import their tools, review their changes, sign in and out")
    sub = mcp.add_subparsers(dest="mcp_command", required=True, metavar="MCP_COMMAND")
    imp = sub.add_parser(
        "import",
        help="publish one mcp_tool per tool the server lists (new: 1.0.0; changed upstream: held for review)",
    )
    imp.add_argument("server", metavar="SERVER", help="the mcp_server's tool id (or namespace/tool)")
    imp.add_argument(
        "--namespace",
        metavar="NS",
        help="publish the tools into this namespace (NS/SERVER.TOOL) instead of beside the server,"
        " e.g. your own when the server is in public",
    )
    imp.add_argument("--json", action="store_true", help="print the report as one JSON object")
    imp.set_defaults(handler=cmd_mcp_import)
    login = sub.add_parser("login", help="sign in to a remote MCP server that asks for OAuth, and keep the tokens")
    login.add_argument("server", metavar="SERVER", help="the mcp_server's tool id (or namespace/tool)")
    login.add_argument("--no-browser", action="store_true", help="only print the sign-in URL")
    login.add_argument("--force", action="store_true", help="sign in again even if a stored token is still good")
    login.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the sign-in (default 300)")
    login.set_defaults(handler=cmd_mcp_login)
    logout = sub.add_parser("logout", help="forget your stored sign-in (tokens) for a remote MCP server")
    logout.add_argument("server", metavar="SERVER", help="the mcp_server's tool id (or namespace/tool)")
    logout.set_defaults(handler=cmd_mcp_logout)
    add_change_commands(sub)
    return mcp


async def cmd_mcp_login(args: argparse.Namespace) -> int:
    from ..mcp_client.oauth.login import login_command  # the MCP SDK: only this command pays for it

    return await login_command(args.server, open_browser=not args.no_browser, force=args.force, timeout_s=args.timeout)


async def cmd_mcp_logout(args: argparse.Namespace) -> int:
    from ..mcp_client.oauth.logout import logout_command

    return await logout_command(args.server)


async def cmd_mcp_import(args: argparse.Namespace) -> int:
    # The MCP SDK takes most of a second to import: only this command pays for it.
    from ..harness.run import runner_environ
    from ..mcp_client.importer import import_server
    from ..mcp_client.pool import McpPool
    from ..registry import connect
    from ..sandbox import Sandbox
    from ..search import embed_published

    settings = Settings.load()
    registry = connect(settings)
    pool = McpPool()  # import_server signs in where the server's config asks (config.auth)
    sandbox = Sandbox(enabled=settings.sandbox)  # the server starts sandboxed, as a run of it would
    try:
        report = await import_server(registry, pool, args.server, runner_environ(), sandbox, namespace=args.namespace)
        # what it published, embedded for search by meaning (a bar on a terminal); never fails the import
        _, unembedded = await embed_published(registry, settings, progress=None)
        failure = report.failure()
        if failure is not None and failure.sqlstate == "42501":  # not allowed there: say where it may go
            failure.hint = await import_hint(registry, report.server, args.namespace)
    finally:
        await pool.aclose()
        await sandbox.aclose()
        await registry.aclose()
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False))
    else:
        print_report(report)
    if unembedded:
        print(f"warning: {unembedded}", file=sys.stderr)
    if failure is None:
        return 0
    if args.json:  # the report says it all; the exit code says what kind of failure
        return failure.exit_code
    raise failure  # one line and its hint on stderr (cli/main.py's fail), its exit code


async def import_hint(registry: Registry, server: str, namespace: str | None) -> str:
    """Where a caller who may not publish into the target namespace can import to: an admin
    imports into the server's namespace; anyone into a namespace of theirs."""
    try:
        mine = [n["namespace"] for n in (await registry.whoami()).get("namespaces") or []]
    except KiwiError:
        mine = []
    own = next((n for n in mine if n != namespace), None)
    where = f"--namespace {own}" if own else "--namespace <yours>"
    admin = "" if namespace else f"an admin imports beside the server: kiwi --admin mcp import {server}; or "
    return f"{admin}import into a namespace of yours: kiwi mcp import {server} {where}"


def print_report(report: ImportReport) -> None:
    """Each tool imported (or unchanged, missing) on stdout, the counts on stderr; the tools that
    failed are left to the one error line the command ends with (ImportReport.failure)."""
    for t in report.tools:
        if t.status == "error":
            continue
        line = f"{t.status:9s} {t.tool_id}"
        if t.version:
            line += f"@{t.version}"
        if t.status == "changed":
            line += f" (was {t.previous_version}: {', '.join(t.changed)} changed upstream)"
        elif t.status == "held":
            line += f" ({', '.join(t.changed)} changed upstream: held as change {t.change}, {t.previous_version} stays)"
        for note in t.notes:  # e.g. a description cut to the registry's limit
            line += f" ({note})"
        print(line)
    counts = report.counts()
    failed = counts.pop("error", 0)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if summary or not failed:  # when every tool failed, the error line says all there is
        print(f"{report.server}: {summary or 'no tools'}", file=sys.stderr)
