"""Running a thread: a directive followed by a model, within a budget, under the directive's
permissions.

A thread (tool_type thread, executor llm_runtime) names its directive and budget in its
config; the runtime (supabase/seed/llm_runtime/tool.yaml) holds providers and model tiers as
data. The merged config is

    providers:    {name: {format: anthropic_messages | openai_chat, url, headers, timeout}}
    tiers:        {name: {provider, model, max_output}}
    default_tier: a tier
    directive:    ref or ref@version                 the directive the model follows
    tier:         a tier (default: default_tier)
    budget:       {tokens, tool_calls, seconds, cost_usd}   cost_usd: US dollars (public.model_prices)
    timeout:      seconds: the whole thread's limit, as the design documents write it (the
                  smaller of it and budget.seconds)

A run is one session (`thread-<uuid>`), nested under its caller's: the Invocation's context
is its directive's parent context, and its budget is narrowed to what the caller has left
(the Invocation's limits, core/limits.py), which its spending is charged to as well.

 0. the model's price is read once (public.model_price), to count its cost in money;
 1. the directive is run through the guarded path (audited; it opens the directive's
    context, a child of the caller's, so it can only narrow it), giving its instructions and
    the schemas of the tools it declares; a thread that declares `permissions` narrows that
    context further (never widens it);
 2. the model gets the instructions, the inputs and the available tools, in its provider's
    format (runner/handlers/llm_formats.py), over the http_client primitive's pooled client;
 3. every tool call it makes goes through the runner's `call_tool` (the Invocation's), the same
    path as MCP `execute run` and rendered as it renders it (runner/harness/mcp_answer.py): the
    context's permissions, rate limits, approvals, and an audit row for every call, allowed or
    refused; the result (or refusal) goes back to it;
 4. it ends at the model's final answer (status success), or when a budget runs out:
    tokens (as the provider's usage reports them, a sub-thread's included), tool calls,
    wall seconds, or money (the tokens priced). Then it
    stops cleanly, status error, saying which budget ran out, with the transcript so far;
    no tool call is left half done (a call is started only within the budget, and is
    bounded by the seconds left, which the guarded path audits as a timeout);
 5. what it spent is kept in public.thread_usage (public.record_thread_usage prices it).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..core.expand import expand_vars_deep
from ..core.limits import MAX_DEPTH, Allowance
from ..core.plan import Plan
from ..core.refs import ToolRef
from ..errors import ConfigError, KiwiError, Refused
from ..harness.mcp_answer import rendered_call
from ..primitives.base import CallTool, Invocation, Outcome, Status
from ..registry.base import Registry
from .llm_formats import Call, Format, Result, Tool, Turn, format_named

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
DEFAULT_BUDGET = {"tokens": 200_000, "tool_calls": 50, "seconds": 600.0}


@dataclass
class Budget:
    tokens: int
    tool_calls: int
    seconds: float
    cost_usd: float | None = None  # money, priced from public.model_prices; None: no limit

    @classmethod
    def of(cls, config: Any) -> Budget:
        given = config if isinstance(config, dict) else {}
        merged = {**DEFAULT_BUDGET, **{k: v for k, v in given.items() if v is not None}}
        try:
            cost = None if merged.get("cost_usd") is None else float(merged["cost_usd"])
            return cls(int(merged["tokens"]), int(merged["tool_calls"]), float(merged["seconds"]), cost)
        except (TypeError, ValueError) as e:
            raise ConfigError(
                f"budget: {e}", hint="budget is {tokens: int, tool_calls: int, seconds: number, cost_usd: number}"
            ) from e


class _Stop(Exception):
    """A budget ran out: `which`, and how much of it was used."""

    def __init__(self, which: str, used: float, limit: float) -> None:
        super().__init__(which)
        self.which, self.used, self.limit = which, used, limit


class ThreadHandler:
    """Runs thread plans. `http_client`: where the model requests go, the http_client primitive's
    pooled client (given at assembly: runner.handlers.standard_handlers); else one of its own."""

    name = "thread"

    def __init__(self, http_client: Callable[[], httpx.AsyncClient] | None = None) -> None:
        self._http_client = http_client
        self._own: httpx.AsyncClient | None = None

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type == "thread"

    async def aclose(self) -> None:
        if self._own is not None:
            await self._own.aclose()
            self._own = None

    def _client(self) -> httpx.AsyncClient:
        if self._http_client is not None:
            return self._http_client()
        if self._own is None or self._own.is_closed:
            self._own = httpx.AsyncClient()
        return self._own

    async def run(self, invocation: Invocation) -> Outcome:
        plan, call_tool, registry = invocation.plan, invocation.call_tool, invocation.registry
        if call_tool is None or registry is None:
            raise ConfigError(
                f"{plan.tool_id}: a thread needs the runner to run its directive and tools",
                hint="run it through runner.harness.run.Runner, which passes its call_tool and registry",
            )
        thread = _Thread(plan, _Setup.of(plan, invocation.environ), call_tool, registry, invocation)
        if thread.allowance.depth > MAX_DEPTH:
            raise Refused(
                f"{plan.tool_id} was not run: threads started from runs are nested {MAX_DEPTH} deep at most",
                hint="a thread that starts threads needs a way to stop",
            )
        await thread.priced()
        rendered = await thread.open_directive(invocation.params)
        outcome = (
            rendered
            if isinstance(rendered, Outcome)
            else await thread.converse(self._client(), rendered, invocation.params)
        )
        return await thread.recorded(outcome)


@dataclass
class _Setup:
    """What a thread's config says, checked: its directive, model tier, provider and budget."""

    directive: str
    tier_name: str
    tier: dict[str, Any]
    provider: dict[str, Any]
    fmt: Format
    budget: Budget

    @classmethod
    def of(cls, plan: Plan, environ: Mapping[str, str]) -> _Setup:
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
        provider = expand_vars_deep(provider, environ)
        fmt = format_named(str(provider.get("format")))
        if fmt is None:
            raise ConfigError(
                f"provider {tier.get('provider')}: unknown format {provider.get('format')!r}",
                hint="format is anthropic_messages or openai_chat",
            )
        budget = Budget.of(config.get("budget"))
        # the documents' `timeout` on a thread (its own, not its executors') limits the whole thread
        own = (plan.manifest.get("config") or {}).get("timeout")
        if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
            budget.seconds = min(budget.seconds, float(own))
        return cls(directive_ref, str(tier_name), tier, provider, fmt, budget)


class _Thread:
    """One run of a thread: its session, clock and budget, the context its calls are made in,
    and what it reports (`state`: the transcript and usage so far)."""

    def __init__(
        self, plan: Plan, setup: _Setup, call_tool: CallTool, registry: Registry, invocation: Invocation
    ) -> None:
        self.plan, self.setup, self.call_tool, self.registry = plan, setup, call_tool, registry
        budget = setup.budget
        self.session = f"thread-{uuid.uuid4()}"
        self.started = time.monotonic()
        self.directive = ToolRef.parse(setup.directive, strict=False)  # the last `@` splits
        # nested under its caller: the caller's context is its directive's parent, and its limits
        # are its budget narrowed by what the caller has left (core/limits.py)
        self.parent_context = invocation.context
        self.allowance = (invocation.limits or Allowance()).child(
            budget.tokens, budget.tool_calls, budget.seconds, budget.cost_usd
        )
        self.budget = Budget(
            int(self.allowance.tokens or 0),
            int(self.allowance.tool_calls or 0),
            float(budget.seconds if self.allowance.deadline is None else self.allowance.deadline - self.started),
            self.allowance.cost_usd,
        )
        self.context: dict[str, Any] = {}
        self.state: dict[str, Any] = {
            "thread": f"{plan.tool_id}@{plan.version}",
            "session": self.session,
            "tier": setup.tier_name,
            "model": setup.tier.get("model"),
            "budget": {k: v for k, v in vars(self.budget).items() if v is not None},
            "transcript": [],
            "usage": {
                "tokens": 0,
                "tool_calls": 0,
                "seconds": 0.0,
                "cost_usd": 0.0,
                "input_tokens": 0,
                "output_tokens": 0,
            },
            "price": None,
        }
        if invocation.context is not None or invocation.limits is not None:
            self.state["parent"] = {"session": invocation.session, "context": invocation.context}
        self.transcript: list[dict[str, Any]] = self.state["transcript"]
        self.usage: dict[str, Any] = self.state["usage"]

    def left(self) -> float:
        return self.budget.seconds - (time.monotonic() - self.started)

    def out_of_seconds(self) -> _Stop:
        return _Stop("seconds", round(time.monotonic() - self.started, 3), self.budget.seconds)

    def charge(self, *, tokens: int = 0, tool_calls: int = 0, cost_usd: float = 0.0) -> None:
        """Count what this thread spent (its sub-threads charge it too, through the allowance)."""
        self.allowance.charge(tokens=tokens, tool_calls=tool_calls, cost_usd=cost_usd)
        self.usage["tokens"] = int(self.allowance.spent["tokens"])
        self.usage["tool_calls"] = int(self.allowance.spent["tool_calls"])
        spent = self.allowance.spent["cost_usd"]
        self.usage["cost_usd"] = round(spent, 8) if self.state["price"] is not None or spent else None

    def over_budget(self) -> None:
        """Raise _Stop when the tokens or the money spent (this thread's and its sub-threads') are over."""
        if self.usage["tokens"] > self.budget.tokens:
            raise _Stop("tokens", self.usage["tokens"], self.budget.tokens)
        if self.budget.cost_usd is not None and self.usage["cost_usd"] > self.budget.cost_usd:
            raise _Stop("cost_usd", self.usage["cost_usd"], self.budget.cost_usd)

    def cost_of(self, turn: Turn) -> float:
        """A model turn's cost in US dollars, at the model's price (public.model_prices)."""
        price = self.state["price"] or {}
        per_input, per_output = (
            float(price.get("input_usd_per_mtok") or 0),
            float(price.get("output_usd_per_mtok") or 0),
        )
        return (turn.input_tokens * per_input + turn.output_tokens * per_output) / 1_000_000

    async def priced(self) -> None:
        """The model's price, read once (public.model_price); a budget in money needs one."""
        model = str(self.setup.tier.get("model"))
        try:
            self.state["price"] = await self.registry.model_price(model)
        except KiwiError as e:  # a registry from before model prices: tokens are still counted
            self.state["price_error"] = e.message
        if self.state["price"] is None and self.budget.cost_usd is not None:
            raise ConfigError(
                f"{self.plan.tool_id}: budget.cost_usd is set, but public.model_prices has no price for {model}",
                hint="an admin adds it: insert into model_prices (model, input_usd_per_mtok, output_usd_per_mtok) ...",
            )
        if self.state["price"] is None:
            self.usage["cost_usd"] = None

    async def recorded(self, outcome: Outcome) -> Outcome:
        """The run's spend kept in public.thread_usage (its own model's tokens, priced by the
        database), and the record's id and cost in the output; a record that fails is a warning."""
        parent = self.state.get("parent") or {}
        usage = {
            "session_id": self.session,
            "parent_session": parent.get("session"),
            "thread": self.state["thread"],
            "model": str(self.setup.tier.get("model")),
            "input_tokens": self.usage["input_tokens"],
            "output_tokens": self.usage["output_tokens"],
            "tool_calls": self.usage["tool_calls"],
            "status": outcome.status,
        }
        try:
            kept = await self.registry.record_thread_usage({k: v for k, v in usage.items() if v is not None})
        except KiwiError as e:
            outcome.detail.setdefault("warnings", []).append(f"the thread's usage was not recorded: {e.message}")
        else:
            self.usage["recorded"] = {"id": kept.get("id"), "cost_usd": kept.get("cost_usd")}
        return outcome

    def finish(self, status: Status, error: str | None = None, **extra: Any) -> Outcome:
        self.usage["seconds"] = round(time.monotonic() - self.started, 3)
        self.state.update(extra)
        return Outcome(status=status, output=self.state, error=error, detail={k: v for k, v in extra.items()})

    async def open_directive(self, params: dict[str, Any]) -> dict[str, Any] | Outcome:
        """1. The directive, through the guarded path: its rendered output (instructions and
        tools), with the context it opened (narrowed by the thread's own permissions) kept for
        the calls; or the run's end, if it could not be run."""
        plan, directive_ref = self.plan, self.setup.directive
        ran = await rendered_call(
            self.call_tool,
            session=self.session,
            ref=self.directive.ref,
            ver=self.directive.version,
            params=params,
            context=self.parent_context,
            run_timeout_s=self.left(),
        )
        ran_json = ran.structured_content or {}
        if ran.is_error:
            return self.finish("error", f"{plan.tool_id}: directive {directive_ref} could not be run: {_text(ran)}")
        rendered: dict[str, Any] = ran_json.get("output") or {}
        context = ran_json.get("context") or {}
        narrowed = plan.manifest.get("permissions")
        if narrowed:
            context = await self.registry.open_context(self.session, None, context.get("id"), narrowed)
        self.context = context
        self.state["context"] = {k: context.get(k) for k in ("id", "directive", "permissions")}
        return rendered

    async def converse(self, client: httpx.AsyncClient, rendered: dict[str, Any], params: dict[str, Any]) -> Outcome:
        """2-4. The model's turns and its tool calls, until its final answer or a budget runs out."""
        fmt, ref = self.setup.fmt, self.directive.ref
        tools, by_name = _tools(rendered.get("tools") or [])
        instructions = (rendered.get("directive") or {}).get("instructions") or ""
        system = (
            f"You are following the directive {rendered.get('directive', {}).get('tool_id', ref)}. "
            "Use only the tools offered; a refused call says why. Answer without calling a tool when done.\n\n"
            + instructions
        )
        messages = [fmt.user("Inputs:\n" + json.dumps(params, ensure_ascii=False, default=str))]
        try:
            while True:
                turn = await self.model_turn(client, system, messages, tools)
                if isinstance(turn, Outcome):
                    return turn
                if not turn.calls:
                    return self.finish("success", answer=turn.text, stopped=None)
                messages.extend(fmt.results(await self.tool_calls(turn.calls, by_name)))
        except _Stop as stop:
            return self.finish(
                "error",
                f"{self.plan.tool_id} stopped: its {stop.which} budget ran out ({stop.used:g} of {stop.limit:g}); "
                "every tool call made so far was run and audited",
                stopped="budget",
                budget_exhausted=stop.which,
            )

    async def model_turn(
        self, client: httpx.AsyncClient, system: str, messages: list[dict[str, Any]], tools: list[Tool]
    ) -> Turn | Outcome:
        """2. The model's turn, added to the messages and the transcript; or the run's end, if the
        provider failed. Raises _Stop when the seconds or the tokens run out."""
        plan, setup = self.plan, self.setup
        if self.left() <= 0:
            raise self.out_of_seconds()
        body = setup.fmt.request(str(setup.tier.get("model")), system, messages, tools, self.max_tokens)
        own_limit = float(setup.provider.get("timeout") or 120)
        timeout = min(self.left(), own_limit)
        try:
            response = await client.post(
                str(setup.provider["url"]), json=body, headers=setup.provider.get("headers") or {}, timeout=timeout
            )
        except httpx.TimeoutException:
            if timeout < own_limit:  # cut short by the budget's seconds
                raise self.out_of_seconds() from None
            return self.finish("timeout", f"{plan.tool_id}: the model did not answer within {timeout:g} s")
        except httpx.HTTPError as e:
            return self.finish("error", f"{plan.tool_id}: the provider could not be reached: {type(e).__name__}")
        if response.status_code >= 400:
            return self.finish(
                "error", f"{plan.tool_id}: the provider answered HTTP {response.status_code}: {response.text[:500]}"
            )
        turn, assistant = setup.fmt.parse(response.json())
        messages.append(assistant)
        self.usage["input_tokens"] += turn.input_tokens
        self.usage["output_tokens"] += turn.output_tokens
        self.charge(tokens=turn.tokens, cost_usd=self.cost_of(turn) if self.state["price"] else 0.0)
        self.transcript.append(
            {
                "role": "assistant",
                "text": turn.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls],
                "tokens": turn.tokens,
            }
        )
        self.over_budget()
        return turn

    @property
    def max_tokens(self) -> int:
        return int(self.setup.tier.get("max_output") or 4096)

    async def tool_calls(self, calls: list[Call], by_name: dict[str, dict[str, Any]]) -> list[Result]:
        """3. The turn's tool calls, each through the guarded path, started only within the
        budget (raises _Stop when the calls or the seconds run out)."""
        results: list[Result] = []
        for call in calls:
            if self.usage["tool_calls"] >= self.budget.tool_calls:
                raise _Stop("tool_calls", self.usage["tool_calls"], self.budget.tool_calls)
            if self.left() <= 0:
                raise self.out_of_seconds()
            self.charge(tool_calls=1)
            result = await self.call(by_name, call, self.left())
            self.charge()  # what a sub-thread it started spent, as this thread's usage
            self.transcript.append(
                {"role": "tool", "id": call.id, "name": call.name, "is_error": result.is_error, "text": result.text}
            )
            results.append(result)
            self.over_budget()  # spent by a sub-thread
        return results

    async def call(self, by_name: dict[str, dict[str, Any]], call: Call, seconds_left: float) -> Result:
        entry = by_name.get(call.name)
        if entry is None:
            known = ", ".join(sorted(by_name)) or "none"
            return Result(call, f"error: no tool named {call.name}; the tools offered are: {known}", True)
        if call.bad_arguments:
            return Result(call, f"error: {call.name} was not run: {call.bad_arguments}", True)
        ran = await rendered_call(
            self.call_tool,
            session=self.session,
            ref=str(entry["id"]),
            ver=entry.get("version"),
            params=call.arguments,
            context=self.context.get("id"),
            run_timeout_s=max(seconds_left, 0.001),
            limits=self.allowance,
        )
        return Result(call, _text(ran), bool(ran.is_error))


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
