"""The kiwi command line: run, search, show, publish, pull, runs, and (from their own modules)
yank, deprecate, delete, approve, deny, approvals, whoami, serve, token, login, logout, mcp, keys, sign,
verify, lock, embed, rollback, agent.

Every command takes --json for machines; without it, output is for people. Exit codes:
0 success, 1 the tool ran and failed, 2 bad usage or parameters, 3 not found,
4 refused (broken chain, altered file or version, trust policy, lockfile drift,
blocked by validation, bad config, no sandbox on this machine),
5 registry unreachable, 124 the tool timed out.

Where the registry is: KIWI_DATABASE_URL (Postgres; the default is the local stack), or
SUPABASE_URL with SUPABASE_KEY or SUPABASE_ANON_KEY (the REST API); then config.toml.
Materialised tools: KIWI_CACHE_DIR.

Every process a tool starts runs in a bubblewrap sandbox with the profile its plan gives
(`kiwi show TOOL` prints it): no network but allowed host:port pairs, no host paths but
granted ones, limits that end a run by name. Where bubblewrap is missing, runs are refused.
KIWI_SANDBOX=off turns it off on a trusted single-user machine (never for `serve --transport http`).

Search by meaning: KIWI_EMBEDDINGS is the model that embeds tools and queries, local (the
default: the bundled wordllama model, no download), openai (an OpenAI-compatible API:
KIWI_EMBEDDINGS_URL, default https://api.openai.com/v1; KIWI_EMBEDDINGS_MODEL, default
text-embedding-3-small; KIWI_EMBEDDINGS_KEY written as ${VAR}, e.g. ${OPENAI_API_KEY}) or
off (words only). Publishing embeds what it published; `kiwi embed` embeds the rest.

Who you act as (`kiwi whoami`): KIWI_ACCESS_TOKEN's user (a Supabase Auth JWT), else the user
`kiwi login` signed in to the configured project (SUPABASE_URL), else on Postgres the local
stack's owner (a user owning namespace `local`), over REST anon.
`--admin` (or KIWI_ADMIN=1) acts as service_role: needed to publish into `public` or to
publish a runtime, primitive or MCP server; never a default. Without it, such a publish
may carry an admin's approval of exactly its content: `kiwi publish DIR --request-approval`
prints an approval id (exit 0, nothing published), an admin runs `kiwi --admin approve ID`,
then `kiwi publish DIR --approval ID` publishes it, once.

A warm start: while `kiwi agent` runs for the same identity and registry, `kiwi run` and
`kiwi search` hand their call to it over a socket only you can open, with the same output
and exit codes, and skip the imports (see `kiwi agent --help`); KIWI_AGENT=off ignores it.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import KiwiError, NotFound
from .args import parse_params
from .version import VersionAction

if TYPE_CHECKING:
    from ..harness.run import RunResult

# What each command's handler needs (the runner, the registry's driver, search, the MCP SDK) is
# imported inside the handler, and only the named command's parser is defined (build_parser):
# a fresh `kiwi run` pays for nothing another command uses (bench/runner_bench.py, d).

EXIT_TIMEOUT = 124
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(argv))
    args = parser.parse_args(argv)
    if getattr(args, "admin", False):  # every Settings.load() of this process sees the choice
        os.environ["KIWI_ADMIN"] = "1"
    import asyncio  # not for `kiwi --help` nor a usage error

    from .. import telemetry

    telemetry.start()  # only when OTEL_* asks for it: otherwise one look at the environment

    try:
        if args.command not in SESSIONLESS:
            use_session()
        done = args.handler(args)  # a coroutine, but for `kiwi agent`, which forks outside any event loop
        return asyncio.run(done) if asyncio.iscoroutine(done) else done
    except KiwiError as e:
        return fail(e, args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`kiwi search | head -1`): stop, quietly
        return EXIT_BROKEN_PIPE


# commands that do not act as the stored session's user: they make, read or end it themselves
SESSIONLESS = ("login", "logout", "token")


def use_session() -> None:
    """Act as the user `kiwi login` signed in, when the configured project has a stored session
    (its access token refreshed if it expired): every Settings.load() of this process sees it
    as KIWI_ACCESS_TOKEN, renewed by the REST backend of a command that outlives it. An explicit
    KIWI_ACCESS_TOKEN, or admin, wins; without a session file this costs one stat."""
    from .session import session_file

    admin = (os.environ.get("KIWI_ADMIN") or "").strip().lower() in ("1", "true", "yes")
    if admin or os.environ.get("KIWI_ACCESS_TOKEN") or not session_file().exists():
        return
    from ..config import Settings
    from ..supabase_auth.renewal import renewable
    from .session import renewal, signed_in

    settings = Settings.load()
    session = signed_in(settings)
    if session is not None:
        os.environ["KIWI_ACCESS_TOKEN"] = session.access_token
        renewable(session.access_token, renewal(settings, session.user_id))  # a long-lived command outlives it


def entrypoint() -> NoReturn:
    """The `kiwi` command: main(), then exit without tearing the interpreter down.

    Freeing every imported module's objects costs a one-shot `kiwi run` about 20 ms here,
    close to a tenth of its wall time, for a process about to end. Exit handlers still run
    (the MCP pool's server kill, logging's flush) and output is flushed first; while a
    thread other than this one is alive, the ordinary exit waits for it instead. A reader
    that went away (`kiwi search | head -0`) ends the command quietly with 141 (128 +
    SIGPIPE, as commands killed by their closed pipe report), never with a traceback."""
    code = main()
    alone = threading.active_count() == 1
    if alone:
        atexit._run_exitfuncs()  # what the interpreter would run at exit (CPython's own hook)
    if not _flushed():
        code = code or EXIT_BROKEN_PIPE
    if not alone:
        sys.exit(code)
    os._exit(code)


def run_forked(argv: list[str]) -> int:
    """A call `kiwi agent` forked (runner/cli/agent.py): main(), then what a cold `kiwi` does
    after it (other threads awaited, exit handlers, output flushed, a gone reader), as a code."""
    try:
        code: Any = main(argv)
    except SystemExit as e:  # argparse: --help, a usage error
        code = e.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if not _flushed():
        code = code or EXIT_BROKEN_PIPE
    return int(code or 0) & 0xFF


def _flushed() -> bool:
    """Flush stdout and stderr; a stream whose reader is gone is pointed at /dev/null (so that
    no later flush reports it again) and the answer is False."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            ok = False
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return ok


def command_of(argv: Sequence[str]) -> str | None:
    """The command the arguments name, when one of COMMANDS does and no help for `kiwi` itself
    is asked before it; else None (every command's parser is then defined, to be listed)."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `kiwi` parser; with `command` (a key of COMMANDS), only that command's parser is defined,
    from its module, which is imported only then: what a command sees and says is the same either way."""
    parser = argparse.ArgumentParser(
        prog="kiwi",
        description="Run, find and publish tools from the Kiwi registry.",
        epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--admin", action="store_true", help="act as service_role (admin), like KIWI_ADMIN=1; never a default"
    )
    parser.add_argument("--version", action=VersionAction, help="print kiwi's version (and commit, in a checkout)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defined: set[Callable[[Any], object]] = set()
    for name, define in COMMANDS.items():  # in the order `kiwi --help` lists them
        if (command is None or name == command) and define not in defined:
            defined.add(define)
            define(sub)
    return parser


def add_run_command(sub: Any) -> None:
    """Define `kiwi run` on the `kiwi` parser's subparsers."""
    run = sub.add_parser("run", help="run a tool through its executor chain")
    run.add_argument("tool", metavar="TOOL", help="tool id, namespace/tool or tool@version")
    run.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one parameter (repeatable); VALUE is read as JSON when the schema wants a non-string",
    )
    run.add_argument("--params", metavar="JSON", help="all parameters as one JSON object")
    run.add_argument(
        "--version", metavar="V", help="run this published version instead of the latest (skips local spaces)"
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="resolve, validate and prepare, but do not run; prints the chain and checks",
    )
    run.add_argument(
        "--registry",
        action="store_true",
        help="run the registry's tool even when a local space (.ai/tools, ~/.ai/tools) holds one of that id",
    )
    run.add_argument(
        "--approval",
        metavar="ID",
        help="use this approved approval (a run that needs one prints its id; a person approves it)",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.set_defaults(handler=cmd_run)


def _search(sub: Any) -> None:
    from .search import add_search_command

    add_search_command(sub)


def _tools(sub: Any) -> None:
    from .tools import add_registry_commands

    add_registry_commands(sub)


def _governance(sub: Any) -> None:
    from .governance import add_governance_commands

    add_governance_commands(sub)


def _serve(sub: Any) -> None:
    from .serve import add_serve_command

    add_serve_command(sub)


def _token(sub: Any) -> None:
    from .token import add_token_command

    add_token_command(sub)


def _login(sub: Any) -> None:
    from .login import add_login_commands

    add_login_commands(sub)


def _mcp(sub: Any) -> None:
    from .mcp import add_mcp_commands  # the MCP SDK itself loads only when used

    add_mcp_commands(sub)


def _trust(sub: Any) -> None:
    from .trust import add_trust_commands

    add_trust_commands(sub)


def _fleet(sub: Any) -> None:
    from .fleet import add_fleet_commands

    add_fleet_commands(sub)


def _console(sub: Any) -> None:
    from .console import add_console_command

    add_console_command(sub)


def _rollback(sub: Any) -> None:
    from .rollback import add_rollback_command

    add_rollback_command(sub)


def _agent(sub: Any) -> None:
    from .agent import add_agent_command

    add_agent_command(sub, run_forked, build_parser)


def _embed(sub: Any) -> None:
    from .embed import add_embed_command

    add_embed_command(sub)


# Each command and what defines it (a definer may define several), in the order `kiwi --help` lists them.
COMMANDS: dict[str, Callable[[Any], object]] = {
    "run": add_run_command,
    "search": _search,
    **dict.fromkeys(("show", "publish", "pull", "runs"), _tools),
    **dict.fromkeys(("approve", "deny", "yank", "deprecate", "delete", "whoami", "approvals"), _governance),
    "serve": _serve,
    "console": _console,
    "token": _token,
    **dict.fromkeys(("login", "logout"), _login),
    "mcp": _mcp,
    **dict.fromkeys(("keys", "sign", "verify", "lock"), _trust),
    "embed": _embed,
    "rollback": _rollback,
    "agent": _agent,
    **dict.fromkeys(("queue", "run-status", "cancel", "worker", "workers", "schedule"), _fleet),
}


def fail(e: KiwiError, args: argparse.Namespace) -> int:
    if getattr(args, "json", False):
        if args.command == "run":  # the run contract: one result object, whatever went wrong
            from ..core.refs import ToolRef
            from ..harness.run import RunResult

            named = ToolRef.parse(args.tool, args.version, strict=False)  # never refuses: it only reports
            failed = RunResult(tool_id=named.ref, version=named.version, status="error", error=str(e))
            print(json.dumps(run_json(failed), ensure_ascii=False, default=str))
        else:
            print(json.dumps({"error": e.as_dict()}, ensure_ascii=False))
    print(f"kiwi: {e}", file=sys.stderr)
    return e.exit_code


def progress(line: str) -> None:
    print(f"… {line}", file=sys.stderr, flush=True)


async def cmd_run(args: argparse.Namespace) -> int:
    import uuid

    from ..config import Settings
    from ..core.refs import split_ref
    from ..handlers import standard_dispatcher
    from ..harness.run import Runner
    from ..policy import Call
    from ..registry import connect

    tool, version = split_ref(args.tool, args.version)
    params, raw = parse_params(args)
    settings = Settings.load()
    dispatcher, session = standard_dispatcher(), f"cli-{uuid.uuid4()}"
    runner = Runner(
        connect(settings, one_shot=True), settings, dispatcher=dispatcher, on_progress=progress, session=session
    )
    runner.local_spaces = not args.registry
    call = Call(runner.session, approval_id=args.approval)
    try:
        result = await runner.run(tool, params, version=version, raw_params=raw, dry_run=args.dry_run, call=call)
    finally:
        await runner.aclose()
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(run_json(result), ensure_ascii=False, default=str))
    else:
        print_run(result, args.dry_run)
    if result.failure is not None:
        return result.failure.exit_code
    return 0 if result.ok else EXIT_TIMEOUT if result.status == "timeout" else 1


def run_json(result: RunResult) -> dict[str, Any]:
    """The contract's object, read field by field: `failure` holds an exception, which
    dataclasses.asdict would try (and, for some, fail) to deep-copy."""
    from ..harness.result import RESULT_KEYS

    return {key: getattr(result, key) for key in RESULT_KEYS}


def print_run(result: RunResult, dry_run: bool) -> None:
    if result.output is not None:
        out = result.output
        print(out if isinstance(out, str) else json.dumps(out, indent=2, ensure_ascii=False, default=str))
    where = f"{result.tool_id}@{result.version}" if result.version else result.tool_id
    chain = " -> ".join(result.executor_chain)
    label = "dry run ok" if dry_run and result.ok else result.status
    if chain or result.error is None:  # a run that never found its chain says only why, below
        print(f"{label}: {where} via {chain or '?'} in {result.duration_ms:.0f} ms", file=sys.stderr)
    if source := result.detail.get("source"):  # where a knowledge entry came from
        print("source: " + ", ".join(source.values()), file=sys.stderr)
    if result.error:
        print(f"kiwi: {result.error}", file=sys.stderr)
        failure = result.failure
        if isinstance(failure, NotFound) and failure.hint is None and failure.message.startswith('tool "'):
            print(f"hint: find tools by what they do with: kiwi search {result.tool_id}", file=sys.stderr)


if __name__ == "__main__":
    entrypoint()
