"""completion/complete for the catalog's prompts and resource templates, so a client can offer
values while its user types:

    a prompt's argument          the directive's declared input: its enum values, or else its
                                 examples and default, that start with what was typed
    the templates' `{ref}`       the knowledge entries the caller can see whose reference starts
                                 with what was typed (public.list_items, as resources/list)

Anything else (an input that declares none of these, the templates' `{version}`) completes to
an empty list. An unknown or invisible prompt, or a template this server does not offer, is
-32602, as prompts/get answers it. Everything runs as the caller, so RLS decides what exists.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from mcp.server.context import ServerRequestContext
from mcp_types import CompleteRequestParams, CompleteResult, Completion, PromptReference

from ...core.refs import MCP_WORDS, ToolRef
from ...errors import UsageError
from ...registry.base import Registry
from ..meta.state import ServerState
from .listing import answered, invalid_params
from .prompts import DIRECTIVE
from .resources import KNOWLEDGE, TEMPLATES

__all__ = ["MAX_VALUES", "complete", "input_values", "knowledge_refs"]

MAX_VALUES = 100
"""The most values one completion answers (the specification's limit); `hasMore` says there are more."""
_LAST_CHAR = chr(0x10FFFF)  # sorts after every other character, in PostgreSQL's "C" (byte) order too
_TEMPLATE_URIS = frozenset(t.uri_template for t in TEMPLATES)


async def complete(state: ServerState, ctx: ServerRequestContext[Any], params: CompleteRequestParams) -> CompleteResult:
    ref, argument = params.ref, params.argument
    if isinstance(ref, PromptReference):
        unknown = invalid_params(
            f"unknown prompt: {ref.name!r} (prompts/list names the directives you can use)", name=ref.name
        )

        async def call() -> Completion:
            return await _prompt_values(state.registry, ref.name, argument.name, argument.value, unknown)

        return CompleteResult(completion=await answered("completion/complete", call, not_found=unknown))

    uri = ref.uri
    if uri not in _TEMPLATE_URIS:
        raise invalid_params(f"unknown resource template: {uri} (resources/templates/list names them)", uri=uri)
    if argument.name != "ref":
        return CompleteResult(completion=Completion(values=[]))

    async def refs() -> Completion:
        return await knowledge_refs(state.registry, argument.value)

    not_found = invalid_params(f"unknown resource template: {uri}", uri=uri)
    return CompleteResult(completion=await answered("completion/complete", refs, not_found=not_found))


async def _prompt_values(registry: Registry, name: str, argument: str, typed: str, unknown: Exception) -> Completion:
    try:
        named = ToolRef.parse(name, None, MCP_WORDS)
        plan = await registry.plan(named.ref, named.version)
    except UsageError:  # a name no directive can have
        raise unknown from None
    if plan.tool_type != DIRECTIVE:
        raise unknown
    prop = ((plan.parameters or {}).get("properties") or {}).get(argument)
    return input_values(prop if isinstance(prop, dict) else {}, typed)


def input_values(prop: dict[str, Any], typed: str) -> Completion:
    """The values a declared input suggests that start with `typed` (ignoring case): its enum
    (as prompts/get compares them), or else its examples and its default."""
    offered = prop.get("enum") if isinstance(prop.get("enum"), list) else None
    if offered is None:
        examples = prop.get("examples")
        offered = [*(examples if isinstance(examples, list) else []), *([prop["default"]] if "default" in prop else [])]
    start = typed.casefold()
    values = list(dict.fromkeys(t for t in map(_text, offered) if t.casefold().startswith(start)))
    return _completion(values)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value) if not isinstance(value, dict | list) else json.dumps(value)


async def knowledge_refs(registry: Registry, typed: str) -> Completion:
    """References of the knowledge entries the caller can see that start with `typed` (a
    percent-encoded `/` read as one), in reference order. They sort together, so one page of
    list_items starting just before `typed` holds them all, up to the limit."""
    prefix = unquote(typed)
    if "\x00" in prefix:
        return Completion(values=[])
    args: dict[str, Any] = {"p_tool_type": KNOWLEDGE, "p_limit": MAX_VALUES + 1}
    if prefix:
        args["p_after"] = prefix[:-1] + chr(ord(prefix[-1]) - 1) + _LAST_CHAR if ord(prefix[-1]) > 1 else prefix[:-1]
    rows = await registry.backend.call("list_items", args, returns="rows", read=True) or []
    values: list[str] = []
    for row in rows:
        if not str(row["tool_id"]).startswith(prefix):
            if values:
                break
            continue  # before the prefix's range (only when the predecessor above is not exact)
        values.append(str(row["tool_id"]))
    return _completion(values)


def _completion(values: list[str]) -> Completion:
    more = len(values) > MAX_VALUES
    values = values[:MAX_VALUES]
    return Completion(values=values, total=None if more else len(values), has_more=more)
