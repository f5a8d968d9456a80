"""The `load` meta-tool: one item as an agent needs it before running it (manifest, executor
chain with signature states, parameter schema, files; directives and knowledge with text)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import Field

from ...core.outputs import output_schema
from ...core.plan import Plan
from ...errors import UsageError
from ...harness.plan_notes import knowledge_source, lifecycle_warnings
from ...trust.states import UNSIGNED, verdict_label
from .args import ITEM_TYPES, check_item_type, item_type_of, split_ref
from .mcp_items import mcp_listing
from .results import guarded, ok
from .state import ServerState

__all__ = ["load"]

ItemId = Annotated[
    str, Field(description="The item's id: tool_id, namespace/tool_id, or id@version (e.g. 'hello_world').")
]
ItemType = Annotated[
    str | None,
    Field(
        description=(
            "What you expect it to be (directive, tool or knowledge); a mismatch is an error. mcp: an MCP "
            "server (or one of its tools), loaded with the list of its tools and their schemas."
        ),
        json_schema_extra={"enum": [*ITEM_TYPES, None]},
    ),
]
Version = Annotated[str | None, Field(description="A semver version; default the latest.")]
IncludeContent = Annotated[
    bool | None,
    Field(
        description=(
            "Include each file's text. Default: yes for directives and knowledge (their text is "
            "the point), no for tools (files are listed with sha256 and size)."
        )
    ),
]


async def load(
    state: ServerState,
    item_id: ItemId,
    item_type: ItemType = None,
    version: Version = None,
    include_content: IncludeContent = None,
) -> CallToolResult:
    """Load one item: its manifest, executor chain (the item down to its primitive), the JSON Schema
    of its parameters (and outputSchema, that of its output, when it declares one), and its files.
    Directives and knowledge come with their text."""

    async def call() -> CallToolResult:
        reg = state.registry
        kind = check_item_type(item_type)
        ref, ver = split_ref(item_id, version)
        plan = await reg.plan(ref, ver)
        actual = item_type_of(plan.tool_type)
        if kind == "mcp" and plan.tool_type in ("mcp_server", "mcp_tool"):
            actual = "mcp"  # a server as an item: its tools with their schemas (mcp_items.py)
        if kind is not None and kind != actual:
            raise UsageError(
                f"{plan.tool_id} is a {plan.tool_type} (item_type {actual}), not a {kind}",
                hint=f"load it with item_type='{actual}' or without item_type",
            )
        verdicts = await state.runner.verify(plan)
        by_tool = {v.tool_id: v for v in verdicts}
        with_text = include_content if include_content is not None else actual != "tool"
        loaded = {
            "item_id": plan.tool_id,
            "item_type": actual,
            "tool_type": plan.tool_type,
            "version": plan.version,
            "content_hash": plan.content_hash,
            "manifest": plan.manifest or None,  # the loaded version's own
            "signature": verdict_label(verdicts[0]) if verdicts else UNSIGNED,
            "executor_chain": [  # the loaded version's chain as it runs (its plan's), never the latest's
                {
                    "depth": depth,
                    **asdict(link),
                    "signature": verdict_label(by_tool[link.tool_id]) if link.tool_id in by_tool else UNSIGNED,
                }
                for depth, link in enumerate(plan.chain)
            ],
            "primitive": plan.primitive,
            "parameters": plan.parameters or {"type": "object", "properties": {}},
            "outputs": plan.outputs,
            "outputSchema": _output_schema(plan),
            "source": knowledge_source(plan) or None,  # a knowledge entry's source_type / source_url
            "files": _files(plan, with_text),
            "sandbox": state.runner.sandbox_profile(plan),  # what its processes may reach (runner/sandbox)
            **{k: getattr(plan, k) for k in ("deprecated", "deprecation_message", "yanked", "yanked_reason")},
            "warnings": lifecycle_warnings(plan),
        }
        if actual == "mcp":
            loaded["mcp"] = await mcp_listing(state, plan)
        return ok(_load_text(loaded), loaded)

    return await guarded("load", call)


def _output_schema(plan: Plan) -> dict[str, Any] | None:
    """The tool's declared outputs as a JSON Schema (MCP's outputSchema), which a successful
    `execute run` holds its `output` to; None when none are declared or they are unusable
    (a run then says why)."""
    try:
        return output_schema(plan.outputs)
    except ValueError:
        return None


def _files(plan: Plan, with_text: bool) -> list[dict[str, Any]]:
    files = []
    for f in plan.files:
        entry = {k: getattr(f, k) for k in ("path", "size_bytes", "sha256", "is_entrypoint", "media_type")}
        if with_text:
            entry["content_text"] = f.content_text
        files.append(entry)
    return files


def _load_text(d: dict[str, Any]) -> str:
    m = d.get("manifest") or {}
    lines = [f"{d['item_id']}@{d['version']}  ({d['item_type']}: {d['tool_type']})  {m.get('name', '')}".rstrip()]
    if m.get("description"):
        lines.append(f"  {m['description'].strip()}")
    if d.get("source"):
        lines.append("  source: " + ", ".join(d["source"].values()))
    lines += [f"warning: {w}" for w in d["warnings"]]
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
    if d.get("outputSchema") is not None:  # what a successful run's `output` is checked against
        lines.append("outputs (outputSchema): " + json.dumps(d["outputSchema"], ensure_ascii=False))
    lines.append("files:" + ("" if d["files"] else " none"))
    for f in d["files"]:
        star = " (entrypoint)" if f.get("is_entrypoint") else ""
        lines.append(f"  {f['path']}{star}  {f.get('size_bytes')} B  sha256 {str(f.get('sha256'))[:16]}")
        if f.get("content_text") is not None:
            lines += ["", f["content_text"].rstrip(), ""]
    if d.get("mcp"):
        lines += _mcp_text(d["mcp"])
    elif d["item_type"] != "knowledge":
        lines.append(f"\nnext: execute(action='run', item_id='{d['item_id']}', parameters={{...}})")
    return "\n".join(lines)


def _mcp_text(listing: dict[str, Any]) -> list[str]:
    server = listing["server"]
    lines = ["", f"tools of {server} ({'called through Kiwi' if listing['proxy'] else 'call it directly'}):"]
    for t in listing["tools"]:
        lines.append(f"  {t['name']}@{t['version']}: {t.get('description') or ''}")
        lines.append(f"    inputSchema: {json.dumps(t['inputSchema'], ensure_ascii=False)}")
    for c in listing["pending_changes"]:
        lines.append(f"  held upstream change of {c['tool_id']} ({', '.join(c['changed'])}): not in use until approved")
    if listing.get("connect"):
        lines.append("connect: " + json.dumps(listing["connect"], ensure_ascii=False))
    lines.append(
        f"\nnext: execute(action='call', item_type='mcp', item_id='{server}', parameters={{'tool': NAME, ...}})"
    )
    return lines
