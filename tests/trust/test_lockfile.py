"""kiwi.lock: `kiwi lock TOOL` pins the exact chain, a run under it refuses any drift
and names the element that moved, `kiwi lock --update` moves it on purpose."""

from __future__ import annotations

import json

import psycopg

from runner import local_owner
from tests.conftest import local_settings

from .conftest import Chain, Project, publish, publish_runtime


def test_lock_records_every_element_of_the_chain(project: Project, chain: Chain, conn: psycopg.Connection) -> None:
    done = project.kiwi("lock", chain.tool)
    assert done.code == 0, done.err
    lock = json.loads((project.dir / "kiwi.lock").read_text())
    entry = lock["tools"][chain.tool]
    stored = conn.execute(
        "select tool_id, version, content_hash from resolve_executor_chain(%s) order by depth", (chain.tool,)
    ).fetchall()
    assert [(c["tool_id"], c["version"], c["content_hash"]) for c in entry["chain"]] == stored
    assert entry["version"] == "1.0.0" and entry["content_hash"] == stored[0][2]
    again = project.kiwi("lock", chain.tool)  # locking what is locked changes nothing
    assert again.code == 0 and "unchanged" in again.out


def test_a_moved_executor_is_refused_and_named_until_the_lock_is_updated(
    project: Project, chain: Chain, conn: psycopg.Connection
) -> None:
    assert project.kiwi("lock", chain.tool).code == 0
    assert project.kiwi("run", chain.tool, "-p", "word=a").code == 0
    publish_runtime(conn, chain.runtime, "1.0.1")  # the runtime moves under the tool

    done = project.kiwi("run", chain.tool, "-p", "word=b", "--json")
    assert done.code == 4
    error = done.json()["error"]
    assert f"{chain.runtime} moved from 1.0.0" in error and "to 1.0.1" in error
    assert f"kiwi lock --update {chain.tool}" in error

    check = project.kiwi("lock")  # checking alone reports the drift and fails
    assert check.code == 4 and f"drift  {chain.tool}" in check.out
    refused = project.kiwi("lock", chain.tool)  # re-locking without --update does not move it
    assert refused.code == 4 and "--update" in refused.err

    updated = project.kiwi("lock", "--update", chain.tool)
    assert updated.code == 0 and f"{chain.runtime}@1.0.1" in updated.out
    assert project.kiwi("run", chain.tool, "-p", "word=c").code == 0
    assert project.kiwi("lock").code == 0


def test_a_locked_tool_runs_its_locked_version_after_a_newer_one_is_published(
    project: Project, chain: Chain, conn: psycopg.Connection
) -> None:
    assert project.kiwi("lock", chain.tool).code == 0
    publish(
        conn,
        {
            "tool_id": chain.tool,
            "tool_type": "script",
            "executor": chain.runtime,
            "version": "2.0.0",
            "entrypoint": "say.sh",
        },
        {"say.sh": '#!/usr/bin/env bash\necho \'{"said": "two"}\'\n'},
    )
    done = project.kiwi("run", chain.tool, "-p", "word=one", "--json")
    assert done.code == 0, done.err
    assert done.json()["version"] == "1.0.0" and done.json()["output"] == {"said": "one"}
    pinned_elsewhere = project.kiwi("run", f"{chain.tool}@2.0.0", "--json")
    assert pinned_elsewhere.code == 4 and "locked at 1.0.0" in pinned_elsewhere.json()["error"]


def test_a_broken_lockfile_is_a_clear_error(project: Project, chain: Chain) -> None:
    (project.dir / "kiwi.lock").write_text("{not json")
    done = project.kiwi("run", chain.tool, "-p", "word=x")
    assert done.code == 2 and "kiwi.lock: not valid JSON" in done.err


def test_unlocked_tools_run_as_before(project: Project, chain: Chain) -> None:
    assert project.kiwi("lock", "hello_world").code == 0
    done = project.kiwi("run", chain.tool, "-p", "word=free")
    assert done.code == 0, done.err


async def test_the_mcp_server_runs_under_the_projects_lockfile(
    database_url: str, tmp_path, project: Project, chain: Chain, conn: psycopg.Connection
) -> None:
    from mcp import Client

    from runner import PostgresRegistry, Runner, build_server

    assert project.kiwi("lock", chain.tool).code == 0
    settings = local_settings(database_url, tmp_path / "mcp-cache", project_dir=project.dir)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
    try:
        async with Client(build_server(runner)) as client:
            args = {"action": "run", "item_id": chain.tool, "parameters": {"word": "mcp"}}
            first = await client.call_tool("execute", args)
            assert not first.is_error and first.structured_content["output"] == {"said": "mcp"}
            publish_runtime(conn, chain.runtime, "1.0.1")
            moved = await client.call_tool("execute", args)
            assert moved.is_error
            assert f"{chain.runtime} moved from 1.0.0" in moved.content[0].text
    finally:
        await runner.aclose()
