"""The `execute` meta-tool: one entry for every action on an item. It checks the action, sends
run/dry_run through the gate (run.py) and every other action through one audit row
(audit.py) to the module that does it (writes.py, import_action.py, approvals, contexts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from ...errors import UsageError
from ...policy import permissions as access
from ...primitives.base import RunListener
from .. import approvals
from ..notify_run import following
from .args import ACTIONS, ExecuteRequest, FileInput, check_context_id, check_item_type, split_ref
from .audit import audited_action, manifest_tool_id
from .import_action import import_tools
from .mcp_items import call_target
from .results import guarded, ok
from .rollback import rollback
from .run import guarded_run
from .state import ServerState, session_of
from .writes import delete, deprecate, publish, yank

__all__ = ["execute"]

Action = Annotated[
    str,
    Field(
        description=(
            "run: run the item with `parameters`. dry_run: resolve, check parameters and validate "
            "without running. create: publish a NEW item from `manifest` and `files` (refused if it "
            "exists). update: publish a new version of an EXISTING item. publish: publish as given. "
            "yank: withdraw item_id=id@version (never latest again; runs only when pinned, with a warning). "
            "deprecate: mark item_id=id@version deprecated (it still runs, warning with "
            "parameters={'message': ...}). delete: remove the item and "
            "all its versions (needs confirm=true). import: item_id names "
            "an mcp_server; publish one mcp_tool per tool it lists (<server>.<tool>). rollback: item_id is a "
            "run that took a checkpoint (a tool with mutates_state, run in a directive's context) or "
            "that context; its working tree is restored to the checkpoint. call: call an MCP "
            "server's tool: item_id the server with parameters={'tool': NAME, ...its arguments}, or "
            "item_id='server.tool' (or 'alias.tool' of the directive of `context`)."
        ),
        json_schema_extra={"enum": list(ACTIONS)},
    ),
]
ItemId = Annotated[
    str | None,
    Field(
        description=(
            "The item: tool_id, namespace/tool_id or id@version. For create/update/publish it may be "
            "left out (the manifest's tool_id is used); if given, it must match the manifest. For "
            "import: the mcp_server's id (its latest version)."
        )
    ),
]
Parameters = Annotated[
    dict[str, Any] | None,
    Field(description="run/dry_run: the item's inputs as one object, per its parameters schema (see load)."),
]
Version = Annotated[str | None, Field(description="run/dry_run: this version instead of the latest.")]
Manifest = Annotated[
    dict[str, Any] | str | None,
    Field(
        description=(
            "create/update/publish: the manifest as an object or as tool.yaml text. Keys: tool_id, "
            "tool_type, executor, version (semver, new for each publish), description, name, "
            "category, tags, entrypoint, config, parameters ([{name, type, required, description, "
            "default, enum}] or a JSON Schema), outputs. See help(topic='execute')."
        )
    ),
]
Files = Annotated[
    list[FileInput] | None,
    Field(description="create/update/publish: the item's files; the database computes sha256 and size."),
]
Confirm = Annotated[
    bool,
    Field(description="delete: must be true to delete; without it you get what would be deleted."),
]
ApprovalId = Annotated[
    str | None,
    Field(
        description=(
            "run: the id of an approved approval (a run that needs approval answers with one); the same "
            "parameters then run once. approve/deny: the approval to decide (or give it as item_id)."
        )
    ),
]
ContextId = Annotated[
    str | None,
    Field(
        description=(
            "The execution context the call is made in (an id from running a directive or from "
            "action=open_context): run/dry_run are checked against its permissions; for open_context, "
            "the parent of the new context."
        )
    ),
]
Permissions = Annotated[
    dict[str, Any] | None,
    Field(description="open_context: narrow the permissions {fs_read, fs_write, shell, mcp, tools, net}."),
]

Act = Callable[[ServerState, ExecuteRequest], Awaitable[CallToolResult]]  # one action other than run/dry_run


ItemType = Annotated[
    str | None,
    Field(description="Optional: mcp for action=call on an MCP server (the default for call); checked, not required."),
]


async def execute(
    state: ServerState,
    action: Action,
    item_id: ItemId = None,
    parameters: Parameters = None,
    version: Version = None,
    manifest: Manifest = None,
    files: Files = None,
    confirm: Confirm = False,
    approval_id: ApprovalId = None,
    context: ContextId = None,
    permissions: Permissions = None,
    item_type: ItemType = None,
    ctx: Context | None = None,
) -> CallToolResult:
    """Act on an item: run or dry_run it, create/update/publish it, yank or deprecate a version of
    it, delete it, or import the
    tools of an MCP server (action=import, item_id=the mcp_server). Results are structured (a run
    gives {tool_id, version, status, output, error, exit_code, duration_ms, executor_chain});
    failures are tool errors with a hint."""
    req = ExecuteRequest(
        action=action,
        session=session_of(ctx, state.server_session),
        item_id=item_id,
        parameters=parameters,
        version=version,
        manifest=manifest,
        files=files,
        confirm=confirm,
        approval_id=approval_id,
        context=context,
        permissions=permissions,
    )
    async with following(ctx if action in ("run", "call") else None, item_id) as listener:
        return await guarded("execute", lambda: _execute(state, req, listener, item_type))


async def _execute(
    state: ServerState, req: ExecuteRequest, listener: RunListener | None = None, item_type: str | None = None
) -> CallToolResult:
    """run/dry_run (and call) through the gate, which audits them; any other action with its audit row."""
    action = req.action
    if check_item_type(item_type) not in (None, "mcp") and action == "call":
        raise UsageError(f"call is for MCP tools, not item_type {item_type!r}", hint="use action='run'")
    if action not in ACTIONS:
        raise UsageError(f"unknown action {action!r}", hint="action is one of " + ", ".join(ACTIONS))
    if action in ("run", "dry_run"):
        return await _run(state, req, listener)
    if action == "call":  # an MCP server's tool, through the gate as a run (mcp_items.py)
        ref, params = await call_target(state, req)
        return await _run(state, replace(req, item_id=ref, parameters=params, version=None), listener)
    inputs = {
        "item_id": req.item_id,
        "version": req.version,
        "parameters": req.parameters,
        "manifest": req.manifest,
        "files": [f.model_dump() for f in req.files or []],
        "confirm": req.confirm,
        "approval_id": req.approval_id,
        "context": req.context,
        "permissions": req.permissions,
    }
    subject = req.item_id or req.approval_id or manifest_tool_id(req.manifest)
    if action == "open_context" and not subject:  # no directive: the parent context, or a new one
        subject = f"context:{req.context}" if req.context else "context:new"
    act = _ACTS.get(action, publish)  # create, update and publish
    # a row the registry cannot take now is journaled by the runner's recorder, when it writes there
    keep = state.runner.recorder.submit_audit if state.registry is state.runner.registry else None
    return await audited_action(
        state.registry,
        session=req.session,
        action=action,
        subject=subject,
        inputs=inputs,
        work=lambda: act(state, req),
        keep=keep,
    )


async def _run(state: ServerState, req: ExecuteRequest, listener: RunListener | None = None) -> CallToolResult:
    ref, ver = split_ref(req.item_id, req.version)
    return await guarded_run(
        state.runner,
        state.registry,
        session=req.session,
        ref=ref,
        ver=ver,
        params=req.parameters or {},
        context=req.context,
        approval_id=req.approval_id,
        dry_run=req.action == "dry_run",
        run_timeout_s=state.run_timeout_s,
        listener=listener,
    )


async def _open_context(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    ref, ver = split_ref(req.item_id, req.version) if req.item_id else (None, None)
    directive = f"{ref}@{ver}" if ver else ref
    parent = check_context_id(req.context)
    opened = await state.registry.open_context(req.session, directive, parent, req.permissions)
    return ok(access.summary(opened), {"action": "open_context", "context": opened})


async def _decide(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """approve or deny a pending call (never from the session that requested it)."""
    return await approvals.decide(
        state.registry,
        approval_id=req.approval_id or req.item_id,
        approve=req.action == "approve",
        reason=(req.parameters or {}).get("reason"),
        session=req.session,
    )


_ACTS: dict[str, Act] = {
    "delete": delete,
    "yank": yank,
    "deprecate": deprecate,
    "import": import_tools,
    "open_context": _open_context,
    "rollback": rollback,
    "approve": _decide,
    "deny": _decide,
}
