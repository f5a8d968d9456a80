"""`kiwi show`, `publish`, `pull` and `runs`: a tool's plan and files, publishing a directory or
a local space's tool, writing a registry tool into a space, your recent runs.

Their parsers are defined by `add_registry_commands`; what each command needs (the runner, the
registry's driver, PyYAML, search) is imported when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import Refused, UsageError
from .args import whole_number

MAX_LIMIT = 1000


def open_registry() -> Any:
    """The configured registry, closed after the command's calls (one connection: registry.connect one_shot)."""
    from ..registry import opened

    return opened(one_shot=True)


def add_registry_commands(sub: Any) -> None:
    """Define `kiwi show`, `publish`, `pull` and `runs` on the `kiwi` parser's subparsers."""
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
    runs.add_argument(
        "--limit", type=limit, default=20, metavar="N", help=f"at most N runs (default 20, at most {MAX_LIMIT})"
    )
    runs.add_argument(
        "--queued",
        action="store_true",
        help="queued runs instead (kiwi queue, MCP tasks, schedules), with their status",
    )
    runs.add_argument(
        "--status",
        metavar="STATUS",
        help="with --queued: open, queued, running, retrying, waiting_approval, success, error, timeout, "
        "cancelled, dead",
    )
    runs.add_argument("--json", action="store_true", help="print a JSON array")
    runs.set_defaults(handler=cmd_runs)


def limit(text: str) -> int:
    """--limit N: a whole number from 1 to MAX_LIMIT (the registry's int, never negative)."""
    return whole_number(text, MAX_LIMIT)


async def cmd_show(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..config import Settings
    from ..core.refs import split_ref
    from ..errors import NotFound
    from ..handlers import standard_dispatcher
    from ..harness.run import Runner
    from ..registry import connect
    from ..registry.suggest import suggest_for

    tool, version = split_ref(args.tool, args.version)
    settings = Settings.load()
    runner = Runner(connect(settings, one_shot=True), settings, dispatcher=standard_dispatcher())
    try:
        try:
            plan = await runner.registry.plan(tool, version)
        except NotFound as e:
            await suggest_for(runner.registry, tool, e)
            raise
        verdicts = {v.tool_id: v for v in await runner.verify(plan)}
        sandbox = runner.sandbox_profile(plan)
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
        "sandbox": sandbox,
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
    if sandbox is not None:
        print("\nsandbox: " + _sandbox_line(sandbox))
    return 0


def _sandbox_line(shown: dict[str, Any]) -> str:
    """The effective sandbox profile in one line, as `kiwi show` prints it."""
    if not shown.get("enabled"):
        return "off (the runner's KIWI_SANDBOX=off): processes run on the host"
    if "error" in shown:
        return f"cannot be set up here: {shown['error']}"
    network = shown["network"] if shown["network"] == "none" else ", ".join(shown["network"])
    fs = shown["fs"]
    paths = [*(f"{p} (read)" for p in fs["read"]), *(f"{p} (write)" for p in fs["write"])]
    limits = ", ".join(f"{k} {v:g}" for k, v in shown["limits"].items())
    line = f"network {network}; host paths {', '.join(paths) or 'none'}; limits {limits}"
    memory = (shown.get("limits_apply") or {}).get("memory_mb", "")
    return line if not memory or memory.startswith("the whole") else f"{line} (memory_mb: {memory})"


async def cmd_publish(args: argparse.Namespace) -> int:
    from ..config import Settings
    from ..core.text import dependents_line
    from ..mcp_server.meta.audit import manifest_tool_id
    from ..registry.storage import Storage, move_large_files
    from ..search import embed_published
    from .governance import audited
    from .publish_source import source_of  # PyYAML only when publishing

    tool_dir = source_of(args.directory)
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
        files = await move_large_files(tool_dir.files, Storage.configured(Settings.load()))
        async with open_registry() as registry:
            answer = await audited(
                registry,
                "publish",
                manifest_tool_id(tool_dir.manifest) or tool_dir.tool_id or str(args.directory),
                {"manifest": tool_dir.manifest, "files": tool_dir.files, "approval_id": args.approval},
                lambda: registry.publish(
                    tool_dir.manifest, files, tool_dir.as_written, signature, approval_id=args.approval
                ),
            )
            _, unembedded = await embed_published(registry, Settings.load())  # never fails the publish
    except Refused as e:
        if args.approval is None and "--request-approval" in (e.hint or ""):  # the command rule (publish.sql)
            e.hint = (
                f"an admin publishes it: kiwi --admin publish {args.directory}; or ask an admin to approve exactly "
                f"this content: kiwi publish {args.directory} --request-approval"
            )
        raise
    locked = tool_dir.manifest["config"]["requires"] if tool_dir.detected else None
    if args.json:
        print(
            json.dumps({**answer, **({"requires_detected": locked} if locked else {})}, ensure_ascii=False, default=str)
        )
    else:
        what = "unchanged" if answer.get("unchanged") else "published"
        print(
            f"{what}: {answer.get('tool_id', tool_dir.tool_id)}@{answer.get('version')} "
            f"content_hash {str(answer.get('content_hash', ''))[:16]}"
        )
        if answer.get("executor_chain"):
            print("chain: " + " -> ".join(answer["executor_chain"]))
        if locked:
            print(
                f"requires (found in its imports: {', '.join(tool_dir.detected)}; locked with uv): {', '.join(locked)}"
            )
        if tool_dir.shared:
            print("with the shared lib: " + ", ".join(tool_dir.shared))
        if "visibility" not in tool_dir.manifest and answer.get("namespace") not in (None, "public"):
            print(
                f"visibility: private (the default in namespace {answer['namespace']}: only its members see it;"
                " `visibility: public` in tool.yaml shares it)"
            )
        for row in files:
            if row.get("storage_key"):
                print(f"stored: {row['path']} ({row['size_bytes']} bytes) in Supabase Storage as {row['storage_key']}")
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
    import uuid

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
    from ..config import Settings
    from ..core.refs import split_ref
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
    if args.queued or args.status:
        from .fleet import cmd_queued_runs

        return await cmd_queued_runs(args)
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
        box = _sandbox_tag(r.get("sandbox"))
        print(f"{str(r['started_at'])[:19]}  {r['status']:<8} {tool:<{width}} {ms:>8}{box}{error}")
    return 0


def _sandbox_tag(shown: Any) -> str:
    """The sandbox a recorded run had, in a few words (none recorded: an HTTP tool, an MCP call)."""
    if not isinstance(shown, dict):
        return ""
    if not shown.get("enabled"):
        return "  [unsandboxed]"
    network = shown.get("network")
    return f"  [sandboxed, network {network if network == 'none' else ', '.join(network or [])}]"


def _one_line(error: str | None, limit: int = 100) -> str:
    """A run's error for a table row: its lines joined, cut loudly at `limit`."""
    if not error:
        return ""
    text = " ".join(part.strip() for part in error.splitlines() if part.strip())
    return "  " + (text if len(text) <= limit else text[: limit - 1] + "…")
