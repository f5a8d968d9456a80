"""The kiwi command line: run, search, show, publish, pull, runs, and (from their own modules)
yank, deprecate, delete, approve, deny, approvals, whoami, serve, token, mcp, keys, sign, verify, lock, embed.

Every command takes --json for machines; without it, output is for people. Exit codes:
0 success, 1 the tool ran and failed, 2 bad usage or parameters, 3 not found,
4 refused (broken chain, altered file or version, trust policy, lockfile drift,
blocked by validation, bad config),
5 registry unreachable, 124 the tool timed out.

Where the registry is: KIWI_DATABASE_URL (Postgres; the default is the local stack), or
SUPABASE_URL with SUPABASE_KEY or SUPABASE_ANON_KEY (the REST API); then config.toml.
Materialised tools: KIWI_CACHE_DIR.

Search by meaning: KIWI_EMBEDDINGS is the model that embeds tools and queries, local (the
default: the bundled wordllama model, no download), openai (an OpenAI-compatible API:
KIWI_EMBEDDINGS_URL, default https://api.openai.com/v1; KIWI_EMBEDDINGS_MODEL, default
text-embedding-3-small; KIWI_EMBEDDINGS_KEY written as ${VAR}, e.g. ${OPENAI_API_KEY}) or
off (words only). Publishing embeds what it published; `kiwi embed` embeds the rest.

Who you act as (`kiwi whoami`): KIWI_ACCESS_TOKEN's user (a Supabase Auth JWT), else on
Postgres the local stack's owner (a user owning namespace `local`), over REST anon.
`--admin` (or KIWI_ADMIN=1) acts as service_role: needed to publish into `public` or to
publish a runtime, primitive or MCP server; never a default. Without it, such a publish
may carry an admin's approval of exactly its content: `kiwi publish DIR --request-approval`
prints an approval id (exit 0, nothing published), an admin runs `kiwi --admin approve ID`,
then `kiwi publish DIR --approval ID` publishes it, once.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from ..config import Settings
from ..core.refs import ToolRef, split_ref
from ..core.text import dependents_line, first_line
from ..errors import KiwiError, Refused, UsageError
from ..handlers import standard_dispatcher
from ..harness.run import RESULT_KEYS, Runner, RunResult
from ..policy import Call
from ..registry import connect, opened
from ..search import embed_published
from .args import whole_number
from .governance import add_governance_commands

EXIT_TIMEOUT = 124
EXIT_BROKEN_PIPE = 141
MAX_LIMIT = 1000
MAX_SEARCH_LIMIT = 200  # search_tools' own cap on a page
SEARCH_HELP = """\
Find tools from a sentence: by its words and, with an embedding model (KIWI_EMBEDDINGS:
local, the default, openai or off), by meaning. The tools of the local spaces (.ai/tools,
~/.ai/tools) are listed among the registry's; a local tool with a registry tool's id shows
once, as the local tool (the one `kiwi run` runs).

modifiers, written in the query:
  type:T        a tool type, or tools running on runtime T (type:python)
  category:C    a category or subcategory
  mcp:SERVER    tools of an MCP server (mcp:* any MCP tool)
  namespace:N   tools of namespace N
  local:        only the local spaces' tools, the registry is not asked (local:project, local:user)

columns: tool_id, tool type, version, signature state (local: a local space's tool), how it
matched (id, words, meaning, words+meaning), description. When the answer is by words only,
stderr says why; --json rows carry matched_by, search_mode and source (registry, local:project,
local:user)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "admin", False):  # every Settings.load() of this process sees the choice
        os.environ["KIWI_ADMIN"] = "1"
    try:
        return asyncio.run(args.handler(args))
    except KiwiError as e:
        return fail(e, args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`kiwi search | head -1`): stop, quietly
        return EXIT_BROKEN_PIPE


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kiwi",
        description="Run, find and publish tools from the Kiwi registry.",
        epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--admin", action="store_true", help="act as service_role (admin), like KIWI_ADMIN=1; never a default"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    limit_help = f"at most N results (default 20, at most {MAX_LIMIT})"

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

    add_search_command(sub)

    show = sub.add_parser("show", help="a tool's manifest, executor chain and files")
    show.add_argument("tool", metavar="TOOL")
    show.add_argument("--version", metavar="V", help="show this version's files and plan")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=cmd_show)

    publish = sub.add_parser(
        "publish", help="publish a directory holding tool.yaml and its files, or a tool of a local space"
    )
    publish.add_argument(
        "directory",
        metavar="DIR|TOOL",
        help="a directory holding tool.yaml; else a tool id found in the project, then the user space",
    )
    publish.add_argument(
        "--sign", action="store_true", help="sign it with your key in the same transaction (see `kiwi keys`)"
    )
    publish.add_argument("--key", default="default", metavar="NAME", help="the signing key (default: default)")
    approval = publish.add_mutually_exclusive_group()
    approval.add_argument(
        "--request-approval",
        action="store_true",
        help="publish nothing: ask an admin to approve this exact content (for what only an admin may publish: "
        "runtimes, primitives, MCP servers, builtin or official tools, the public namespace); prints the id",
    )
    approval.add_argument(
        "--approval", metavar="ID", help="publish with this approval (approved by an admin, for exactly this content)"
    )
    publish.add_argument("--json", action="store_true", help="print the registry's answer as JSON")
    publish.set_defaults(handler=cmd_publish)

    pull = sub.add_parser("pull", help="write a registry tool into a local space, tool.yaml as it was published")
    pull.add_argument("tool", metavar="TOOL", help="tool id, namespace/tool or tool@version (default: the latest)")
    pull.add_argument(
        "--user", action="store_true", help="into the user space (~/.ai/tools) instead of the project's .ai/tools"
    )
    pull.add_argument("--force", action="store_true", help="replace a local copy that differs from the version")
    pull.add_argument("--json", action="store_true", help="print where it wrote as JSON")
    pull.set_defaults(handler=cmd_pull)

    runs = sub.add_parser("runs", help="your recent runs, newest first")
    runs.add_argument("--tool", metavar="TOOL", help="only runs of this tool")
    runs.add_argument("--limit", type=limit, default=20, metavar="N", help=limit_help.replace("results", "runs"))
    runs.add_argument("--json", action="store_true", help="print a JSON array")
    runs.set_defaults(handler=cmd_runs)

    from .embed import add_embed_command
    from .mcp import add_mcp_commands  # the MCP SDK itself loads only when used
    from .serve import add_serve_command
    from .token import add_token_command
    from .trust import add_trust_commands

    add_governance_commands(sub)
    add_serve_command(sub)
    add_token_command(sub)
    add_mcp_commands(sub)
    add_trust_commands(sub)
    add_embed_command(sub)
    return parser


def add_search_command(sub: Any) -> None:
    """Define `kiwi search` on the `kiwi` parser's subparsers."""
    search = sub.add_parser(
        "search",
        help="search the registry and the local spaces (modifiers: type:, category:, mcp:, namespace:, local:)",
        description=SEARCH_HELP.split("\n\n", 1)[0],
        epilog=SEARCH_HELP.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument("query", nargs="*", help="words and modifiers; no words lists by popularity")
    search.add_argument("--type", dest="tool_type", metavar="TYPE", help="only this tool type")
    search.add_argument("--category", metavar="C", help="only this category")
    search.add_argument(
        "--limit",
        type=search_limit,
        default=20,
        metavar="N",
        help=f"at most N results (default 20, at most {MAX_SEARCH_LIMIT})",
    )
    search.add_argument("--json", action="store_true", help="print a JSON array")
    search.set_defaults(handler=cmd_search)


def limit(text: str) -> int:
    """--limit N: a whole number from 1 to MAX_LIMIT (the registry's int, never negative)."""
    return whole_number(text, MAX_LIMIT)


def search_limit(text: str) -> int:
    """search's --limit: search_tools serves at most MAX_SEARCH_LIMIT rows a query."""
    return whole_number(text, MAX_SEARCH_LIMIT)


open_registry = opened  # the configured registry, closed after the command's calls


def fail(e: KiwiError, args: argparse.Namespace) -> int:
    if getattr(args, "json", False):
        if args.command == "run":  # the run contract: one result object, whatever went wrong
            named = ToolRef.parse(args.tool, args.version, strict=False)  # never refuses: it only reports
            failed = RunResult(tool_id=named.ref, version=named.version, status="error", error=str(e))
            print(json.dumps(run_json(failed), ensure_ascii=False, default=str))
        else:
            print(json.dumps({"error": e.as_dict()}, ensure_ascii=False))
    print(f"kiwi: {e}", file=sys.stderr)
    return e.exit_code


def progress(line: str) -> None:
    print(f"… {line}", file=sys.stderr, flush=True)


def parse_params(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    params: dict[str, Any] = {}
    if args.params:
        try:
            params = json.loads(args.params)
        except ValueError as e:
            raise UsageError(f"--params is not valid JSON: {e}", hint="""example: --params '{"name": "Ada"}'""") from e
        if not isinstance(params, dict):
            raise UsageError("--params must be a JSON object", hint="""example: --params '{"name": "Ada"}'""")
    raw: dict[str, str] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"-p expects KEY=VALUE, got {item!r}")
        raw[key] = value
    return params, raw


async def cmd_run(args: argparse.Namespace) -> int:
    tool, version = split_ref(args.tool, args.version)
    params, raw = parse_params(args)
    settings = Settings.load()
    dispatcher, session = standard_dispatcher(), f"cli-{uuid.uuid4()}"
    runner = Runner(connect(settings), settings, dispatcher=dispatcher, on_progress=progress, session=session)
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
    return {key: getattr(result, key) for key in RESULT_KEYS}


def print_run(result: RunResult, dry_run: bool) -> None:
    if result.output is not None:
        out = result.output
        print(out if isinstance(out, str) else json.dumps(out, indent=2, ensure_ascii=False, default=str))
    where = f"{result.tool_id}@{result.version}" if result.version else result.tool_id
    chain = " -> ".join(result.executor_chain)
    label = "dry run ok" if dry_run and result.ok else result.status
    print(f"{label}: {where} via {chain or '?'} in {result.duration_ms:.0f} ms", file=sys.stderr)
    if source := result.detail.get("source"):  # where a knowledge entry came from
        print("source: " + ", ".join(source.values()), file=sys.stderr)
    if result.error:
        print(f"kiwi: {result.error}", file=sys.stderr)


async def cmd_search(args: argparse.Namespace) -> int:
    from ..registry.spaces import spaces
    from ..search.combined import LOCAL_SIGNATURE, search, search_embedder
    from ..search.query import parse
    from ..trust.states import signature_labels  # cryptography only for commands that show signatures

    settings = Settings.load()
    query = parse(" ".join(args.query), tool_type=args.tool_type, category=args.category)
    embedder = search_embedder(settings) if query.text.strip() else None
    local = spaces(settings)
    if query.local_only:  # the registry is not asked
        found = await search(None, query, limit=args.limit, embedder=embedder, spaces=local)
        signed: dict[str, dict[str, Any]] = {}
    else:
        async with open_registry() as registry:
            found = await search(registry, query, limit=args.limit, embedder=embedder, spaces=local)
            published = [r for r in found.rows if r["source"] == "registry"]
            signed = await signature_labels(registry, published, settings.trust)
    rows = [  # the signature's state for people, not the raw signatures it was judged from
        {k: v for k, v in r.items() if k != "signatures"}
        | {"signature": signed[r["tool_id"]] if r["source"] == "registry" else LOCAL_SIGNATURE}
        for r in found.rows
    ]
    for warning in found.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if found.embedding_failed:
        print(f"warning: searching by words only: {found.embedding_failed}", file=sys.stderr)
    elif found.lexical_because and query.text.strip():
        print(f"note: matched by words only: {found.lexical_because}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print("no tools found", file=sys.stderr)
        return 0
    width = max(len(r["tool_id"]) for r in rows)
    matched = max((len(r.get("matched_by") or "") for r in rows), default=0)
    for r in rows:
        desc = first_line(r.get("description"))
        state = r["signature"]["state"]
        how = f"{r.get('matched_by') or '':<{matched}}  " if matched else ""
        print(
            f"{r['tool_id']:<{width}}  {r['tool_type'] or '-':<10} {r.get('latest_version') or '-':<8} {state:<9}  "
            f"{how}{desc[:80]}"
        )
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    tool, version = split_ref(args.tool, args.version)
    settings = Settings.load()
    runner = Runner(connect(settings), settings, dispatcher=standard_dispatcher())
    try:
        plan = await runner.registry.plan(tool, version)
        verdicts = {v.tool_id: v for v in await runner.verify(plan)}
    finally:
        await runner.aclose()
    manifest = plan.manifest or None  # the shown version's own
    # the shown version's chain as it runs (its plan's), never the latest version's
    chain = [{"depth": depth, **asdict(link)} for depth, link in enumerate(plan.chain)]
    files = [{k: getattr(f, k) for k in ("path", "size_bytes", "sha256", "is_entrypoint")} for f in plan.files]
    shown = {
        "tool_id": plan.tool_id,
        "version": plan.version,
        "tool_type": plan.tool_type,
        "content_hash": plan.content_hash,
        "manifest": manifest,
        "chain": [
            {**row, "signature": verdicts[row["tool_id"]].as_dict() if row["tool_id"] in verdicts else None}
            for row in chain
        ],
        "parameters": plan.parameters,
        "files": files,
        **{k: getattr(plan, k) for k in ("deprecated", "deprecation_message", "yanked", "yanked_reason")},
    }
    if args.json:
        print(json.dumps(shown, ensure_ascii=False, default=str))
        return 0
    m = manifest or {}
    print(f"{plan.tool_id}@{plan.version}  ({plan.tool_type})  {m.get('name', '')}")
    if m.get("description"):
        print(f"  {m['description'].strip()}")
    if plan.yanked:
        print(f"  yanked{': ' + plan.yanked_reason if plan.yanked_reason else ''} (runs only when pinned to it)")
    if plan.deprecated:
        print(f"  deprecated: {plan.deprecation_message or 'no reason given'}")
    print("\nchain:")
    for row in chain:
        verdict = verdicts.get(row["tool_id"])
        print(
            f"  {row['depth']}  {row['tool_id']:<20} {row['tool_type']:<10} {row['version']:<8} "
            f"{row['content_hash'][:12]}  {verdict.state if verdict else '-'}"
        )
    props = (plan.parameters or {}).get("properties") or {}
    required = set((plan.parameters or {}).get("required") or [])
    print("\nparameters:" + ("" if props else " none"))
    for name, prop in props.items():
        flag = "required" if name in required else f"default {json.dumps(prop['default'])}" if "default" in prop else ""
        print(f"  {name:<16} {prop.get('type', 'any'):<8} {flag:<16} {prop.get('description', '')}")
    print("\nfiles:" + ("" if files else " none"))
    for f in files:
        star = "*" if f["is_entrypoint"] else " "
        print(f" {star}{f['path']:<30} {f['size_bytes']:>8} B  sha256 {f['sha256'][:16]}")
    return 0


async def cmd_publish(args: argparse.Namespace) -> int:
    from ..core.tool_dir import ToolDirError, load_tool_dir
    from ..registry.spaces import find  # PyYAML only when publishing

    directory = Path(args.directory)
    if not directory.is_dir():
        local = find(args.directory, Settings.load())
        if local is None:
            raise UsageError(
                f"{args.directory}: not a directory, nor a tool of a local space",
                hint="give a directory holding tool.yaml, or the tool_id of a tool in .ai/tools or ~/.ai/tools",
            )
        directory = local.path
    try:
        tool_dir = load_tool_dir(directory)  # manifest_yaml: tool.yaml as written, kept by the registry
    except ToolDirError as e:
        raise UsageError(str(e), hint="a tool directory holds tool.yaml beside its files") from e
    if args.request_approval:
        if args.sign:
            raise UsageError(
                "nothing is signed when asking for an approval", hint="sign when you publish: --approval ID --sign"
            )
        return await request_publish_approval(args, tool_dir.manifest, tool_dir.files)
    signature = None
    if args.sign:
        from ..trust.keys import load
        from ..trust.signing import sign_publication

        key = load(Settings.load().keys_dir, args.key)
        signature = sign_publication(key, tool_dir.manifest, tool_dir.files)
    try:
        async with open_registry() as registry:
            answer = await registry.publish(
                tool_dir.manifest, tool_dir.files, tool_dir.manifest_yaml, signature, approval_id=args.approval
            )
            _, unembedded = await embed_published(registry, Settings.load())  # never fails the publish
    except Refused as e:
        if args.approval is None and "--request-approval" in (e.hint or ""):  # the command rule (publish.sql)
            e.hint = (
                f"an admin publishes it: kiwi --admin publish {args.directory}; or ask an admin to approve exactly "
                f"this content: kiwi publish {args.directory} --request-approval"
            )
        raise
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
    else:
        what = "unchanged" if answer.get("unchanged") else "published"
        print(
            f"{what}: {answer.get('tool_id', tool_dir.tool_id)}@{answer.get('version')} "
            f"content_hash {str(answer.get('content_hash', ''))[:16]}"
        )
        if answer.get("executor_chain"):
            print("chain: " + " -> ".join(answer["executor_chain"]))
        if answer.get("normalised"):  # old spellings of config keys the registry rewrote
            print("normalised: " + "; ".join(answer["normalised"]))
        if answer.get("signature"):
            print(f"signed with key {answer['signature']['key_fingerprint'][:16]}")
        if answer.get("dependents"):
            print(dependents_line(answer))
        if answer.get("approval_id"):
            print(f"with approval {answer['approval_id']} (now used)")
    if unembedded:
        print(f"warning: {unembedded}", file=sys.stderr)
    return 0


async def request_publish_approval(args: argparse.Namespace, manifest: dict[str, Any], files: list[Any]) -> int:
    """kiwi publish DIR --request-approval: a pending approval of publishing exactly this content
    (public.request_publish_approval). Nothing is published; exit 0 once the request is filed."""
    async with open_registry() as registry:
        approval = await registry.request_publish_approval(manifest, files, session=f"cli-{uuid.uuid4()}")
    if args.json:
        print(json.dumps(approval, ensure_ascii=False, default=str))
        return 0
    print(f"approval requested: {approval['id']}")
    print(f"  to publish {approval['tool_id']}@{approval.get('version')} content_hash {approval['content_hash'][:16]}")
    if approval.get("why"):
        print(f"  needed because {approval['why']}")
    print(f"an admin approves it (before {approval['expires_at']}): kiwi --admin approve {approval['id']}")
    print(f"then publish it, unchanged: kiwi publish {args.directory} --approval {approval['id']}")
    return 0


async def cmd_pull(args: argparse.Namespace) -> int:
    """kiwi pull TOOL[@V]: the version's tool.yaml (byte for byte as published) and files, into a space."""
    from ..registry.spaces import PROJECT, USER, pull

    tool, version = split_ref(args.tool, None)
    async with open_registry() as registry:
        pulled = await pull(registry, tool, version, Settings.load(), USER if args.user else PROJECT, force=args.force)
    if args.json:
        print(json.dumps(pulled.as_json(), ensure_ascii=False))
    else:
        what = "pulled" if pulled.changed else "unchanged"
        print(f"{what}: {pulled.ref}@{pulled.version} -> {pulled.path} ({pulled.space} space)")
    return 0


async def cmd_runs(args: argparse.Namespace) -> int:
    async with open_registry() as registry:
        rows = await registry.runs(tool_id=args.tool, limit=args.limit)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print("no runs yet", file=sys.stderr)
    tools = [f"{r['tool_id']}@{r.get('version') or '-'}" for r in rows]
    width = max(map(len, tools), default=0)
    for r, tool in zip(rows, tools, strict=True):
        ms = f"{r['duration_ms']:.0f} ms" if r.get("duration_ms") is not None else "-"
        error = _one_line(r.get("error_summary"))
        print(f"{str(r['started_at'])[:19]}  {r['status']:<8} {tool:<{width}} {ms:>8}{error}")
    return 0


def _one_line(error: str | None, limit: int = 100) -> str:
    """A run's error for a table row: its lines joined, cut loudly at `limit`."""
    if not error:
        return ""
    text = " ".join(part.strip() for part in error.splitlines() if part.strip())
    return "  " + (text if len(text) <= limit else text[: limit - 1] + "…")


if __name__ == "__main__":
    entrypoint()
