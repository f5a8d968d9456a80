"""The registry: one typed client (`Registry`) over one seam (`Backend.call`).

Each method of `Registry` is one SQL function of the registry (supabase/migrations/),
called by name with its `p_*` arguments as the function declares them; an optional
argument left as None is not sent, so that the function's SQL default applies. A backend
carries a call and nothing else, as an httpx transport carries a request:

    await backend.call("resolve_execution_plan", {"p_tool_id": "hello_world"}, read=True)

    PostgresBackend  postgres.py  `select public.<function>(p_x => %s, ...)` on a pool, as the caller
    RestBackend      rest.py      PostgREST's `POST /rest/v1/rpc/<function>`, through supabase-py
    MemoryBackend    memory.py    answers from the plans and rows it is given (unit tests)

`returns` says what comes back: "value" (the function's one value), "rows" (a
set-returning function's rows, as dicts), "column" (the values of a set-returning function
of one column, in order), or a `Select` (rows of a table or view of `public`, filtered by
equality on `args`, as JSON objects). `read`: the call changes nothing, so a backend may
repeat it after a connection lost mid-call.

Backends translate the database's errors into KiwiErrors (errors.py): PT404 -> NotFound,
PT422/PT409/42501 -> Refused, 22023 -> UsageError (a bad manifest), a connection failure
-> RegistryUnavailable. What is particular to one function is written here, once: plans
and untouched gate verdicts remembered while the backend's cache is live (plan_cache.py),
approval ids checked before they are sent, batches of records answered as lists of ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol, Self, TypeAlias

from ..core.plan import Plan
from ..core.text import unstorable_text
from ..errors import UsageError

__all__ = ["Backend", "Cache", "Registry", "Returns", "Rows", "Select"]


class Rows(list[dict[str, Any]]):
    """Records to write, with their JSON array text when it was made already (the run journal
    encodes each record once, journal.py): a backend that sends JSON may send `json` as it is,
    since it encodes exactly these dicts; any other reads them as the list they are."""

    json: str | None = None


@dataclass(frozen=True)
class Select:
    """A read of a table or view of `public` instead of a function: the rows matching `args`,
    ordered by `order` (each column descending with `desc`), at most `limit`, with only
    `columns` when it names some (a list need not carry what only one row's page shows)."""

    order: tuple[str, ...]
    desc: bool = False
    limit: int | None = None
    columns: tuple[str, ...] = ()


# public.tool_runs but its payload (up to 64 KiB a run): what a list of runs shows
RUN_LIST_COLUMNS = (
    "id", "tool_id", "version", "content_hash", "status", "exit_code", "duration_ms", "error_summary",
    "executor_chain", "primitive", "params_sha256", "params_size", "source", "warnings", "caller",
    "caller_role", "started_at", "finished_at", "sandbox", "trace_id",
)  # fmt: skip

Returns: TypeAlias = Literal["value", "rows", "column"] | Select


class Cache(Protocol):
    """Answers remembered while they are known to be current (plan_cache.PlanCache)."""

    def peek(self, key: Hashable) -> dict[str, Any] | None: ...

    async def get(
        self,
        key: Hashable,
        fetch: Callable[[], Awaitable[dict[str, Any]]],
        keep: Callable[[dict[str, Any]], bool] | None = None,
        alias: Callable[[dict[str, Any]], Hashable | None] | None = None,
    ) -> dict[str, Any]: ...


class Backend(Protocol):
    """What carries the registry's calls: one coroutine, `call`."""

    @property
    def cache(self) -> Cache | None:
        """A backend whose database says when answers change (Postgres), else None; read-only
        here, so that a backend may hold a narrower type (PlanCache)."""
        ...

    def caller(self) -> str:
        """Whom the next call acts as, as a key (what one caller may read, another may not)."""
        ...

    async def call(
        self, function: str, args: Mapping[str, Any], *, returns: Returns = "value", read: bool = False
    ) -> Any:
        """public.<function>(<name> => <value>, ...), answered as `returns` says; the database's
        errors as KiwiErrors."""
        ...

    async def aclose(self) -> None: ...


ANY_SESSION = object()
"""In a verdict's key, instead of the session: the verdict holds in every session."""


def _shared(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A verdict's key with every session in place of its own."""
    return (*key[:4], ANY_SESSION)


def _any_session(key: tuple[Any, ...], verdict: dict[str, Any]) -> Hashable | None:
    """The key under which an untouched verdict is also kept for every session of the caller:
    when check_call says no limit is scoped to sessions (a queued run, an MCP session, each
    has a session of its own, and its first call then needs no round trip)."""
    return _shared(key) if verdict.get("per_session") is False else None


def _remembered(cache: Cache, key: tuple[Any, ...]) -> dict[str, Any] | None:
    """The verdict kept under `key`, else the one kept for every session of its caller."""
    known = cache.peek(key)
    return known if known is not None else cache.peek(_shared(key))


def _untouched(verdict: dict[str, Any]) -> bool:
    """A verdict that allowed a call without counting it or using an approval."""
    return verdict.get("allowed") is True and not verdict.get("limits") and verdict.get("approval") is None


def checked_uuid(value: object, message: str, hint: str) -> str:
    """`value` as a uuid's text, checked here so that a typo is a usage error (`message`, `hint`)
    naming it, not the database's cast error."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise UsageError(message, hint=hint) from None


def _uuid(value: str) -> str:
    """An approval id."""
    return checked_uuid(
        value, f"not an approval id: {value!r}", "approval ids are uuids; list them with `kiwi approvals`"
    )


def _storable(manifest: Any, files: Sequence[Any], manifest_yaml: str | None = None) -> None:
    """Refuse, naming each field, what PostgreSQL cannot store (a NUL, a lone surrogate) before it
    is sent: the database would answer with a raw error naming no field."""
    problems = [
        *unstorable_text(manifest, "manifest"),
        *unstorable_text(list(files), "files"),
        *unstorable_text(manifest_yaml, "manifest_yaml"),
    ]
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        err = UsageError(f"invalid manifest:\n{lines}", hint="remove those characters; nothing was sent")
        err.problems = problems  # type: ignore[attr-defined]  # as a 22023 from the registry carries them
        raise err


class Registry:
    """The registry's functions, typed, over any Backend (`PostgresRegistry` and `RestRegistry`
    are this class over their backend)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backend!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def plan(self, tool_id: str, version: str | None = None) -> Plan:
        """The execution plan as a frozen Plan; while the plan is remembered (the same dict comes
        back), the same Plan object, made once (core/identity.py)."""
        return Plan.of(await self.execution_plan(tool_id, version))

    async def execution_plan(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        """public.resolve_execution_plan(p_tool_id, p_version): the plan as a dict; from memory
        while the backend's cache says it is current (treat it as read-only)."""
        cache = self.backend.cache
        if cache is None:
            return await self._fetch_plan(tool_id, version)
        key = (self.backend.caller(), tool_id, version)  # per caller: what one may read, another may not
        known = cache.peek(key)  # the runner's hot path: no await when remembered
        return known if known is not None else await cache.get(key, partial(self._fetch_plan, tool_id, version))

    async def _fetch_plan(self, tool_id: str, version: str | None) -> dict[str, Any]:
        return await self._call("resolve_execution_plan", {"p_tool_id": tool_id}, read=True, p_version=version)

    async def chain(self, tool_id: str, version: str | None = None) -> list[dict[str, Any]]:
        """public.resolve_executor_chain(p_tool_id, p_version): rows ordered by depth, from the
        version (default the latest) down to its primitive."""
        args = {"p_tool_id": tool_id}
        return await self._call("resolve_executor_chain", args, returns="rows", read=True, p_version=version)

    async def chains_batch(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        """public.resolve_executor_chains_batch(p_tool_ids)."""
        return await self._call(
            "resolve_executor_chains_batch", {"p_tool_ids": list(tool_ids)}, returns="rows", read=True
        )

    async def chains_compact(self, tool_ids: list[str]) -> dict[str, Any]:
        """public.resolve_executor_chains_compact(p_tool_ids): the same chains as chains_batch,
        each element once: {"tools": [{"requested", "chain": [ref@version, ...]} or
        {"requested", "error", "error_code"}], "elements": {ref@version: {...}}}."""
        return await self._call("resolve_executor_chains_compact", {"p_tool_ids": list(tool_ids)}, read=True)

    async def search(
        self,
        query: str,
        *,
        tool_type: str | None = None,
        category: str | None = None,
        limit: int = 20,
        embedding: Sequence[float] | None = None,
        model: str | None = None,
    ) -> list[dict[str, Any]]:
        """public.search_tools(p_query, p_tool_type, p_category, p_limit, p_embedding, p_model):
        with the query's embedding and its model (runner/search/embedders.py) lexical and semantic
        ranks fused, else words only; each row says how it matched (matched_by, search_mode)."""
        args = {"p_query": query, "p_limit": limit}
        kinds = {"p_tool_type": tool_type, "p_category": category, "p_model": model}
        vector = None if embedding is None else [float(x) for x in embedding]
        return await self._call("search_tools", args, returns="rows", read=True, p_embedding=vector, **kinds)

    async def pending_search_texts(
        self, model: str, limit: int = 256, *, after: str | None = None, every: bool = False
    ) -> list[dict[str, Any]]:
        """public.pending_search_texts(p_model, p_limit, p_after, p_all): searchable texts of the
        tools the caller may embed that have no embedding for `model` yet -> [{text_hash,
        search_text}] (distinct, in hash order after `after`; once stored, a text is no longer
        pending). `every` (service_role only; Refused for others): embedded or not, to refresh."""
        args = {"p_model": model, "p_limit": limit}
        call = self._call("pending_search_texts", args, returns="rows", read=True, p_after=after, p_all=every or None)
        return list(await call or [])

    async def store_search_embeddings(self, model: str, items: list[dict[str, Any]]) -> int:
        """public.store_search_embeddings(p_model, p_items): [{text_hash, embedding}] stored for
        `model` -> how many were stored (an existing vector is kept, except that service_role
        replaces it); Refused for a hash of no tool the caller may embed or a vector that
        is not 256 numbers."""
        return int(await self._call("store_search_embeddings", {"p_model": model, "p_items": list(items)}) or 0)

    async def unembedded_tools(self, model: str, refs: Sequence[str]) -> list[str]:
        """public.unembedded_tools(p_model, p_refs): of these tools (at most 500) that the caller
        may find, those with no vector for `model`: search matched them by their words only."""
        refs = await self._call(
            "unembedded_tools", {"p_model": model, "p_refs": list(refs)}, returns="column", read=True
        )
        return [str(r) for r in refs or []]

    async def prune_search_embeddings(self, models: Sequence[str], *, idle_s: float | None = None) -> int:
        """public.prune_search_embeddings(p_models, p_idle) (service_role only): deletes the vectors
        of texts no tool has any more, and of models not in `models` idle for `idle_s` seconds
        (default 30 days) -> how many were deleted."""
        idle = None if idle_s is None else f"{idle_s} seconds"
        args = {"p_models": list(models)}
        return int(await self._call("prune_search_embeddings", args, p_idle=idle) or 0)

    async def publish(
        self,
        manifest: dict[str, Any],
        files: list[dict[str, Any]],
        manifest_yaml: str | None = None,
        signature: dict[str, Any] | None = None,
        approval_id: str | None = None,
    ) -> dict[str, Any]:
        """public.publish_tool_version(p_manifest, p_files, p_manifest_yaml, p_signature,
        p_approval_id); a signature {content_hash, public_key, signature} is written in the same
        transaction. `approval_id` (sent only when given): an admin's approval of this exact
        content, for a write only an admin may otherwise make; it is used up, or Refused saying
        why (pending, denied, expired, used, other content); given for a publish that needs
        none, UsageError. Text PostgreSQL cannot store is refused here, naming the field."""
        _storable(manifest, files, manifest_yaml)
        return await self._call(
            "publish_tool_version",
            {"p_manifest": manifest, "p_files": list(files)},
            p_manifest_yaml=manifest_yaml,
            p_signature=signature,
            p_approval_id=None if approval_id is None else _uuid(approval_id),
        )

    async def request_publish_approval(
        self, manifest: dict[str, Any], files: list[dict[str, Any]], session: str | None = None
    ) -> dict[str, Any]:
        """public.request_publish_approval(p_manifest, p_files, p_session): a pending approval
        (policy 'command write') of publishing exactly this content, which only an admin
        decides -> {id, status, tool_id, version, content_hash, expires_at, decide, why}.
        Refused for a publish that needs none (PT409) and for anon."""
        _storable(manifest, files)
        args = {"p_manifest": manifest, "p_files": list(files)}
        return await self._call("request_publish_approval", args, p_session=session)

    async def sign(
        self, tool_id: str, version: str, content_hash: str, public_key: str, signature: str
    ) -> dict[str, Any]:
        """public.sign_tool_version(...): attach a signature to a published version."""
        return await self._call(
            "sign_tool_version",
            {
                "p_tool_id": tool_id,
                "p_version": version,
                "p_content_hash": content_hash,
                "p_public_key": public_key,
                "p_signature": signature,
            },
        )

    async def signature_states(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        """public.signature_states(p_tool_ids): latest version and signatures of each tool."""
        return await self._call("signature_states", {"p_tool_ids": list(tool_ids)}, returns="rows", read=True)

    async def attestations(self, tool_id: str, version: str | None = None) -> list[dict[str, Any]]:
        """public.resolve_chain_attestations(p_tool_id, p_version): the chain with each element's
        namespace, manifest, files (path, sha256) and signatures, read from the stored rows."""
        args = {"p_tool_id": tool_id}
        return await self._call("resolve_chain_attestations", args, returns="rows", read=True, p_version=version)

    async def preview_plan(self, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
        """public.preview_execution_plan(p_manifest, p_files): the plan an unpublished tool
        (a local space's tool.yaml) would have, its executor chain taken from the registry."""
        _storable(manifest, files)
        return await self._call("preview_execution_plan", {"p_manifest": manifest, "p_files": list(files)}, read=True)

    async def version_source(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        """public.tool_version_source(p_tool_id, p_version): what a version was published from,
        {tool_id, namespace, version, content_hash, manifest, manifest_yaml, files} (for kiwi pull)."""
        return await self._call("tool_version_source", {"p_tool_id": tool_id}, read=True, p_version=version)

    async def delete_tool(self, tool_id: str) -> dict[str, Any]:
        """public.delete_tool(p_tool_id): refused (naming them) while other tools execute on it."""
        return await self._call("delete_tool", {"p_tool_id": tool_id})

    async def yank(self, tool_id: str, version: str, reason: str | None = None) -> dict[str, Any]:
        """public.yank_tool_version(p_tool_id, p_version, p_reason): the version stays readable by
        exact version, never latest -> {tool_id, version, is_yanked, is_deprecated, latest_version}."""
        return await self._call("yank_tool_version", {"p_tool_id": tool_id, "p_version": version}, p_reason=reason)

    async def deprecate(self, tool_id: str, version: str, message: str | None = None) -> dict[str, Any]:
        """public.deprecate_tool_version(p_tool_id, p_version, p_message): the version still runs, warning
        with the message -> {tool_id, version, is_yanked, is_deprecated, latest_version}."""
        return await self._call(
            "deprecate_tool_version", {"p_tool_id": tool_id, "p_version": version}, p_message=message
        )

    async def record_run(self, record: dict[str, Any]) -> str:
        """public.record_run(p_run jsonb) -> the run's id."""
        return str(await self._call("record_run", {"p_run": record}))

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        """public.record_runs(p_runs jsonb) -> their ids, in order (all or nothing)."""
        return [str(i) for i in await self._call("record_runs", {"p_runs": _rows(records)}, returns="column") or []]

    async def runs(self, *, tool_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Recent runs the caller may read (public.tool_runs, newest first), without their payloads."""
        newest = Select(order=("started_at",), desc=True, limit=limit, columns=RUN_LIST_COLUMNS)
        return list(await self._call("tool_runs", {}, returns=newest, read=True, tool_id=tool_id) or [])

    async def record_audit(self, entry: dict[str, Any]) -> str:
        """public.record_audit(p_entry jsonb) -> the audit row's id (one call, allowed or refused)."""
        return str(await self._call("record_audit", {"p_entry": entry}))

    async def whoami(self) -> dict[str, Any]:
        """public.whoami(): the caller as the database sees it {role, user_id, is_admin, identity, namespaces}."""
        return await self._call("whoami", {}, read=True)

    async def limits(self) -> dict[str, Any]:
        """public.registry_limits as {name: value} (text_field_chars -> {description: 4000, ...}):
        what publish refuses beyond, so a writer can fit its content first; a row that is not
        there sets no limit."""
        rows = await self._call("registry_limits", {}, returns=Select(order=("name",)), read=True)
        return {str(r["name"]): r["value"] for r in rows or []}

    async def record_audits(self, entries: list[dict[str, Any]]) -> list[str]:
        """public.record_audits(p_entries jsonb) -> their ids, in order (all or nothing)."""
        ids = await self._call("record_audits", {"p_entries": _rows(entries)}, returns="column")
        return [str(i) for i in ids or []]

    async def record_calls(self, runs: list[dict[str, Any]], audits: list[dict[str, Any]]) -> list[str]:
        """public.record_calls(p_runs jsonb, p_audits jsonb): record_runs and record_audits in one
        round trip, all or nothing -> the runs' ids, then the audit rows', in order."""
        args = {"p_runs": _rows(runs), "p_audits": _rows(audits)}
        return [str(i) for i in await self._call("record_calls", args, returns="column") or []]

    async def check_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """public.check_call(p jsonb): the gate's one round trip for a call {tool_id, server,
        session_id, version, content_hash, params_sha256, params_size, approval_id, dry_run}:
        rate limits taken (all or none) and, unless a dry run, the approval used or requested
        -> {allowed, kind, reason, hint, retry_after_s, limit, approval, policy}.

        A call no limit counts and no policy covers is let through from memory while the
        backend's cache is live: it stays so until a limit, a policy or a plan changes, and each
        of those notifies (320_gate_notifications.sql). Anything else, every dry run
        and every call that brings an approval asks the database."""
        fetch = partial(self._call, "check_call", {"p": call})
        cache, key = self.backend.cache, self._verdict_key(call)
        if cache is None or key is None:
            return await fetch()  # a dry run is let through even where a policy would hold the run
        known = _remembered(cache, key)  # no await when remembered
        if known is not None:
            return known
        return await cache.get(key, fetch, keep=_untouched, alias=partial(_any_session, key))

    def remembered_verdict(self, call: dict[str, Any]) -> dict[str, Any] | None:
        """check_call's untouched verdict for `call` while the backend's cache holds it (no I/O),
        else None: what check_call would answer without a round trip. A verdict that holds in
        any session (no limit is scoped to sessions) is found from another session's call."""
        cache, key = self.backend.cache, self._verdict_key(call)
        return None if cache is None or key is None else _remembered(cache, key)

    def _verdict_key(self, call: dict[str, Any]) -> tuple[Any, ...] | None:
        """Where an untouched verdict of `call` is remembered; None for a call never answered from
        memory (a dry run, or one that brings an approval)."""
        if call.get("approval_id") is not None or call.get("dry_run"):
            return None
        return ("gate", self.backend.caller(), call.get("tool_id"), call.get("server"), call.get("session_id"))

    async def admit_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """public.admit_call(p jsonb): check_call's object and the context the call is made under
        (context_id), what it needs of it (needs: {shell, mcp, tools, net, fs_read, fs_write}) and,
        for a directive, open_context: true -> check_call's verdict with `context` (the context
        read) and `opened`
        (the child context); a need the context lacks, or a child wider than its parent, is
        {allowed: false, kind: permission_denied, permission}. One round trip, never from memory:
        it reads a context and may open one. Its decision is check_call's, so an untouched one is
        remembered as check_call remembers it."""
        cache, key = self.backend.cache, self._verdict_key(call)
        if cache is None or key is None:
            return await self._call("admit_call", {"p": call})
        answer: dict[str, Any] = {}

        async def fetch() -> dict[str, Any]:
            answer.update(await self._call("admit_call", {"p": call}))
            return {k: v for k, v in answer.items() if k not in ("context", "opened", "permission")}

        if cache.peek(key) is None:  # else get would answer from memory without reading the context
            await cache.get(key, fetch, keep=_untouched, alias=partial(_any_session, key))
        return answer or await self._call("admit_call", {"p": call})

    async def take_rate_limit(self, tool_id: str, server: str | None, session: str | None) -> dict[str, Any]:
        """public.take_rate_limit(p_tool_id, p_server, p_session): take one call from every limit
        that applies, or none -> {allowed, retry_after_s, limit, reason, limits}."""
        return await self._call("take_rate_limit", {"p_tool_id": tool_id, "p_server": server, "p_session": session})

    async def decide_approval(
        self, approval_id: str, approve: bool, reason: str | None = None, decider_session: str | None = None
    ) -> dict[str, Any]:
        """public.decide_approval(p_id, p_approve, p_reason, p_decider_session) -> the approval."""
        args = {"p_id": _uuid(approval_id), "p_approve": approve}
        return await self._call("decide_approval", args, p_reason=reason, p_decider_session=decider_session)

    async def attach_approval_parameters(self, approval_id: str, params: dict[str, Any]) -> bool:
        """public.attach_approval_parameters: show a direct call's parameters to whoever decides
        its approval (kept only when they hash to the approval's digest)."""
        return bool(await self._call("attach_approval_parameters", {"p_id": approval_id, "p_params": params}))

    async def approvals(self) -> list[dict[str, Any]]:
        """Pending approvals the caller may read (public.pending_approvals, oldest first)."""
        oldest = Select(order=("requested_at", "id"))
        rows = list(await self._call("pending_approvals", {}, returns=oldest, read=True) or [])
        if rows:  # a queued run's parameters, as the database holds them; a direct call's stay with it
            ids = [str(r["id"]) for r in rows]
            found = await self._call("approval_parameters", {"p_ids": ids}, returns="rows", read=True) or []
            params = {str(p["id"]): p["params"] for p in found}
            for row in rows:
                row["params"] = params.get(str(row["id"]))
        return rows

    async def hold_mcp_change(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """public.hold_mcp_tool_change(p_manifest): an upstream change of an imported MCP tool,
        held for a decision instead of published -> the pending change, or {held: false}."""
        return await self._call("hold_mcp_tool_change", {"p_manifest": manifest})

    async def mcp_changes(self, *, server: str | None = None, status: str | None = "pending") -> list[dict[str, Any]]:
        """Held MCP tool changes the caller may read (public.mcp_tool_changes, oldest first)."""
        oldest = Select(order=("detected_at", "id"))
        rows = await self._call("mcp_tool_changes", {}, returns=oldest, read=True, server=server, status=status)
        return list(rows or [])

    async def decide_mcp_change(self, change_id: str, approve: bool, reason: str | None = None) -> dict[str, Any]:
        """public.decide_mcp_tool_change(p_id, p_approve, p_reason): approving publishes the held version."""
        args = {"p_id": checked_uuid(change_id, f"not a change id: {change_id!r}", "kiwi mcp changes lists them")}
        return await self._call("decide_mcp_tool_change", {**args, "p_approve": approve}, p_reason=reason)

    async def open_context(
        self,
        session: str,
        directive: str | None = None,
        parent: str | None = None,
        permissions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """public.open_context(p_session, p_directive, p_parent, p_permissions): an execution
        context -> {id, parent_id, session_id, directive, permissions, ...}; widening is Refused."""
        return await self._call(
            "open_context", {"p_session": session}, p_directive=directive, p_parent=parent, p_permissions=permissions
        )

    async def model_price(self, model: str) -> dict[str, Any] | None:
        """public.model_price(p_model): {model, input_usd_per_mtok, output_usd_per_mtok}, or None."""
        price = await self._call("model_price", {"p_model": model}, read=True)
        return price if isinstance(price, dict) else None

    async def record_thread_usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        """public.record_thread_usage(p_usage): one thread run's spend, priced by the database
        -> {id, session_id, model, input_tokens, output_tokens, cost_usd}."""
        return await self._call("record_thread_usage", {"p_usage": usage})

    async def get_context(self, context_id: str) -> dict[str, Any]:
        """public.get_context(p_id): one of the caller's contexts (NotFound; Refused if expired)."""
        return await self._call("get_context", {"p_id": context_id}, read=True)

    async def record_checkpoint(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """public.record_checkpoint(p_checkpoint): the checkpoint taken before a run, as the caller's."""
        return await self._call("record_checkpoint", {"p_checkpoint": checkpoint})

    async def rollback_checkpoint(self, run_or_context: str) -> dict[str, Any]:
        """public.rollback_checkpoint(p_id): the caller's own checkpoint of a run, or the first of a
        context (NotFound for anyone else's)."""
        return await self._call("rollback_checkpoint", {"p_id": run_or_context}, read=True)

    async def checkpoint_restored(self, checkpoint_id: str) -> dict[str, Any]:
        """public.checkpoint_restored(p_id): mark the caller's checkpoint restored."""
        return await self._call("checkpoint_restored", {"p_id": checkpoint_id})

    async def operator_status(self) -> dict[str, Any]:
        """public.operator_status(): the schema is current; an admin also reads the queue's depth."""
        return await self._call("operator_status", {}, read=True)

    async def _call(
        self, function: str, args: dict[str, Any], *, returns: Returns = "value", read: bool = False, **optional: Any
    ) -> Any:
        """`function` with `args`, and those of `optional` that are given: one left as None is
        not sent, so the function's SQL default applies."""
        if optional:
            args = {**args, **{name: value for name, value in optional.items() if value is not None}}
        return await self.backend.call(function, args, returns=returns, read=read)


def _rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the records to send, or the Rows themselves (their JSON text goes with them)."""
    return records if isinstance(records, Rows) else list(records)
