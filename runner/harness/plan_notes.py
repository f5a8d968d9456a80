"""What a plan says about itself besides what it runs: the warnings its version carries
(deprecated, yanked), a local tool shadowing the registry's, a knowledge entry's text and where
it came from. Shared by runs and MCP `load`."""

from __future__ import annotations

from typing import Any

from ..core.plan import Plan


def shadowing(plan: Plan) -> list[str]:
    """The announcement of a local tool that shadows a registry tool of the same identity."""
    if plan.source == "registry" or plan.shadows is None:
        return []
    return [
        f"{plan.tool_id}: running the {plan.source} space's tool ({plan.origin}), which shadows the "
        f"registry's {plan.tool_id}@{plan.shadows}; `kiwi run --registry {plan.tool_id}` runs the registry's"
    ]


def lifecycle_warnings(plan: Plan) -> list[str]:
    """What running this version warns of: deprecated (with its message), or yanked, which a plan
    is only when its exact version was asked for (a pin: tool@V, --version, kiwi.lock)."""
    where = f"{plan.tool_id}@{plan.version}"
    said: list[str] = []
    if plan.yanked:
        why = f": {plan.yanked_reason}" if plan.yanked_reason else ""
        said.append(
            f"{where} is yanked{why}; it runs only because this exact version is pinned "
            f"(unpinned, {plan.tool_id} runs its latest version)"
        )
    if plan.deprecated:
        said.append(f"{where} is deprecated: {plan.deprecation_message or 'no reason given'}")
    return said


SOURCE_KEYS = ("source_type", "source_url")  # a knowledge entry's config, as the design documents name it


def knowledge_source(plan: Plan) -> dict[str, str]:
    """Where a knowledge entry came from (config.source_type, config.source_url; publish checked
    them: supabase/migrations/*_config_contracts.sql, *_publish.sql), returned with its text by
    a run and by MCP load and execute. Empty for other tools and entries that do not say."""
    if plan.tool_type != "knowledge":
        return {}
    return {k: v for k in SOURCE_KEYS if isinstance(v := plan.config.get(k), str) and v}


def knowledge_text(plan: Plan) -> Any:
    """A knowledge entry's text: its entrypoint's, else every file's by path."""
    texts = {f.path: f.content_text for f in plan.files}
    if plan.entrypoint and plan.entrypoint.content_text is not None:
        return plan.entrypoint.content_text
    return texts
