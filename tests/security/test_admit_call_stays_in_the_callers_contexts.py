"""The gate's one round trip (public.admit_call) reads and opens contexts as its caller only.

Folding get_context, check_call and open_context into one call must not open a way around
any of them: a caller cannot have a call checked against, or a directive's context opened
under, another user's context (whether the database or the runner's memory of contexts
answers), and a directive run under a context never widens it. Whom the call acts as comes
from the JWT claims only; the call names no caller and takes no permissions of its own.
Two users with real claims, on the real database and migrations.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import (
    Call,
    Denied,
    NotFound,
    PostgresRegistry,
    Principal,
    Runner,
    UsageError,
    acting_as,
    anon,
    from_claims,
)
from tests.conftest import local_settings

SHA = "a" * 64


def user() -> Principal:
    return from_claims({"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"})


@pytest.fixture
async def kiwi(database_url: str, tmp_path: Path, conn: psycopg.Connection) -> AsyncIterator[Runner]:
    """One runner serving several users in turn, as `kiwi serve` does."""
    settings = local_settings(database_url, tmp_path)
    runner = Runner(PostgresRegistry(database_url, principal=anon()), settings, session=f"test-admit-{uuid.uuid4()}")
    try:
        yield runner
    finally:
        await runner.aclose()
        conn.execute("delete from execution_contexts where session_id = %s", (runner.session,))
        conn.execute("delete from audit_log where session_id = %s", (runner.session,))


def directive(publish_tool: Callable[..., str], tools: list[str]) -> str:
    manifest = {"tool_type": "directive", "executor": "directive_runtime", "permissions": {"tools": tools}}
    return publish_tool("admit_directive", manifest, {"d.md": "# d\n"}, entrypoint="d.md")


def contexts(conn: psycopg.Connection, session: str) -> list[tuple[str, str | None]]:
    rows = conn.execute(
        "select caller, parent_id::text from execution_contexts where session_id = %s order by created_at", (session,)
    )
    return [(r[0], r[1]) for r in rows]


async def test_nobody_is_checked_against_or_opens_under_another_users_context(
    kiwi: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    narrow = directive(publish_tool, ["hello_world"])
    a, b = user(), user()
    plan, hello = await kiwi.plan(narrow), await kiwi.plan("hello_world")
    with acting_as(a):
        opened = (await kiwi.gate.admit(plan, {}, Call(kiwi.session), False)).child_context or {}
        await kiwi.gate.admit(hello, {"name": "A"}, Call(kiwi.session, context=opened["id"]), False)
    assert contexts(conn, kiwi.session) == [(a.user_id, None)]

    with acting_as(b):
        with pytest.raises(NotFound):  # not served from the runner's memory of a's context either
            await kiwi.gate.admit(hello, {"name": "B"}, Call(kiwi.session, context=opened["id"]), False)
        with pytest.raises(NotFound):
            await kiwi.gate.admit(plan, {}, Call(kiwi.session, context=opened["id"]), False)
        with pytest.raises(NotFound):
            await kiwi.registry.admit_call(
                {
                    "tool_id": narrow,
                    "version": "1.0.0",
                    "params_sha256": SHA,
                    "session_id": kiwi.session,
                    "context_id": opened["id"],
                    "open_context": True,
                }
            )
        with pytest.raises(UsageError):  # the caller is the token's: a call that names one is refused
            await kiwi.registry.admit_call({"tool_id": narrow, "params_sha256": SHA, "caller": a.user_id})
    assert contexts(conn, kiwi.session) == [(a.user_id, None)], "nothing was opened for b, under a's or at all"


async def test_a_directive_run_through_the_folded_call_never_widens_its_parent(
    kiwi: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    narrow, wide = directive(publish_tool, ["hello_world", "admit_directive_*"]), directive(publish_tool, ["*"])
    a = user()
    outer, inner = await kiwi.plan(narrow), await kiwi.plan(wide)
    conn.execute("insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 5, 3600)", (wide,))
    try:
        with acting_as(a):
            parent = (await kiwi.gate.admit(outer, {}, Call(kiwi.session), False)).child_context or {}
            with pytest.raises(Denied) as refused:
                await kiwi.gate.admit(inner, {}, Call(kiwi.session, context=parent["id"]), False)
            with pytest.raises(UsageError):  # no permissions of its own to widen with
                await kiwi.registry.admit_call(
                    {
                        "tool_id": wide,
                        "params_sha256": SHA,
                        "session_id": kiwi.session,
                        "context_id": parent["id"],
                        "open_context": True,
                        "permissions": {"tools": ["*"]},
                    }
                )
        counted = conn.execute(
            "select coalesce(sum(c.calls), 0) from kiwi_internal.rate_limit_counters c"
            " join rate_limits l on l.id = c.limit_id where l.key = %s",
            (wide,),
        ).fetchone()
    finally:
        conn.execute("delete from rate_limits where key = %s", (wide,))
    denied: Any = refused.value
    assert denied.kind == "permission_denied"
    assert denied.extra["permission"] == (
        'permissions.tools: "*" is wider than the parent\'s ["hello_world", "admit_directive_*"]'
    )
    assert contexts(conn, kiwi.session) == [(a.user_id, None)], "no child was opened"
    assert counted == (0,), "the refused directive took nothing from its rate limit"
