"""The http_client primitive against a real local HTTP server (no database needed)."""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from runner import ConfigError, Invocation, Outcome, Plan
from runner.primitives.http_client import HttpClientPrimitive

from .http_server import serve

FAST_RETRY = {"retries": 2, "retry_delay": 0.01}  # three attempts in all


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve() as url:
        yield url


@pytest.fixture
async def prim() -> AsyncIterator[HttpClientPrimitive]:
    primitive = HttpClientPrimitive()
    yield primitive
    await primitive.aclose()


def make_plan(config: dict[str, Any]) -> Plan:
    return Plan(
        tool_id="example",
        version="1.0.0",
        tool_type="api",
        content_hash="0" * 64,
        primitive="http_client",
        executor_id="http_client",
        chain=[],
        config=config,
        parameters=None,
    )


async def run(
    prim: HttpClientPrimitive,
    config: dict[str, Any],
    params: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    progress: list[str] | None = None,
) -> Outcome:
    invocation = Invocation(
        plan=make_plan(config),
        params=params or {},
        environ=environ or {},
        on_progress=progress.append if progress is not None else None,
    )
    return await prim.run(invocation)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_accepts_only_http_client_plans() -> None:
    primitive = HttpClientPrimitive()
    assert primitive.accepts(make_plan({}))
    other = make_plan({})
    assert not primitive.accepts(Plan(**{**other.__dict__, "primitive": "subprocess"}))


@pytest.mark.slow
async def test_get_with_url_template_percent_encodes_the_parameter(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url_template": base + "/echo/items/{name}"}, {"name": "a b/c?d"})
    assert out.status == "success", out.error
    assert out.output["method"] == "GET"
    assert out.output["path"] == "/echo/items/a%20b%2Fc%3Fd"
    assert out.exit_code is None
    assert out.detail["http_status"] == 200
    assert out.detail["attempts"] == 1
    assert out.detail["truncated"] is False
    assert out.detail["url"] == base + "/echo/items/a%20b%2Fc%3Fd"
    assert out.detail["body"] == out.output


async def test_post_body_template_keeps_number_types(prim: HttpClientPrimitive, base: str) -> None:
    config = {
        "method": "POST",
        "url": base + "/echo",
        "body_template": {"count": "{count}", "label": "n={count}", "tags": ["{tag}"], "fixed": True},
    }
    out = await run(prim, config, {"count": 3, "tag": "x"})
    assert out.status == "success", out.error
    assert out.output["body"] == {"count": 3, "label": "n=3", "tags": ["x"], "fixed": True}
    assert out.output["headers"]["Content-Type"] == "application/json"


async def test_post_without_a_body_sends_the_parameters_as_json(prim: HttpClientPrimitive, base: str) -> None:
    params = {"message": "hi", "n": 2, "nested": {"ok": True}}
    out = await run(prim, {"method": "PUT", "url": base + "/echo"}, params)
    assert out.output["method"] == "PUT"
    assert out.output["body"] == params


async def test_get_sends_no_body(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url": base + "/echo"}, {"message": "hi"})
    assert out.output["body"] is None


async def test_text_body_template(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url": base + "/echo", "body": "hello {who} {literal}", "headers": {"X-A": "1"}}
    out = await run(prim, config, {"who": "world"})
    assert out.output["body"] == "hello world {literal}"


async def test_query_headers_and_var_defaults(prim: HttpClientPrimitive, base: str) -> None:
    config = {
        "url": "${BASE_URL:-" + base + "}/echo",
        "query": {"q": "{term}", "limit": "{limit}", "v": "${API_VERSION:-2}", "empty": "${UNSET:-}"},
        "headers": {"X-Term": "term={term}", "User-Agent": "kiwi/0.1", "X-Dropped": None},
    }
    out = await run(prim, config, {"term": "café & co"})
    assert out.status == "success", out.error
    # limit names an absent parameter and empty renders empty: both are left out
    assert out.output["query"] == {"q": ["café & co"], "v": ["2"]}
    assert out.output["headers"]["X-Term"] == "term=café & co".encode().decode("latin-1")
    assert out.output["headers"]["User-Agent"] == "kiwi/0.1"
    assert "X-Dropped" not in out.output["headers"]


async def test_a_header_the_config_sets_replaces_the_clients_default_once(prim: HttpClientPrimitive, base: str) -> None:
    """The request is built beside the client, not by client.build_request: its default headers
    must still go out, and one the config names (in any case) must go out once, as the config's."""
    config = {"url": base + "/echo", "headers": {"user-agent": "kiwi/0.2", "Accept": "application/json"}}
    out = await run(prim, config)
    assert out.status == "success", out.error
    lines = out.output["header_lines"]
    assert [v for k, v in lines if k == "user-agent"] == ["kiwi/0.2"]
    assert [v for k, v in lines if k == "accept"] == ["application/json"]
    assert [k for k, _ in lines].count("accept-encoding") == 1  # a default the config left alone
    assert [v for k, v in lines if k == "connection"] == ["keep-alive"]


@pytest.mark.parametrize(("charset", "expected"), [("latin-1", "café"), ("utf-8", "café"), ("none", "café")])
async def test_a_text_body_is_read_in_the_charset_it_names_else_utf8(
    prim: HttpClientPrimitive, base: str, charset: str, expected: str
) -> None:
    out = await run(prim, {"url": f"{base}/text/{charset}"})
    assert out.status == "success", out.error
    assert out.output == expected


async def test_a_parameter_is_never_expanded_as_a_variable(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url": base + "/echo", "body_template": {"m": "{m}", "s": "say {m}"}}
    out = await run(prim, config, {"m": "${SECRET}"}, environ={"SECRET": "hidden-value"})
    assert out.output["body"] == {"m": "${SECRET}", "s": "say ${SECRET}"}


@pytest.mark.parametrize(
    ("auth", "where", "expected"),
    [
        ({"type": "bearer", "token": "${TOKEN}"}, "header", ("Authorization", "Bearer tok-123456")),
        (
            {"type": "basic", "username": "alice", "password": "${TOKEN}"},
            "header",
            ("Authorization", "Basic " + base64.b64encode(b"alice:tok-123456").decode()),
        ),
        ({"type": "api_key", "name": "X-Api-Key", "value": "${TOKEN}"}, "header", ("X-Api-Key", "tok-123456")),
        ({"type": "api_key", "name": "key", "value": "${TOKEN}", "in": "query"}, "query", ("key", ["tok-123456"])),
    ],
)
async def test_auth_reaches_the_server(
    prim: HttpClientPrimitive, base: str, auth: dict[str, str], where: str, expected: tuple[str, Any]
) -> None:
    out = await run(prim, {"url": base + "/echo", "auth": auth}, environ={"TOKEN": "tok-123456"})
    assert out.status == "success", out.error
    name, value = expected
    received = out.output["headers"] if where == "header" else out.output["query"]
    assert received[name] == value
    # the API answered with the secret in a successful body: output is the tool's data,
    # but detail (logged, shown) never carries it
    assert "tok-123456" not in repr(out.detail)


async def test_an_empty_secret_sends_no_auth(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url": base + "/echo", "auth": {"type": "bearer", "token": "${ECHO_TOKEN:-}"}}
    out = await run(prim, config, {"message": "hi"})
    assert out.status == "success", out.error
    assert "Authorization" not in out.output["headers"]


async def test_a_missing_variable_is_a_config_error_naming_it(prim: HttpClientPrimitive, base: str) -> None:
    config = {"url": base + "/echo", "auth": {"type": "bearer", "token": "${KIWI_TEST_NOT_SET}"}}
    with pytest.raises(ConfigError, match="KIWI_TEST_NOT_SET"):
        await run(prim, config)


async def test_an_unknown_url_placeholder_is_a_config_error(prim: HttpClientPrimitive, base: str) -> None:
    with pytest.raises(ConfigError, match=r"\{missing\}"):
        await run(prim, {"url_template": base + "/echo/{missing}"})


async def test_retries_past_503s_to_a_200(prim: HttpClientPrimitive, base: str) -> None:
    progress: list[str] = []
    config = {"url": base + "/flaky/twice/2", **FAST_RETRY}
    out = await run(prim, config, progress=progress)
    assert out.status == "success", out.error
    assert out.detail["attempts"] == 3
    assert len(progress) == 2
    assert progress[0].startswith("HTTP 503, retrying in ")
    assert progress[0].endswith("(attempt 2 of 3)")
    assert progress[1].endswith("(attempt 3 of 3)")


async def test_503s_beyond_the_attempts_are_an_error(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url": base + "/flaky/always/99", **FAST_RETRY})
    assert out.status == "error"
    assert out.detail["attempts"] == 3
    assert out.detail["http_status"] == 503
    assert out.error.startswith(f"HTTP 503 Service Unavailable from GET {base}/flaky/always/99")


async def test_a_404_is_not_retried_and_is_reported(prim: HttpClientPrimitive, base: str) -> None:
    progress: list[str] = []
    out = await run(prim, {"url": base + "/status/404", **FAST_RETRY}, progress=progress)
    assert out.status == "error"
    assert out.detail["attempts"] == 1
    assert out.detail["http_status"] == 404
    assert out.error.startswith(f"HTTP 404 Not Found from GET {base}/status/404: ")
    assert '"method": "GET"' in out.error  # a body excerpt
    assert out.output["path"] == "/status/404"
    assert progress == []


async def test_connection_refused_is_retried_then_an_error(prim: HttpClientPrimitive) -> None:
    progress: list[str] = []
    out = await run(prim, {"url": f"http://127.0.0.1:{free_port()}/x", **FAST_RETRY}, progress=progress)
    assert out.status == "error"
    assert out.detail["attempts"] == 3
    assert out.detail["http_status"] is None
    assert "ConnectError" in out.error
    assert len(progress) == 2 and "ConnectError" in progress[0]


@pytest.mark.slow
async def test_a_slow_server_is_a_timeout(prim: HttpClientPrimitive, base: str) -> None:
    started = time.monotonic()
    config = {"url": base + "/slow/3", "timeout": 0.2, "retries": 1, "retry_delay": 0.01}
    out = await run(prim, config)
    assert out.status == "timeout"
    assert out.detail["attempts"] == 2
    assert "timed out after 0.2 s" in out.error
    assert time.monotonic() - started < 2


async def test_response_transform_picks_a_field(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url": base + "/echo", "response_transform": "$.body.user.name"}
    out = await run(prim, config, {"user": {"name": "ada"}})
    assert out.status == "success", out.error
    assert out.output == "ada"
    assert out.detail["body"]["body"] == {"user": {"name": "ada"}}  # the body before the transform


async def test_response_transform_with_several_matches_gives_a_list(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url": base + "/echo", "response_transform": "$.body.items[*].id"}
    out = await run(prim, config, {"items": [{"id": 1}, {"id": 2}]})
    assert out.output == [1, 2]


async def test_response_transform_without_a_match_is_an_error(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url": base + "/echo", "response_transform": "$.nothing.here"})
    assert out.status == "error"
    assert "$.nothing.here" in out.error
    assert out.detail["http_status"] == 200


async def test_an_invalid_response_transform_fails_before_sending(prim: HttpClientPrimitive) -> None:
    with pytest.raises(ConfigError, match="response_transform"):
        await run(prim, {"url": f"http://127.0.0.1:{free_port()}/", "response_transform": "$["})


async def test_a_huge_response_is_cut_and_says_so(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url": base + "/big/50000", "max_response_bytes": 1000})
    assert out.detail["truncated"] is True
    assert out.output == "x" * 1000
    assert "cut at 1000 bytes" in out.error
    assert "max_response_bytes" in out.detail["warning"]


async def test_secrets_never_appear_in_error_or_detail(prim: HttpClientPrimitive, base: str) -> None:
    secret = "s3cr3t/token+value"
    progress: list[str] = []
    config = {
        "url": base + "/leak",
        "auth": {"type": "bearer", "token": "${TOKEN}"},
        "query": {"sig": "${SIG}"},
        "headers": {"X-Other": "${OTHER}"},
        **FAST_RETRY,
        "retryable_statuses": [401],
    }
    environ = {"TOKEN": secret, "SIG": "sig-" + secret, "OTHER": "other-secret"}
    out = await run(prim, config, environ=environ, progress=progress)
    assert out.status == "error"
    assert "bad credentials: Bearer ***" in out.error  # the server echoed the header back
    everything = repr((out.error, out.detail, out.output, progress))
    for value in environ.values():
        assert value not in everything
        assert httpx.URL("http://h/", params={"v": value}).query.decode().removeprefix("v=") not in everything
    assert "Authorization" not in repr(out.detail["headers"])
    assert out.detail["url"] == f"{base}/leak?sig=***"


async def test_a_secret_in_the_url_path_is_redacted(prim: HttpClientPrimitive, base: str) -> None:
    out = await run(prim, {"url": base + "/status/404/bot${BOT_TOKEN}/send"}, environ={"BOT_TOKEN": "123:abcdef"})
    assert out.status == "error"
    assert "123:abcdef" not in repr((out.error, out.detail, out.output))
    assert f"{base}/status/404/bot***/send" in out.error


@pytest.mark.slow
async def test_200_concurrent_runs_on_one_instance(prim: HttpClientPrimitive, base: str) -> None:
    config = {"method": "POST", "url_template": base + "/echo/{i}", "body_template": {"i": "{i}"}}
    outs = await asyncio.gather(*(run(prim, config, {"i": i}) for i in range(200)))
    assert [o.status for o in outs] == ["success"] * 200
    assert [o.output["body"]["i"] for o in outs] == list(range(200))


async def test_aclose_closes_the_pool(base: str) -> None:
    primitive = HttpClientPrimitive()
    client = primitive.client
    assert client is primitive.client  # one pool for every run
    out = await run(primitive, {"url": base + "/echo"})
    assert out.status == "success"
    await primitive.aclose()
    assert client.is_closed


async def test_the_transport_seam_takes_an_injected_transport() -> None:
    seen: list[httpx.Request] = []
    replies = iter([httpx.Response(429, headers={"Retry-After": "0"}), httpx.Response(200, json={"data": [7]})])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return next(replies)

    primitive = HttpClientPrimitive(transport=httpx.MockTransport(handler))
    progress: list[str] = []
    config = {"url": "https://api.example.test/v1/{kind}", "response_transform": "$.data[0]", "retries": 2}
    out = await run(primitive, config, {"kind": "things"}, progress=progress)
    await primitive.aclose()
    assert out.status == "success", out.error
    assert out.output == 7
    assert out.detail["attempts"] == 2
    assert progress == ["HTTP 429, retrying in 0.0 s (attempt 2 of 3)"]  # Retry-After honoured
    assert [str(r.url) for r in seen] == ["https://api.example.test/v1/things"] * 2


# --- the design documents' keys (issue 15): timeout, retries, retry_delay, retryable_statuses ----


async def test_retries_0_tries_a_503_once(prim: HttpClientPrimitive, base: str) -> None:
    """Regression: with `retries: 0` a 503 was tried three times ("attempt 2 of 3")."""
    progress: list[str] = []
    out = await run(prim, {"url": base + "/flaky/zero/5", "retries": 0}, progress=progress)
    assert (out.status, out.detail["attempts"], out.detail["http_status"]) == ("error", 1, 503)
    assert progress == []
    unset = await run(prim, {"url": base + "/flaky/unset/5"}, progress=progress)
    assert unset.detail["attempts"] == 1 and progress == [], "retries defaults to 0, as in the documents"


async def test_only_the_documents_keys_are_read(prim: HttpClientPrimitive, base: str) -> None:
    """No alias in the runner: today's spellings are publish's to normalise, never read here."""
    config = {"url": base + "/flaky/legacy/5", "retry": {"attempts": 3, "backoff_s": 0.01}, "timeout_s": 0.001}
    out = await run(prim, config)
    assert out.detail["attempts"] == 1 and out.status == "error" and out.detail["http_status"] == 503


@pytest.mark.slow
async def test_retry_delay_grows_linearly(prim: HttpClientPrimitive, base: str) -> None:
    progress: list[str] = []
    started = time.monotonic()
    out = await run(prim, {"url": base + "/flaky/linear/2", "retries": 2, "retry_delay": 0.2}, progress=progress)
    assert out.status == "success" and out.detail["attempts"] == 3
    assert progress == [
        "HTTP 503, retrying in 0.2 s (attempt 2 of 3)",
        "HTTP 503, retrying in 0.4 s (attempt 3 of 3)",
    ]
    assert time.monotonic() - started >= 0.6


async def test_retryable_statuses_decide_what_is_retried(prim: HttpClientPrimitive, base: str) -> None:
    only_500 = {"retries": 2, "retry_delay": 0.01, "retryable_statuses": [500]}
    not_listed = await run(prim, {"url": base + "/flaky/listed/1", **only_500})
    assert (not_listed.detail["attempts"], not_listed.detail["http_status"]) == (1, 503)
    listed = await run(prim, {"url": base + "/status/500", **only_500})
    assert listed.detail["attempts"] == 3
    for status in (502, 503, 504, 429):  # the documents' default list
        out = await run(prim, {"url": base + f"/status/{status}", "retries": 1, "retry_delay": 0})
        assert out.detail["attempts"] == 2, status
    assert (await run(prim, {"url": base + "/status/500", "retries": 1})).detail["attempts"] == 1, "500 is not"


@pytest.mark.slow
async def test_timeout_bounds_each_attempt(prim: HttpClientPrimitive, base: str) -> None:
    started = time.monotonic()
    out = await run(prim, {"url": base + "/slow/3", "timeout": 0.3})
    assert out.status == "timeout" and "timed out after 0.3 s (attempt 1 of 1)" in out.error
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"timeout": "x"},
            "config.timeout must be a number of seconds greater than 0 and at most 86400 (24 hours), not 'x'",
        ),
        (
            {"timeout": 0},
            "config.timeout must be a number of seconds greater than 0 and at most 86400 (24 hours), not 0",
        ),
        ({"retries": -1}, "config.retries must be a whole number of extra attempts (0 or more), not -1"),
        ({"retries": 1.5}, "config.retries must be a whole number of extra attempts (0 or more), not 1.5"),
        ({"retries": True}, "config.retries must be a whole number of extra attempts (0 or more), not True"),
        ({"retry_delay": "soon"}, "config.retry_delay must be a number of seconds (0 or more), not 'soon'"),
        ({"retryable_statuses": ["503"]}, "config.retryable_statuses must be a list of HTTP status codes"),
        ({"retryable_statuses": 503}, "config.retryable_statuses must be a list of HTTP status codes"),
    ],
)
async def test_a_bad_value_is_an_error_naming_its_field(
    prim: HttpClientPrimitive, base: str, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        await run(prim, {"url": base + "/echo", **config})
    assert message in str(info.value)
    assert str(info.value).startswith("example: ")
