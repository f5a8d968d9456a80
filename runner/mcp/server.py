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

`execute(action="import", item_id=SERVER)` is `kiwi mcp import SERVER`: the mcp_server's
tools/list, published as one mcp_tool per tool. It goes through the runner's own MCP pool,
so the session it opens is the one the imported tools then run on. Only the registry row
named by item_id decides what is started; no argument of the request reaches the command.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import yaml
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, InvalidParameters, KiwiError, NotFound, PrimitiveError, Refused, UsageError
from ..plan import Plan
from ..policy import Call, Denied
from ..policy import permissions as access
from ..principal import requested
from ..records import params_digest
from ..registry.base import Registry
from ..run import Runner, RunResult
from ..text import dependents_line, first_line
from ..trust.states import UNSIGNED, signature_labels, verdict_label
from . import approvals
from .auth import acting_as_caller
from .handler import mcp_handler_of
from .importer import ImportReport, import_server

__all__ = ["ACTIONS", "ITEM_TYPES", "Deleter", "build_server", "default_deleter", "guarded_run", "item_type_of"]

logger = logging.getLogger("kiwi.mcp.server")

ITEM_TYPES = ("directive", "tool", "knowledge")
ACTIONS = (
    "run",
    "dry_run",
    "create",
    "update",
    "publish",
    "yank",
    "delete",
    "import",
    "approve",
    "deny",
    "open_context",
)
HELP_TOPICS = ("overview", "item_types", "search", "load", "execute", "errors", "examples")
MAX_LIMIT = 200  # what search_tools serves at most
FETCH_FOR_FILTER = 4  # item_type "tool" is filtered here: ask the registry for this many times the limit

Deleter = Callable[[str], Awaitable[dict[str, Any]]]
"""Removes a tool and all its versions: `public.delete_tool(p_tool_id)`; returns its answer."""


def item_type_of(tool_type: str | None) -> str:
    """The MCP item type of a registry tool type."""
    return tool_type if tool_type in ("directive", "knowledge") else "tool"


def default_deleter(registry: Registry) -> Deleter:
    """`public.delete_tool` through the registry, so the database's errors become KiwiErrors."""
    return registry.delete_tool


class FileInput(BaseModel):
    """One file of a tool being published."""

    model_config = ConfigDict(extra="forbid")

    path: Annotated[str, Field(description="Relative path inside the tool, e.g. 'main.py' (no '..', no leading '/').")]
    content_text: Annotated[str, Field(description="The file's full text (UTF-8).")]
    is_entrypoint: Annotated[
        bool, Field(description="True for the file the runtime invokes (one per tool); match manifest 'entrypoint'.")
    ] = False
    media_type: Annotated[str | None, Field(description="Optional media type, e.g. 'text/x-python'.")] = None


# --- results -------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _ok(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=_jsonable(structured))


def _fail(
    message: str, hint: str | None, *, kind: str = "error", extra: dict[str, Any] | None = None
) -> CallToolResult:
    text = f"error: {message}" + (f"\nhint: {hint}" if hint else "")
    structured = {"error": {"kind": kind, "message": message, "hint": hint}, **(extra or {})}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=_jsonable(structured), is_error=True
    )


def _error_result(e: KiwiError) -> CallToolResult:
    hint = e.hint or _default_hint(e)
    return _fail(e.message, hint, kind=e.kind)


def _default_hint(e: KiwiError) -> str:
    if isinstance(e, NotFound):
        return "find the right id with search(query=...); ids are tool_id or namespace/tool_id"
    if isinstance(e, UsageError):
        return "see help(topic='execute') for the arguments each action takes"
    if isinstance(e, Refused):
        return "the registry refused the change; read the message, fix the cause, and try again"
    return "see help(topic='errors')"


async def _guarded(what: str, call: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """Every failure as a tool error: KiwiErrors with their hint, anything else as an internal error.
    Over HTTP the call acts as the request's verified caller (runner/mcp/auth.py)."""
    try:
        with acting_as_caller():
            return await call()
    except KiwiError as e:
        return _error_result(e)
    except Exception as e:
        logger.exception("kiwi MCP %s failed unexpectedly", what)
        return _fail(
            f"{what} failed unexpectedly: {type(e).__name__}: {e}",
            "this is a bug in Kiwi's MCP server, not in your request; the server keeps answering, "
            "so another call (or the kiwi CLI) may work",
            kind="internal",
        )


# --- argument checks -----------------------------------------------------------------------


def _check_item_type(item_type: str | None) -> str | None:
    if item_type is None or item_type == "":
        return None
    if item_type not in ITEM_TYPES:
        raise UsageError(
            f"unknown item_type {item_type!r}",
            hint="item_type is one of directive, tool, knowledge (or leave it out for all)",
        )
    return item_type


def _split_ref(item_id: str | None, version: str | None) -> tuple[str, str | None]:
    """`tool@1.2.0` is the same as item_id=tool, version=1.2.0."""
    ref = (item_id or "").strip()
    if "@" in ref:
        ref, _, at = ref.rpartition("@")
        if version and version != at:
            raise UsageError(f"two versions given: @{at} and version={version}", hint="give the version once")
        version = at
    if not ref:
        raise UsageError("no item_id given", hint="name an item, e.g. item_id='hello_world'; find ids with search")
    return ref, version or None


def _same_tool(ref: str, manifest_id: str) -> bool:
    return ref == manifest_id or ref.rsplit("/", 1)[-1] == manifest_id.rsplit("/", 1)[-1]


# --- text renderings -----------------------------------------------------------------------


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _run_text(result: RunResult, dry_run: bool) -> str:
    where = f"{result.tool_id}@{result.version}" if result.version else result.tool_id
    chain = " -> ".join(result.executor_chain)
    label = ("dry run ok" if result.ok else "dry run failed") if dry_run else result.status
    via = f" via {chain}" if result.executor_chain else ""
    lines = [f"{label}: {where}{via} in {result.duration_ms:.0f} ms"]
    if result.output is not None and not dry_run:
        lines += ["", _dump(result.output)]
    if dry_run and isinstance(result.output, dict) and "validation" in result.output:
        lines += ["", _dump({k: result.output[k] for k in ("handler", "parameters", "files", "validation")})]
    lines += [f"warning: {w}" for w in result.warnings]
    if result.failure is not None:
        lines += ["", f"error: {result.failure.message}"]
    elif result.error:
        lines += ["", f"error: {result.error}"]
    return "\n".join(lines)


# --- the server ----------------------------------------------------------------------------

INSTRUCTIONS = """\
Kiwi is a registry of versioned tools, directives and knowledge. Use `search` to find an
item, `load` to read it (parameters, files, executor chain), and `execute` to run it
(action=run, or dry_run to validate first) or to create/update/publish/delete items.
Call `help` for the full guide."""


def build_server(
    runner: Runner,
    registry: Registry | None = None,
    *,
    delete: Deleter | None = None,
    run_timeout_s: float | None = 900.0,
    name: str = "kiwi",
    session_id: str | None = None,
    allow_command_writes: bool = False,
) -> MCPServer:
    """Kiwi's MCP server over `runner` (and `registry`, by default the runner's).

    Writes that choose a command for others (publishing or deleting a runtime, primitive or
    mcp_server, a builtin or official tool, anything in `public`) are off over MCP unless
    `allow_command_writes`; even then the database lets only an admin make them.

    `delete` removes a tool (default: `public.delete_tool` through the registry's connection).
    `run_timeout_s` bounds one `execute` run as a last resort (tools have their own timeouts;
    on expiry the run is cancelled, which kills its process group). The caller owns the runner
    and closes it after serving.

    Every run and dry_run is checked against the registry's rate limits first
    (`public.take_rate_limit`: per tool, per MCP server, per session; shared by every Kiwi
    process) and audited afterwards (`public.record_audit`), allowed or refused; every other
    execute action is audited too (`audited_action`). `session_id` names this server's session
    in both; by default a new one per server instance.
    """
    reg: Registry = registry if registry is not None else runner.registry
    server_session = session_id or f"mcp-{uuid.uuid4()}"
    deleter = delete if delete is not None else default_deleter(reg)
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")

    # --- search ------------------------------------------------------------------------

    async def search(
        query: Annotated[
            str,
            Field(
                description=(
                    "Words to look for in ids, names, descriptions and tags (typos are tolerated). "
                    "Modifiers: type:T (a tool type, or tools on runtime T, e.g. type:python), category:C, "
                    "mcp:SERVER (tools of an MCP server), namespace:N. Empty: everything, most used first."
                )
            ),
        ] = "",
        item_type: Annotated[
            str | None,
            Field(
                description="Only this kind of item: directive, tool or knowledge. Leave out for all.",
                json_schema_extra={"enum": [*ITEM_TYPES, None]},
            ),
        ] = None,
        limit: Annotated[int, Field(description="At most this many results.", ge=1, le=MAX_LIMIT)] = 20,
    ) -> CallToolResult:
        """Search the Kiwi registry for directives, tools and knowledge. Returns ranked items with
        their item_id, item_type, tool_type, latest version and description. Next: load(item_id)."""

        async def call() -> CallToolResult:
            kind = _check_item_type(item_type)
            if kind == "tool":
                fetch = min(MAX_LIMIT, limit * FETCH_FOR_FILTER)
                rows = await reg.search(query, limit=fetch)
            else:
                rows = await reg.search(query, tool_type=kind, limit=limit)
            if kind is not None:  # a type: modifier in the query wins in SQL; item_type still holds
                rows = [r for r in rows if item_type_of(r.get("tool_type")) == kind]
            rows = rows[:limit]
            signed = await signature_labels(reg, rows, runner.settings.trust)
            items = [
                {
                    "item_id": r["tool_id"],
                    "item_type": item_type_of(r.get("tool_type")),
                    "tool_type": r.get("tool_type"),
                    "name": r.get("name"),
                    "description": r.get("description"),
                    "latest_version": r.get("latest_version"),
                    "executor_id": r.get("executor_id"),
                    "category": r.get("category"),
                    "namespace": r.get("namespace"),
                    "rank": r.get("rank"),
                    "signature": signed[r["tool_id"]],
                }
                for r in rows
            ]
            if not items:
                text = f"no items found for {query!r}" + (f" (item_type {kind})" if kind else "")
                text += "\nhint: try fewer or other words, drop a modifier, or search with an empty query"
            else:
                width = max(len(i["item_id"]) for i in items)
                lines = [
                    f"{i['item_id']:<{width}}  {i['tool_type']:<10} {i['latest_version'] or '-':<8} "
                    f"{i['signature']['state']:<9}  {first_line(i['description'])[:100]}"
                    for i in items
                ]
                text = f"{len(items)} item(s):\n" + "\n".join(lines) + "\n\nnext: load(item_id=...) to see one"
            return _ok(text, {"query": query, "item_type": kind, "count": len(items), "items": items})

        return await _guarded("search", call)

    # --- load --------------------------------------------------------------------------

    async def load(
        item_id: Annotated[
            str, Field(description="The item's id: tool_id, namespace/tool_id, or id@version (e.g. 'hello_world').")
        ],
        item_type: Annotated[
            str | None,
            Field(
                description="What you expect it to be (directive, tool or knowledge); a mismatch is an error.",
                json_schema_extra={"enum": [*ITEM_TYPES, None]},
            ),
        ] = None,
        version: Annotated[str | None, Field(description="A semver version; default the latest.")] = None,
        include_content: Annotated[
            bool | None,
            Field(
                description=(
                    "Include each file's text. Default: yes for directives and knowledge (their text is "
                    "the point), no for tools (files are listed with sha256 and size)."
                )
            ),
        ] = None,
    ) -> CallToolResult:
        """Load one item: its manifest, executor chain (the item down to its primitive), the JSON Schema
        of its parameters, and its files. Directives and knowledge come with their text."""

        async def call() -> CallToolResult:
            kind = _check_item_type(item_type)
            ref, ver = _split_ref(item_id, version)
            chain, plan = await asyncio.gather(reg.chain(ref), reg.execution_plan(ref, ver))
            actual = item_type_of(plan.get("tool_type"))
            if kind is not None and kind != actual:
                raise UsageError(
                    f"{plan['tool_id']} is a {plan.get('tool_type')} (item_type {actual}), not a {kind}",
                    hint=f"load it with item_type='{actual}' or without item_type",
                )
            verdicts = await runner.verify(Plan.from_json(plan))
            top = chain[0] if chain else None
            manifest = top["manifest"] if top and top.get("version") == plan.get("version") else None
            with_text = include_content if include_content is not None else actual != "tool"
            files = []
            for f in plan.get("files") or []:
                entry = {k: f.get(k) for k in ("path", "size_bytes", "sha256", "is_entrypoint", "media_type")}
                if with_text:
                    entry["content_text"] = f.get("content_text")
                files.append(entry)
            loaded = {
                "item_id": plan["tool_id"],
                "item_type": actual,
                "tool_type": plan.get("tool_type"),
                "version": plan.get("version"),
                "content_hash": plan.get("content_hash"),
                "manifest": manifest,
                "signature": verdict_label(verdicts[0]) if verdicts else UNSIGNED,
                "executor_chain": [
                    {
                        **{k: row.get(k) for k in ("depth", "tool_id", "tool_type", "version", "content_hash")},
                        "signature": verdict_label(v) if v is not None else UNSIGNED,
                    }
                    for row, v in zip(chain, _align(verdicts, chain), strict=True)
                ],
                "primitive": plan.get("primitive"),
                "parameters": plan.get("parameters") or {"type": "object", "properties": {}},
                "outputs": plan.get("outputs"),
                "files": files,
            }
            return _ok(_load_text(loaded), loaded)

        return await _guarded("load", call)

    # --- execute -------------------------------------------------------------------------

    async def execute(
        action: Annotated[
            str,
            Field(
                description=(
                    "run: run the item with `parameters`. dry_run: resolve, check parameters and validate "
                    "without running. create: publish a NEW item from `manifest` and `files` (refused if it "
                    "exists). update: publish a new version of an EXISTING item. publish: publish as given. "
                    "yank: withdraw item_id=id@version (never latest again). delete: remove the item and "
                    "all its versions (needs confirm=true). import: item_id names "
                    "an mcp_server; publish one mcp_tool per tool it lists (<server>.<tool>)."
                ),
                json_schema_extra={"enum": list(ACTIONS)},
            ),
        ],
        item_id: Annotated[
            str | None,
            Field(
                description=(
                    "The item: tool_id, namespace/tool_id or id@version. For create/update/publish it may be "
                    "left out (the manifest's tool_id is used); if given, it must match the manifest. For "
                    "import: the mcp_server's id (its latest version)."
                )
            ),
        ] = None,
        parameters: Annotated[
            dict[str, Any] | None,
            Field(description="run/dry_run: the item's inputs as one object, per its parameters schema (see load)."),
        ] = None,
        version: Annotated[str | None, Field(description="run/dry_run: this version instead of the latest.")] = None,
        manifest: Annotated[
            dict[str, Any] | str | None,
            Field(
                description=(
                    "create/update/publish: the manifest as an object or as tool.yaml text. Keys: tool_id, "
                    "tool_type, executor, version (semver, new for each publish), description, name, "
                    "category, tags, entrypoint, config, parameters ([{name, type, required, description, "
                    "default, enum}] or a JSON Schema), outputs. See help(topic='execute')."
                )
            ),
        ] = None,
        files: Annotated[
            list[FileInput] | None,
            Field(description="create/update/publish: the item's files; the database computes sha256 and size."),
        ] = None,
        confirm: Annotated[
            bool,
            Field(description="delete: must be true to delete; without it you get what would be deleted."),
        ] = False,
        approval_id: Annotated[
            str | None,
            Field(
                description=(
                    "run: the id of an approved approval (a run that needs approval answers with one); the same "
                    "parameters then run once. approve/deny: the approval to decide (or give it as item_id)."
                )
            ),
        ] = None,
        context: Annotated[
            str | None,
            Field(
                description=(
                    "The execution context the call is made in (an id from running a directive or from "
                    "action=open_context): run/dry_run are checked against its permissions; for open_context, "
                    "the parent of the new context."
                )
            ),
        ] = None,
        permissions: Annotated[
            dict[str, Any] | None,
            Field(description="open_context: narrow the permissions {fs_read, fs_write, shell, mcp, tools}."),
        ] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Act on an item: run or dry_run it, create/update/publish it, delete it, or import the
        tools of an MCP server (action=import, item_id=the mcp_server). Results are structured (a run
        gives {tool_id, version, status, output, error, exit_code, duration_ms, executor_chain});
        failures are tool errors with a hint."""

        session = _session_of(ctx, server_session)

        async def call() -> CallToolResult:
            if action not in ACTIONS:
                raise UsageError(f"unknown action {action!r}", hint="action is one of " + ", ".join(ACTIONS))
            if action in ("run", "dry_run"):
                return await _run(action == "dry_run")
            inputs = {
                "item_id": item_id,
                "version": version,
                "parameters": parameters,
                "manifest": manifest,
                "files": [f.model_dump() for f in files or []],
                "confirm": confirm,
                "approval_id": approval_id,
                "context": context,
                "permissions": permissions,
            }
            subject = item_id or approval_id or _manifest_tool_id(manifest)
            if action == "open_context" and not subject:  # no directive: the parent context, or a new one
                subject = f"context:{context}" if context else "context:new"
            return await audited_action(reg, session=session, action=action, subject=subject, inputs=inputs, work=_act)

        async def _act() -> CallToolResult:
            if action == "delete":
                return await _delete()
            if action == "yank":
                return await _yank()
            if action == "import":
                return await _import()
            if action == "open_context":
                ref, ver = _split_ref(item_id, version) if item_id else (None, None)
                opened = await reg.open_context(session, f"{ref}@{ver}" if ver else ref, context, permissions)
                return _ok(access.summary(opened), {"action": "open_context", "context": opened})
            if action in ("approve", "deny"):
                reason = (parameters or {}).get("reason")
                return await approvals.decide(
                    reg, approval_id=approval_id or item_id, approve=action == "approve", reason=reason, session=session
                )
            return await _publish()

        async def _run(dry_run: bool) -> CallToolResult:
            ref, ver = _split_ref(item_id, version)
            return await guarded_run(
                runner,
                reg,
                session=session,
                ref=ref,
                ver=ver,
                params=parameters or {},
                context=context,
                approval_id=approval_id,
                dry_run=dry_run,
                run_timeout_s=run_timeout_s,
            )

        async def _publish() -> CallToolResult:
            if manifest is None or manifest == "":
                raise UsageError(
                    f"{action} needs a manifest",
                    hint="give manifest={tool_id, tool_type, executor, version, ...} and files=[...]; "
                    "see help(topic='execute')",
                )
            doc, manifest_yaml = _manifest(manifest)
            if item_id:
                ref, _ = _split_ref(item_id, None)
                if "tool_id" not in doc:
                    doc["tool_id"] = ref.rsplit("/", 1)[-1]
                elif not _same_tool(ref, str(doc["tool_id"])):
                    raise UsageError(
                        f"item_id {ref!r} does not match the manifest's tool_id {doc['tool_id']!r}",
                        hint="give one id: leave item_id out, or make it the manifest's tool_id",
                    )
            if not doc.get("tool_id"):
                raise UsageError("the manifest has no tool_id", hint="add tool_id (lowercase, e.g. 'csv_to_json')")
            ref = str(doc["tool_id"])
            if doc.get("namespace") and "/" not in ref:
                ref = f"{doc['namespace']}/{ref}"
            if action in ("create", "update"):
                exists = await _exists(ref)
                if action == "create" and exists:
                    raise Refused(
                        f"{ref} already exists",
                        hint="use action='update' with a new version to change it, or choose another tool_id",
                    )
                if action == "update" and not exists:
                    raise NotFound(f"{ref} does not exist", hint="use action='create' to publish a new item")
            if not allow_command_writes and _acts_as_admin(reg):
                _refuse_command_write(action, ref, doc)
            rows = [f.model_dump(exclude_none=True) for f in files or []]
            answer = await reg.publish(doc, rows, manifest_yaml)
            what = "unchanged (identical content already published)" if answer.get("unchanged") else "published"
            text = (
                f"{what}: {answer.get('tool_id', ref)}@{answer.get('version')} "
                f"content_hash {str(answer.get('content_hash', ''))[:16]}"
            )
            if answer.get("executor_chain"):
                text += "\nchain: " + " -> ".join(map(str, answer["executor_chain"]))
            if answer.get("dependents"):
                text += "\n" + dependents_line(answer)
            text += f"\nnext: execute(action='dry_run', item_id='{answer.get('tool_id', ref)}') to check it"
            return _ok(text, {"action": action, **answer})

        async def _delete() -> CallToolResult:
            ref, _ = _split_ref(item_id, None)
            chain = await reg.chain(ref)
            top = chain[0]
            if not allow_command_writes and _acts_as_admin(reg):
                _refuse_command_write("delete", top["tool_id"], {**(top.get("manifest") or {}), **top})
            target = {
                "item_id": top["tool_id"],
                "tool_type": top.get("tool_type"),
                "latest_version": top.get("version"),
            }
            if not confirm:
                text = (
                    f"nothing deleted yet: this would remove {top['tool_id']} ({top.get('tool_type')}, latest "
                    f"{top.get('version')}) with ALL its versions and files; it cannot be undone.\n"
                    f"To delete it, call execute(action='delete', item_id='{ref}', confirm=true)."
                )
                return _ok(
                    text, {"action": "delete", "deleted": False, "confirm_required": True, "would_delete": target}
                )
            answer = await deleter(ref)
            versions = answer.get("versions") if isinstance(answer, dict) else None
            text = f"deleted: {top['tool_id']}" + (f" ({versions} version(s))" if versions is not None else "")
            return _ok(text, {"action": "delete", "deleted": True, **(answer if isinstance(answer, dict) else {})})

        async def _yank() -> CallToolResult:
            ref, ver = _split_ref(item_id, version)
            if ver is None:
                raise UsageError("yank needs a version", hint=f"give item_id='{ref}@1.0.0' (load it to see versions)")
            reason = (parameters or {}).get("reason")
            if reason is not None and not isinstance(reason, str):
                raise UsageError("reason must be a string", hint="parameters={'reason': 'why'}")
            if not allow_command_writes and _acts_as_admin(reg):
                top = (await reg.chain(ref))[0]
                _refuse_command_write("yank", top["tool_id"], {**(top.get("manifest") or {}), **top})
            answer = await reg.yank(ref, ver, reason)
            text = f"yanked: {answer['tool_id']}@{answer['version']}; latest is now {answer.get('latest_version')}"
            return _ok(text, {"action": "yank", **answer})

        async def _import() -> CallToolResult:
            ref, ver = _split_ref(item_id, None)
            if ver is not None:
                raise UsageError(
                    f"import takes the server's latest version, not @{ver}",
                    hint=f"give item_id='{ref}'; publish the server version you want as the latest first",
                )
            if manifest or files or parameters:
                raise UsageError(
                    "import takes only item_id",
                    hint="what is started comes from the mcp_server's registry row alone; change the server with "
                    "action='update', then import it",
                )
            try:
                top = (await reg.chain(ref))[0]
            except NotFound as e:
                raise NotFound(
                    e.message, hint="find MCP servers with search(query='type:mcp_server'), then import one by its id"
                ) from e
            if top.get("tool_type") != "mcp_server":
                raise Refused(
                    f"{top['tool_id']} is a {top.get('tool_type')}, not an mcp_server; only MCP servers are imported",
                    hint="find one with search(query='type:mcp_server'), or publish one (tool_type mcp_server, "
                    "executor subprocess, config {transport, command, args} or {transport, url})",
                )
            pool = mcp_handler_of(runner.dispatcher).pool
            work = import_server(reg, pool, ref, runner.environ)
            try:
                report = await asyncio.wait_for(work, timeout=run_timeout_s)
            except TimeoutError:
                return _fail(
                    f"importing {ref} did not finish within the server's limit of {run_timeout_s:g} s",
                    "check that the server starts and answers tools/list (kiwi mcp import shows its errors)",
                    kind="timeout",
                )
            except (PrimitiveError, ConfigError) as e:  # the server did not start, or cannot be reached
                own = e.hint.rstrip(".") + "; " if isinstance(e, ConfigError) and e.hint else ""
                return _fail(
                    e.message,
                    own + f"the server's command, url and environment are in load(item_id='{ref}'); fix them with "
                    "action='update', then import again",
                    kind=e.kind,
                )
            structured: dict[str, Any] = {"action": "import", **report.as_json()}
            text = _import_text(report)
            if report.ok:
                return _ok(text, structured)
            hint = "each failed tool names its error; fix the cause and import again (published tools stay)"
            structured["error"] = {"kind": "refused", "message": "some tools could not be published", "hint": hint}
            return CallToolResult(
                content=[TextContent(type="text", text=f"error: {text}\nhint: {hint}")],
                structured_content=_jsonable(structured),
                is_error=True,
            )

        async def _exists(ref: str) -> bool:
            try:
                await reg.chain(ref)
            except NotFound:
                return False
            return True

        return await _guarded("execute", call)

    # --- help ------------------------------------------------------------------------------

    async def help(
        topic: Annotated[
            str | None,
            Field(
                description="One section: " + ", ".join(HELP_TOPICS) + ". Leave out for the whole guide.",
                json_schema_extra={"enum": [*HELP_TOPICS, None]},
            ),
        ] = None,
    ) -> CallToolResult:
        """Explain Kiwi's MCP surface: item types, the four tools, actions, query modifiers,
        parameters, errors and hints, with examples. Call it first if unsure."""

        async def call() -> CallToolResult:
            if topic in (None, "", "all"):
                text = "\n\n".join(HELP[t] for t in HELP_TOPICS)
            elif topic in HELP:
                text = HELP[topic]
            else:
                raise UsageError(f"unknown help topic {topic!r}", hint="topics: " + ", ".join(HELP_TOPICS))
            return _ok(text, {"topic": topic or "all", "topics": list(HELP_TOPICS), "text": text})

        return await _guarded("help", call)

    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
    for fn, title, hints in (
        (search, "Search the Kiwi registry", read_only),
        (load, "Load an item", read_only),
        (execute, "Run, validate, publish, delete or import items", writes),
        (help, "How to use Kiwi", read_only),
    ):
        doc = inspect.cleandoc(fn.__doc__ or "")
        server.add_tool(fn, name=fn.__name__, title=title, description=doc, annotations=hints)
    return server


async def guarded_run(
    runner: Runner,
    reg: Registry,
    *,
    session: str,
    ref: str,
    ver: str | None,
    params: dict[str, Any],
    context: str | None = None,
    approval_id: str | None = None,
    dry_run: bool = False,
    run_timeout_s: float | None = 900.0,
) -> CallToolResult:
    """One tool call as `execute run`/`dry_run` makes it, rendered for MCP: the Runner's gate
    (runner/policy) decides permissions, rate limits and approvals and audits the call; a
    refusal is a tool error of its kind. Kiwi's MCP server and threads (runner/thread.py)
    share it. `reg` is kept for the callers' sake: the runner's registry is the one used."""
    del reg
    call = Call(session, context=context, approval_id=approval_id)
    # the lockfile's version, if it pins one; an explicit version always wins
    work = runner.run(ref, params, version=ver or runner.locked_version(ref), dry_run=dry_run, call=call)
    try:
        result = await asyncio.wait_for(work, timeout=run_timeout_s)
    except TimeoutError:
        return _fail(
            f"{ref} did not finish within the server's limit of {run_timeout_s:g} s; it was stopped",
            "the tool's own timeout_s should end it sooner; raise it in the tool's config, or run it with the kiwi CLI",
            kind="timeout",
            extra={"result": {"tool_id": ref, "version": ver, "status": "timeout"}},
        )
    if isinstance(result.failure, Denied):
        return _fail(result.failure.message, result.failure.hint, kind=result.failure.kind, extra=result.failure.extra)
    structured: dict[str, Any] = result.as_json()
    child = result.context
    if child is not None:  # the directive's context: pass it to the calls made following it
        structured["context"] = child
    if dry_run:
        out = result.output if isinstance(result.output, dict) else {}
        validation = out.get("validation") or {"passed": result.ok, "warnings": result.warnings}
        if not result.ok:
            validation = {"passed": False, "problem": result.error}
        structured = {**structured, "dry_run": True, "validation": validation}
    text = _run_text(result, dry_run)
    if child is not None:
        text += f"\ncontext: {child['id']}; pass context='{child['id']}' to every call made following it"
    if result.ok:
        return _ok(text, structured)
    hint = _run_hint(result, ref)
    text += f"\nhint: {hint}"
    structured["hint"] = hint
    if result.failure is not None:
        structured["failure"] = {**result.failure.as_dict(), "hint": hint}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=_jsonable(structured), is_error=True
    )


async def _audit(reg: Registry, entry: dict[str, Any]) -> None:
    """Write the audit row; a failure to write it is logged, never a failed call."""
    try:
        await reg.record_audit({k: v for k, v in entry.items() if v is not None})
    except KiwiError as e:
        logger.warning("could not audit the call of %s: %s", entry.get("tool_id"), e.message)


_REFUSALS = frozenset({"usage", "invalid_parameters", "not_found", "refused", "integrity", "permission_denied"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


async def audited_action(
    reg: Registry,
    *,
    session: str,
    action: str,
    subject: str | None,
    inputs: dict[str, Any],
    work: Callable[[], Awaitable[CallToolResult]],
) -> CallToolResult:
    """`work` (an execute action other than run/dry_run), with one audit row for how it went.

    Refused (a usage error, not found, refused by the registry, no permission): decision
    refused with the reason. Failed after it started (an import that timed out or published
    only some tools, an unexpected error): allowed, outcome error. Otherwise allowed, outcome
    success, naming what it touched (the published version and its content_hash, the
    approval's tool, the context's directive). A delete without confirm is a preview: allowed,
    no outcome, reason "preview". The inputs are stored only as their sha256 and size; the
    result is returned (or the error raised) unchanged, and a failure to audit is only logged."""
    started = time.perf_counter()
    entry: dict[str, Any] = {"session_id": session, "action": action}
    entry["params_sha256"], entry["params_size"] = params_digest(inputs)
    fallback = subject or f"{action}:unknown"
    try:
        result = await work()
    except KiwiError as e:
        refused = e.kind in _REFUSALS
        await _audit(reg, {**entry, **_subject(fallback), **_verdict(refused, e.message), "duration_ms": _ms(started)})
        raise
    except Exception as e:
        reason = f"failed unexpectedly: {type(e).__name__}"
        await _audit(reg, {**entry, **_subject(fallback), **_verdict(False, reason), "duration_ms": _ms(started)})
        raise
    data = result.structured_content if isinstance(result.structured_content, dict) else {}
    if result.is_error:
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        refused = action != "import" and error.get("kind") in _REFUSALS
        verdict = _verdict(refused, str(error.get("message") or "failed"))
    elif action == "delete" and not data.get("deleted"):
        verdict = {"decision": "allowed", "reason": "preview: nothing deleted (confirm=true was not given)"}
    else:
        verdict = {"decision": "allowed", "outcome": "success"}
    await _audit(reg, {**entry, **_subject(fallback, data), **verdict, "duration_ms": _ms(started)})
    return result


def _verdict(refused: bool, reason: str) -> dict[str, Any]:
    if refused:
        return {"decision": "refused", "reason": reason[:2000]}
    return {"decision": "allowed", "outcome": "error", "reason": reason[:2000]}


def _subject(fallback: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """tool_id, version and content_hash of what an action touched, from its result when it has them."""
    data = data or {}
    found: dict[str, Any] = {}
    for key in ("approval", "would_delete", "context"):
        if isinstance(data.get(key), dict):
            found = data[key]
    tool = found.get("tool_id") or found.get("item_id") or found.get("directive") or data.get("tool_id")
    tool = tool or data.get("server") or (f"context:{found['id']}" if found.get("id") and "context" in data else None)
    tool = tool or fallback
    version = found.get("version") or found.get("latest_version") or data.get("version")
    if version is None and "@" in str(tool):  # a directive as ref@version
        tool, version = str(tool).rsplit("@", 1)
    content_hash = found.get("content_hash") or data.get("content_hash")
    tool = "".join(ch for ch in str(tool) if ch.isprintable())[:300] or fallback[:300]
    return {
        "tool_id": tool,
        "version": str(version)[:128] if version is not None else None,
        "content_hash": content_hash if isinstance(content_hash, str) and _SHA256.fullmatch(content_hash) else None,
    }


def _manifest_tool_id(manifest: dict[str, Any] | str | None) -> str | None:
    """The manifest's tool_id, when it is easy to see (for auditing a publish that fails early)."""
    if isinstance(manifest, dict) and manifest.get("tool_id"):
        tool_id, namespace = str(manifest["tool_id"]), manifest.get("namespace")
        in_namespace = namespace and namespace != "public" and "/" not in tool_id
        return f"{namespace}/{tool_id}" if in_namespace else tool_id
    if isinstance(manifest, str):
        found = re.search(r"^tool_id:\s*['\"]?([^\s'\"#]+)", manifest, re.MULTILINE)
        return found.group(1) if found else None
    return None


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


COMMAND_TYPES = ("runtime", "primitive", "mcp_server")


def _session_of(ctx: Context | None, server_session: str) -> str:
    """The session a call is audited and rate-limited in: each client connection's own over
    streamable HTTP (where many callers share one server), else the server's (stdio: one client)."""
    try:
        transport = ctx.request_context.session_id if ctx is not None else None
    except (AttributeError, ValueError, LookupError):  # outside a request (in-memory tests call it directly)
        transport = None
    return f"{server_session}/{transport}"[:200] if transport else server_session


def _acts_as_admin(reg: Registry) -> bool:
    """Whether this request acts as an admin (only then could the database allow a write that
    chooses a command; for anyone else it refuses them itself, after validating the manifest)."""
    own = getattr(reg, "principal", None)
    who = requested() or own
    return bool(who is not None and who.is_admin)


def _refuse_command_write(action: str, ref: str, doc: dict[str, Any]) -> None:
    """Refuse, over MCP, a write that would choose what command other tools run (a prompt
    injection's favourite): runtimes, primitives, MCP servers, builtin or official tools,
    and anything in the shared `public` namespace."""
    namespace = str(doc.get("namespace") or (ref.split("/", 1)[0] if "/" in ref else "public"))
    why = (
        f"it is a {doc.get('tool_type')}"
        if doc.get("tool_type") in COMMAND_TYPES
        else "it is a builtin or official tool"
        if doc.get("is_builtin") or doc.get("is_official")
        else "it is in the public namespace"
        if namespace == "public"
        else None
    )
    if why is not None:
        raise Refused(
            f"{action} of {ref} is not allowed over MCP: {why}, and such writes decide what runs for others",
            hint="publish it into your own namespace (namespace: <yours>), or have a person publish it with "
            "`kiwi --admin publish`; a server started with --allow-command-writes passes such writes to the "
            "registry, which lets only an admin make them",
        )


def _manifest(value: dict[str, Any] | str) -> tuple[dict[str, Any], str | None]:
    if isinstance(value, dict):
        return dict(value), None
    try:
        doc = yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise UsageError(f"the manifest is not valid YAML or JSON: {e}", hint="give it as a JSON object") from e
    if not isinstance(doc, dict):
        raise UsageError("the manifest must be an object of manifest fields", hint="see help(topic='execute')")
    return doc, value


def _run_hint(result: RunResult, ref: str) -> str:
    if isinstance(result.failure, InvalidParameters):
        return f"the parameters schema is in load(item_id='{ref}'); pass them as one object in `parameters`"
    if result.failure is not None:
        return result.failure.hint or _default_hint(result.failure)
    if result.status == "timeout":
        return "the tool hit its own timeout; try smaller inputs, or a version with a longer config.timeout_s"
    return f"the tool ran and failed (exit code {result.exit_code}); check parameters with load(item_id='{ref}')"


def _import_text(report: ImportReport) -> str:
    counts = report.counts()
    summary = ", ".join(
        f"{counts[s]} {s}" for s in ("created", "changed", "unchanged", "missing", "error") if s in counts
    )
    lines = [f"imported {report.server}: {summary or 'no tools listed'}"]
    for t in report.tools:
        line = f"  {t.status:<9} {t.tool_id}" + (f"@{t.version}" if t.version else "")
        if t.status == "changed":
            line += f" (was {t.previous_version}; upstream changed its {' and '.join(t.changed)})"
        elif t.status == "missing":
            line += " (no longer listed by the server; kept)"
        if t.error:
            line += f": {t.error}"
        lines.append(line)
    listed = [t.tool_id for t in report.tools if t.status != "missing"]
    if listed:
        lines.append(f"\nnext: load(item_id='{listed[0]}') for its parameters, then execute(action='run', ...)")
    return "\n".join(lines)


def _align(verdicts: list[Any], chain: list[dict[str, Any]]) -> list[Any]:
    """The verdict of each chain row, by tool (load's chain is the latest; a pinned version's
    verdicts come from its own chain, which can be shaped differently)."""
    by_tool = {v.tool_id: v for v in verdicts}
    return [by_tool.get(row.get("tool_id")) for row in chain]


def _load_text(d: dict[str, Any]) -> str:
    m = d.get("manifest") or {}
    lines = [f"{d['item_id']}@{d['version']}  ({d['item_type']}: {d['tool_type']})  {m.get('name', '')}".rstrip()]
    if m.get("description"):
        lines.append(f"  {m['description'].strip()}")
    lines += ["", "executor chain: " + " -> ".join(f"{c['tool_id']}@{c['version']}" for c in d["executor_chain"])]
    lines.append(
        "signatures: "
        + ", ".join(f"{c['tool_id']} {(c.get('signature') or UNSIGNED)['state']}" for c in d["executor_chain"])
    )
    params = d["parameters"] or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    lines.append("parameters:" + ("" if props else " none"))
    for pname, prop in props.items():
        flag = (
            "required" if pname in required else f"default {json.dumps(prop['default'])}" if "default" in prop else ""
        )
        enum = f" one of {prop['enum']}" if prop.get("enum") else ""
        lines.append(
            f"  {pname} ({prop.get('type', 'any')}{', ' + flag if flag else ''}){enum}: {prop.get('description', '')}"
        )
    lines.append("files:" + ("" if d["files"] else " none"))
    for f in d["files"]:
        star = " (entrypoint)" if f.get("is_entrypoint") else ""
        lines.append(f"  {f['path']}{star}  {f.get('size_bytes')} B  sha256 {str(f.get('sha256'))[:16]}")
        if f.get("content_text") is not None:
            lines += ["", f["content_text"].rstrip(), ""]
    if d["item_type"] != "knowledge":
        lines.append(f"\nnext: execute(action='run', item_id='{d['item_id']}', parameters={{...}})")
    return "\n".join(lines)


HELP: dict[str, str] = {
    "overview": """\
# Kiwi MCP server

Kiwi is a registry of versioned items. Four tools:
  search(query, item_type?, limit?)                 find items
  load(item_id, item_type?, version?, include_content?)  read one: manifest, chain, parameters, files
  execute(action, item_id?, parameters?, version?, manifest?, files?, confirm?)
                                                    run | dry_run | create | update | publish | delete
                                                    | import (an MCP server's tools)
  help(topic?)                                      this guide; topics: overview, item_types, search,
                                                    load, execute, errors, examples
Usual flow: search -> load (read the parameters) -> execute action=dry_run (optional) -> action=run.""",
    "item_types": """\
## Item types (item_type)
  directive  instructions for an agent (tool_type directive); load gives their text, run renders them
  knowledge  reference text (tool_type knowledge); load or run returns the text; it has no executor
  tool       anything executable: script, api, runtime, primitive, mcp_server, mcp_tool, composite, thread
Every item has an executor chain: the item, then what runs it, down to a primitive
(e.g. hello_world -> bash_runtime -> subprocess). item_type filters search and checks load.""",
    "search": """\
## search
  query     words (typos tolerated) plus modifiers, which can be combined:
              type:T        a tool type (script, api, mcp_tool, ...) or tools on runtime T (type:python)
              category:C    a category or subcategory
              mcp:S         tools served by MCP server S (e.g. mcp:github)
              namespace:N   items of namespace N
            empty query: everything, most used first
  item_type directive | tool | knowledge (optional)
  limit     1-200, default 20
Returns items [{item_id, item_type, tool_type, name, description, latest_version, ...}].""",
    "load": """\
## load
  item_id          tool_id, namespace/tool_id, or id@version
  item_type        optional; an error if the item is of another type
  version          optional; default the latest
  include_content  file text; default yes for directives/knowledge, no for tools
Returns {item_id, item_type, tool_type, version, content_hash, manifest, executor_chain,
parameters (JSON Schema: what execute's `parameters` must satisfy), files [{path, sha256,
size_bytes, is_entrypoint, content_text?}]}.""",
    "execute": """\
## execute
  action=run      item_id, parameters {..} per the item's schema, version?  -> {tool_id, version,
                  status (success|error|timeout), output, error, exit_code, duration_ms, executor_chain}
  action=dry_run  the same arguments; resolves the chain, checks parameters, validates files and
                  config, prepares the environment, but does not run -> executor_chain, validation
  action=create   manifest + files: publish a NEW item (refused if the id exists)
  action=update   manifest + files: publish a new version of an EXISTING item (bump `version`)
  action=publish  manifest + files: publish as given (new item or new version)
  action=yank     item_id=id@version: withdraw that version (still runnable when pinned, never latest);
                  parameters {reason}? optional
  action=delete   item_id: without confirm=true only shows what would be deleted; with it, removes
                  the item and all its versions (refused while other items execute on it)
  action=import   item_id of an mcp_server: start it (as its registry row says; nothing else is
                  taken from the request), call tools/list, and publish one mcp_tool per tool as
                  <server>.<tool> -> {server, ok, counts, tools [{tool_id, tool, status, version,
                  previous_version, changed, error}]}. status: created (1.0.0), unchanged (nothing
                  published), changed (a new minor version; `changed` names description and/or
                  inputSchema), missing (no longer listed; kept, not deleted). Re-import any time.
  action=approve  approval_id (or item_id): approve a pending call; parameters {reason}? optional.
  action=deny     the same, denying it. Never from the session that requested the call.
Approvals: a run of a tool under an approval policy does not run; it answers with an error of kind
approval_pending carrying approval {id, expires_at}. After a person runs `kiwi approve ID`, call
run again with the same parameters and approval_id=ID: it runs once (dry_run needs no approval).
  action=open_context  item_id? (a directive, or none), context? (the parent), permissions? (narrower)
                  -> context {id, directive, permissions}. Running a directive opens one too (its
                  result has `context`). Pass context=ID to run/dry_run: a call outside its permissions
                  (tools, mcp server.tool, shell command) is refused and audited; a child context can
                  only narrow its parent's permissions. fs_read/fs_write are not enforced yet.
Manifest keys: tool_id, tool_type (script, api, directive, knowledge, ...), executor (e.g.
python_runtime, bash_runtime, node_runtime, directive_runtime, http_client; none for knowledge),
version (semver), name, description, category, tags, entrypoint (a file path), config,
parameters: [{name, type, required, description, default, enum}] or a JSON Schema, outputs.
Files: [{path, content_text, is_entrypoint}]. A script gets its parameters as one JSON object on
stdin and as KIWI_PARAM_<NAME> variables; JSON printed on stdout is its structured output.
Versions are immutable: publishing the same version with other content is refused.""",
    "errors": """\
## Errors
Every failure is a tool result with isError=true. Its text reads `error: <what went wrong>` and
`hint: <what to do>`; structured content has {error: {kind, message, hint}} (a failed run also
carries the run result). Kinds: usage / invalid_parameters (fix the arguments; load shows the
schema), not_found (search for the id), refused / integrity / config (the registry or runner will
not go on: read the message), registry_unavailable (the database is down), timeout, internal,
rate_limited (a rate limit is full: structured content has retry_after_s, seconds to wait),
approval_pending (nothing ran: structured content has approval {id, expires_at}; see execute),
approval_refused (the approval_id is pending, denied, expired, used, or for other parameters).
permission_denied: the call is outside its context's permissions; structured content names it.
Every run and dry_run is audited (public.audit_log), allowed or refused.
The server keeps answering after any error.""",
    "examples": """\
## Examples
  search(query="hello")                     search(query="type:python csv", limit=5)
  search(query="", item_type="knowledge")   search(query="mcp:github issues")
  load(item_id="hello_world")
  execute(action="dry_run", item_id="hello_world", parameters={"name": "Ada"})
  execute(action="run", item_id="hello_world", parameters={"name": "Ada"})
      -> structured {"status": "success", "output": {"greeting": "Hello, Ada!"}, ...}
  execute(action="create", manifest={"tool_id": "shout", "tool_type": "script",
          "executor": "bash_runtime", "version": "1.0.0", "description": "Upper-cases text",
          "entrypoint": "shout.sh", "parameters": [{"name": "text", "type": "string", "required": true}]},
          files=[{"path": "shout.sh", "is_entrypoint": true,
                  "content_text": "printf '%s' \\"$KIWI_PARAM_TEXT\\" | tr a-z A-Z"}])
  execute(action="delete", item_id="shout")                -> asks to confirm
  execute(action="delete", item_id="shout", confirm=true)  -> deleted
  execute(action="import", item_id="github")               -> github.create_issue, ... published
  execute(action="run", item_id="github.create_issue", parameters={...})""",
}
