"""Redirects and secrets (issue 13): an api tool with `X-Api-Key: ${SECRET}` redirected by a
302 from 127.0.0.1 to 127.0.0.2 delivered the key there; only Authorization was dropped, and
redirects were followed by default.

Real parts: two real HTTP servers, one on 127.0.0.1 and one on 127.0.0.2 (two origins), the
real http_client primitive and its aiohttp pool. Each test asserts what the second server got.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from runner import ConfigError, Invocation, Outcome, Plan
from runner.primitives.http_client import HttpClientPrimitive
from tests.primitives.http_server import Served, serving

SECRET = "s3cr3t-key-value-0042"
ENV = {"SECRET": SECRET, "TRACE": "trace-id-secret-77"}


@pytest.fixture(scope="module")
def home() -> Iterator[Served]:
    with serving("127.0.0.1") as served:
        yield served


@pytest.fixture(scope="module")
def other() -> Iterator[Served]:
    with serving("127.0.0.2") as served:
        yield served


@pytest.fixture(autouse=True)
def fresh(home: Served, other: Served) -> None:
    home.received.clear()
    other.received.clear()


@pytest.fixture
async def prim() -> AsyncIterator[HttpClientPrimitive]:
    primitive = HttpClientPrimitive()
    yield primitive
    await primitive.aclose()


async def run(prim: HttpClientPrimitive, config: dict[str, Any], environ: dict[str, str] = ENV) -> Outcome:
    plan = Plan(
        tool_id="leaky_api",
        version="1.0.0",
        tool_type="api",
        content_hash="0" * 64,
        primitive="http_client",
        executor_id="http_client",
        chain=[],
        config=config,
        parameters=None,
    )
    return await prim.run(Invocation(plan=plan, params={}, environ=environ))


def redirect(home: Served, to: str, code: int = 302) -> str:
    return f"{home.url}/redirect/{code}/{quote(to, safe='')}"


def leaked(received: list[dict[str, Any]], *secrets: str) -> bool:
    return any(s in repr(received) for s in secrets or (SECRET,))


async def test_a_secret_header_is_not_sent_to_another_origin(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    """The finding itself, with the redirect explicitly allowed: the hop happens, the key stays home."""
    config = {
        "url": redirect(home, other.url + "/echo/landed"),
        "headers": {"X-Api-Key": "${SECRET}", "X-Plain": "kept"},
        "follow_redirects": True,
    }
    out = await run(prim, config)
    assert out.status == "success", out.error
    assert home.received[0]["headers"]["X-Api-Key"] == SECRET
    [got] = other.received
    assert got["path"] == "/echo/landed"
    assert got["headers"]["Host"] == other.url.removeprefix("http://")
    assert "X-Api-Key" not in got["headers"]
    assert got["headers"]["X-Plain"] == "kept"
    assert not leaked(other.received)
    [hop] = out.detail["redirects"]
    assert hop["status"] == 302 and hop["cross_origin"] is True
    assert hop["dropped_headers"] == ["X-Api-Key"]
    assert SECRET not in repr(out.detail)


async def test_by_default_a_redirect_to_another_origin_is_not_followed(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    config = {"url": redirect(home, other.url + "/echo"), "headers": {"X-Api-Key": "${SECRET}"}}
    out = await run(prim, config)
    assert other.received == []
    assert out.status == "error"
    assert out.detail["http_status"] == 302
    assert "another origin" in out.error and "follow_redirects" in out.error
    assert out.detail["redirect_refused"].startswith("redirect to " + other.url)


async def test_by_default_a_same_origin_redirect_is_followed_with_its_headers(
    prim: HttpClientPrimitive, home: Served
) -> None:
    config = {"url": redirect(home, "/echo/next"), "headers": {"X-Api-Key": "${SECRET}"}}
    out = await run(prim, config)
    assert out.status == "success", out.error
    assert out.output["path"] == "/echo/next"
    assert out.output["headers"]["X-Api-Key"] == SECRET
    assert out.detail["redirects"] == [{"status": 302, "url": home.url + "/echo/next", "cross_origin": False}]
    assert out.detail["url"] == home.url + "/echo/next"


async def test_follow_redirects_false_follows_none(prim: HttpClientPrimitive, home: Served) -> None:
    out = await run(prim, {"url": redirect(home, "/echo/next"), "follow_redirects": False})
    assert len(home.received) == 1
    assert out.status == "error" and out.detail["http_status"] == 302
    assert "follow_redirects: false" in out.error


@pytest.mark.parametrize(
    ("auth", "header"),
    [
        ({"type": "bearer", "token": "${SECRET}"}, "Authorization"),
        ({"type": "basic", "username": "alice", "password": "${SECRET}"}, "Authorization"),
        ({"type": "api_key", "name": "X-Key", "value": "${SECRET}"}, "X-Key"),
        ({"type": "api_key", "name": "X-Key", "value": "literal-key-in-config"}, "X-Key"),
    ],
)
async def test_auth_is_not_sent_to_another_origin(
    prim: HttpClientPrimitive, home: Served, other: Served, auth: dict[str, str], header: str
) -> None:
    config = {"url": redirect(home, other.url + "/echo"), "auth": auth, "follow_redirects": True}
    out = await run(prim, config)
    assert out.status == "success", out.error
    [got] = other.received
    assert header not in got["headers"]
    basic = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert not leaked(other.received, SECRET, basic, "literal-key-in-config")
    assert out.detail["redirects"][0]["dropped_headers"] == [header]


async def test_secret_query_values_are_not_sent_to_another_origin(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    """The first server echoes the secrets into its Location: the hop keeps only the rest."""
    target = f"{other.url}/echo?key={SECRET}&token={quote(SECRET)}&page=2&trace=x-trace-id-secret-77-y"
    config = {
        "url": redirect(home, target),
        "query": {"key": "${SECRET}"},
        "auth": {"type": "api_key", "name": "token", "value": "${SECRET}", "in": "query"},
        "headers": {"X-Trace": "${TRACE}"},
        "follow_redirects": True,
    }
    out = await run(prim, config)
    assert out.status == "success", out.error
    [got] = other.received
    assert got["query"] == {"page": ["2"]}
    assert "X-Trace" not in got["headers"]
    assert not leaked(other.received, SECRET, "trace-id-secret-77")
    hop = out.detail["redirects"][0]
    assert hop["dropped_query"] == ["key", "token", "trace"]
    assert hop["dropped_headers"] == ["X-Trace"]


async def test_once_dropped_a_secret_does_not_come_back(prim: HttpClientPrimitive, home: Served, other: Served) -> None:
    """127.0.0.1 -> 127.0.0.2 -> 127.0.0.1: the way back is chosen by the other origin."""
    back = redirect(home, home.url + "/echo/back")
    config = {"url": redirect(home, redirect(other, back)), "headers": {"X-Api-Key": "${SECRET}"}}
    out = await run(prim, {**config, "follow_redirects": True})
    assert out.status == "success", out.error
    assert "X-Api-Key" not in out.output["headers"]
    assert not leaked(other.received)
    assert [h["cross_origin"] for h in out.detail["redirects"]] == [True, True, False]


async def test_a_different_port_is_another_origin(prim: HttpClientPrimitive, home: Served) -> None:
    with serving("127.0.0.1") as neighbour:
        config = {"url": redirect(home, neighbour.url + "/echo"), "headers": {"X-Api-Key": "${SECRET}"}}
        refused = await run(prim, config)
        assert neighbour.received == [] and refused.status == "error"
        out = await run(prim, {**config, "follow_redirects": True})
        assert out.status == "success", out.error
        assert not leaked(neighbour.received)


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.2/x", "gopher://127.0.0.2:70/_x"])
async def test_a_redirect_to_another_scheme_is_refused(prim: HttpClientPrimitive, home: Served, target: str) -> None:
    out = await run(prim, {"url": redirect(home, target), "follow_redirects": True})
    assert out.status == "error"
    assert out.detail["http_status"] == 302
    assert "only http and https" in out.error


async def test_redirects_stop_at_max_redirects(prim: HttpClientPrimitive, home: Served) -> None:
    url = home.url + "/echo/end"
    for _ in range(4):
        url = redirect(home, url)
    out = await run(prim, {"url": url, "max_redirects": 3})
    assert out.status == "error"
    assert "more than 3 redirects" in out.error
    assert len(home.received) == 4
    assert len(out.detail["redirects"]) == 3
    out = await run(prim, {"url": url})  # 4 hops: within the default 5
    assert out.status == "success", out.error


async def test_a_body_holding_a_secret_is_not_resent_to_another_origin(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    """A 307 keeps method and body: with a secret in it, the hop is refused, not stripped."""
    config = {
        "method": "POST",
        "url": redirect(home, other.url + "/echo", 307),
        "body_template": {"client_secret": "${SECRET}", "grant": "x"},
        "follow_redirects": True,
    }
    out = await run(prim, config)
    assert other.received == []
    assert out.status == "error"
    assert "body" in out.error and "another origin" in out.error
    assert SECRET not in repr(out.detail) + out.error


async def test_a_body_without_a_secret_is_resent_on_307_and_dropped_on_303(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    config = {"method": "POST", "body_template": {"n": 1}, "follow_redirects": True}
    out = await run(prim, {**config, "url": redirect(home, other.url + "/echo", 307)})
    assert out.status == "success", out.error
    assert (out.output["method"], out.output["body"]) == ("POST", {"n": 1})
    out = await run(prim, {**config, "url": redirect(home, other.url + "/echo", 303)})
    assert out.status == "success", out.error
    assert (out.output["method"], out.output["body"]) == ("GET", None)
    assert "Content-Type" not in out.output["headers"]


@pytest.mark.parametrize(("key", "value"), [("follow_redirects", "sometimes"), ("max_redirects", -1)])
async def test_a_bad_redirect_setting_is_a_config_error(
    prim: HttpClientPrimitive, home: Served, key: str, value: Any
) -> None:
    with pytest.raises(ConfigError, match=key):
        await run(prim, {"url": home.url + "/echo", key: value})
    assert home.received == []


async def test_a_host_header_the_config_set_stays_on_its_origin(
    prim: HttpClientPrimitive, home: Served, other: Served
) -> None:
    config = {"url": redirect(home, "/echo/same"), "headers": {"Host": "api.internal"}}
    out = await run(prim, config)
    assert out.output["headers"]["Host"] == "api.internal"
    config = {**config, "url": redirect(home, other.url + "/echo/away"), "follow_redirects": True}
    out = await run(prim, config)
    assert out.output["headers"]["Host"] == other.url.removeprefix("http://")


async def test_a_cookie_one_run_was_given_never_rides_along_with_another_run(
    prim: HttpClientPrimitive, home: Served
) -> None:
    """Regression: the pooled client's cookie jar kept `Set-Cookie` from one run and sent it on
    every later run of any tool to that host, whoever asked for it."""
    first = await run(prim, {"url": f"{home.url}/cookie/alice-session-token"})
    assert first.status == "success", first.error
    second = await run(prim, {"url": f"{home.url}/echo/next"})
    assert second.status == "success", second.error
    assert "alice-session-token" not in repr(home.received[-1]["headers"])
    assert "cookie" not in {k.lower() for k in home.received[-1]["headers"]}


async def test_the_pool_refuses_cookies_set_on_it_and_keeps_none_across_a_redirect(
    prim: HttpClientPrimitive, home: Served
) -> None:
    """The pool's cookies are a no-op jar (no urllib wrapping per response): setting cookies on
    the shared client is refused, and a Set-Cookie on a redirect hop is not sent to the next."""
    with pytest.raises(TypeError, match="keeps no cookies"):
        prim.client.cookies = {"session": "mallory"}
    out = await run(prim, {"url": redirect(home, "/cookie/hop-token")})
    assert out.status == "success", out.error
    followed = await run(prim, {"url": redirect(home, "/echo/after")})
    assert followed.status == "success", followed.error
    assert "hop-token" not in repr(home.received[-1]["headers"])
    assert not prim.client.cookies


async def test_the_rest_registry_never_follows_a_redirect_with_its_keys(home: Served, other: Served) -> None:
    """Regression: the REST backend's client followed redirects and httpx keeps an `apikey`
    header across origins, so a redirect from the API carried the project key elsewhere."""
    from runner import KiwiError, RestRegistry

    api = f"{home.url}/redirect/302/{quote(other.url + '/echo', safe='')}"
    async with RestRegistry(api, "sb_publishable_leaky_key_0042") as registry:
        with pytest.raises(KiwiError):
            await registry.search("anything")
    assert home.received, "the API was asked"
    assert not other.received, "nothing reached the redirect's target"
