"""What the console's tests share: the console as an ASGI app on the suite's database (through
the runner's login, as `kiwi serve` connects), an HTTP client signed in as someone, and a
second tenant's private tool."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from runner import LOCAL_JWT_SECRET, Settings
from runner.console import mounted_console
from runner.testing.http_serving import user_token
from tests.conftest import local_settings, runner_url

CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


def console_settings(database_url: str, cache_dir: Path) -> Settings:
    return local_settings(runner_url(database_url), cache_dir, jwt_secret=LOCAL_JWT_SECRET)


@pytest.fixture
async def console(database_url: str, tmp_path: Path) -> AsyncIterator[Starlette]:
    mount, made = mounted_console(console_settings(database_url, tmp_path))
    yield Starlette(routes=[mount])
    await made.aclose()


@pytest.fixture
def browse(console: Starlette) -> Callable[[], httpx.AsyncClient]:
    """A new client of the in-process console (its own cookies); close it with `async with`."""

    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=console), base_url="http://testserver")

    return client


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "the page has no CSRF field"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, token: str | None = None) -> None:
    form = await client.get("/console/signin")
    answer = await client.post(
        "/console/signin", data={"csrf": csrf_of(form.text), "token": token or user_token()}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
