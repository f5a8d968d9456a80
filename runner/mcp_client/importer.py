"""`kiwi mcp import SERVER`: the server's tools/list, published as `mcp_tool` rows.

Each tool becomes `<server>.<tool>` (characters a tool id cannot hold become `_`; the
upstream name stays in config.tool), its inputSchema the parameters, its outputSchema the
outputs (which its results are then checked against: core/outputs.py), its description the
description, its annotations config.annotations, the server its executor.

* new upstream tool: version 1.0.0.
* unchanged (same description, schema and config as the latest version): nothing is
  published, nothing changes.
* changed upstream (its `description`, `inputSchema`, `outputSchema` or `annotations`):
  held, not published (status `held`): the new minor version waits in
  public.mcp_tool_changes with its diff until someone approves it (`kiwi mcp approve`), and
  until then every caller keeps the latest approved version. A tool changes under its agents
  only when a person has read the change (rug-pull protection:
  supabase/schemas/620_mcp_tool_changes.sql).
* changed on Kiwi's side only (its config or executor, as a new server version names it): a
  new minor version, published, whose changelog and `metadata.mcp_import` say what changed.
  Earlier versions stay as they were: callers pinned to one keep it.
* `create=False` (a re-read on a schedule or a reconnect, refresh.py): tools new upstream are
  reported as `new`, not published.
* tools the latest listing no longer has are reported as `missing`; nothing is deleted.
* `namespace`: the tools go there (`<namespace>/<server name>.<tool>`) instead of beside the
  server, for a user who may not publish into the server's namespace (`public`).
* a description longer than the registry allows (registry_limits.text_field_chars.description,
  which publish enforces) is cut to it at a word, ending in "…": the tool is published all
  the same, `metadata.mcp_import.description_cut` keeps the upstream length, the report's
  entry says so in its notes. The cut text is what an import compares, so an unchanged
  upstream tool stays `unchanged`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import mcp_types as types

from ..core.refs import ToolRef, tool_name
from ..errors import KiwiError, Refused
from ..harness.environ import allowed_environ
from ..registry.base import Registry
from ..sandbox import Sandbox, profile_from
from ..sandbox.site import ToolSite
from .oauth.provider import OAuthSessions
from .pool import McpPool
from .servers import server_link, server_spec

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]")
_SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_LAST_WORD = re.compile(r"\s+\S*\Z")  # the whitespace before the last (maybe partial) word, and that word


def _config_rest(manifest: Mapping[str, Any]) -> Any:
    config = manifest.get("config")
    return {k: v for k, v in config.items() if k != "annotations"} if isinstance(config, dict) else config


# What an import compares, by the names MCP uses: each label and how to read it from a manifest.
_COMPARED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "description": lambda m: m.get("description"),
    "inputSchema": lambda m: m.get("parameters"),
    "outputSchema": lambda m: m.get("outputs"),
    "config": _config_rest,  # the annotations are named apart
    "executor": lambda m: m.get("executor"),
    "annotations": lambda m: (m.get("config") or {}).get("annotations"),
}


@dataclass
class ImportedTool:
    tool_id: str
    tool: str  # the upstream name
    status: str  # created | unchanged | changed | held | new | missing | error
    version: str | None = None
    previous_version: str | None = None
    changed: list[str] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # what was fitted to the registry (a cut description)
    change: str | None = None  # held: the id of the pending change in public.mcp_tool_changes
    failure: KiwiError | None = field(default=None, repr=False, compare=False)  # why publish refused it

    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "failure"}


@dataclass
class ImportReport:
    server: str
    tools: list[ImportedTool] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.status != "error" for t in self.tools)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tools:
            out[t.status] = out.get(t.status, 0) + 1
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "ok": self.ok,
            "counts": self.counts(),
            "tools": [t.as_json() for t in self.tools],
        }

    def failure(self) -> KiwiError | None:
        """One error for every tool that was not imported (None when all were): the first
        reason, how many more there are, and its kind (so its exit code) and hint."""
        failed = [t for t in self.tools if t.status == "error"]
        if not failed:
            return None
        first = failed[0]
        reason = first.error or "publish refused it"
        alike = sum(1 for t in failed[1:] if t.error == first.error)
        more = [f"and {alike} more like it"] if alike else []
        if len(failed) - 1 - alike:
            more.append(f"{len(failed) - 1 - alike} more for other reasons (--json lists each)")
        tail = f" ({'; '.join(more)})" if more else ""
        of = f"{len(failed)} of {len(self.tools)} tools"
        kind = type(first.failure) if first.failure is not None else KiwiError
        hint = first.failure.hint if first.failure is not None else None
        error = kind(f"{of} of {self.server} not imported: {first.tool_id}: {reason}{tail}", hint=hint)
        error.sqlstate = first.failure.sqlstate if first.failure is not None else None
        return error


async def import_server(
    registry: Registry,
    pool: McpPool,
    server: str,
    environ: Mapping[str, str],
    sandbox: Sandbox | None = None,
    *,
    namespace: str | None = None,
    site: ToolSite | None = None,
) -> ImportReport:
    """List the server's tools through `pool`, publish what is new and hold what changed
    upstream. The server starts as a run of it would: in `sandbox` (or `site`, a run's own)
    with its plan's profile, reading only the variables its plan allows. `namespace`: publish
    the tools there, not beside the server."""
    plan = await registry.plan(server)
    if plan.tool_type != "mcp_server":
        raise Refused(f"{plan.tool_id} is a {plan.tool_type}, not an mcp_server", hint="kiwi search type:mcp_server")
    ref = server_link(plan).tool_id
    allowed = allowed_environ(environ, plan.allowed_variables)
    if site is None and sandbox is not None and sandbox.enabled:
        site = ToolSite(sandbox, profile_from(plan.config.get("sandbox"), ref, allowed), environ=allowed)
    # signs in as the registry's caller where config.auth asks, as the mcp_tool handler does
    spec = server_spec(plan, allowed, site)
    listed = await pool.list_tools(OAuthSessions().apply(spec, plan.config, allowed, registry, environ))
    return await review_listing(registry, ref, listed, target=import_target(ref, namespace))


async def review_listing(
    registry: Registry, ref: str, listed: list[types.Tool], *, target: str, create: bool = True
) -> ImportReport:
    """What the server `ref` listed, against the registry's tools `<target>.<tool>`: new ones
    published, changed ones held, gone ones `missing`. Without `create` (a re-read, not an
    import) nothing is published: new tools are reported `new`, and only imported tools whose
    upstream fields changed are looked at (and held)."""
    server_row = (await registry.chain(ref))[0]
    server_manifest: dict[str, Any] = server_row.get("manifest") or {}
    wanted = {tool_id_for(target, t.name): t for t in listed}
    latest = await _latest_manifests(registry, list(wanted))
    limit = await description_limit(registry)

    report = ImportReport(server=ref)
    for tool_id, tool in wanted.items():
        manifest = tool_manifest(ref, tool, server_manifest, target)
        upstream = manifest["description"]
        manifest["description"] = cut_description(upstream, limit)
        cut = {"upstream_chars": len(upstream), "limit": limit} if manifest["description"] != upstream else None
        previous = latest.get(tool_id)
        if previous is None and not create:
            report.tools.append(ImportedTool(tool_id=tool_id, tool=tool.name, status="new"))
            continue
        if not create and not _reviewable(previous, manifest):
            continue
        report.tools.append(await _publish_one(registry, tool_id, tool.name, manifest, previous, cut))
    for row in await registry.search(f"mcp:{ref}", tool_type="mcp_tool", limit=1000):
        mine = str(row["tool_id"]).startswith(f"{target}.")
        if mine and row["tool_id"] not in wanted and row.get("executor_id") == ref:
            report.tools.append(
                ImportedTool(tool_id=row["tool_id"], tool="", status="missing", version=row.get("latest_version"))
            )
    return report


def _reviewable(previous: Mapping[str, Any] | None, manifest: Mapping[str, Any]) -> bool:
    """Whether a re-read may hold a change of this tool: it was imported (not published by
    hand), and only what its server decides differs."""
    if previous is None or "mcp_import" not in (previous["manifest"].get("metadata") or {}):
        return False
    return set(differences(previous["manifest"], manifest)) <= UPSTREAM


def import_target(server_ref: str, namespace: str | None) -> str:
    """What the imported tools' ids start with: the server's ref, or in `namespace` the
    server's name (`local/everything_mcp` for everything_mcp imported into `local`)."""
    if namespace is None or ToolRef.parse(server_ref, strict=False).namespace == namespace:
        return server_ref
    return ToolRef(namespace=namespace, tool_id=tool_name(server_ref)).ref


def tool_id_for(server_ref: str, name: str) -> str:
    return f"{server_ref}.{_NOT_IN_ID.sub('_', name)}"[: len(server_ref) + 1 + 128]


def tool_manifest(
    server_ref: str, tool: types.Tool, server_manifest: Mapping[str, Any], target: str | None = None
) -> dict[str, Any]:
    """The manifest an upstream tool publishes as (without version, changelog, metadata);
    `target` (import_target) is where its id goes, beside the server by default."""
    schema = dict(tool.input_schema or {"type": "object"})
    target = target or server_ref
    manifest: dict[str, Any] = {
        "tool_id": tool_id_for(target, tool.name),
        "tool_type": "mcp_tool",
        "executor": server_ref,
        "name": tool.title or tool.name,
        "description": tool.description or f"{tool.name} (a tool of the MCP server {server_ref})",
        "category": server_manifest.get("category") or "mcp",
        "tags": ["mcp", tool_name(server_ref)],
        "config": {"tool": tool.name},
        "parameters": schema,
    }
    if tool.output_schema:  # what its structuredContent promises; runs are held to it
        manifest["outputs"] = dict(tool.output_schema)
    if tool.annotations is not None:  # readOnlyHint, idempotentHint ...: whether a cut-off call may be retried
        hints = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        if hints:
            manifest["config"]["annotations"] = hints
    if server_manifest.get("visibility") and target == server_ref:  # elsewhere, that namespace's default
        manifest["visibility"] = server_manifest["visibility"]
    return manifest


async def description_limit(registry: Registry) -> int | None:
    """registry_limits.text_field_chars.description: the most characters publish takes in a
    description (None: no such row, no limit)."""
    chars = (await registry.limits()).get("text_field_chars")
    value = chars.get("description") if isinstance(chars, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cut_description(text: str, limit: int | None) -> str:
    """`text`, or if it has more than `limit` characters its start cut before the word the limit
    falls in, ending in "…", `limit` characters at most (a first word longer than that is cut
    inside)."""
    if limit is None or limit < 1 or len(text) <= limit:
        return text
    head = text[: limit - 1]  # room for the "…"
    if not text[limit - 1].isspace():  # the limit falls inside a word: that word goes
        head = _LAST_WORD.sub("", head)
    return (head.rstrip() or text[: limit - 1]) + "…"


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What an upstream change touched, by the names MCP uses (description, inputSchema,
    outputSchema, annotations)."""
    return [label for label, read in _COMPARED.items() if read(old) != read(new)]


UPSTREAM = frozenset({"description", "inputSchema", "outputSchema", "annotations"})  # what a server decides


def next_version(version: str) -> str:
    m = _SEMVER.match(version)
    if m is None:
        return "1.0.0"
    return f"{m.group(1)}.{int(m.group(2)) + 1}.0"


async def _publish_one(
    registry: Registry,
    tool_id: str,
    name: str,
    manifest: dict[str, Any],
    previous: dict[str, Any] | None,
    cut: dict[str, Any] | None = None,
) -> ImportedTool:
    item = ImportedTool(tool_id=tool_id, tool=name, status="created", version="1.0.0")
    meta: dict[str, Any] = {"tool": name, "server": manifest["executor"], "upstream_changed": False}
    if cut is not None:  # {upstream_chars, limit}: said on every import, kept with each version published
        meta["description_cut"] = cut
        item.notes.append(
            f"description cut from {cut['upstream_chars']} to {len(manifest['description'])} characters "
            f"(registry_limits.text_field_chars.description is {cut['limit']})"
        )
    if previous is not None:
        old_manifest, old_version = previous["manifest"], previous["version"]
        item.changed = differences(old_manifest, manifest)
        if not item.changed:
            item.status, item.version = "unchanged", old_version
            return item
        item.status, item.previous_version, item.version = "changed", old_version, next_version(old_version)
        meta.update(upstream_changed=True, changed=item.changed, previous_version=old_version)
        manifest["changelog"] = f"upstream {name} changed its {' and '.join(item.changed)} (was {old_version})"
    manifest.update(version=item.version, metadata={"mcp_import": meta})
    try:
        if item.status == "changed" and set(item.changed) <= UPSTREAM:  # a person reads it first
            held = await registry.hold_mcp_change(manifest)
            if held.get("held"):
                item.status, item.change = "held", held.get("id")
            else:  # the registry sees no difference after all: nothing waits
                item.status, item.version = "unchanged", item.previous_version
        else:
            await registry.publish(manifest, [])
    except KiwiError as exc:
        item.status, item.error, item.failure = "error", exc.message, exc
    return item


async def _latest_manifests(registry: Registry, tool_ids: list[str]) -> dict[str, dict[str, Any]]:
    """tool_id -> {version, manifest} of its latest version, for those that exist (one query)."""
    out: dict[str, dict[str, Any]] = {}
    if not tool_ids:
        return out
    for row in await registry.chains_batch(sorted(set(tool_ids))):
        if row.get("depth") == 0 and not row.get("error"):
            out[row["requested_tool_id"]] = {"version": row["version"], "manifest": row["manifest"] or {}}
    return out
