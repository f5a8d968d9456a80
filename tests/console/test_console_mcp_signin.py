"""Signing in to a remote MCP server (OAuth) from the console: the person's browser is sent to a
FAKE authorization server (tests/mcp/oauth_fake_server.py, in front of a real MCP server), which
redirects back to the console's callback; the console exchanges the code as that person and
keeps the tokens in the real database, where `kiwi mcp login` keeps them. The console runs in
process; the fake and the database are real."""

from __future__ import annotations

import base64
import os
import re
import uuid
from collections.abc import Callable, Iterator
from html import unescape

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, from_claims
from runner.mcp_client.oauth.login import LoginResult
from runner.testing.http_serving import user_token
from tests.conftest import runner_url
from tests.console.conftest import csrf_of, sign_in
from tests.mcp.oauth_fake_server import FakeAuthServer, fake_oauth_server

Browse = Callable[[], httpx.AsyncClient]
REFRESH = re.compile(r'http-equiv="refresh" content="0;url=([^"]+)"')


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAuthServer]:
    monkeypatch.setenv("KIWI_TOKEN_KEY", base64.urlsafe_b64encode(os.urandom(32)).decode())
    with fake_oauth_server() as server:
        yield server


@pytest.fixture
def server(conn: psycopg.Connection, fake: FakeAuthServer) -> Iterator[str]:
    ref = f"console_oauth_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": ref,
        "tool_type": "mcp_server",
        "executor": "http_client",
        "version": "1.0.0",
        "config": {"transport": "streamable_http", "url": fake.mcp_url, "auth": {"type": "oauth"}},
    }
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
    yield ref
    conn.execute("delete from tools where ref = %s", (ref,))


@pytest.fixture
def person(conn: psycopg.Connection) -> Iterator[str]:
    uid = str(uuid.uuid4())
    yield uid
    conn.execute("delete from kiwi_internal.mcp_oauth_tokens where user_id = %s", (uid,))


async def start(client: httpx.AsyncClient, server: str) -> str:
    """Press `Sign in` on the servers page; the authorization URL the page sends the browser to."""
    page = await client.get("/console/servers")
    section = page.text.split(f'data-server="{server}"', 1)[1].split("</section>", 1)[0]
    assert "not signed in" in section and f"/console/servers/{server}/signin" in section
    answer = await client.post(f"/console/servers/{server}/signin", data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 200, answer.text
    found = REFRESH.search(answer.text)
    assert found, answer.text
    return unescape(found.group(1))


async def authorize(url: str) -> str:
    """The person at the authorization server (the fake approves at once): its redirect back."""
    async with httpx.AsyncClient() as browser:
        answer = await browser.get(url)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


async def test_a_person_signs_in_to_a_server_from_the_console(
    browse: Browse, server: str, person: str, fake: FakeAuthServer, database_url: str
) -> None:
    async with browse() as client:
        await sign_in(client, user_token(person))
        url = await start(client, server)
        assert url.startswith(f"{fake.base}/authorize?") and "state=" in url
        back = await authorize(url)
        assert back.startswith(f"http://testserver/console/servers/{server}/callback?code=")
        # another browser (no nonce cookie) cannot finish it, nor can a made-up state
        async with browse() as stranger:
            assert (await stranger.get(back)).status_code == 403
        forged = re.sub(r"state=[^&]+", "state=forged", back)
        assert (await client.get(forged)).status_code == 400
        done = await client.get(back)
        assert done.status_code == 200 and "You are signed in to" in done.text, done.text
        assert fake.log[:3] == ["register", "authorize", "authorization_code"]
        assert not any(token in done.text for token in fake.issued)
        page = await client.get("/console/servers")
        section = page.text.split(f'data-server="{server}"', 1)[1].split("</section>", 1)[0]
        assert "signed in" in section and "not signed in" not in section
        # the callback is spent: replaying it finds no sign-in
        assert (await client.get(back)).status_code == 400
    # the tokens are the person's, where `kiwi mcp login` keeps them: her later runs use them
    registry = PostgresRegistry(
        runner_url(database_url), principal=from_claims({"sub": person, "role": "authenticated"})
    )
    try:
        from runner.mcp_client.oauth.login import login

        result = await login(registry, server, dict(os.environ), say=lambda _: None, open_browser=False, timeout_s=10)
        assert isinstance(result, LoginResult) and not result.signed_in and result.tools == 2
    finally:
        await registry.aclose()


async def test_a_refused_authorization_is_an_error_page(
    browse: Browse, server: str, person: str, fake: FakeAuthServer
) -> None:
    async with browse() as client:
        await sign_in(client, user_token(person))
        url = await start(client, server)
        state = re.search(r"state=([^&]+)", url)
        assert state
        refused = await client.get(
            f"/console/servers/{server}/callback", params={"error": "access_denied", "state": unescape(state.group(1))}
        )
        assert refused.status_code == 403 and "access_denied" in refused.text
        assert "authorization_code" not in fake.log


async def test_starting_a_sign_in_needs_the_forms_csrf_token(browse: Browse, server: str, person: str) -> None:
    async with browse() as client:
        await sign_in(client, user_token(person))
        answer = await client.post(f"/console/servers/{server}/signin", data={})
        assert answer.status_code == 403 and "CSRF" in answer.text
