"""Every request acts as its caller: the registry sets each statement's role and JWT claims.

Found by an attacker's trial (issue 12): the runner, the CLI and the MCP server ran every
request on the database login (the `postgres` superuser), so RLS and the namespace rules
decided nothing. Two users with real claims, anon and an explicit admin, on the real
database and migrations, through the runner's own login (kiwi_runner: not a superuser, it
can only SET ROLE), as `kiwi` logs in by default.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import (
    LOCAL_OWNER_ID,
    NotFound,
    PostgresRegistry,
    Principal,
    Refused,
    Runner,
    acting_as,
    admin,
    anon,
    from_claims,
    local_owner,
)
from runner.config import stack_database_url
from tests.conftest import local_settings


def user(user_id: str) -> Principal:
    return from_claims({"sub": user_id, "role": "authenticated", "aud": "authenticated"})


@pytest.fixture
def two_users(conn: psycopg.Connection) -> Iterator[dict[str, Any]]:
    """Users A and B, each owning a namespace of their own."""
    made = {}
    for name in ("a", "b"):
        uid = str(uuid.uuid4())
        ns = f"t{name}_{uuid.uuid4().hex[:10]}"
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, uid))
        made[name] = {"id": uid, "ns": ns, "principal": user(uid)}
    yield made
    for who in made.values():
        conn.execute("delete from tools where namespace = %s", (who["ns"],))
        conn.execute("delete from namespaces where namespace = %s", (who["ns"],))


def private_tool(ns: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    manifest = {
        "tool_id": f"secret_{uuid.uuid4().hex[:8]}",
        "namespace": ns,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "visibility": "private",
        "description": "a private tool",
        "entrypoint": "run.sh",
    }
    return manifest, [{"path": "run.sh", "content_text": "echo private", "is_entrypoint": True}]


async def test_each_request_runs_as_the_principal_it_is_made_for(
    runner_database_url: str, two_users: dict[str, Any]
) -> None:
    """One connection, many callers in turn: each statement sees its own caller, never the last one's."""
    registry = PostgresRegistry(runner_database_url, principal=anon(), min_size=1, max_size=1)
    callers = [two_users["a"]["principal"], two_users["b"]["principal"], anon(), admin(), None]

    async def whoami(who: Principal | None) -> tuple[Principal | None, dict[str, Any]]:
        with acting_as(who):
            await asyncio.sleep(0)
            return who, await registry.whoami()

    try:
        seen = await asyncio.gather(*(whoami(callers[i % len(callers)]) for i in range(40)))
    finally:
        await registry.aclose()
    for who, answer in seen:
        expected = who or anon()
        assert answer["role"] == expected.role
        assert answer["user_id"] == expected.user_id
        assert answer["is_admin"] is expected.is_admin


async def test_a_private_plan_cached_for_its_owner_is_never_served_to_another(
    runner_database_url: str, two_users: dict[str, Any]
) -> None:
    a, b = two_users["a"], two_users["b"]
    registry = PostgresRegistry(runner_database_url, principal=anon())
    try:
        manifest, files = private_tool(a["ns"])
        ref = f"{a['ns']}/{manifest['tool_id']}"
        with acting_as(a["principal"]):
            await registry.publish(manifest, files)
            for _ in range(20):  # the plan cache listens from the second plan on; let it start
                plan = await registry.execution_plan(ref)
                await asyncio.sleep(0.02)
        assert plan["tool_id"] == ref
        for stranger in (b["principal"], anon(), local_owner()):
            with acting_as(stranger), pytest.raises(NotFound):
                await registry.execution_plan(ref)
    finally:
        await registry.aclose()


async def test_runs_are_recorded_as_the_caller_that_made_them(
    runner_database_url: str, two_users: dict[str, Any], conn: psycopg.Connection, tmp_path: Path
) -> None:
    settings = local_settings(runner_database_url, tmp_path)
    runner = Runner(PostgresRegistry(runner_database_url, principal=local_owner()), settings)
    try:

        async def run(who: Principal) -> str | None:
            with acting_as(who):
                result = await runner.run("hello_world", {"name": "Ada"})
            assert result.ok, result.error
            return result.run_id

        ids = await asyncio.gather(run(two_users["a"]["principal"]), run(two_users["b"]["principal"]), run(anon()))
        await runner.flush_records()
    finally:
        await runner.aclose()
    rows = dict(conn.execute("select id::text, caller from tool_runs where id = any(%s::uuid[])", (ids[:2],)))
    assert rows == {ids[0]: two_users["a"]["id"], ids[1]: two_users["b"]["id"]}
    # anon may not record runs: nothing was written under anyone else's name
    assert conn.execute("select count(*) from tool_runs where id = %s::uuid", (ids[2],)).fetchone() == (0,)


async def test_the_local_owner_publishes_in_its_namespace_but_not_into_public(
    runner_database_url: str, conn: psycopg.Connection
) -> None:
    registry = PostgresRegistry(runner_database_url, principal=local_owner())
    tool_id = f"mine_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": tool_id,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "description": "d",
        "entrypoint": "run.sh",
    }
    files = [{"path": "run.sh", "content_text": "echo hi", "is_entrypoint": True}]
    try:
        assert (await registry.whoami())["user_id"] == LOCAL_OWNER_ID
        with pytest.raises(Refused):
            await registry.publish(manifest, files)
        assert conn.execute("select count(*) from tools where tool_id = %s", (tool_id,)).fetchone() == (0,)
        answer = await registry.publish({**manifest, "namespace": "local"}, files)
        assert answer["tool_id"] == f"local/{tool_id}"
    finally:
        await registry.aclose()
        conn.execute("delete from tools where tool_id = %s", (tool_id,))


def test_a_principal_is_never_the_database_login_by_default() -> None:
    """Nothing constructs a registry without saying whom it acts as."""
    with pytest.raises(TypeError):
        PostgresRegistry(stack_database_url())  # type: ignore[call-arg]


def test_the_local_stack_creates_the_owner_the_runner_acts_as(conn: psycopg.Connection) -> None:
    """supabase/local_owner.sql and runner.principal name the same user, and the stack applied it."""
    from tests.conftest import ROOT

    assert LOCAL_OWNER_ID in (ROOT / "supabase" / "local_owner.sql").read_text()
    row = conn.execute("select owner_id::text from namespaces where namespace = 'local'").fetchone()
    assert row == (LOCAL_OWNER_ID,)


async def test_a_login_that_cannot_take_the_callers_role_is_a_clear_refusal(
    database_url: str, conn: psycopg.Connection
) -> None:
    """A database login that is not a member of authenticated cannot act as a user: refused with
    the grant that is missing, never a traceback and never the login's own rights instead."""
    from urllib.parse import urlsplit

    name = f"kiwi_lonely_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create role {name} login password 'lonely-pw'")
    try:
        parts = urlsplit(database_url)
        url = f"postgresql://{name}:lonely-pw@{parts.hostname}:{parts.port}{parts.path}"
        registry = PostgresRegistry(url, principal=local_owner())
        try:
            with pytest.raises(Refused, match="cannot act as role authenticated") as info:
                await registry.whoami()
            assert info.value.hint and "grant authenticated to" in info.value.hint
        finally:
            await registry.aclose()
    finally:
        conn.execute(f"drop role {name}")
