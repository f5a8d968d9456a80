"""Running a thread: a directive followed by a model, within a budget, under the directive's
permissions.

A thread (tool_type thread, executor llm_runtime) names its directive and budget in its
config; the runtime (supabase/seed/llm_runtime/tool.yaml) holds providers and model tiers as
data. The merged config is

    providers:    {name: {format: anthropic_messages | openai_chat, url, headers, timeout_s}}
    tiers:        {name: {provider, model, max_output}}
    default_tier: a tier
    directive:    ref or ref@version                 the directive the model follows
    tier:         a tier (default: default_tier)
    budget:       {tokens, tool_calls, seconds}

A run is one session (`thread-<uuid>`):

 1. the directive is run through the guarded path (audited; it opens the directive's
    context), giving its instructions and the schemas of the tools it declares; a thread
    that declares `permissions` narrows that context further (never widens it);
 2. the model gets the instructions, the inputs and the available tools, in its provider's
    format (runner/handlers/llm_formats.py), over the http_client primitive's pooled client;
 3. every tool call it makes goes through `guarded_run` (runner/mcp/server.py), the same
    path as MCP `execute run`: the context's permissions, rate limits, approvals, and an
    audit row for every call, allowed or refused; the result (or refusal) goes back to it;
 4. it ends at the model's final answer (status success), or when a budget runs out:
    tokens (as the provider's usage reports them), tool calls, or wall seconds. Then it
    stops cleanly, status error, saying which budget ran out, with the transcript so far;
    no tool call is left half done (a call is started only within the budget, and is
    bounded by the seconds left, which the guarded path audits as a timeout).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from ..core.expand import expand_vars_deep
from ..core.plan import Plan
from ..core.refs import ToolRef
from ..errors import ConfigError
from ..primitives.base import Invocation, Outcome
from .llm_formats import Call, Result, Tool, format_named

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
DEFAULT_BUDGET = {"tokens": 200_000, "tool_calls": 50, "seconds": 600.0}


@dataclass
class Budget:
    tokens: int
    tool_calls: int
    seconds: float

    @classmethod
    def of(cls, config: Any) -> Budget:
        given = config if isinstance(config, dict) else {}
        merged = {**DEFAULT_BUDGET, **{k: v for k, v in given.items() if v is not None}}
        try:
            return cls(int(merged["tokens"]), int(merged["tool_calls"]), float(merged["seconds"]))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"budget: {e}", hint="budget is {tokens: int, tool_calls: int, seconds: number}") from e


class _Stop(Exception):
    """A budget ran out: `which`, and how much of it was used."""

    def __init__(self, which: str, used: float, limit: float) -> None:
        super().__init__(which)
        self.which, self.used, self.limit = which, used, limit


class ThreadHandler:
    name = "thread"

    def __init__(self) -> None:
        self._own: httpx.AsyncClient | None = None

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type == "thread"

    async def aclose(self) -> None:
        if self._own is not None:
            await self._own.aclose()
            self._own = None

    def _client(self, runner: Any) -> httpx.AsyncClient:
        """The http_client primitive's pool, when the runner's dispatcher has one."""
        for handler in getattr(getattr(runner, "dispatcher", None), "handlers", []):
            if getattr(handler, "name", None) == "http_client" and hasattr(handler, "instance"):
                return handler.instance().client
        if self._own is None or self._own.is_closed:
            self._own = httpx.AsyncClient()
        return self._own

    async def run(self, invocation: Invocation) -> Outcome:
        from ..mcp.server import guarded_run  # the MCP stack, loaded only when a thread runs

        plan, runner = invocation.plan, invocation.runner
        if runner is None or invocation.registry is None:
            raise ConfigError(
                f"{plan.tool_id}: a thread needs the runner to run its directive and tools",
                hint="run it through runner.harness.run.Runner, which passes itself",
            )
        registry = invocation.registry
        config = plan.config
        directive_ref = config.get("directive")
        if not isinstance(directive_ref, str) or not directive_ref.strip():
            raise ConfigError(
                f"{plan.tool_id}: config.directive is not set", hint="name the directive the model follows"
            )
        tier_name = config.get("tier") or config.get("default_tier")
        tier = (config.get("tiers") or {}).get(tier_name)
        if not isinstance(tier, dict):
            raise ConfigError(
                f"{plan.tool_id}: no model tier {tier_name!r}", hint=f"tiers: {sorted(config.get('tiers') or {})}"
            )
        provider = (config.get("providers") or {}).get(tier.get("provider"))
        if not isinstance(provider, dict):
            raise ConfigError(f"{plan.tool_id}: tier {tier_name} names no known provider {tier.get('provider')!r}")
        provider = expand_vars_deep(provider, invocation.environ)
        fmt = format_named(str(provider.get("format")))
        if fmt is None:
            raise ConfigError(
                f"provider {tier.get('provider')}: unknown format {provider.get('format')!r}",
                hint="format is anthropic_messages or openai_chat",
            )
        budget = Budget.of(config.get("budget"))
        session = f"thread-{uuid.uuid4()}"
        started = time.monotonic()
        state: dict[str, Any] = {
            "thread": f"{plan.tool_id}@{plan.version}",
            "session": session,
            "tier": tier_name,
            "model": tier.get("model"),
            "transcript": [],
            "usage": {"tokens": 0, "tool_calls": 0, "seconds": 0.0},
        }

        def left() -> float:
            return budget.seconds - (time.monotonic() - started)

        def finish(status: str, error: str | None = None, **extra: Any) -> Outcome:
            state["usage"]["seconds"] = round(time.monotonic() - started, 3)
            state.update(extra)
            return Outcome(status=status, output=state, error=error, detail={k: v for k, v in extra.items()})

        # 1. the directive, through the guarded path: its instructions, tools and context
        ref, ver = (named := ToolRef.parse(directive_ref, strict=False)).ref, named.version  # the last `@` splits
        ran = await guarded_run(
            runner, registry, session=session, ref=ref, ver=ver, params=invocation.params, run_timeout_s=left()
        )
        ran_json = ran.structured_content or {}
        if ran.is_error:
            return finish("error", f"{plan.tool_id}: directive {directive_ref} could not be run: {_text(ran)}")
        rendered = ran_json.get("output") or {}
        context = ran_json.get("context") or {}
        narrowed = plan.manifest.get("permissions")
        if narrowed:
            context = await registry.open_context(session, None, context.get("id"), narrowed)
        state["context"] = {k: context.get(k) for k in ("id", "directive", "permissions")}

        tools, by_name = _tools(rendered.get("tools") or [])
        instructions = (rendered.get("directive") or {}).get("instructions") or ""
        system = (
            f"You are following the directive {rendered.get('directive', {}).get('tool_id', ref)}. "
            "Use only the tools offered; a refused call says why. Answer without calling a tool when done.\n\n"
            + instructions
        )
        messages = [fmt.user("Inputs:\n" + json.dumps(invocation.params, ensure_ascii=False, default=str))]
        client = self._client(runner)
        max_tokens = int(tier.get("max_output") or 4096)
        transcript, usage = state["transcript"], state["usage"]

        try:
            while True:
                # 2. the model's turn
                if left() <= 0:
                    raise _Stop("seconds", round(time.monotonic() - started, 3), budget.seconds)
                body = fmt.request(str(tier.get("model")), system, messages, tools, max_tokens)
                own_limit = float(provider.get("timeout_s") or 120)
                timeout = min(left(), own_limit)
                try:
                    response = await client.post(
                        str(provider["url"]), json=body, headers=provider.get("headers") or {}, timeout=timeout
                    )
                except httpx.TimeoutException:
                    if timeout < own_limit:  # cut short by the budget's seconds
                        raise _Stop("seconds", round(time.monotonic() - started, 3), budget.seconds) from None
                    return finish("timeout", f"{plan.tool_id}: the model did not answer within {timeout:g} s")
                except httpx.HTTPError as e:
                    return finish("error", f"{plan.tool_id}: the provider could not be reached: {type(e).__name__}")
                if response.status_code >= 400:
                    return finish(
                        "error",
                        f"{plan.tool_id}: the provider answered HTTP {response.status_code}: {response.text[:500]}",
                    )
                turn, assistant = fmt.parse(response.json())
                messages.append(assistant)
                usage["tokens"] += turn.tokens
                transcript.append(
                    {
                        "role": "assistant",
                        "text": turn.text,
                        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls],
                        "tokens": turn.tokens,
                    }
                )
                if usage["tokens"] > budget.tokens:
                    raise _Stop("tokens", usage["tokens"], budget.tokens)
                if not turn.calls:
                    return finish("success", answer=turn.text, stopped=None)
                # 3. its tool calls, each through the guarded path
                results: list[Result] = []
                for call in turn.calls:
                    if usage["tool_calls"] >= budget.tool_calls:
                        raise _Stop("tool_calls", usage["tool_calls"], budget.tool_calls)
                    if left() <= 0:
                        raise _Stop("seconds", round(time.monotonic() - started, 3), budget.seconds)
                    usage["tool_calls"] += 1
                    result = await _call(guarded_run, runner, registry, session, context, by_name, call, left())
                    transcript.append(
                        {
                            "role": "tool",
                            "id": call.id,
                            "name": call.name,
                            "is_error": result.is_error,
                            "text": result.text,
                        }
                    )
                    results.append(result)
                messages.extend(fmt.results(results))
        except _Stop as stop:
            return finish(
                "error",
                f"{plan.tool_id} stopped: its {stop.which} budget ran out ({stop.used:g} of {stop.limit:g}); "
                "every tool call made so far was run and audited",
                stopped="budget",
                budget_exhausted=stop.which,
            )


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _tools(declared: list[dict[str, Any]]) -> tuple[list[Tool], dict[str, dict[str, Any]]]:
    """The directive's available tools as the model sees them (names the providers accept)."""
    tools: list[Tool] = []
    by_name: dict[str, dict[str, Any]] = {}
    for entry in declared:
        if not entry.get("available"):
            continue
        name = _NOT_IN_NAME.sub("_", str(entry["id"]))[:64]
        schema = entry.get("parameters") or {"type": "object", "properties": {}}
        by_name[name] = entry
        tools.append(Tool(name=name, description=entry.get("description") or entry["id"], schema=schema))
    return tools, by_name


async def _call(
    guarded_run: Any,
    runner: Any,
    registry: Any,
    session: str,
    context: dict[str, Any],
    by_name: dict[str, dict[str, Any]],
    call: Call,
    seconds_left: float,
) -> Result:
    entry = by_name.get(call.name)
    if entry is None:
        known = ", ".join(sorted(by_name)) or "none"
        return Result(call, f"error: no tool named {call.name}; the tools offered are: {known}", True)
    if call.bad_arguments:
        return Result(call, f"error: {call.name} was not run: {call.bad_arguments}", True)
    ran = await guarded_run(
        runner,
        registry,
        session=session,
        ref=str(entry["id"]),
        ver=entry.get("version"),
        params=call.arguments,
        context=context.get("id"),
        run_timeout_s=max(seconds_left, 0.001),
    )
    return Result(call, _text(ran), bool(ran.is_error))
