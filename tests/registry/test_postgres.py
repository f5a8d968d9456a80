"""PostgresRegistry against the real local database (the seed is loaded by `make db`).

Tools this module publishes get unique names (`registry_pg_<hex>`) and are deleted
afterwards, as tests/test_concurrent_publish.py does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from runner import (
    NotFound,
    PostgresRegistry,
    Refused,
    RegistryUnavailable,
    RestRegistry,
    Settings,
    UsageError,
    admin,
    connect,
    local_owner,
)
from runner.registry.errors import redact, scrub
from runner.registry.postgres import statement
from tests.conftest import stack_url


@pytest.fixture
async def reg(database_url: str) -> AsyncIterator[PostgresRegistry]:
    """The registry acting as an admin, explicitly: these tests publish into `public`."""
    registry = PostgresRegistry(database_url, principal=admin())
    yield registry
    await registry.aclose()


@pytest.fixture
def fresh_tool(conn: psycopg.Connection) -> Iterator[str]:
    name = f"registry_pg_{uuid.uuid4().hex[:10]}"
    yield name
    conn.execute("delete from tools where ref = %s", (name,))


def script(tool_id: str, version: str = "1.0.0", body: str = "echo hi") -> tuple[dict, list[dict]]:
    manifest = {"tool_id": tool_id, "tool_type": "script", "executor": "bash_runtime", "version": version}
    return manifest, [{"path": "main.sh", "content_text": body}]


async def test_execution_plan_of_a_seeded_tool(reg: PostgresRegistry) -> None:
    plan = await reg.execution_plan("hello_world")
    assert plan["tool_id"] == "hello_world"
    assert plan["primitive"] == "subprocess"
    assert [link["tool_id"] for link in plan["chain"]] == ["hello_world", "bash_runtime", "subprocess"]
    assert plan["config"]["command"] == "bash"
    assert any(f["is_entrypoint"] for f in plan["files"])


async def test_execution_plan_of_a_pinned_version(reg: PostgresRegistry) -> None:
    latest = await reg.execution_plan("hello_world")
    assert (await reg.execution_plan("hello_world", latest["version"]))["version"] == latest["version"]
    with pytest.raises(NotFound, match=r'version 99\.0\.0 of tool "hello_world"'):
        await reg.execution_plan("hello_world", "99.0.0")


async def test_chain_rows_are_ordered_by_depth_and_end_in_a_primitive(reg: PostgresRegistry) -> None:
    rows = await reg.chain("hello_world")
    assert [r["depth"] for r in rows] == list(range(len(rows)))
    assert rows[0]["tool_id"] == "hello_world"
    assert rows[-1]["tool_type"] == "primitive"
    assert set(rows[0]) >= {"depth", "tool_id", "tool_type", "executor_id", "version", "content_hash", "manifest"}
    assert isinstance(rows[0]["manifest"], dict)


async def test_batch_gives_an_error_row_for_a_bad_id_and_resolves_the_others(reg: PostgresRegistry) -> None:
    rows = await reg.chains_batch(["hello_world", "no_such_tool_zz", "format_bytes"])
    bad = [r for r in rows if r["requested_tool_id"] == "no_such_tool_zz"]
    assert len(bad) == 1 and bad[0]["depth"] is None and "no_such_tool_zz" in bad[0]["error"]
    for good in ("hello_world", "format_bytes"):
        chain = [r for r in rows if r["requested_tool_id"] == good]
        assert chain and chain[-1]["tool_type"] == "primitive" and all(r["error"] is None for r in chain)


async def test_the_compact_batch_names_each_element_once_and_agrees_with_the_row_batch(
    reg: PostgresRegistry,
) -> None:
    ids = ["hello_world", "no_such_tool_zz", "format_bytes", "hello_world"]
    compact, rows = await reg.chains_compact(ids), await reg.chains_batch(ids)
    assert [t["requested"] for t in compact["tools"]] == ids
    bad = compact["tools"][1]
    assert "chain" not in bad and "no_such_tool_zz" in bad["error"] and bad["error_code"] == "PT404"
    for entry in compact["tools"]:
        if "chain" in entry:
            elements = [compact["elements"][key] for key in entry["chain"]]
            wanted = [r for r in rows if r["requested_tool_id"] == entry["requested"]][: len(elements)]
            assert [e["tool_id"] for e in elements] == [r["tool_id"] for r in wanted]
            assert elements[0]["manifest"] == wanted[0]["manifest"]
    assert sorted(compact["elements"]) == sorted({f"{r['tool_id']}@{r['version']}" for r in rows if not r["error"]})


async def test_search_finds_hello_world_first(reg: PostgresRegistry) -> None:
    rows = await reg.search("hello world")
    assert rows[0]["tool_id"] == "hello_world"
    typed = await reg.search("", tool_type="primitive", limit=50)
    assert typed and {r["tool_type"] for r in typed} == {"primitive"}
    assert len(await reg.search("", limit=2)) == 2


async def test_a_query_vector_travels_as_an_array_literal_that_keeps_every_number(
    reg: PostgresRegistry, database_url: str
) -> None:
    """The vector is sent as a `{...}` literal (psycopg's list dumper cost 0.5 ms a search):
    tiny, negative-zero and exponent-form numbers arrive as the same float4 values."""
    vector = [1e-08, -0.0, 2.5e-05, 0.1, -0.33333334] + [0.0625] * 251
    sent, params = statement("search_tools", {"p_query": "x", "p_embedding": vector}, "rows")
    assert params[1].startswith("{1e-08,-0.0,2.5e-05,0.1,") and "p_embedding => %s::real[]" in sent
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        got = await (await conn.execute("select %s::real[]", (params[1],))).fetchone()
    assert got and [float(f"{x:.8g}") for x in got[0][:5]] == [1e-08, 0.0, 2.5e-05, 0.1, -0.33333334]
    rows = await reg.search("hello world", embedding=vector, model="wordllama/l2_supercat_256")
    # the vector is no real query's: which stored vectors lie nearest it depends on what else the
    # database holds, so the answer is judged by its mode and by the words' tool being in it
    assert rows and {r["search_mode"] for r in rows} == {"hybrid"}
    assert "hello_world" in [r["tool_id"] for r in rows[:5]]


async def test_unknown_tool_is_not_found_and_names_the_tool(reg: PostgresRegistry) -> None:
    with pytest.raises(NotFound, match="no_such_tool_zz") as info:
        await reg.execution_plan("no_such_tool_zz")
    assert info.value.exit_code == 3
    with pytest.raises(NotFound, match="no_such_tool_zz"):
        await reg.chain("no_such_tool_zz")


async def test_publish_then_republish_identical_is_a_no_op(reg: PostgresRegistry, fresh_tool: str) -> None:
    manifest, files = script(fresh_tool)
    first = await reg.publish(manifest, files, "tool_id: x\n")
    assert first["tool_id"] == fresh_tool and first["created"] is True and first["is_latest"] is True
    again = await reg.publish(manifest, files)
    assert again["created"] is False and again["unchanged"] is True
    assert again["content_hash"] == first["content_hash"]
    plan = await reg.execution_plan(fresh_tool)
    assert plan["content_hash"] == first["content_hash"]


async def test_same_version_with_other_content_is_refused(reg: PostgresRegistry, fresh_tool: str) -> None:
    await reg.publish(*script(fresh_tool))
    with pytest.raises(Refused, match="already published with different content") as info:
        await reg.publish(*script(fresh_tool, body="echo other"))
    assert info.value.hint and "new version" in info.value.hint


async def test_bad_manifest_is_a_usage_error_naming_each_field(reg: PostgresRegistry, fresh_tool: str) -> None:
    manifest = {"tool_id": fresh_tool, "tool_type": "script", "executor": "bash_runtime", "version": "1.0"}
    with pytest.raises(UsageError) as info:
        await reg.publish(manifest, [{"path": "/abs.sh", "content_text": "x"}])
    err = info.value
    assert any(p.startswith("version:") for p in err.problems)
    assert "version" in err.message and err.hint == "fix the fields named above; nothing was published"
    assert err.exit_code == 2


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:Wr0ng-S3cret-pw@127.0.0.1:{urlsplit(stack_url()).port}/postgres",  # wrong password
        "postgresql://postgres:Wr0ng-S3cret-pw@127.0.0.1:1/postgres",  # nothing listens
        "host=127.0.0.1 port=1 user=postgres password=Wr0ng-S3cret-pw dbname=postgres",
    ],
)
async def test_unreachable_database_is_registry_unavailable_without_the_password(url: str) -> None:
    registry = PostgresRegistry(url, principal=local_owner(), connect_timeout=3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RegistryUnavailable) as info:
        await registry.execution_plan("hello_world")
    assert loop.time() - started < 2, "a refused connection is reported at once, not after the pool's timeout"
    text = str(info.value)
    assert "Wr0ng-S3cret-pw" not in text and "Wr0ng-S3cret-pw" not in repr(registry)
    assert "127.0.0.1" in text and "***" in text
    assert "make db" in (info.value.hint or "") and "KIWI_DATABASE_URL" in (info.value.hint or "")
    assert info.value.exit_code == 5
    await registry.aclose()


def test_redaction_covers_urls_and_conninfo() -> None:
    assert redact("postgresql://u:p%40ss@h:5432/d?sslmode=require") == "postgresql://u:***@h:5432/d?sslmode=require"
    assert redact("postgresql://h/d?user=u&password=pw") == "postgresql://h/d?user=u&password=***"
    assert redact("host=h password='a b' user=u") == "host=h password=*** user=u"
    assert scrub("failed for p@ss", "postgresql://u:p%40ss@h/d") == "failed for ***"


async def test_hot_statements_are_prepared_on_the_server(database_url: str) -> None:
    registry = PostgresRegistry(database_url, principal=local_owner(), min_size=1, max_size=1)
    try:
        for _ in range(3):
            await registry.execution_plan("hello_world")
        await registry.search("hello")
        pool = registry.backend._pool
        assert pool is not None
        async with pool.connection() as conn:
            rows = await (
                await conn.execute("select statement, generic_plans + custom_plans from pg_prepared_statements")
            ).fetchall()
    finally:
        await registry.aclose()
    executions = {statement: n for statement, n in rows}
    plan = [n for s, n in executions.items() if "resolve_execution_plan" in s]
    assert plan == [3], executions
    assert any("search_tools" in s for s in executions)


async def test_fifty_concurrent_plans_share_the_pool(reg: PostgresRegistry) -> None:
    tools = ["hello_world", "format_bytes", "http_echo"] * 17
    plans = await asyncio.gather(*(reg.execution_plan(t) for t in tools[:50]))
    assert [p["tool_id"] for p in plans] == tools[:50]


async def test_the_registry_reopens_after_aclose(reg: PostgresRegistry) -> None:
    await reg.execution_plan("hello_world")
    await reg.aclose()
    assert (await reg.execution_plan("hello_world"))["tool_id"] == "hello_world"


async def test_record_run_then_runs_round_trip(reg: PostgresRegistry, conn: psycopg.Connection) -> None:
    """Needs public.record_run and public.tool_runs (schema file 210_run_records.sql)."""
    record = {
        "tool_id": "hello_world",
        "version": "1.0.0",
        "status": "success",
        "exit_code": 0,
        "duration_ms": 12.5,
        "executor_chain": ["hello_world", "bash_runtime", "subprocess"],
        "primitive": "subprocess",
    }
    run_id = await reg.record_run(record)
    assert uuid.UUID(run_id)
    try:
        rows = await reg.runs(tool_id="hello_world", limit=5)
        one = await reg.runs(limit=1)
    finally:
        conn.execute("delete from tool_runs where id = %s", (run_id,))
    assert rows and all(r["tool_id"] == "hello_world" for r in rows)
    ours = [r for r in rows if r["id"] == run_id]
    assert ours, "the new run is among the newest"
    assert ours[0]["status"] == "success" and ours[0]["executor_chain"] == record["executor_chain"]
    assert isinstance(ours[0]["started_at"], str), "rows have the JSON shapes the REST backend returns"
    started = [r["started_at"] for r in rows]
    assert started == sorted(started, reverse=True)
    assert len(one) == 1


async def test_a_bad_run_record_is_a_usage_error(reg: PostgresRegistry) -> None:
    """Needs schema file 210_run_records.sql."""
    with pytest.raises(UsageError) as info:
        await reg.record_run({"tool_id": "hello_world", "status": "finished"})
    assert any(p.startswith("status:") for p in info.value.problems)


async def test_record_audit_and_take_rate_limit(reg: PostgresRegistry, conn: psycopg.Connection) -> None:
    """Needs schema files 240_audit.sql and 250_rate_limits.sql."""
    session = f"registry-pg-{uuid.uuid4()}"
    tool = f"rl_registry_{uuid.uuid4().hex[:8]}"
    limit_id = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 1, 60) returning id", (tool,)
    ).fetchone()[0]
    try:
        first = await reg.take_rate_limit(tool, None, session)
        second = await reg.take_rate_limit(tool, None, session)
        audit_id = await reg.record_audit(
            {
                "session_id": session,
                "tool_id": tool,
                "decision": "refused",
                "reason": second["reason"],
                "retry_after_s": second["retry_after_s"],
            }
        )
        row = conn.execute("select decision, caller from audit_log where id = %s", (audit_id,)).fetchone()
    finally:
        conn.execute("delete from rate_limits where id = %s", (limit_id,))
        conn.execute("delete from audit_log where session_id = %s", (session,))
    assert first["allowed"] is True and first["retry_after_s"] is None
    assert second["allowed"] is False and 0 <= float(second["retry_after_s"]) <= 60
    assert second["limit"]["key"] == tool
    assert row == ("refused", "role:service_role"), "the caller is whom the registry acts as, not its login"
    with pytest.raises(UsageError, match="decision"):
        await reg.record_audit({"session_id": session, "tool_id": tool, "decision": "maybe"})


def test_connect_chooses_the_backend_from_the_settings(tmp_path) -> None:
    pg = connect(Settings.load({"KIWI_DATABASE_URL": "postgresql://u:pw@h/d"}, tmp_path / "none.toml"))
    assert isinstance(pg, PostgresRegistry) and "pw" not in repr(pg)
    rest = connect(Settings.load({"SUPABASE_URL": "https://x.supabase.co", "SUPABASE_KEY": "k"}, tmp_path / "n.toml"))
    assert isinstance(rest, RestRegistry)
