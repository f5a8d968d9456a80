"""The console's sign-in by email and password, when the server has a hosted project configured:
against a fake Supabase Auth (tests/fake_gotrue.py, a real HTTP server signing real JWTs), the
console keeps the access token it is given exactly as a pasted one, and says why when Supabase
Auth refuses or cannot be reached. Without a project, the form offers only the token."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from runner import from_token
from runner.console import mounted_console
from tests.console.conftest import console_settings, csrf_of
from tests.fake_gotrue import ANON_KEY, FakeGoTrue, fake_gotrue

EMAIL, PASSWORD = "ada@example.com", "correct horse battery staple"


@pytest.fixture
def gotrue() -> Iterator[FakeGoTrue]:
    with fake_gotrue() as fake:
        fake.add_user(EMAIL, PASSWORD)
        yield fake


async def _client(database_url: str, tmp_path: Path, url: str | None) -> AsyncIterator[httpx.AsyncClient]:
    settings = dataclasses.replace(
        console_settings(database_url, tmp_path), supabase_url=url, supabase_key=ANON_KEY if url else None
    )
    mount, made = mounted_console(settings)
    app = Starlette(routes=[mount])
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
            yield client
    finally:
        await made.aclose()


@pytest.fixture
async def hosted(database_url: str, tmp_path: Path, gotrue: FakeGoTrue) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(database_url, tmp_path, gotrue.base):
        yield client


async def _post(client: httpx.AsyncClient, **fields: str) -> httpx.Response:
    form = await client.get("/console/signin")
    return await client.post("/console/signin", data={"csrf": csrf_of(form.text), **fields})


async def test_a_person_signs_in_with_email_and_password(hosted: httpx.AsyncClient, gotrue: FakeGoTrue) -> None:
    form = await hosted.get("/console/signin")
    assert 'name="password"' in form.text and 'type="password"' in form.text and gotrue.base in form.text
    answer = await _post(hosted, email=EMAIL, password=PASSWORD)
    assert answer.status_code == 303 and answer.headers["location"] == "/console/approvals"
    assert gotrue.log == ["password"]
    token = hosted.cookies["kiwi_console_session"]
    principal = from_token(token, secret=gotrue.secret)
    assert principal.user_id == gotrue.users[EMAIL]["id"]
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    inbox = await hosted.get("/console/approvals")
    assert inbox.status_code == 200 and f'id="who">{principal.describe()}<' in inbox.text


async def test_a_wrong_password_is_refused_on_the_form(hosted: httpx.AsyncClient, gotrue: FakeGoTrue) -> None:
    answer = await _post(hosted, email=EMAIL, password="not it")
    assert answer.status_code == 401 and 'role="alert"' in answer.text
    assert f"sign-in refused for {EMAIL}" in answer.text and "Traceback" not in answer.text
    assert f'value="{EMAIL}"' in answer.text  # the email stays filled in; the password never comes back
    assert "not it" not in answer.text
    assert "kiwi_console_session" not in answer.headers.get("set-cookie", "")
    missing = await _post(hosted, email=EMAIL, password="")
    assert missing.status_code == 401 and "both your email and your password" in missing.text


async def test_the_password_form_needs_its_csrf_token(hosted: httpx.AsyncClient, gotrue: FakeGoTrue) -> None:
    await hosted.get("/console/signin")
    refused = await hosted.post("/console/signin", data={"email": EMAIL, "password": PASSWORD})
    assert refused.status_code == 403 and gotrue.log == []
    foreign = await hosted.post(
        "/console/signin",
        data={"email": EMAIL, "password": PASSWORD, "csrf": hosted.cookies["kiwi_console_csrf"]},
        headers={"origin": "http://evil.example"},
    )
    assert foreign.status_code == 403 and gotrue.log == []


async def test_an_unreachable_supabase_auth_is_said_on_the_form(database_url: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed once the block ends
    async for client in _client(database_url, tmp_path, nowhere):
        answer = await _post(client, email=EMAIL, password=PASSWORD)
        assert answer.status_code == 401 and "cannot reach Supabase Auth" in answer.text


async def test_without_a_project_the_form_takes_only_a_token(database_url: str, tmp_path: Path) -> None:
    async for client in _client(database_url, tmp_path, None):
        form = await client.get("/console/signin")
        assert 'name="password"' not in form.text and 'name="token"' in form.text
        answer = await _post(client, email=EMAIL, password=PASSWORD)
        assert answer.status_code == 401 and "no hosted project is configured" in answer.text
