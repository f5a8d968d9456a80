"""The typed Registry over MemoryBackend (runner/registry/memory.py): no database.

What the Registry itself decides, once for every backend, is tested here: the typed
Plan, optional arguments left to their SQL defaults, plans and untouched gate verdicts
remembered per caller while the backend has a cache, approval ids checked before they
are sent, record batches answered as lists of ids.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import pytest

from runner import MemoryBackend, NotFound, Plan, Refused, Registry, RegistryUnavailable, UsageError
from runner.registry import Select
from runner.registry.base import RUN_LIST_COLUMNS
from runner.registry.memory import ALLOWED, Sent


def link(tool_id: str, tool_type: str, version: str = "1.0.0") -> dict[str, Any]:
    return {"tool_id": tool_id, "tool_type": tool_type, "version": version, "content_hash": f"{tool_id}-{version}"}


def plan(tool_id: str, version: str = "1.0.0", *, description: str = "", **extra: Any) -> dict[str, Any]:
    """A plan as resolve_execution_plan returns it: a script on bash_runtime on subprocess."""
    chain = [link(tool_id, "script", version), link("bash_runtime", "runtime"), link("subprocess", "primitive")]
    return {
        "tool_id": tool_id,
        "version": version,
        "tool_type": "script",
        "content_hash": f"{tool_id}-{version}",
        "primitive": "subprocess",
        "chain": chain,
        "config": {"command": "bash", "args": ["{entrypoint}"]},
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        "files": [
            {"path": "main.sh", "sha256": "ab" * 32, "size_bytes": 7, "is_entrypoint": True, "content_text": "x"}
        ],
        "manifest": {"tool_id": tool_id, "version": version, "description": description},
        **extra,
    }


RUNTIME = {
    **plan("bash_runtime"),
    "tool_type": "runtime",
    "chain": [link("bash_runtime", "runtime"), link("subprocess", "primitive")],
    "manifest": {"tool_id": "bash_runtime", "description": "Bash"},
}


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend([plan("hello_world", description="Says hello"), plan("hello_world", "1.1.0"), RUNTIME])


@pytest.fixture
def registry(backend: MemoryBackend) -> Registry:
    return Registry(backend)


async def test_plan_is_a_frozen_plan_made_once_for_the_same_answer(registry: Registry) -> None:
    first = await registry.plan("hello_world")
    assert isinstance(first, Plan) and first.version == "1.1.0", "the last plan given is the latest"
    assert first.chain_ids == ["hello_world", "bash_runtime", "subprocess"] and first.entrypoint is not None
    assert await registry.plan("hello_world") is first, "the same answer gives the same Plan, not a new one"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.version = "2.0.0"  # type: ignore[misc]
    pinned = await registry.plan("public/hello_world", "1.0.0")
    assert pinned.version == "1.0.0" and pinned is not first


async def test_unknown_tools_and_versions_are_not_found_as_the_database_says(registry: Registry) -> None:
    with pytest.raises(NotFound, match='tool "no_such_tool_zz" not found') as info:
        await registry.plan("no_such_tool_zz")
    assert info.value.exit_code == 3 and info.value.sqlstate == "PT404"
    with pytest.raises(NotFound, match=r'version 9\.0\.0 of tool "hello_world" not found'):
        await registry.execution_plan("hello_world", "9.0.0")
    with pytest.raises(NotFound, match="no_such_tool_zz"):
        await registry.chain("no_such_tool_zz")


async def test_optional_arguments_are_sent_only_when_given(registry: Registry, backend: MemoryBackend) -> None:
    await registry.execution_plan("hello_world")
    await registry.execution_plan("hello_world", "1.0.0")
    await registry.search("hello", category="demo")
    assert backend.calls == [
        Sent("resolve_execution_plan", {"p_tool_id": "hello_world"}, "value", True),
        Sent("resolve_execution_plan", {"p_tool_id": "hello_world", "p_version": "1.0.0"}, "value", True),
        Sent("search_tools", {"p_query": "hello", "p_limit": 20, "p_category": "demo"}, "rows", True),
    ]
    await registry.take_rate_limit("hello_world", None, "s1")
    assert backend.calls[-1].args == {"p_tool_id": "hello_world", "p_server": None, "p_session": "s1"}, (
        "an argument the method requires is sent even when it is None"
    )


async def test_chain_rows_and_a_batch_with_an_error_row(registry: Registry) -> None:
    rows = await registry.chain("hello_world")
    assert [(r["depth"], r["tool_id"], r["executor_id"]) for r in rows] == [
        (0, "hello_world", "bash_runtime"), (1, "bash_runtime", "subprocess"), (2, "subprocess", None),
    ]  # fmt: skip
    assert rows[0]["manifest"]["version"] == "1.1.0" and rows[1]["manifest"]["description"] == "Bash"
    batch = await registry.chains_batch(["hello_world", "no_such_tool_zz"])
    bad = [r for r in batch if r["requested_tool_id"] == "no_such_tool_zz"]
    assert len(bad) == 1 and bad[0]["depth"] is None and "no_such_tool_zz" in bad[0]["error"]
    assert [r["tool_id"] for r in batch if r["requested_tool_id"] == "hello_world"][-1] == "subprocess"
    compact = await registry.chains_compact(["hello_world", "no_such_tool_zz"])
    assert compact["tools"][0]["chain"] == ["hello_world@1.1.0", "bash_runtime@1.0.0", "subprocess@1.0.0"]
    assert compact["tools"][1]["error_code"] == "PT404" and "no_such_tool_zz" in compact["tools"][1]["error"]
    assert compact["elements"]["hello_world@1.1.0"]["executor_id"] == "bash_runtime"


async def test_search_over_the_rows_given(backend: MemoryBackend, registry: Registry) -> None:
    assert [r["tool_id"] for r in await registry.search("hello world")] == ["hello_world"]
    assert [r["tool_id"] for r in await registry.search("", tool_type="runtime")] == ["bash_runtime"]
    assert len(await registry.search("", limit=1)) == 1
    rows = [{"tool_id": "a", "tool_type": "script", "category": "x"}, {"tool_id": "b", "tool_type": "script"}]
    given = Registry(MemoryBackend(rows=rows))
    assert [r["tool_id"] for r in await given.search("", category="x")] == ["a"]


async def test_records_are_kept_in_order_and_a_duplicate_id_is_refused(
    registry: Registry, backend: MemoryBackend
) -> None:
    mine = str(uuid.uuid4())
    one = await registry.record_run({"tool_id": "hello_world", "status": "success"})
    ids = await registry.record_runs([{"id": mine, "tool_id": "hello_world", "status": "error"}, {"tool_id": "x"}])
    assert ids[0] == mine and len(ids) == 2 and uuid.UUID(one)
    assert [r["id"] for r in backend.runs] == [one, *ids]
    assert backend.calls[-1] == Sent("record_runs", {"p_runs": [{"id": mine, "tool_id": "hello_world",
                                     "status": "error"}, {"tool_id": "x"}]}, "column", False)  # fmt: skip
    with pytest.raises(Refused) as info:
        await registry.record_runs([{"tool_id": "y"}, {"id": mine, "tool_id": "hello_world"}])
    assert info.value.sqlstate == "23505" and len(backend.runs) == 3, "all or nothing"
    newest = await registry.runs(tool_id="hello_world", limit=1)
    assert [r["id"] for r in newest] == [mine]
    assert backend.calls[-1].returns == Select(order=("started_at",), desc=True, limit=1, columns=RUN_LIST_COLUMNS)
    audit = await registry.record_audit({"tool_id": "hello_world", "decision": "allowed"})
    assert await registry.record_audits([{"decision": "refused"}]) != [audit]
    assert [a["decision"] for a in backend.audits] == ["allowed", "refused"]


async def test_check_call_allows_and_whoami_answers(registry: Registry, backend: MemoryBackend) -> None:
    assert await registry.check_call({"tool_id": "hello_world"}) == ALLOWED
    assert (await registry.whoami())["identity"] == "memory"
    refusing = Registry(MemoryBackend(verdict=lambda call: {"allowed": False, "reason": call["tool_id"]}))
    assert await refusing.check_call({"tool_id": "t"}) == {"allowed": False, "reason": "t"}


async def test_a_function_or_argument_the_database_lacks_is_missing(backend: MemoryBackend) -> None:
    with pytest.raises(RegistryUnavailable, match="missing something") as info:
        await backend.call("no_such_function_zz", {"p_x": 1})
    assert "migrations" in (info.value.hint or "")
    with pytest.raises(RegistryUnavailable, match=r"resolve_execution_plan\(p_tool\)"):
        await backend.call("resolve_execution_plan", {"p_tool": "hello_world"})


async def test_approval_ids_are_checked_before_they_are_sent(registry: Registry, backend: MemoryBackend) -> None:
    with pytest.raises(UsageError, match="not an approval id"):
        await registry.decide_approval("not-a-uuid", True)
    with pytest.raises(UsageError, match="not an approval id"):
        await registry.publish({"tool_id": "t"}, [], approval_id="nope")
    assert backend.calls == [], "nothing was sent"


class Remembering:
    """A cache like plan_cache.PlanCache while it listens: keeps what `keep` allows."""

    def __init__(self) -> None:
        self.kept: dict[Hashable, dict[str, Any]] = {}

    def peek(self, key: Hashable) -> dict[str, Any] | None:
        return self.kept.get(key)

    async def get(
        self,
        key: Hashable,
        fetch: Callable[[], Awaitable[dict[str, Any]]],
        keep: Callable[[dict[str, Any]], bool] | None = None,
        alias: Callable[[dict[str, Any]], Hashable | None] | None = None,
    ) -> dict[str, Any]:
        if key in self.kept:
            return self.kept[key]
        answer = await fetch()
        if keep is None or keep(answer):
            self.kept[key] = answer
            if alias is not None and (other := alias(answer)) is not None:
                self.kept[other] = answer
        return answer


async def test_plans_and_untouched_verdicts_are_remembered_per_caller() -> None:
    cache = Remembering()
    verdicts = iter([ALLOWED, {"allowed": True, "limits": [{"key": "t"}], "approval": None}])
    backend = MemoryBackend([plan("hello_world")], verdict=lambda call: next(verdicts), cache=cache)
    registry = Registry(backend)
    await registry.plan("hello_world")
    await registry.plan("hello_world")
    assert [c.function for c in backend.calls] == ["resolve_execution_plan"]
    assert ("memory", "hello_world", None) in cache.kept, "keyed by the caller: what one may read, another may not"

    call = {"tool_id": "hello_world", "server": None, "session_id": "s"}
    for _ in range(3):
        assert await registry.check_call(call) == ALLOWED
    assert [c.function for c in backend.calls].count("check_call") == 1, "an untouched verdict is remembered"
    counted = {**call, "tool_id": "t"}
    await registry.check_call(counted)
    assert ("gate", "memory", "t", None, "s") not in cache.kept, "a verdict that took from a limit is not"

    before = len(backend.calls)
    backend.verdict = ALLOWED
    await registry.check_call({**call, "dry_run": True})
    await registry.check_call({**call, "approval_id": str(uuid.uuid4())})
    assert len(backend.calls) == before + 2, "a dry run and a call bringing an approval always ask"


async def test_a_verdict_that_holds_in_any_session_is_remembered_for_every_session_of_its_caller() -> None:
    cache = Remembering()
    anywhere = {**ALLOWED, "per_session": False}
    backend = MemoryBackend([plan("hello_world")], verdict=anywhere, cache=cache)
    registry = Registry(backend)
    call = {"tool_id": "hello_world", "server": None, "session_id": "queue-1"}
    assert await registry.check_call(call) == anywhere
    assert await registry.check_call({**call, "session_id": "queue-2"}) == anywhere
    assert registry.remembered_verdict({**call, "session_id": "queue-3"}) == anywhere
    assert [c.function for c in backend.calls].count("check_call") == 1, "no limit is per session: one asks"

    backend.verdict = {**ALLOWED, "per_session": True}  # a limit is scoped to sessions: each session asks
    other = {**call, "tool_id": "t"}
    await registry.check_call(other)
    await registry.check_call({**other, "session_id": "queue-2"})
    assert [c.function for c in backend.calls].count("check_call") == 3
    assert registry.remembered_verdict({**other, "session_id": "queue-3"}) is None


async def test_the_registry_closes_its_backend_and_says_what_carries_it(backend: MemoryBackend) -> None:
    async with Registry(backend) as registry:
        assert repr(registry) == "Registry(MemoryBackend(2 tools))"
    assert backend.closed
