"""MCP sessions over HTTP are bounded (issue 26: "3,000 `initialize` requests without `DELETE`
added 101 MB to `kiwi serve --transport http` that was never freed").

An idle session expires (KIWI_SESSION_IDLE_TIMEOUT, `kiwi serve --session-idle-timeout`) and
its id then answers 404; a caller holds at most KIWI_MAX_SESSIONS_PER_USER live sessions: at
the cap a new one closes the caller's session idle the longest, or, every one busy, is refused
with a 429 naming the cap. A caller never closes another's sessions. (The memory that comes
back is measured by bench/sessions_bench.py, not here.)

Real parts: a real `kiwi serve --transport http` process, raw HTTP as an abandoning client
sends it, real tokens of two users.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner.testing.http_serving import Served, kiwi_http_server, user_token
from tests.kiwi_cli import kiwi_env, run_kiwi

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "abandoner", "version": "1"}},
}
IDLE_S = 1.0


def opened(served: Served, token: str) -> str:
    """A new session of `token`'s user (initialize, nothing after it): its id."""
    response = httpx.post(served.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def session_headers(token: str, session: str) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}


def ping(served: Served, token: str, session: str) -> int:
    """The status of a ping on `session` (200: it lives; 404: it is gone)."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return httpx.post(served.url, json=body, headers=session_headers(token, session), timeout=30).status_code


def alive(served: Served, token: str, session: str) -> bool:
    status = ping(served, token, session)
    assert status in (200, 404), status
    return status == 200


# --- idle sessions expire -------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose sessions expire after IDLE_S seconds unused (set through the config)."""
    workdir = tmp_path_factory.mktemp("idle")
    with kiwi_http_server(database_url, workdir, KIWI_SESSION_IDLE_TIMEOUT=str(IDLE_S)) as s:
        yield s


def test_an_abandoned_session_expires_and_its_id_answers_404(quick: Served) -> None:
    token = user_token(str(uuid.uuid4()))
    sessions = [opened(quick, token) for _ in range(5)]
    # (the last one opened: on a loaded machine opening five may take longer than the timeout)
    assert alive(quick, token, sessions[-1])
    # Each look at a session that is still there uses it (and starts its idle time again), so
    # look at each only after it has been left alone for twice its timeout; a few such rounds.
    gone: set[str] = set()
    for _ in range(10):
        time.sleep(2 * IDLE_S)
        gone |= {s for s in sessions if s not in gone and not alive(quick, token, s)}
        if len(gone) == len(sessions):
            break
    assert gone == set(sessions), "every abandoned session expired"
    assert "Traceback" not in quick.stderr()


def test_a_session_in_use_does_not_expire(quick: Served) -> None:
    token = user_token(str(uuid.uuid4()))
    session = opened(quick, token)
    headers = session_headers(token, session)
    with httpx.stream("GET", quick.url, headers={**headers, "Accept": "text/event-stream"}, timeout=60) as stream:
        assert stream.status_code == 200  # an open GET stream: a request in flight the whole time
        time.sleep(4 * IDLE_S)
        assert alive(quick, token, session)


# --- a cap per caller -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server where a caller holds at most 2 live sessions (idle ones expire only after 600 s)."""
    workdir = tmp_path_factory.mktemp("capped")
    with kiwi_http_server(database_url, workdir, KIWI_MAX_SESSIONS_PER_USER="2") as s:
        yield s


def test_at_the_cap_a_new_session_closes_the_callers_session_idle_the_longest(capped: Served) -> None:
    a, b = user_token(str(uuid.uuid4())), user_token(str(uuid.uuid4()))
    first, second = opened(capped, a), opened(capped, a)
    others = [opened(capped, b), opened(capped, b)]
    assert alive(capped, a, first)  # used last: `second` is now the one idle the longest
    third = opened(capped, a)
    assert not alive(capped, a, second), "the caller's session idle the longest made room"
    assert alive(capped, a, first) and alive(capped, a, third)
    assert all(alive(capped, b, s) for s in others), "another caller's sessions are untouched"


def test_at_the_cap_with_every_session_busy_a_new_one_is_refused_naming_the_cap(capped: Served) -> None:
    token = user_token(str(uuid.uuid4()))
    sessions = [opened(capped, token), opened(capped, token)]
    streams = [
        httpx.stream(
            "GET", capped.url, headers={**session_headers(token, s), "Accept": "text/event-stream"}, timeout=60
        )
        for s in sessions
    ]
    try:
        for stream in streams:
            assert stream.__enter__().status_code == 200  # both busy: a GET stream each
        refused = httpx.post(capped.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert "KIWI_MAX_SESSIONS_PER_USER" in error["message"] and "2 live MCP sessions" in error["message"]
        assert error["data"] == {"max_sessions_per_user": 2}
        assert "mcp-session-id" not in refused.headers
        assert all(alive(capped, token, s) for s in sessions), "nobody's session was closed to refuse it"
        other = user_token(str(uuid.uuid4()))
        assert alive(capped, other, opened(capped, other)), "another caller still opens sessions"
    finally:
        for stream in streams:
            stream.__exit__(None, None, None)
    ended = httpx.delete(capped.url, headers=session_headers(token, sessions[0]), timeout=30)
    assert ended.status_code == 200
    assert alive(capped, token, opened(capped, token)), "a session ended by its client makes room at once"


def test_kiwi_serve_help_documents_both(database_url: str, tmp_path: Path) -> None:
    shown = run_kiwi(("serve", "--help"), cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert shown.code == 0, shown.err
    text = " ".join(shown.out.split())
    assert "--session-idle-timeout SECONDS" in text and "KIWI_SESSION_IDLE_TIMEOUT" in text
    assert "--max-sessions-per-user N" in text and "KIWI_MAX_SESSIONS_PER_USER" in text
