"""`kiwi serve --transport http` answers protocol errors as the MCP transport specification
(2025-06-18, 2025-11-25) and JSON-RPC 2.0 say: one test per error that was answered wrong
(issue 17), each sent as raw HTTP to a real server process with a real token.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.testing.http_serving import ROOT, Served, kiwi_http_server, serve_env, user_token

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
ACCEPT = "application/json, text/event-stream"
SESSION = "mcp-session-id"


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("protocol")) as s:
        yield s


@pytest.fixture(scope="module")
def headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {user_token()}", "Accept": ACCEPT, "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def session(served: Served, headers: dict[str, str]) -> dict[str, str]:
    """The headers of an initialized session (its id and the negotiated protocol version)."""
    opened = httpx.post(served.url, json=INITIALIZE, headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    established = {**headers, "Mcp-Session-Id": opened.headers[SESSION], "MCP-Protocol-Version": "2025-11-25"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(served.url, json=note, headers=established, timeout=30).status_code == 202
    return established


def post(served: Served, headers: dict[str, str], body: Any = None, *, content: bytes | None = None) -> httpx.Response:
    if content is None:
        return httpx.post(served.url, json=body, headers=headers, timeout=30)
    return httpx.post(served.url, content=content, headers=headers, timeout=30)


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body


def test_a_message_without_a_method_is_an_invalid_request(served: Served, session: dict[str, str]) -> None:
    """JSON-RPC 2.0 §5.1: -32600 Invalid Request (it was -32602 Invalid params, with pydantic's text)."""
    for body in ({"jsonrpc": "2.0", "id": 2}, {"jsonrpc": "2.0", "id": 3, "params": {}}, {"jsonrpc": "2.0"}):
        response = post(served, session, body)
        assert response.status_code == 400, body
        error = error_of(response)
        assert error["error"]["code"] == -32600, error
        assert "method" in error["error"]["message"] and "validation error" not in error["error"]["message"].lower()
        assert error["id"] is None


def test_other_messages_that_are_not_json_rpc_are_invalid_requests(served: Served, session: dict[str, str]) -> None:
    """A batch (removed in 2025-06-18), a wrong `jsonrpc`, a null request id, a non-string method,
    scalar params: -32600, the request id echoed where it could be read."""
    cases: list[tuple[Any, Any]] = [
        ([], None),
        ([{"jsonrpc": "2.0", "id": 4, "method": "ping"}], None),
        ("ping", None),
        ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, 5),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": 6, "method": 7}, 6),
        ({"jsonrpc": "2.0", "id": "seven", "method": "tools/list", "params": 5}, "seven"),
    ]
    for body, echoed in cases:
        response = post(served, session, body)
        assert response.status_code == 400, body
        error = error_of(response)
        assert error["error"]["code"] == -32600, (body, error)
        assert error["id"] == echoed, (body, error)
    # what is still JSON-RPC goes on: a ping answers, a parse error stays -32700
    assert '"result":{}' in post(served, session, {"jsonrpc": "2.0", "id": 8, "method": "ping"}).text
    broken = post(served, session, content=b"{not json")
    assert broken.status_code == 400 and error_of(broken)["error"]["code"] == -32700


def test_an_unsupported_protocol_version_is_400_naming_the_supported_ones(
    served: Served, session: dict[str, str]
) -> None:
    """Transports §Protocol Version Header: 400 Bad Request (the message was about "params._meta
    envelope keys"); on every method, not only POST."""
    bad = {**session, "MCP-Protocol-Version": "1999-01-01"}
    responses = [
        post(served, bad, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
        httpx.get(served.url, headers={**bad, "Accept": "text/event-stream"}, timeout=30),
    ]
    for response in responses:
        assert response.status_code == 400
        error = error_of(response)["error"]
        assert "1999-01-01" in error["message"] and "envelope" not in error["message"]
        for version in ("2025-03-26", "2025-06-18", "2025-11-25"):
            assert version in error["message"] and version in error["data"]["supported"]
        assert error["data"]["requested"] == "1999-01-01"
    for version in ("2025-06-18", "2025-11-25"):  # the versions it names are served
        ok = post(served, {**session, "MCP-Protocol-Version": version}, {"jsonrpc": "2.0", "id": 10, "method": "ping"})
        assert ok.status_code == 200 and '"result":{}' in ok.text


def test_a_post_with_another_content_type_is_415(served: Served, headers: dict[str, str]) -> None:
    """415 Unsupported Media Type (it was 400, in plain text); JSON with a charset is JSON."""
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/jsonl", ""):
        response = httpx.post(
            served.url,
            content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
            headers={**headers, "Content-Type": content_type},
            timeout=30,
        )
        assert response.status_code == 415, content_type
        assert "application/json" in error_of(response)["error"]["message"]
    ok = post(served, {**headers, "Content-Type": "application/json; charset=utf-8"}, INITIALIZE)
    assert ok.status_code == 200 and '"protocolVersion"' in ok.text


def test_a_post_that_does_not_accept_json_and_event_streams_is_406(served: Served, headers: dict[str, str]) -> None:
    """Transports §Sending Messages: the client MUST accept application/json and text/event-stream."""
    for accept in ("application/json", "text/event-stream", "text/html"):
        response = post(served, {**headers, "Accept": accept}, INITIALIZE)
        assert response.status_code == 406, accept
        assert SESSION not in response.headers
    assert post(served, {**headers, "Accept": "*/*"}, INITIALIZE).status_code == 200


def test_an_error_answer_to_a_request_without_a_session_names_no_session(
    served: Served, headers: dict[str, str]
) -> None:
    """The SDK named the session it opened for such a request and at once discarded: a client
    adopting it would only get 404s."""
    for response in (
        post(served, headers, {"jsonrpc": "2.0", "id": 11, "method": "tools/list"}),
        httpx.get(served.url, headers={**headers, "Accept": "text/event-stream"}, timeout=30),
        httpx.delete(served.url, headers=headers, timeout=30),
    ):
        assert response.status_code == 400
        assert SESSION not in response.headers
        assert error_of(response)["error"]["code"] == -32600


def test_a_port_that_cannot_be_bound_is_an_error_with_an_exit_status(database_url: str, tmp_path: Path) -> None:
    """`kiwi serve --transport http` printed "serving" although its port was taken."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", "serve", "--transport", "http", "--port", str(port)],
            cwd=ROOT,
            env=serve_env(database_url, tmp_path / "cache"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot serve on 127.0.0.1:{port}: the port is already in use" in done.stderr
    assert "serving" not in done.stderr and done.stdout == ""
