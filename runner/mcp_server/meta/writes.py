"""execute's writes to the registry: create/update/publish, yank, deprecate and delete. Writes that would
choose what command other tools run are refused here over MCP (a prompt injection's favourite)
unless the server was started to allow them; the database decides the rest. On a server that
allows them, a non-admin's such publish is held for a person: a pending approval of exactly
that content, which an admin decides (`kiwi --admin approve ID`), then the same publish with
approval_id=ID goes through once."""

from __future__ import annotations

from typing import Any

import yaml
from mcp_types import CallToolResult

from ...core.refs import ToolRef, tool_name
from ...core.text import dependents_line
from ...core.yaml_safe import YamlTooLarge, load_yaml
from ...errors import NotFound, Refused, UsageError
from ...principal import requested
from ...registry.base import Registry
from ...registry.storage import Storage, move_large_files
from ...search import embed_published
from .args import ExecuteRequest, same_tool, split_ref
from .results import fail, ok
from .state import ServerState

__all__ = ["delete", "deprecate", "publish", "yank"]

COMMAND_TYPES = ("runtime", "primitive", "mcp_server")


async def publish(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """create (a new item), update (a new version of an existing one) or publish (either)."""
    action, reg = req.action, state.registry
    if req.manifest is None or req.manifest == "":
        raise UsageError(
            f"{action} needs a manifest",
            hint="give manifest={tool_id, tool_type, executor, version, ...} and files=[...]; "
            "see help(topic='execute')",
        )
    doc, manifest_yaml = _manifest(req.manifest)
    ref = _publish_ref(doc, req.item_id)
    if action in ("create", "update"):
        exists = await _exists(reg, ref)
        if action == "create" and exists:
            raise Refused(
                f"{ref} already exists",
                hint="use action='update' with a new version to change it, or choose another tool_id",
            )
        if action == "update" and not exists:
            raise NotFound(f"{ref} does not exist", hint="use action='create' to publish a new item")
    if not state.allow_command_writes and _acts_as_admin(reg):
        _refuse_command_write(action, ref, doc)
    rows = [f.model_dump(exclude_none=True) for f in req.files or []]
    try:
        # a file over the inline limit goes to Supabase Storage, as `kiwi publish` puts it
        rows = await move_large_files(rows, Storage.configured(state.runner.settings, state.runner.environ))
        answer = await reg.publish(doc, rows, manifest_yaml, approval_id=req.approval_id)
    except Refused as e:
        if not (state.allow_command_writes and req.approval_id is None and e.message.startswith("only an admin may")):
            raise
        return await _hold_for_approval(state, doc, rows, e.message)
    what = "unchanged (identical content already published)" if answer.get("unchanged") else "published"
    text = (
        f"{what}: {answer.get('tool_id', ref)}@{answer.get('version')} "
        f"content_hash {str(answer.get('content_hash', ''))[:16]}"
    )
    if answer.get("executor_chain"):
        text += "\nchain: " + " -> ".join(map(str, answer["executor_chain"]))
    if answer.get("dependents"):
        text += "\n" + dependents_line(answer)
    _, unembedded = await embed_published(reg, state.embedder)  # never fails the publish
    if unembedded:
        text += f"\nwarning: {unembedded}"
    text += f"\nnext: execute(action='dry_run', item_id='{answer.get('tool_id', ref)}') to check it"
    return ok(text, {"action": action, **answer, **({"warnings": [unembedded]} if unembedded else {})})


async def _hold_for_approval(
    state: ServerState, doc: dict[str, Any], rows: list[dict[str, Any]], why: str
) -> CallToolResult:
    """A command write by a non-admin, on a server that allows such writes: nothing is published;
    a pending approval of exactly this content waits for an admin."""
    approval = await state.registry.request_publish_approval(doc, rows, state.server_session)
    aid = approval.get("id")
    message = f"{why}. Nothing was published; approval {aid} of exactly this content is pending."
    hint = (
        f"a person (an admin) runs `kiwi --admin approve {aid}`; then call execute(action='publish') again "
        f"with the same manifest and files and approval_id='{aid}' before {approval.get('expires_at')}"
    )
    return fail(message, hint, kind="approval_pending", extra={"approval": approval})


def _publish_ref(doc: dict[str, Any], item_id: str | None) -> str:
    """The reference a publish writes: the manifest's tool_id (filled in from item_id, which must
    otherwise match it), in the manifest's namespace."""
    if item_id:
        ref, _ = split_ref(item_id, None)
        if "tool_id" not in doc:
            doc["tool_id"] = tool_name(ref)
        elif not same_tool(ref, str(doc["tool_id"])):
            raise UsageError(
                f"item_id {ref!r} does not match the manifest's tool_id {doc['tool_id']!r}",
                hint="give one id: leave item_id out, or make it the manifest's tool_id",
            )
    if not doc.get("tool_id"):
        raise UsageError("the manifest has no tool_id", hint="add tool_id (lowercase, e.g. 'csv_to_json')")
    ref = str(doc["tool_id"])
    if doc.get("namespace") and "/" not in ref:
        ref = f"{doc['namespace']}/{ref}"
    return ref


async def delete(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """Without confirm, only what would be deleted; with it, the item and all its versions."""
    reg = state.registry
    ref, _ = split_ref(req.item_id, None)
    chain = await reg.chain(ref)
    top = chain[0]
    if not state.allow_command_writes and _acts_as_admin(reg):
        _refuse_command_write("delete", top["tool_id"], {**(top.get("manifest") or {}), **top})
    target = {
        "item_id": top["tool_id"],
        "tool_type": top.get("tool_type"),
        "latest_version": top.get("version"),
    }
    if not req.confirm:
        text = (
            f"nothing deleted yet: this would remove {top['tool_id']} ({top.get('tool_type')}, latest "
            f"{top.get('version')}) with ALL its versions and files; it cannot be undone.\n"
            f"To delete it, call execute(action='delete', item_id='{ref}', confirm=true)."
        )
        return ok(text, {"action": "delete", "deleted": False, "confirm_required": True, "would_delete": target})
    answer = await state.deleter(ref)
    versions = answer.get("versions") if isinstance(answer, dict) else None
    text = f"deleted: {top['tool_id']}" + (f" ({versions} version(s))" if versions is not None else "")
    return ok(text, {"action": "delete", "deleted": True, **(answer if isinstance(answer, dict) else {})})


async def yank(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """Withdraw one version: still runnable when pinned (with a warning), never the latest again."""
    ref, ver, reason = await _version_status_request(state, req, "reason")
    answer = await state.registry.yank(ref, ver, reason)
    text = f"yanked: {answer['tool_id']}@{answer['version']}; latest is now {answer.get('latest_version')}"
    return ok(text, {"action": "yank", **answer})


async def deprecate(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """Mark one version deprecated: it still runs, and every run of it warns with the message."""
    ref, ver, message = await _version_status_request(state, req, "message")
    answer = await state.registry.deprecate(ref, ver, message)
    said = f": {message}" if message else ""
    text = f"deprecated: {answer['tool_id']}@{answer['version']}{said}; runs of it now warn so"
    return ok(text, {"action": "deprecate", **answer})


async def _version_status_request(state: ServerState, req: ExecuteRequest, word: str) -> tuple[str, str, str | None]:
    """yank's and deprecate's arguments: the exact version, and parameters={word: text}; over MCP
    an admin's session may not change a command's status (as it may not publish one)."""
    ref, ver = split_ref(req.item_id, req.version)
    if ver is None:
        raise UsageError(f"{req.action} needs a version", hint=f"give item_id='{ref}@1.0.0' (load it to see versions)")
    text = (req.parameters or {}).get(word)
    if text is not None and not isinstance(text, str):
        raise UsageError(f"{word} must be a string", hint=f"parameters={{'{word}': '...'}}")
    if not state.allow_command_writes and _acts_as_admin(state.registry):
        top = (await state.registry.chain(ref))[0]
        _refuse_command_write(req.action, top["tool_id"], {**(top.get("manifest") or {}), **top})
    return ref, ver, text


async def _exists(reg: Registry, ref: str) -> bool:
    try:
        await reg.chain(ref)
    except NotFound:
        return False
    return True


def _manifest(value: dict[str, Any] | str) -> tuple[dict[str, Any], str | None]:
    if isinstance(value, dict):
        return dict(value), None
    try:
        doc = load_yaml(value)
    except YamlTooLarge as e:
        raise UsageError(f"manifest: {e}", hint="publish a smaller manifest") from None
    except yaml.YAMLError as e:
        raise UsageError(f"the manifest is not valid YAML or JSON: {e}", hint="give it as a JSON object") from e
    if not isinstance(doc, dict):
        raise UsageError("the manifest must be an object of manifest fields", hint="see help(topic='execute')")
    return doc, value


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
    namespace = str(doc.get("namespace") or ToolRef.parse(ref, strict=False).namespace)
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
