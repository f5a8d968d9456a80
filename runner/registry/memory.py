"""A registry in memory, for unit tests: `Registry(MemoryBackend([plan, ...]))`.

`MemoryBackend` carries the registry's calls (base.py's one seam) to Python lists and
dicts instead of a database. It answers the functions unit tests need from the plans (as
resolve_execution_plan returns them) and search rows it is given, in the shapes the SQL
functions answer with, and raises what they raise: NotFound naming an unknown tool or
version (PT404), Refused for a duplicate record id (23505) or an embedding it cannot store
(PT422), and RegistryUnavailable, as on a database without the migration, for a function it
does not have or arguments the function does not declare (42883). What is written is kept
(`runs`, `audits`, and `embeddings` by (model, text_hash): search fuses them with the words,
as search_tools does), and every call received is noted in `calls`, so a test sees exactly
what the typed Registry sent.

Plans are handed back as given, the same dict each time, as a warm plan cache does:
treat them as read-only.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..core.fusion import fuse
from ..errors import KiwiError
from .base import Cache, Returns, Select
from .errors import from_sqlstate

__all__ = ["ALLOWED", "MemoryBackend", "Sent"]

ALLOWED: dict[str, Any] = {"allowed": True, "limits": [], "approval": None}  # check_call's untouched verdict
EMBEDDING_DIMENSIONS = 256  # store_search_embeddings' vectors (extensions.vector(256))
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Sent:
    """One call as the backend received it."""

    function: str
    args: dict[str, Any]
    returns: Returns
    read: bool


class MemoryBackend:
    """`plans`: resolve_execution_plan's answers (a tool's last one is its latest); `rows`:
    search_tools' rows (by default one per tool, made from its latest plan); `verdict`:
    check_call's answer, or a function of the call; `cache`: answers to remember, as a
    Postgres backend's plan cache does (None: every call comes here)."""

    def __init__(
        self,
        plans: Iterable[Mapping[str, Any]] = (),
        *,
        rows: Iterable[Mapping[str, Any]] | None = None,
        whoami: Mapping[str, Any] | None = None,
        verdict: Mapping[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] = ALLOWED,
        cache: Cache | None = None,
    ) -> None:
        self.plans: dict[str, list[Mapping[str, Any]]] = {}
        for plan in plans:
            self.add(plan)
        self.rows = None if rows is None else [dict(r) for r in rows]
        self.who = dict(whoami or {"role": "service_role", "user_id": None, "identity": "memory", "is_admin": True})
        self.verdict = verdict
        self.cache = cache
        self.calls: list[Sent] = []
        self.runs: list[dict[str, Any]] = []
        self.audits: list[dict[str, Any]] = []
        self.approvals: list[dict[str, Any]] = []
        self.embeddings: dict[tuple[str, str], list[float]] = {}  # (model, text_hash) -> vector
        self.closed = False
        self._clock = itertools.count()

    def __repr__(self) -> str:
        return f"MemoryBackend({len(self.plans)} tools)"

    def add(self, plan: Mapping[str, Any]) -> None:
        """Publish a plan: it becomes its tool's latest version."""
        self.plans.setdefault(_ref(plan["tool_id"]), []).append(plan)

    def caller(self) -> str:
        return str(self.who.get("identity"))

    async def call(
        self, function: str, args: Mapping[str, Any], *, returns: Returns = "value", read: bool = False
    ) -> Any:
        self.calls.append(Sent(function, dict(args), returns, read))
        answer = getattr(self, "_" + function, None) if function.isidentifier() else None
        try:
            if answer is None:
                raise TypeError(function)
            inspect.signature(answer).bind(**args)
        except TypeError:
            names = ", ".join(args)
            raise from_sqlstate("42883", f"function public.{function}({names}) does not exist") from None
        result = answer(**args)
        if isinstance(returns, Select):
            for column in reversed(returns.order):
                result.sort(key=lambda row, c=column: str(row.get(c) or ""), reverse=returns.desc)
            if returns.columns:
                result = [{c: row.get(c) for c in returns.columns} for row in result]
            return result[: returns.limit]
        return result

    async def aclose(self) -> None:
        self.closed = True

    # -- the functions: named, and with the arguments, as the SQL declares them -----------

    def _resolve_execution_plan(self, p_tool_id: str, p_version: str | None = None) -> Mapping[str, Any]:
        versions = self.plans.get(_ref(p_tool_id))
        if not versions:
            raise from_sqlstate("PT404", f'tool "{p_tool_id}" not found')
        if p_version is None:
            return versions[-1]
        for plan in versions:
            if plan["version"] == p_version:
                return plan
        raise from_sqlstate("PT404", f'version {p_version} of tool "{p_tool_id}" not found')

    def _resolve_executor_chain(self, p_tool_id: str, p_version: str | None = None) -> list[dict[str, Any]]:
        plan = self._resolve_execution_plan(p_tool_id, p_version)
        links = plan.get("chain") or [plan]
        rows = []
        for depth, link in enumerate(links):
            own = plan if depth == 0 else (self.plans.get(_ref(link["tool_id"])) or [{}])[-1]
            rows.append(
                {
                    "depth": depth,
                    "tool_id": link["tool_id"],
                    "tool_type": link["tool_type"],
                    "executor_id": links[depth + 1]["tool_id"] if depth + 1 < len(links) else None,
                    "version": link["version"],
                    "content_hash": link["content_hash"],
                    "manifest": own.get("manifest") or {},
                }
            )
        return rows

    def _resolve_executor_chains_batch(self, p_tool_ids: list[str]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for ref in p_tool_ids:
            try:
                rows += [{"requested_tool_id": ref, **row, "error": None} for row in self._resolve_executor_chain(ref)]
            except KiwiError as exc:
                empty = dict.fromkeys(("depth", "tool_id", "tool_type", "executor_id", "version", "content_hash"))
                rows.append({"requested_tool_id": ref, **empty, "manifest": None, "error": exc.message})
        return rows

    def _resolve_executor_chains_compact(self, p_tool_ids: list[str]) -> dict[str, Any]:
        tools: list[dict[str, Any]] = []
        elements: dict[str, dict[str, Any]] = {}
        for ref in p_tool_ids:
            try:
                chain = self._resolve_executor_chain(ref)
            except KiwiError as exc:
                tools.append({"requested": ref, "error": exc.message, "error_code": exc.sqlstate})
                continue
            keys = [f"{row['tool_id']}@{row['version']}" for row in chain]
            for key, row in zip(keys, chain, strict=True):
                elements[key] = {k: v for k, v in row.items() if k != "depth"}
            tools.append({"requested": ref, "chain": keys})
        return {"tools": tools, "elements": elements}

    def _search_tools(
        self,
        p_query: str,
        p_tool_type: str | None = None,
        p_category: str | None = None,
        p_limit: int = 20,
        p_embedding: list[float] | None = None,
        p_model: str | None = None,
    ) -> list[dict[str, Any]]:
        """Rows with every word of the query; with an embedding of a model that has vectors,
        also the rows nearest in meaning, the two fused as search_tools fuses them."""
        words = p_query.lower().split()
        rows = [r for r in self._searchable() if p_tool_type in (None, r.get("tool_type"))]
        rows = [r for r in rows if p_category in (None, r.get("category"))]
        lexical: dict[str, float] = {}
        for row in rows:
            text = " ".join(str(row.get(k) or "") for k in ("tool_id", "name", "description")).lower()
            text += " " + text.replace("_", " ")
            if all(w in text for w in words):
                lexical[row["tool_id"]] = float(sum(text.count(w) for w in words))
        near, mode = self._nearest(rows, p_embedding, p_model) if words else ({}, "lexical: no query words")
        ranks = fuse(lexical, near)  # as search_tools fuses (search_weights)
        found = []
        for row in rows:
            tid = row["tool_id"]
            if tid in ranks:
                how = "words+meaning" if tid in lexical and tid in near else "words" if tid in lexical else "meaning"
                rank = ranks[tid] if mode == "hybrid" else lexical[tid]
                found.append({**row, "rank": rank, "matched_by": how, "search_mode": mode})
        found.sort(key=lambda r: (-r["rank"], r["tool_id"]))
        return found[:p_limit]

    def _nearest(
        self, rows: list[dict[str, Any]], embedding: list[float] | None, model: str | None
    ) -> tuple[dict[str, float], str]:
        """tool_id -> cosine similarity of each row with a vector for `model` (at most 50), and
        the search mode: hybrid, or why it is lexical only."""
        if embedding is None or model is None:
            return {}, "lexical: no query embedding"
        vectors = {h: v for (m, h), v in self.embeddings.items() if m == model}
        if not vectors:
            return {}, f"lexical: no embeddings for model {model}"
        near = {}
        for row in rows:
            vector = vectors.get(_hash(self._text_of(row)))
            if vector is not None:
                near[row["tool_id"]] = sum(a * b for a, b in zip(embedding, vector, strict=True))
        best = sorted(near, key=lambda t: -near[t])[:50]
        return {t: near[t] for t in best}, "hybrid"

    def _pending_search_texts(
        self, p_model: str, p_limit: int = 256, p_after: str | None = None, p_all: bool = False
    ) -> list[dict[str, Any]]:
        if p_all and self.who.get("role") != "service_role":
            raise from_sqlstate("42501", "pending_search_texts: p_all (every text) is for service_role")
        texts = {_hash(t): t for t in map(self._text_of, self._searchable())}
        pending = [
            {"text_hash": h, "search_text": t}
            for h, t in sorted(texts.items())
            if (p_all or (p_model, h) not in self.embeddings) and (p_after is None or h > p_after)
        ]
        return pending[:p_limit]

    def _store_search_embeddings(self, p_model: str, p_items: list[Mapping[str, Any]]) -> int:
        known = {_hash(self._text_of(row)) for row in self._searchable()}
        for item in p_items:
            vector = item.get("embedding")
            if item.get("text_hash") not in known:
                raise from_sqlstate("PT422", f"no tool you may embed has the search text {item.get('text_hash')}")
            if not isinstance(vector, list) or len(vector) != EMBEDDING_DIMENSIONS:
                raise from_sqlstate("PT422", f"an embedding is {EMBEDDING_DIMENSIONS} numbers")
        replace = self.who.get("role") == "service_role"
        stored = 0
        for item in p_items:
            key = (p_model, str(item["text_hash"]))
            if replace or key not in self.embeddings:
                self.embeddings[key] = [float(x) for x in item["embedding"]]
                stored += 1
        return stored

    def _unembedded_tools(self, p_model: str, p_refs: list[str]) -> list[str]:
        embedded = {h for (m, h) in self.embeddings if m == p_model}
        rows = {r["tool_id"]: r for r in self._searchable()}
        return sorted(r for r in p_refs if r in rows and _hash(self._text_of(rows[r])) not in embedded)

    def _searchable(self) -> list[dict[str, Any]]:
        """search_tools' rows: those given, else one per tool from its latest plan."""
        return self.rows if self.rows is not None else [_search_row(v[-1]) for v in self.plans.values()]

    def _text_of(self, row: Mapping[str, Any]) -> str:
        """The searchable text of a search row's tool."""
        versions = self.plans.get(_ref(row["tool_id"]))
        return _search_text(row, versions[-1] if versions and self.rows is None else None)

    def _record_run(self, p_run: Mapping[str, Any]) -> str:
        return self._record_runs([p_run])[0]

    def _record_runs(self, p_runs: list[Mapping[str, Any]]) -> list[str]:
        return self._keep(self.runs, p_runs, "tool_runs", "started_at")

    def _record_audit(self, p_entry: Mapping[str, Any]) -> str:
        return self._record_audits([p_entry])[0]

    def _record_audits(self, p_entries: list[Mapping[str, Any]]) -> list[str]:
        return self._keep(self.audits, p_entries, "audit_log", "at")

    def _record_calls(self, p_runs: list[Mapping[str, Any]], p_audits: list[Mapping[str, Any]]) -> list[str]:
        kept = (list(self.runs), list(self.audits))
        try:
            return self._record_runs(p_runs) + self._record_audits(p_audits)
        except KiwiError:  # all or nothing
            self.runs[:], self.audits[:] = kept
            raise

    def _check_call(self, p: dict[str, Any]) -> dict[str, Any]:
        return dict(self.verdict(p) if callable(self.verdict) else self.verdict)

    def _take_rate_limit(self, p_tool_id: str, p_server: str | None = None, p_session: str | None = None) -> Any:
        return {"allowed": True, "retry_after_s": None, "limit": None, "reason": None, "limits": []}

    def _whoami(self) -> dict[str, Any]:
        return dict(self.who)

    def _tool_runs(self, tool_id: str | None = None) -> list[dict[str, Any]]:  # a table (Select)
        return [dict(r) for r in self.runs if tool_id in (None, r.get("tool_id"))]

    def _pending_approvals(self) -> list[dict[str, Any]]:  # a view (Select)
        return [dict(a) for a in self.approvals]

    def _approval_parameters(self, p_ids: list[str]) -> list[dict[str, Any]]:
        return []  # no queued runs here, nor attached parameters

    def _attach_approval_parameters(self, p_id: str, p_params: dict[str, Any]) -> bool:
        return False

    def _keep(self, rows: list[dict[str, Any]], new: list[Mapping[str, Any]], table: str, stamp: str) -> list[str]:
        """Rows written all or nothing, each with an id (its own, or a new one) and a time
        (`stamp`, as the table's default fills it) -> the ids."""
        made = [{"id": str(uuid.uuid4()), stamp: self._now(), **r} for r in new]
        taken = {str(r["id"]) for r in rows}
        for row in made:
            if str(row["id"]) in taken:
                raise from_sqlstate("23505", f'duplicate key value violates unique constraint "{table}_pkey"')
            taken.add(str(row["id"]))
        rows.extend(made)
        return [str(r["id"]) for r in made]

    def _now(self) -> str:
        """Timestamps that only move forward, one step per row written."""
        return (_EPOCH + timedelta(milliseconds=next(self._clock))).isoformat()


def _ref(tool_id: str) -> str:
    return tool_id.removeprefix("public/")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _search_text(row: Mapping[str, Any], plan: Mapping[str, Any] | None = None) -> str:
    """A tool's searchable text: name, description, tags, parameter names and descriptions, from
    its latest plan when there is one, else from its search row (the SQL builds its own; this one
    only needs to be stable)."""
    manifest = (plan or {}).get("manifest") or row
    schema = (plan or {}).get("parameters") or manifest.get("parameters") or {}
    props = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    lines = [str(manifest.get("name") or row["tool_id"]), str(manifest.get("description") or "")]
    lines.append(" ".join(map(str, manifest.get("tags") or [])))
    lines += [f"{name}: {(spec or {}).get('description') or ''}" for name, spec in props.items()]
    return "\n".join(line for line in lines if line.strip())


def _search_row(plan: Mapping[str, Any]) -> dict[str, Any]:
    manifest = plan.get("manifest") or {}
    chain = plan.get("chain") or []
    return {
        "tool_id": plan["tool_id"],
        "namespace": "public",
        "name": manifest.get("name") or plan["tool_id"],
        "tool_type": plan["tool_type"],
        "category": manifest.get("category"),
        "description": manifest.get("description"),
        "executor_id": chain[1]["tool_id"] if len(chain) > 1 else None,
        "latest_version": plan["version"],
    }
