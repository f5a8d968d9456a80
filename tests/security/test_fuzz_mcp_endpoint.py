"""Whatever reaches `kiwi serve --transport http`, the answer is an HTTP error or a JSON-RPC
error or a tool error with a message: never a 500, never a traceback (in the answer or in the
server's stderr), and the server goes on answering.

Hypothesis sends raw HTTP to one real server process (runner/testing/http_serving.py) as a
throwaway user who owns a namespace: malformed JSON-RPC messages (wrong types, missing fields,
huge ids, NUL and lone surrogates escaped in JSON), nesting thousands deep, bytes that are not
UTF-8, wrong content types, absent or made-up session ids, bad tokens; and generated arguments
to the four meta tools (`search`, `load`, `execute`, `help`) in an initialized session. Each
kind of input is its own test, so one finding does not hide the others. What the tenant
publishes is deleted at the end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner.testing.http_serving import Served, kiwi_http_server, unsigned_token, user_token
from tests.test_fuzz import files_strategy, finite_json, manifests, near_valid

ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"
EXAMPLES = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
TIMEOUT_S = 60  # per request; a request that takes longer is a finding of its own (a stall)
TENANT = uuid.uuid4()
NS = f"fzm_{uuid.uuid4().hex[:10]}"


@dataclass
class Endpoint:
    """The server, the tenant's token and an initialized session's headers."""

    served: Served
    token: str
    session: dict[str, str]
    log_seen: int = 0  # how much of the server's stderr the last check read

    def new_stderr(self) -> str:
        """What the server wrote to stderr since the last call."""
        text = self.served.stderr()
        new, self.log_seen = text[self.log_seen :], len(text)
        return new


def initialize(served: Served, token: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
    }
    opened = httpx.post(served.url, json=init, headers=headers, timeout=TIMEOUT_S)
    assert opened.status_code == 200, opened.text
    session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(served.url, json=note, headers=session, timeout=TIMEOUT_S).status_code == 202
    return session


@pytest.fixture(scope="module")
def endpoint(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (NS, TENANT))
        try:
            with kiwi_http_server(database_url, tmp_path_factory.mktemp("fuzz-http")) as served:
                token = user_token(str(TENANT))
                e = Endpoint(served, token, initialize(served, token))
                e.new_stderr()
                yield e
        finally:
            conn.execute("delete from approvals where namespace = %s", (NS,))
            conn.execute("delete from tools where namespace = %s or owner_id = %s", (NS, TENANT))
            conn.execute("delete from namespaces where owner_id = %s", (TENANT,))


# --- what every answer must be ----------------------------------------------------------------


def messages_of(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of an answer: one JSON body, or the `data:` lines of an event stream."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:]]
    assert kind.startswith("application/json"), f"{response.status_code} {kind!r}: {response.text[:500]}"
    return [response.json()]


# What a raw error looks like: a database's or Python's, naming no field of the request.
RAW = ("Traceback", "invalid input syntax for", "unsupported Unicode escape", "psycopg", "RecursionError")
RAW += ("stack depth limit", "internal error", "UnicodeEncodeError", "UnicodeDecodeError")


def check_text(text: str) -> None:
    """An error's text says what was wrong: it is not a raw database or Python error."""
    assert text.strip(), "an error without a message"
    assert not any(raw in text for raw in RAW), text[:2000]


def check_error(error: Any) -> None:
    assert isinstance(error, dict) and isinstance(error.get("code"), int), error
    assert isinstance(error.get("message"), str), error
    check_text(error["message"])


def check_answer(e: Endpoint, response: httpx.Response) -> list[Any]:
    """No 500, no traceback; an error status has a JSON error with a message; a 200 carries
    JSON-RPC results or errors (a tool error with text). Returns the messages."""
    event(f"HTTP {response.status_code}")
    stderr = e.new_stderr()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert response.status_code < 500, f"{response.status_code}: {response.text[:2000]}"
    assert "Traceback" not in response.text, response.text[:2000]
    if response.status_code == 202:
        assert not response.content.strip(), response.text
        return []
    if response.status_code == 401:
        assert response.json()["error_description"].strip()
        return []
    found = messages_of(response)
    if response.status_code >= 400:
        assert found and all("error" in m for m in found), found
    for m in found:
        assert m.get("jsonrpc") == "2.0", m
        if "error" in m:
            check_error(m["error"])
            event(f"JSON-RPC {m['error']['code']}")
        elif isinstance(m.get("result"), dict) and m["result"].get("isError"):
            check_text(" ".join(part.get("text", "") for part in m["result"].get("content", [])))
            event("tool error")
    return found


def still_searches(e: Endpoint) -> None:
    """The server answers a normal `search` after everything else, in a new session."""
    session = initialize(e.served, e.token)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "hello"}},
    }
    answer = httpx.post(e.served.url, json=call, headers=session, timeout=TIMEOUT_S)
    (message,) = messages_of(answer)
    assert answer.status_code == 200 and not message["result"].get("isError"), message
    assert "Traceback" not in e.new_stderr()


# --- strategies: messages -----------------------------------------------------------------------

odd_text = st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfff", "\ufffe", "\U0010ffff", "", "a" * 70_000])
texts = odd_text | st.text(max_size=12)
ids = st.one_of(
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**200, 10**400, 0, -1]),
    st.floats(),
    texts,
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
    "resources/read", "resources/templates/list", "completion/complete", "logging/setLevel",
    "notifications/initialized", "notifications/cancelled", "notifications/progress", "rpc.discover", "",
]  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
    max_leaves=8,
)
params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from(["search", "load", "execute", "help", "nope"]) | texts,
            "arguments": json_values,
            "uri": st.sampled_from(["kiwi://x", "file:///etc/passwd", ""]) | texts,
            "cursor": texts | json_values,
            "level": st.sampled_from(["debug", "emergency", "loud"]) | json_values,
            "ref": json_values,
            "argument": json_values,
            "requestId": ids,
            "progressToken": ids,
            "_meta": json_values,
        },
    ),
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2.0]) | json_values,
        "id": ids,
        "method": st.sampled_from(METHODS) | texts | json_values,
        "params": params,
        "result": json_values,
        "error": json_values,
    },
)


def encoded(message: Any, ensure_ascii: bool) -> bytes:
    """JSON as a client would send it: NUL and lone surrogates escaped (\\u0000, \\ud800)."""
    return json.dumps(message, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


def nested(depth: int, opener: str, where: str) -> bytes:
    """A message nested `depth` deep: the whole body, its params, or a tool's argument."""
    closer = "]" if opener == "[" else "}"
    inner = (("[" if opener == "[" else '{"a":') * depth) + ("1" if opener == "{" else "") + closer * depth
    if where == "body":
        return inner.encode()
    if where == "params":
        return f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"cursor":{inner}}}}}'.encode()
    call = f'{{"name":"search","arguments":{{"query":"x","limit":{inner}}}}}'
    return f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{call}}}'.encode()


raw_bodies = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"",
            b"{",
            b"null",
            b"[]",
            b'{"jsonrpc":"2.0","id":1,"method":"ping"',
            b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',
            b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc3\x28"}}',
            b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}garbage',
            b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"\\u0000"}}}',
        ]
    ),
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=latin-1",
        "APPLICATION/JSON",
        "application/json;;",
        "text/plain",
        "",
        "multipart/form-data; boundary=x",
        "application/json" + "; x=y" * 300,
    ]
)
accepts = st.sampled_from([ACCEPT, "*/*", "application/json", "text/event-stream", "", "text/html;q=0.1"])
session_ids = st.sampled_from(["keep", "absent", "", "0", "x" * 5000, "../../etc", "a b", "a\tb"]) | st.uuids().map(
    lambda u: u.hex
)
tokens = st.sampled_from(["keep", "absent", "", "x", "a.b.c", "Bearer", "keep-other-user", "alg-none", "expired"])


def with_headers(e: Endpoint, content_type: str, accept: str, session_id: str, token: str) -> dict[str, str]:
    headers = {"Content-Type": content_type, "Accept": accept, "MCP-Protocol-Version": PROTOCOL}
    if session_id == "keep":
        headers["Mcp-Session-Id"] = e.session["Mcp-Session-Id"]
    elif session_id != "absent":
        headers["Mcp-Session-Id"] = session_id
    bearer = {
        "keep": e.token,
        "keep-other-user": user_token(str(uuid.uuid4())),
        "alg-none": unsigned_token({"sub": str(TENANT), "role": "authenticated"}),
        "expired": user_token(str(TENANT), expires_in_s=-60),
    }.get(token, token)
    if token != "absent":
        headers["Authorization"] = f"Bearer {bearer}".strip()
    return headers


def post(e: Endpoint, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(e.served.url, content=body, headers=headers or e.session, timeout=TIMEOUT_S)


# --- the tests: JSON-RPC over HTTP --------------------------------------------------------------


@EXAMPLES
@given(message=envelopes | json_values, ascii_only=st.booleans())
def test_malformed_json_rpc_messages_get_errors(message: Any, ascii_only: bool, endpoint: Endpoint) -> None:
    check_answer(endpoint, post(endpoint, encoded(message, ascii_only)))


@settings(EXAMPLES, max_examples=12)
@given(
    depth=st.sampled_from([50, 500, 990, 1000, 2000, 5000]),
    opener=st.sampled_from(["[", "{"]),
    where=st.sampled_from(["body", "params", "argument"]),
)
def test_deeply_nested_messages_get_errors(depth: int, opener: str, where: str, endpoint: Endpoint) -> None:
    check_answer(endpoint, post(endpoint, nested(depth, opener, where)))


@EXAMPLES
@given(
    body=raw_bodies | envelopes.map(lambda m: encoded(m, True)),
    content_type=content_types,
    accept=accepts,
    session_id=session_ids,
    token=tokens,
)
def test_bad_bytes_headers_sessions_and_tokens_get_errors(
    body: bytes, content_type: str, accept: str, session_id: str, token: str, endpoint: Endpoint
) -> None:
    check_answer(endpoint, post(endpoint, body, with_headers(endpoint, content_type, accept, session_id, token)))


# --- the tests: the meta tools' arguments -------------------------------------------------------

REFS = ["hello_world", "hello_world@1.0.0", "format_bytes", f"{NS}/nope", "public/x", "@", "a/b/c", "../x", "x@y@z"]
item_ids = st.sampled_from(REFS) | texts | json_values
uuids_or_not = st.uuids().map(str) | st.sampled_from(["not-a-uuid", "", "0" * 36, "{}"]) | texts | json_values
ACTIONS = ["run", "dry_run", "create", "update", "publish", "yank", "deprecate", "delete", "approve", "deny"]
ACTIONS += ["open_context", "rollback", "Run", "", "import"]


def in_namespace(manifest: Any) -> Any:
    if isinstance(manifest, dict) and isinstance(manifest.get("tool_id"), str) and "/" not in manifest["tool_id"]:
        return {**manifest, "tool_id": f"{NS}/{manifest['tool_id']}"}
    return manifest


manifest_texts = (
    st.sampled_from(
        [
            "tool_id: x\nversion: [",
            "a: &a [*a]",
            "- &a x\n- *a\n- *a",
            "tool_id: !!python/object:os.system x",
            f"tool_id: {NS}/y\ntool_type: knowledge\nversion: 1.0.0\n",
            "\x00",
            "\ud800",
        ]
    )
    | texts
)
manifest_values = st.one_of(
    manifests(st.text(max_size=8), finite_json).map(in_namespace),
    near_valid(finite_json).map(lambda mf: in_namespace(mf[0])),
    manifest_texts,
    json_values,
)
ARGUMENTS: dict[str, st.SearchStrategy[Any]] = {
    "search": st.fixed_dictionaries(
        {},
        optional={
            "query": st.sampled_from(["hello", "type:script", "namespace:" + NS, "mcp:", "local:", "*"]) | texts,
            "item_type": st.sampled_from(["tool", "directive", "knowledge", "TOOL"]) | texts | json_values,
            "limit": st.integers() | st.sampled_from([0, 1, 200, 201, 2**31, 2**64]) | json_values,
            "junk": json_values,
        },
    ),
    "load": st.fixed_dictionaries(
        {},
        optional={
            "item_id": item_ids,
            "item_type": st.sampled_from(["tool", "knowledge"]) | texts,
            "version": st.sampled_from(["1.0.0", "latest", "1", "9" * 500]) | texts | json_values,
            "include_content": st.booleans() | json_values,
        },
    ),
    "execute": st.fixed_dictionaries(
        {"action": st.sampled_from(ACTIONS) | texts | json_values},
        optional={
            "item_id": item_ids,
            "parameters": st.dictionaries(st.sampled_from(["name", "bytes", "word"]) | texts, json_values)
            | json_values,
            "version": st.sampled_from(["1.0.0", "2.0.0-rc.1"]) | texts | json_values,
            "manifest": manifest_values,
            "files": files_strategy | json_values,
            "confirm": st.booleans() | json_values,
            "approval_id": uuids_or_not,
            "context": uuids_or_not,
            "permissions": st.dictionaries(
                st.sampled_from(["fs_read", "fs_write", "shell", "mcp", "tools", "net"]) | texts, json_values
            )
            | json_values,
        },
    ),
    "help": st.fixed_dictionaries(
        {}, optional={"topic": st.sampled_from(["overview", "all", "execute", "nope"]) | texts | json_values}
    ),
}


def call_tool(e: Endpoint, name: str, arguments: Any, request_id: int = 7) -> list[Any]:
    call = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    found = check_answer(e, post(e, encoded(call, True)))
    assert found, "a tools/call gets an answer"
    # the answer to the call, or a parse error (-32700, id null): a lone surrogate escaped in JSON
    # (\ud800) is not text, and the SDK's strict parser says so
    parse_error = [m for m in found if m.get("id") is None and m.get("error", {}).get("code") == -32700]
    assert parse_error or any(m.get("id") == request_id for m in found), found
    return found


@EXAMPLES
@given(name=st.sampled_from(["search", "load", "help"]), data=st.data())
def test_search_load_and_help_take_any_arguments(name: str, data: st.DataObject, endpoint: Endpoint) -> None:
    arguments = data.draw(ARGUMENTS[name] | json_values, label="arguments")
    call_tool(endpoint, name, arguments)


@settings(EXAMPLES, max_examples=60)
@given(arguments=ARGUMENTS["execute"])
def test_execute_takes_any_arguments(arguments: dict[str, Any], endpoint: Endpoint) -> None:
    event(f"action {arguments['action']!r}"[:40])
    call_tool(endpoint, "execute", arguments)


@settings(EXAMPLES, max_examples=30)
@given(
    action=st.sampled_from(["run", "dry_run", "open_context", "approve", "deny"]),
    item_id=st.none() | st.sampled_from(["hello_world", "format_bytes", f"{NS}/nope"]),
    field=st.sampled_from(["context", "approval_id"]),
    value=st.sampled_from(["not-a-uuid", "", "0" * 36, "1234", "ffffffff-ffff-ffff-ffff-fffffffffffff", "\u00e9"])
    | st.uuids().map(str),
)
def test_execute_names_a_malformed_context_or_approval_id(
    action: str, item_id: str | None, field: str, value: str, endpoint: Endpoint
) -> None:
    """Ids the database would cast (uuids) are checked with the field's name, not by the cast."""
    arguments = {"action": action, field: value} | ({"item_id": item_id} if item_id else {})
    call_tool(endpoint, "execute", arguments)


def test_the_server_still_searches_after_all_that(endpoint: Endpoint) -> None:
    still_searches(endpoint)
