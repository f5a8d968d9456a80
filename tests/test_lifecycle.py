"""A version's lifecycle after publishing (issue 15, items 4 and 5), from the CLI and over MCP,
against the real database, as the local owner (a member of namespace `local`).

Measured before: a pinned yanked or deprecated version ran without a word, the CLI had no
`deprecate`, MCP no deprecate action, and `kiwi show tool@1.0.0` (like MCP `load`) showed the
latest version's chain. Now a deprecated version runs warning with its message, a yanked one
runs only when pinned exactly (tool@V, --version, kiwi.lock), warning too, and the warnings
reach the CLI's stderr, the MCP result and the run record.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp_types import CallToolResult
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, Runner, build_server, local_owner
from tests.conftest import local_settings
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

Kiwi = Callable[..., Done]


def publish(conn: psycopg.Connection, ref: str, version: str, word: str, executor: str = "bash_runtime") -> None:
    manifest = {
        "tool_id": ref,
        "tool_type": "script",
        "executor": executor,
        "version": version,
        "description": f"prints {word}",
        "entrypoint": "main.sh",
    }
    files = [{"path": "main.sh", "content_text": f'echo \'{{"said": "{word}"}}\'\n', "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))


@pytest.fixture
def tool(conn: psycopg.Connection) -> Iterator[str]:
    """local/lifecycle_<hex> at 1.0.0 (on bash_runtime) and 1.1.0 (on a runtime of its own, so
    the two versions' chains differ); removed afterwards with its runs."""
    ref = f"local/lifecycle_{uuid.uuid4().hex[:8]}"
    runtime = f"{ref}_rt"
    conn.execute(
        "select publish_tool_version(%s, '[]')",
        (
            Jsonb(
                {
                    "tool_id": runtime,
                    "tool_type": "runtime",
                    "executor": "bash_runtime",
                    "version": "1.0.0",
                    "description": "bash, again",
                }
            ),
        ),
    )
    publish(conn, ref, "1.0.0", "one")
    publish(conn, ref, "1.1.0", "two", executor=runtime)
    yield ref
    conn.execute("delete from tools where ref = %s", (ref,))
    conn.execute("delete from tools where ref = %s", (runtime,))
    conn.execute("delete from tool_runs where tool_id = %s", (ref,))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Kiwi:
    """`kiwi(*args)`: the CLI as a process in an empty project directory (where kiwi.lock goes)."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_PROJECT_DIR=str(workdir))

    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=workdir, env=env)

    return run


def warnings_in(err: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")]


def recorded_warnings(conn: psycopg.Connection, ref: str) -> list[tuple[str, list[str] | None]]:
    rows = conn.execute(
        "select version, warnings from tool_runs where tool_id = %s order by started_at", (ref,)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


# --- the CLI ---------------------------------------------------------------------------------


def test_a_deprecated_version_runs_warning_with_its_message_on_stderr_and_in_the_run_record(
    kiwi: Kiwi, tool: str, conn: psycopg.Connection
) -> None:
    done = kiwi("deprecate", f"{tool}@1.1.0", "--message", "use local/other instead")
    assert done.code == 0, done.err
    assert done.out.strip() == f"deprecated: {tool}@1.1.0: use local/other instead; runs of it now warn so"

    ran = kiwi("run", tool, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["version"] == "1.1.0" and ran.json()["output"] == {"said": "two"}, "it still runs"
    said = f"{tool}@1.1.0 is deprecated: use local/other instead"
    assert said in warnings_in(ran.err)
    assert "warnings" not in ran.json(), "the --json object stays the contract's"
    assert kiwi("run", tool, "--version", "1.0.0").err.count("deprecated") == 0, "only that version warns"
    assert any(v == "1.1.0" and said in (ws or []) for v, ws in recorded_warnings(conn, tool)), "and its run record"


def test_deprecate_needs_a_version_and_the_right_to_change_the_tool(kiwi: Kiwi, tool: str) -> None:
    done = kiwi("deprecate", tool)
    assert done.code == 2 and "deprecate needs a version" in done.err
    yank = kiwi("yank", tool)
    assert yank.code == 2 and "yank needs a version" in yank.err and f"kiwi yank {tool}@1.0.0" in yank.err
    refused = kiwi("deprecate", "hello_world@1.0.0", "--message", "no")
    assert refused.code == 4, refused.err
    assert 'you cannot change tool "hello_world"' in refused.err
    assert kiwi("deprecate", f"{tool}@9.9.9").code == 3


def test_a_yanked_version_runs_only_when_pinned_exactly_and_then_warns(
    kiwi: Kiwi, tool: str, conn: psycopg.Connection
) -> None:
    assert kiwi("yank", f"{tool}@1.1.0", "--reason", "prints the wrong word").code == 0

    unpinned = kiwi("run", tool, "--json")
    assert unpinned.json()["version"] == "1.0.0", "unpinned, the latest version that is not yanked runs"
    assert not [w for w in warnings_in(unpinned.err) if "yanked" in w]

    said = (
        f"{tool}@1.1.0 is yanked: prints the wrong word; it runs only because this exact version is pinned "
        f"(unpinned, {tool} runs its latest version)"
    )
    for pinned in (("run", f"{tool}@1.1.0", "--json"), ("run", tool, "--version", "1.1.0", "--json")):
        done = kiwi(*pinned)
        assert done.code == 0, done.err
        assert done.json()["output"] == {"said": "two"}
        assert said in warnings_in(done.err), pinned
    assert [v for v, ws in recorded_warnings(conn, tool) if ws and said in ws] == ["1.1.0", "1.1.0"]


def test_a_kiwi_lock_pin_of_a_version_yanked_later_runs_it_with_the_warning(kiwi: Kiwi, tool: str) -> None:
    assert kiwi("lock", tool).code == 0
    assert kiwi("yank", f"{tool}@1.1.0").code == 0
    done = kiwi("run", tool, "--json")
    assert done.code == 0, done.err
    assert done.json()["version"] == "1.1.0", "the lock pins it"
    assert any(w.startswith(f"{tool}@1.1.0 is yanked; it runs only because") for w in warnings_in(done.err))


def test_show_of_a_version_shows_that_versions_chain_and_its_status(kiwi: Kiwi, tool: str) -> None:
    """`kiwi show tool@1.0.0` showed 1.1.0 (the latest) as the first row of its chain."""
    runtime = f"{tool}_rt"
    shown = kiwi("show", f"{tool}@1.0.0", "--json").json()
    assert [(r["depth"], r["tool_id"], r["version"]) for r in shown["chain"]] == [
        (0, tool, "1.0.0"),
        (1, "bash_runtime", "1.0.0"),
        (2, "subprocess", "1.0.0"),
    ]
    assert shown["version"] == "1.0.0" and shown["manifest"]["version"] == "1.0.0"
    latest = kiwi("show", tool, "--json").json()
    assert [r["tool_id"] for r in latest["chain"]][:3] == [tool, runtime, "bash_runtime"]
    assert latest["chain"][0]["version"] == "1.1.0"

    kiwi("deprecate", f"{tool}@1.0.0", "--message", "old")
    kiwi("yank", f"{tool}@1.0.0", "--reason", "bad")
    people = kiwi("show", tool, "--version", "1.0.0")
    assert people.code == 0, people.err
    chain = people.out.split("chain:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert chain[0].split()[:4] == ["0", tool, "script", "1.0.0"]
    assert "  yanked: bad (runs only when pinned to it)" in people.out
    assert "  deprecated: old" in people.out
    status = kiwi("show", f"{tool}@1.0.0", "--json").json()
    assert {k: status[k] for k in ("deprecated", "deprecation_message", "yanked", "yanked_reason")} == {
        "deprecated": True,
        "deprecation_message": "old",
        "yanked": True,
        "yanked_reason": "bad",
    }


# --- MCP ------------------------------------------------------------------------------------


@pytest.fixture
def mcp(database_url: str, conn: psycopg.Connection, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """`async with mcp() as client`: an in-memory client of a Kiwi server acting as the local owner."""
    sessions: list[str] = []

    @asynccontextmanager
    async def open_client() -> AsyncIterator[Client]:
        session_id = f"test-lifecycle-{uuid.uuid4()}"
        sessions.append(session_id)
        settings = local_settings(database_url, tmp_path)
        runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
        try:
            async with Client(build_server(runner, session_id=session_id)) as client:
                yield client
        finally:
            await runner.aclose()

    yield open_client
    for session_id in sessions:
        conn.execute("delete from audit_log where session_id = %s", (session_id,))


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    return result.structured_content


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_mcp_deprecates_yanks_and_runs_with_the_warnings(
    mcp: Callable[[], Any], tool: str, conn: psycopg.Connection
) -> None:
    async with mcp() as client:
        done = await client.call_tool(
            "execute", {"action": "deprecate", "item_id": f"{tool}@1.0.0", "parameters": {"message": "use 1.1.0"}}
        )
        assert not done.is_error, text(done)
        assert structured(done)["is_deprecated"] is True and structured(done)["action"] == "deprecate"

        ran = await client.call_tool("execute", {"action": "run", "item_id": tool, "version": "1.0.0"})
        assert not ran.is_error, text(ran)
        said = f"{tool}@1.0.0 is deprecated: use 1.1.0"
        assert structured(ran)["warnings"][0] == said
        assert f"warning: {said}" in text(ran)

        await client.call_tool("execute", {"action": "yank", "item_id": f"{tool}@1.1.0"})
        latest = await client.call_tool("execute", {"action": "run", "item_id": tool})
        assert structured(latest)["version"] == "1.0.0", "yanked 1.1.0 is not the latest any more"
        pinned = await client.call_tool("execute", {"action": "run", "item_id": f"{tool}@1.1.0"})
        assert not pinned.is_error, text(pinned)
        assert any(w.startswith(f"{tool}@1.1.0 is yanked; it runs only") for w in structured(pinned)["warnings"])

        no_version = await client.call_tool("execute", {"action": "deprecate", "item_id": tool})
        assert no_version.is_error and "deprecate needs a version" in text(no_version)
        not_text = await client.call_tool(
            "execute", {"action": "deprecate", "item_id": f"{tool}@1.0.0", "parameters": {"message": 5}}
        )
        assert not_text.is_error and "message must be a string" in text(not_text)
        theirs = await client.call_tool("execute", {"action": "deprecate", "item_id": "hello_world@1.0.0"})
        assert theirs.is_error and "you cannot change tool" in text(theirs)

    audited = conn.execute(
        "select version, decision from audit_log where tool_id = %s and action = 'deprecate' order by at", (tool,)
    ).fetchall()
    assert audited[0] == ("1.0.0", "allowed"), "the deprecate action is audited"
    recorded = dict(
        conn.execute(
            "select version, warnings from tool_runs where tool_id = %s and version = '1.0.0' and warnings is not null",
            (tool,),
        ).fetchall()
    )
    assert said in recorded["1.0.0"]


async def test_mcp_load_of_a_version_gives_that_versions_manifest_and_chain(mcp: Callable[[], Any], tool: str) -> None:
    """load(item@1.0.0) gave the latest version's chain, and no manifest at all."""
    async with mcp() as client:
        loaded = await client.call_tool("load", {"item_id": f"{tool}@1.0.0"})
        assert not loaded.is_error, text(loaded)
        got = structured(loaded)
        assert got["version"] == "1.0.0" and got["manifest"]["version"] == "1.0.0"
        assert [(c["tool_id"], c["version"]) for c in got["executor_chain"]] == [
            (tool, "1.0.0"),
            ("bash_runtime", "1.0.0"),
            ("subprocess", "1.0.0"),
        ]
        assert got["deprecated"] is False and got["warnings"] == []
        await client.call_tool("execute", {"action": "deprecate", "item_id": f"{tool}@1.0.0", "parameters": {}})
        again = structured(await client.call_tool("load", {"item_id": tool, "version": "1.0.0"}))
        assert again["deprecated"] is True
        assert again["warnings"] == [f"{tool}@1.0.0 is deprecated: no reason given"]


# --- plans held in memory ---------------------------------------------------------------------


async def test_a_runner_holding_a_pinned_plan_in_memory_sees_it_deprecated(
    database_url: str, tool: str, conn: psycopg.Connection
) -> None:
    """Deprecating a version that is not the latest changes no cached plan of the database, yet
    must reach a long-lived runner's plans in memory (the change notification)."""
    registry = PostgresRegistry(database_url, principal=local_owner())
    try:
        await registry.plan(tool, "1.0.0")
        await registry.plan(tool, "1.0.0")  # the second plan starts the listener
        cache = registry._plan_cache
        assert cache is not None
        for _ in range(150):
            if cache.live:
                break
            await asyncio.sleep(0.02)
        assert (await registry.plan(tool, "1.0.0")).deprecated is False
        conn.execute("select deprecate_tool_version(%s, '1.0.0', 'gone soon')", (tool,))
        for _ in range(150):
            plan = await registry.plan(tool, "1.0.0")
            if plan.deprecated:
                break
            await asyncio.sleep(0.02)
        assert plan.deprecated and plan.deprecation_message == "gone soon"
    finally:
        await registry.aclose()
