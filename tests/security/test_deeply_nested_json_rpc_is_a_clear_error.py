"""JSON-RPC nested 10,000 deep sent to the HTTP endpoint (issue 26: "HTTP 500 with a
`RecursionError` traceback"). Now the endpoint measures how deep a body nests before anything
parses it (a linear scan, no recursion) and answers a body deeper than it accepts with a
JSON-RPC Invalid Request naming the limit; nothing in the server's log is a traceback.

Real parts: a real `kiwi serve --transport http` process, real HTTP, a real token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner.mcp_server.http_protocol import MAX_JSON_DEPTH, json_depth
from runner.testing.http_serving import Served, kiwi_http_server, user_token

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "deep", "version": "1"}},
}


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("deep")) as s:
        yield s


def post(served: Served, body: bytes) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    return httpx.post(served.url, content=body, headers=headers, timeout=60)


def nested(depth: int, open_: str = "[", close: str = "]", inner: str = "1") -> str:
    return open_ * depth + inner + close * depth


def deep_request(depth: int) -> bytes:
    """A tools/call whose arguments nest `depth` levels deep in all."""
    arguments = nested(depth - 2, '{"a":', "}", "0")
    return (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":' + arguments + "}}"
    ).encode()


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("an array 10,000 deep", nested(10_000).encode()),
        ("objects 10,000 deep in a request", deep_request(10_000)),
        ("a request 1,000 deep", deep_request(1_000)),
        ("just past the limit", deep_request(MAX_JSON_DEPTH + 1)),
        ("10,000 deep and not even JSON", ("[" * 10_000).encode()),
    ],
)
def test_a_body_nested_too_deep_is_an_invalid_request_naming_the_limit(served: Served, name: str, body: bytes) -> None:
    response = post(served, body)
    assert response.status_code == 400, (name, response.status_code, response.text[:300])
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert "nest" in answer["error"]["message"] and str(MAX_JSON_DEPTH) in answer["error"]["message"]
    log = served.stderr()
    assert "Traceback" not in log and "RecursionError" not in log, log[-2000:]


def test_a_call_at_the_limit_is_answered_by_the_tool(served: Served) -> None:
    """64 levels deep is served: the call reaches `search` and is answered (a result, not the
    depth refusal's error, and no traceback)."""
    token = {"Authorization": f"Bearer {user_token()}"}
    opened = httpx.post(served.url, json=INITIALIZE, headers={**HEADERS, **token}, timeout=60)
    assert opened.status_code == 200, opened.text
    session = {**HEADERS, **token, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    session["MCP-Protocol-Version"] = "2025-06-18"
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(served.url, json=initialized, headers=session, timeout=60).status_code == 202
    response = httpx.post(served.url, content=deep_request(MAX_JSON_DEPTH), headers=session, timeout=60)
    assert response.status_code == 200, response.text[:300]
    # one message, the call's answer: a result (the tool ran), not the depth refusal's error
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    answer = json.loads(data[0] if data else response.text)
    assert answer["id"] == 7 and "result" in answer and "error" not in answer, response.text[:300]
    assert "Traceback" not in served.stderr()


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[[[", "]]]]{{{{"]', 1),  # brackets in strings do not count
        ('["\\"[[[[", {"k\\\\": [[]]}]', 4),  # nor after an escaped quote
        ("[[[" + '"unterminated [[[[[[', 3),  # a string left open counts to the end of the body
        ("]]]]", 0),
    ],
)
def test_the_depth_scan_counts_only_structure(text: str, depth: int) -> None:
    assert json_depth(text.encode()) == depth


@pytest.mark.slow
def test_the_depth_scan_of_a_hostile_body_is_linear(tmp_path: Path) -> None:
    """Quotes and escapes arranged to make a backtracking scan quadratic are read once each:
    4 MiB of them are measured (no recursion, and no time limit asserted: it just finishes)."""
    body = ('"' + '\\"' * (2 * 1024 * 1024)).encode()
    assert json_depth(body) == 0
    assert json_depth(b"[" * (4 * 1024 * 1024)) == 4 * 1024 * 1024
