"""Directives as MCP prompts: prompts/list lists the directives the caller can see, prompts/get
renders one with its arguments.

A prompt's name is the directive's reference (`create_script_tool`, `acme/review`); `ref@1.2.0`
gets that version, the bare reference the latest. Its arguments are the directive's declared
inputs (`parameters`): required ones must be given, unknown ones are refused, an `enum` holds,
defaults fill the rest. The rendered prompt is one user message: the directive's instructions
with `{input}` placeholders filled (`${VAR}`s are left as written: a prompt never reads the
server's environment), the inputs, and where its tool context comes from (execute run); then
the text of each knowledge entry it cites, embedded as the resource resources.py serves by the
same URI (an entry the caller cannot read is named as not available, nothing more).

Errors are protocol errors, never a traceback: an unknown or invisible prompt (the same
answer for both), a missing required or unknown argument, a value outside its enum: -32602.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp_types import (
    EmbeddedResource,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
)

from ...core.expand import fill
from ...core.plan import Plan
from ...core.refs import MCP_WORDS, ToolRef
from ...errors import NotFound, UsageError
from ...registry.base import Registry
from ..meta.state import ServerState
from .listing import answered, invalid_params, page
from .resources import KNOWLEDGE, contents_of, knowledge_uri

__all__ = ["arguments_of", "checked_arguments", "cited", "get_prompt", "list_prompts", "prompt_of", "rendered"]

DIRECTIVE = "directive"


def arguments_of(schema: dict[str, Any] | None) -> list[PromptArgument]:
    """A parameters schema's properties as prompt arguments: the required ones first, in the
    order the schema requires them, then the others by name."""
    props: dict[str, Any] = (schema or {}).get("properties") or {}
    required = [n for n in (schema or {}).get("required") or [] if n in props]
    order = required + sorted(n for n in props if n not in required)
    return [
        PromptArgument(name=n, description=_describe(props[n]), required=n in required)
        for n in order
        if isinstance(props[n], dict)
    ]


def _describe(prop: dict[str, Any]) -> str | None:
    text = str(prop.get("description") or "").strip()
    extra = []
    if prop.get("enum"):
        extra.append("one of " + ", ".join(str(v) for v in prop["enum"]))
    if "default" in prop:
        extra.append(f"default {json.dumps(prop['default'], ensure_ascii=False)}")
    if extra:
        text = f"{text} ({'; '.join(extra)})" if text else "; ".join(extra)
    return text or None


def prompt_of(row: dict[str, Any]) -> Prompt:
    """One list_items row (a directive) as a prompt."""
    return Prompt(
        name=row["tool_id"],
        title=row.get("name") or None,
        description=row.get("description") or row.get("name") or f"Kiwi directive {row['tool_id']}",
        arguments=arguments_of(row.get("parameters")),
    )


async def list_prompts(
    state: ServerState, ctx: ServerRequestContext[Any], params: PaginatedRequestParams
) -> ListPromptsResult:
    async def call() -> ListPromptsResult:
        got = await page(state.registry, DIRECTIVE, params.cursor)
        return ListPromptsResult(prompts=[prompt_of(r) for r in got.rows], next_cursor=got.next_cursor)

    return await answered("prompts/list", call, not_found=invalid_params("invalid cursor"))


async def get_prompt(
    state: ServerState, ctx: ServerRequestContext[Any], params: GetPromptRequestParams
) -> GetPromptResult:
    name = params.name
    unknown = invalid_params(f"unknown prompt: {name!r} (prompts/list names the directives you can use)", name=name)

    async def call() -> GetPromptResult:
        try:
            ref = ToolRef.parse(name, None, MCP_WORDS)
            plan = await state.registry.plan(ref.ref, ref.version)
        except UsageError:  # a name no directive can have (empty, a malformed version)
            raise unknown from None
        if plan.tool_type != DIRECTIVE:
            raise unknown
        values = checked_arguments(plan, params.arguments or {})
        return rendered(plan, values, await cited(state.registry, plan))

    return await answered("prompts/get", call, not_found=unknown)


async def cited(registry: Registry, plan: Plan) -> list[tuple[str, Plan | None]]:
    """Each knowledge entry the directive cites, as the caller may read it (None: not available
    to the caller, whether missing or invisible)."""

    async def one(ref: str) -> tuple[str, Plan | None]:
        try:
            named = ToolRef.parse(ref, None, MCP_WORDS)
            entry = await registry.plan(named.ref, named.version)
        except (NotFound, UsageError):
            return ref, None
        return ref, entry if entry.tool_type == KNOWLEDGE else None

    return list(await asyncio.gather(*(one(str(c)) for c in plan.manifest.get("cites") or [])))


def checked_arguments(plan: Plan, arguments: dict[str, str]) -> dict[str, Any]:
    """The arguments checked against the directive's inputs, with the defaults filled in, in the
    order prompts/list gives them; -32602 naming what is wrong."""
    schema = plan.parameters or {}
    props: dict[str, Any] = schema.get("properties") or {}
    required = [n for n in schema.get("required") or [] if n in props]
    where = f"prompt {plan.tool_id!r}"
    unknown = sorted(set(arguments) - set(props))
    if unknown and schema.get("additionalProperties") is not True:
        raise invalid_params(
            f"{where}: unknown argument(s) {', '.join(unknown)}; its arguments: {', '.join(sorted(props)) or 'none'}",
            unknown=unknown,
        )
    missing = [n for n in required if arguments.get(n) in (None, "")]
    if missing:
        raise invalid_params(f"{where}: missing required argument(s) {', '.join(missing)}", missing=missing)
    for n, value in arguments.items():
        enum = (props.get(n) or {}).get("enum")
        if enum and value not in [str(v) for v in enum]:
            raise invalid_params(f"{where}: argument {n} must be one of {', '.join(str(v) for v in enum)}", name=n)
    values: dict[str, Any] = {}
    for arg in arguments_of(schema):
        if arg.name in arguments:
            values[arg.name] = arguments[arg.name]
        elif "default" in props[arg.name]:
            values[arg.name] = props[arg.name]["default"]
    return values | {n: v for n, v in arguments.items() if n not in values}


def rendered(plan: Plan, values: dict[str, Any], cites: Sequence[tuple[str, Plan | None]] = ()) -> GetPromptResult:
    """The directive `plan` as a prompt: its instructions filled with the checked `values`, then
    the text of each knowledge entry it cites, embedded (those the caller may read)."""
    entry = plan.entrypoint
    instructions = entry.content_text if entry is not None else None
    text = fill(instructions, values, strict=False) if instructions else "(this directive has no instructions)"
    lines = [text.rstrip(), "", "---", f"Directive: {plan.tool_id}@{plan.version}"]
    if values:
        lines.append("Inputs:")
        lines += [f"- {n}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for n, v in values.items()]
    lines.append(
        "Its tool context (the tools it requires, their availability, its permissions): "
        f"execute(action='run', item_id='{plan.tool_id}', parameters={{...the inputs}})"
    )
    missing = [ref for ref, entry_plan in cites if entry_plan is None]
    if missing:
        lines.append("Cited knowledge not available: " + ", ".join(missing))
    messages = [PromptMessage(role="user", content=TextContent(type="text", text="\n".join(lines)))]
    for _, known in cites:
        if known is not None:
            uri = knowledge_uri(known.tool_id, known.version)
            messages += [
                PromptMessage(role="user", content=EmbeddedResource(type="resource", resource=contents))
                for contents in contents_of(uri, known)
            ]
    return GetPromptResult(description=plan.manifest.get("description") or None, messages=messages)
