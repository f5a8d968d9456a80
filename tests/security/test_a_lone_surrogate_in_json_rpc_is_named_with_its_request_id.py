"""Finding (from the fuzz suite): a lone surrogate escaped in a JSON-RPC body (`"\\ud800"` in a
`tools/call`'s arguments) was answered by the SDK's parser with -32700 "unexpected end of hex
escape" (the escape is complete: the character is the problem) and `id: null`, so a client
could not tell which request failed. The endpoint now names the field and keeps the id; a
surrogate pair (an emoji) is text and still reaches the tool.

Real parts: a real `kiwi serve --transport http` process, real HTTP, a real token.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from runner.testing.http_serving import Served, kiwi_http_server, user_token

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("surrogate")) as s:
        yield s


def call(query_json: str) -> bytes:
    return (
        '{"jsonrpc":"2.0","id":41,"method":"tools/call",'
        '"params":{"name":"search","arguments":{"query":' + query_json + "}}}"
    ).encode()


@pytest.mark.parametrize("escape", ['"\\ud800"', '"x\\uDC00y"', '"\\ud83d"'])
def test_a_lone_surrogate_is_an_invalid_request_naming_the_field_and_the_id(served: Served, escape: str) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    response = httpx.post(served.url, content=call(escape), headers=headers, timeout=60)
    assert response.status_code == 400, response.text[:300]
    answer = response.json()
    assert answer["id"] == 41 and answer["error"]["code"] == -32600
    assert "params.arguments.query: must be valid Unicode text" in answer["error"]["message"]
    assert "Traceback" not in served.stderr()


def test_a_lone_surrogate_in_the_id_is_answered_without_echoing_it(served: Served) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    body = b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":"search","arguments":{}}}'
    response = httpx.post(served.url, content=body, headers=headers, timeout=60)
    assert response.status_code == 400, response.text[:300]
    assert response.json()["id"] is None and "id: must be valid Unicode text" in response.json()["error"]["message"]
    assert "Traceback" not in served.stderr()


def test_a_surrogate_pair_is_text_and_passes_the_check(served: Served) -> None:
    """An emoji spelt as an escaped pair is not refused here (the request goes on to the SDK,
    which wants a session for tools/call: any answer but the surrogate refusal will do)."""
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    response = httpx.post(served.url, content=call('"\\ud83d\\ude00"'), headers=headers, timeout=60)
    assert "surrogate" not in response.text
