"""OAuth to remote MCP servers end to end: registry rows -> Runner -> pool -> the SDK's OAuth
provider -> a FAKE authorization server guarding a real MCP server (oauth_fake_server.py),
with tokens kept per user in the real database. `kiwi mcp login` runs its real loopback
listener; the test plays the browser by following the printed URL."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import (
    McpPool,
    NotFound,
    PostgresRegistry,
    Principal,
    Runner,
    UsageError,
    admin,
    from_claims,
    import_server,
    local_owner,
    standard_dispatcher,
)
from runner.mcp_client.oauth.login import login
from runner.mcp_client.oauth.logout import logout
from runner.mcp_client.pool import ConnectionFailed
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi

from . import unique
from .oauth_fake_server import FakeAuthServer, fake_oauth_server

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
Publish = Callable[[dict[str, Any]], str]


@pytest.fixture
def publish(conn: psycopg.Connection) -> Iterator[Publish]:
    made: list[str] = []

    def go(manifest: dict[str, Any]) -> str:
        conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
        made.append(manifest["tool_id"])
        return str(manifest["tool_id"])

    yield go
    for ref in reversed(made):
        conn.execute("delete from tools where executor_id = %s", (ref,))
        conn.execute("delete from tools where ref = %s", (ref,))


@pytest.fixture
def fake() -> Iterator[FakeAuthServer]:
    with fake_oauth_server() as server:
        yield server


@pytest.fixture
def users(conn: psycopg.Connection) -> Iterator[tuple[Principal, Principal]]:
    ids = [str(uuid.uuid4()), str(uuid.uuid4())]
    yield from_claims({"sub": ids[0], "role": "authenticated"}), from_claims({"sub": ids[1], "role": "authenticated"})
    conn.execute("delete from kiwi_internal.mcp_oauth_tokens where user_id = any(%s::uuid[])", (ids,))


def oauth_server(publish: Publish, url: str, transport: str = "streamable_http", **auth: Any) -> str:
    server = publish(
        {
            "tool_id": unique("oauth_mcp"),
            "tool_type": "mcp_server",
            "executor": "http_client",
            "version": "1.0.0",
            "config": {"transport": transport, "url": url, "auth": {"type": "oauth", **auth}},
        }
    )
    for name in ("whoami", "echo"):
        publish({"tool_id": f"{server}.{name}", "tool_type": "mcp_tool", "executor": server, "version": "1.0.0"})
    return server


def answer(run: Any) -> Any:
    """A tool's text answer (the SDK's server gives it as structured content {result})."""
    return run.output.get("result") if isinstance(run.output, dict) else run.output


def environ(**extra: str) -> dict[str, str]:
    return {**os.environ, "KIWI_TOKEN_KEY": KEY, **extra}


@pytest.fixture
def runner_as(make_runner: Callable[..., Runner]) -> Callable[..., Runner]:
    def make(principal: Principal, **extra: str) -> Runner:
        dispatcher = standard_dispatcher(mcp_pool=McpPool())
        return make_runner(principal=principal, dispatcher=dispatcher, environ=environ(**extra))

    return make


async def browse(url: str) -> None:
    """The person at the browser: open the sign-in URL, follow the redirects (to Kiwi's loopback listener)."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as client:
        (await client.get(url)).raise_for_status()


async def signed_in(registry: PostgresRegistry, server: str, **options: Any) -> Any:
    said: list[str] = []
    visits: list[asyncio.Task[None]] = []

    def say(text: str) -> None:
        said.append(text)
        if m := re.search(r"^\s+(http\S+)$", text, re.M):
            visits.append(asyncio.get_running_loop().create_task(browse(m[1])))

    result = await login(registry, server, environ(), say=say, open_browser=False, timeout_s=20, **options)
    await asyncio.gather(*visits)
    return result, said


async def test_login_stores_the_users_token_and_runs_use_it(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    alice, _ = users
    server = oauth_server(publish, fake.mcp_url)
    runner = runner_as(alice)
    fake.next_subject = "alice@example"
    result, said = await signed_in(runner.registry, server)  # type: ignore[arg-type]
    assert result.signed_in and result.tools == 2 and result.resource == fake.mcp_url
    assert fake.log[:3] == ["register", "authorize", "authorization_code"]
    assert not any(t in "\n".join(said) for t in fake.tokens)  # the URL is printed, never a token
    run = await runner.run(f"{server}.whoami", {})
    assert (run.status, answer(run)) == ("success", "alice@example"), run.error
    # logging in again with a good token sends nobody to the browser
    again, _ = await signed_in(runner.registry, server)  # type: ignore[arg-type]
    assert not again.signed_in and fake.log.count("authorize") == 1


async def test_login_and_runs_over_sse(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    """The older SSE transport signs in the same way: its GET stream and its POSTed messages
    carry the user's token, from discovery (the 401 on GET /sse) to the tool's answer."""
    alice, bob = users
    server = oauth_server(publish, fake.sse_url, transport="sse")
    fake.next_subject = "alice@sse"
    result, _ = await signed_in(runner_as(alice).registry, server)  # type: ignore[arg-type]
    assert result.signed_in and result.tools == 2 and result.resource == fake.sse_url
    assert fake.log[:3] == ["register", "authorize", "authorization_code"]
    run = await runner_as(alice).run(f"{server}.whoami", {})
    assert (run.status, answer(run)) == ("success", "alice@sse"), run.error
    refused = await runner_as(bob).run(f"{server}.whoami", {})
    assert refused.status == "error" and "kiwi mcp login" in (refused.error or "")


async def test_an_expired_token_is_refreshed_by_a_later_process(
    publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    alice, _ = users
    with fake_oauth_server(access_ttl_s=2) as fake:
        server = oauth_server(publish, fake.mcp_url)
        first = runner_as(alice)
        await signed_in(first.registry, server)  # type: ignore[arg-type]
        assert answer(await first.run(f"{server}.echo", {"message": "fresh"})) == "Echo: fresh"
        issued = set(fake.tokens)
        time.sleep(2.2)  # the access token is dead now; the refresh token is not
        later = runner_as(alice)  # a new runner: the tokens come from the database
        run = await later.run(f"{server}.echo", {"message": "refreshed"})
        assert answer(run) == "Echo: refreshed", run.error
        assert fake.log.count("refresh_token") == 1 and fake.log.count("authorize") == 1
        assert set(fake.tokens) - issued, "a new access token was issued"


async def test_a_run_without_a_login_fails_naming_kiwi_mcp_login(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    alice, bob = users
    server = oauth_server(publish, fake.mcp_url)
    await signed_in(runner_as(alice).registry, server)  # type: ignore[arg-type]
    run = await runner_as(bob).run(f"{server}.whoami", {})  # Alice's login lends Bob nothing
    assert run.status == "error"
    assert "wants you to sign in" in (run.error or "") and "kiwi mcp login" in (run.error or "")


async def test_a_missing_token_key_is_a_clear_error(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    server = oauth_server(publish, fake.mcp_url)
    run = await runner_as(users[0], KIWI_TOKEN_KEY="").run(f"{server}.whoami", {})
    assert run.status == "error" and "KIWI_TOKEN_KEY is not set" in (run.error or "")


async def test_client_credentials_for_machine_use(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    fake.add_client("kiwi-machine", "s3cret-machine-value")
    server = oauth_server(
        publish, fake.mcp_url, grant="client_credentials", client_id="kiwi-machine", client_secret="${MACHINE_SECRET}"
    )
    for principal in (users[0], admin()):  # a user keeps the token in the database; an admin in memory
        run = await runner_as(principal, MACHINE_SECRET="s3cret-machine-value").run(f"{server}.whoami", {})
        assert (run.status, answer(run)) == ("success", "client:kiwi-machine"), run.error
    assert fake.log.count("client_credentials") == 2 and "register" not in fake.log
    wrong = await runner_as(users[1], MACHINE_SECRET="wrong-secret-value").run(f"{server}.whoami", {})
    assert wrong.status == "error" and "s3cret" not in (wrong.error or "")


async def test_the_secret_must_be_a_variable_reference(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    server = oauth_server(
        publish, fake.mcp_url, grant="client_credentials", client_id="kiwi-machine", client_secret="inline-secret"
    )
    run = await runner_as(users[0]).run(f"{server}.whoami", {})
    assert run.status == "error" and "must be a ${VAR} reference" in (run.error or "")


async def test_import_signs_in_as_its_caller(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    runner = runner_as(users[0])
    server = oauth_server(publish, fake.mcp_url)
    await signed_in(runner.registry, server)  # type: ignore[arg-type]
    pool = McpPool()
    try:
        report = await import_server(runner.registry, pool, server, environ())
        assert sorted(t.tool for t in report.tools if t.tool) == ["echo", "whoami"], "listed with her token"
        with pytest.raises(ConnectionFailed, match="wants you to sign in"):  # Bob never signed in
            await import_server(runner_as(users[1]).registry, pool, server, environ())
    finally:
        await pool.aclose()


async def test_login_refuses_bad_servers(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    registry = runner_as(users[0]).registry
    with pytest.raises(NotFound):
        await login(registry, "no_such_server_" + uuid.uuid4().hex[:6], environ(), open_browser=False)
    plain = publish(
        {
            "tool_id": unique("plain_mcp"),
            "tool_type": "mcp_server",
            "executor": "http_client",
            "version": "1.0.0",
            "config": {"transport": "streamable_http", "url": fake.mcp_url},
        }
    )
    with pytest.raises(UsageError, match="does not ask for OAuth"):
        await login(registry, plain, environ(), open_browser=False)


async def test_logout_forgets_only_the_callers_tokens(
    fake: FakeAuthServer, publish: Publish, users: tuple[Principal, Principal], runner_as: Callable[..., Runner]
) -> None:
    alice, bob = users
    server = oauth_server(publish, fake.mcp_url)
    for who in (alice, bob):
        await signed_in(runner_as(who).registry, server)  # type: ignore[arg-type]
    gone = await logout(runner_as(alice).registry, server, environ())
    assert (gone.server, gone.resource, gone.forgotten) == (server, fake.mcp_url, True)
    again = await logout(runner_as(alice).registry, server, environ(KIWI_TOKEN_KEY=""))
    assert not again.forgotten, "nothing left to forget (and forgetting needs no key)"
    run = await runner_as(alice).run(f"{server}.whoami", {})
    assert run.status == "error" and "kiwi mcp login" in (run.error or ""), "Alice must sign in again"
    assert (await runner_as(bob).run(f"{server}.whoami", {})).status == "success", "Bob is still signed in"
    with pytest.raises(UsageError, match="does not ask for OAuth"):
        plain = {"transport": "streamable_http", "url": fake.mcp_url}
        manifest = {"tool_type": "mcp_server", "executor": "http_client", "version": "1.0.0", "config": plain}
        await logout(runner_as(alice).registry, publish({"tool_id": unique("plain_mcp"), **manifest}), environ())


def test_kiwi_mcp_logout_as_a_process(
    fake: FakeAuthServer, publish: Publish, database_url: str, tmp_path: Path, conn: psycopg.Connection
) -> None:
    """The command, as the local owner: it forgets what login stored, then says there is nothing
    to forget; a bad server name is an error without a traceback."""
    server = oauth_server(publish, fake.mcp_url)
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_TOKEN_KEY=KEY)
    try:
        asyncio.run(_local_owner_signs_in(database_url, server))
        stored = "select count(*) from kiwi_internal.mcp_oauth_tokens where resource like %s"
        assert conn.execute(stored, (fake.mcp_url + "#%",)).fetchone() == (1,)
        out = run_kiwi(["mcp", "logout", server], cwd=tmp_path, env=env)
        assert out.code == 0 and f"signed out of {server} ({fake.mcp_url})" in out.err, out.err
        assert conn.execute(stored, (fake.mcp_url + "#%",)).fetchone() == (0,)
        twice = run_kiwi(["mcp", "logout", server], cwd=tmp_path, env=env)
        assert twice.code == 0 and f"not signed in to {server}" in twice.err and "nothing to forget" in twice.err
        bad = run_kiwi(["mcp", "logout", "no_such_server_x"], cwd=tmp_path, env=env)
        assert bad.code == 3 and "no_such_server_x" in bad.err and "Traceback" not in bad.err
    finally:
        conn.execute("delete from kiwi_internal.mcp_oauth_tokens where resource like %s", (fake.mcp_url + "#%",))


async def _local_owner_signs_in(database_url: str, server: str) -> None:
    registry = PostgresRegistry(database_url, principal=local_owner())
    try:
        result, _ = await signed_in(registry, server)
        assert result.signed_in
    finally:
        await registry.aclose()


def test_kiwi_mcp_login_with_a_bad_server_name(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_TOKEN_KEY=KEY)
    done = run_kiwi(["mcp", "login", "no_such_server_x"], cwd=tmp_path, env=env)
    assert done.code == 3, done.err
    assert "no_such_server_x" in done.err and "Traceback" not in done.err


def test_kiwi_mcp_login_as_a_process(
    fake: FakeAuthServer, publish: Publish, database_url: str, tmp_path: Path, conn: psycopg.Connection
) -> None:
    """The command itself: it prints the URL, its loopback listener takes the redirect, the local
    owner's tokens are stored, and a `kiwi run` of the server's tool then works."""
    server = oauth_server(publish, fake.mcp_url)
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_TOKEN_KEY=KEY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "mcp", "login", server, "--no-browser", "--timeout", "30"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("  http"):
                with httpx2.Client(follow_redirects=True, timeout=10) as client:
                    client.get(line.strip()).raise_for_status()
                break
        rest = proc.stderr.read()
        assert proc.wait(30) == 0, rest
        assert f"signed in to {server}" in rest
        ran = run_kiwi(["run", f"{server}.whoami", "--json"], cwd=tmp_path, env=env)
        assert ran.code == 0 and "person-1" in ran.out, ran.err
    finally:
        proc.kill()
        conn.execute("delete from kiwi_internal.mcp_oauth_tokens where resource like %s", (fake.mcp_url + "#%",))
