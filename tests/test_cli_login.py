"""`kiwi login`, the stored session and `kiwi logout`, for a hosted project's user.

The project's Supabase Auth is a FAKE GoTrue on a local port (tests/fake_gotrue.py) that signs
real JWTs with the local stack's secret, so the session it hands out really acts on the real
database: `kiwi whoami` and `kiwi publish` run as the signed-in user. Every command is a real
`kiwi` process, in an empty directory, with its own XDG_CONFIG_HOME.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import jwt
import psycopg
import pytest

from runner import LOCAL_JWT_SECRET, LOCAL_OWNER_ID, from_token
from tests.conftest import ROOT
from tests.fake_gotrue import ANON_KEY, FakeGoTrue, fake_gotrue
from tests.kiwi_cli import Done, kiwi_env

EMAIL, PASSWORD = "ada@example.com", "correct horse battery staple"
Kiwi = Callable[..., Done]


@pytest.fixture
def gotrue() -> Iterator[FakeGoTrue]:
    with fake_gotrue() as fake:
        yield fake


@pytest.fixture
def user(gotrue: FakeGoTrue) -> str:
    return gotrue.add_user(EMAIL, PASSWORD)


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    return tmp_path / "config"


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path, gotrue: FakeGoTrue, config_home: Path) -> Kiwi:
    """`kiwi(*args, stdin=..., env=...)`: the CLI as a process, configured for the fake's project
    (SUPABASE_URL and its anon key) over the Postgres backend, on the test database."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    base = kiwi_env(database_url, tmp_path / "cache")
    base.update(SUPABASE_URL=gotrue.base, SUPABASE_ANON_KEY=ANON_KEY, XDG_CONFIG_HOME=str(config_home))

    def run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Done:
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", *args],
            cwd=workdir,
            env={**base, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    return run


def login(kiwi: Kiwi, password: str = PASSWORD, **env: str) -> Done:
    return kiwi("login", "--email", EMAIL, "--password-stdin", stdin=password + "\n", env=env)


def session_of(config_home: Path) -> dict[str, object]:
    return json.loads((config_home / "kiwi" / "session.json").read_text())


def expire(config_home: Path) -> None:
    """Make the stored access token one that has expired (as an hour later)."""
    path = config_home / "kiwi" / "session.json"
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "expires_at": int(time.time()) - 5}))


def whoami(kiwi: Kiwi, **env: str) -> dict[str, object]:
    done = kiwi("whoami", "--json", env=env)
    assert done.code == 0, done.err
    return dict(done.json())


def one_line(done: Done) -> str:
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.err, done.err
    return lines[0]


def test_a_signed_in_user_is_whom_later_commands_act_as(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue
) -> None:
    done = login(kiwi)
    assert done.code == 0, done.err
    assert done.out.strip() == f"signed in to {gotrue.base} as {EMAIL} ({user})"
    path = config_home / "kiwi" / "session.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert PASSWORD not in path.read_text(), "the password is never stored"
    assert gotrue.log == ["password"]

    seen = whoami(kiwi)
    assert (seen["user_id"], seen["role"], seen["source"]) == (user, "authenticated", "session, kiwi login")
    plain = kiwi("whoami")
    assert plain.out.startswith(f"user {user} <{EMAIL}> (authenticated, session, kiwi login)"), plain.out

    # `kiwi token` prints the session's own access token, which the project's secret verifies
    token = kiwi("token")
    assert token.code == 0, token.err
    assert token.out.strip() == session_of(config_home)["access_token"]
    assert from_token(token.out, secret=LOCAL_JWT_SECRET).user_id == user
    as_json = kiwi("token", "--json").json()
    assert (as_json["user_id"], as_json["email"], as_json["token_type"]) == (user, EMAIL, "bearer")
    # asked for another token explicitly, it signs one as before
    other = kiwi("token", "--role", "anon")
    assert other.code == 0 and from_token(other.out, secret=LOCAL_JWT_SECRET).role == "anon"


def test_the_session_publishes_into_the_users_own_namespace(
    kiwi: Kiwi, user: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    namespace = f"login_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (namespace, user))
    tool = tmp_path / "note"
    tool.mkdir()
    (tool / "tool.yaml").write_text(
        f"tool_id: note\nnamespace: {namespace}\nversion: 1.0.0\ntool_type: knowledge\n"
        "description: A note the signed-in user keeps.\nentrypoint: note.md\n"
    )
    (tool / "note.md").write_text("# A note\n\nKept by whoever signed in.\n")
    try:
        assert login(kiwi).code == 0
        done = kiwi("publish", str(tool))
        assert done.code == 0, done.err
        assert done.out.startswith(f"published: {namespace}/note@1.0.0")
        row = conn.execute(
            "select v.published_by::text from tool_versions v join tools t on t.id = v.tool_uuid "
            "where t.namespace = %s and t.tool_id = 'note'",
            (namespace,),
        ).fetchone()
        assert row == (user,), "published as the signed-in user"
        # signed out, kiwi acts as the local owner again, who may not write there
        assert kiwi("logout").code == 0
        (tool / "tool.yaml").write_text((tool / "tool.yaml").read_text().replace("1.0.0", "1.0.1"))
        refused = kiwi("publish", str(tool))
        assert refused.code == 4 and namespace in refused.err, refused.err
    finally:
        conn.execute("delete from tools where namespace = %s", (namespace,))
        conn.execute("delete from namespaces where namespace = %s", (namespace,))


def test_an_expired_access_token_is_refreshed_once_and_stored_again(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue
) -> None:
    assert login(kiwi).code == 0
    first = session_of(config_home)
    expire(config_home)
    seen = whoami(kiwi)
    assert seen["user_id"] == user
    after = session_of(config_home)
    assert gotrue.log == ["password", "refresh_token"]
    assert after["refresh_token"] != first["refresh_token"], "the refresh token rotated"
    assert int(str(after["expires_at"])) > time.time() + 600
    whoami(kiwi)
    assert gotrue.log == ["password", "refresh_token"], "a fresh token is used as it is"


def test_commands_started_together_refresh_the_session_once(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue
) -> None:
    """Supabase Auth spends a refresh token once: two commands refreshing it together would
    leave one of them signed out. They take turns, and the second uses what the first stored."""
    assert login(kiwi).code == 0
    expire(config_home)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lambda _: whoami(kiwi), range(4)))
    assert {s["user_id"] for s in seen} == {user}
    assert gotrue.log.count("refresh_token") == 1 and "refresh_token refused" not in gotrue.log


def test_a_wrong_password_is_one_line_and_stores_nothing(kiwi: Kiwi, user: str, config_home: Path) -> None:
    done = login(kiwi, password="not the password")
    assert done.code == 4
    assert one_line(done) == f"kiwi: sign-in refused for {EMAIL}: Invalid login credentials"
    assert not (config_home / "kiwi" / "session.json").exists()
    assert whoami(kiwi)["user_id"] == LOCAL_OWNER_ID


def test_an_unreachable_supabase_auth_is_one_line(kiwi: Kiwi) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    done = login(kiwi, SUPABASE_URL=url)
    assert done.code == 5
    line = one_line(done)
    assert line.startswith(f"kiwi: cannot reach Supabase Auth at {url}/auth/v1") and "SUPABASE_URL" in line


def test_a_session_whose_refresh_token_is_spent_says_sign_in_again(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue
) -> None:
    assert login(kiwi).code == 0
    expire(config_home)
    gotrue.spend_every_refresh_token()
    done = kiwi("whoami")
    assert done.code == 4
    line = one_line(done)
    assert line.startswith("kiwi: your session has expired (Invalid Refresh Token") and "`kiwi login`" in line


def test_logout_revokes_the_session_and_removes_it(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue
) -> None:
    assert login(kiwi).code == 0
    refresh = str(session_of(config_home)["refresh_token"])
    done = kiwi("logout")
    assert done.code == 0, done.err
    assert done.out.startswith(f"signed out of {gotrue.base} ({EMAIL} ({user}))")
    assert not (config_home / "kiwi" / "session.json").exists()
    assert gotrue.log[-1] == "logout local" and refresh not in gotrue.refresh_tokens
    assert whoami(kiwi)["user_id"] == LOCAL_OWNER_ID
    again = kiwi("logout")
    assert again.code == 0 and "not signed in" in again.out


def test_the_password_is_never_an_argument(kiwi: Kiwi, user: str) -> None:
    as_argument = kiwi("login", "--email", EMAIL, "--password", PASSWORD)
    assert as_argument.code == 2 and "unrecognized arguments" in as_argument.err
    no_terminal = kiwi("login", "--email", EMAIL)  # stdin is a pipe, and --password-stdin was not given
    assert no_terminal.code == 2 and "--password-stdin" in no_terminal.err


def test_a_session_acts_only_for_its_own_project(kiwi: Kiwi, user: str) -> None:
    assert login(kiwi).code == 0
    elsewhere = whoami(kiwi, SUPABASE_URL="https://another-project.supabase.co")
    assert (elsewhere["user_id"], elsewhere["source"]) == (LOCAL_OWNER_ID, "local owner")
    local = kiwi("whoami", "--json", env={"SUPABASE_URL": "", "SUPABASE_ANON_KEY": ""})
    assert local.code == 0 and local.json()["user_id"] == LOCAL_OWNER_ID
    # an explicit KIWI_ACCESS_TOKEN still wins over the session
    other = str(uuid.uuid4())
    token = jwt.encode(
        {"sub": other, "role": "authenticated", "aud": "authenticated", "exp": int(time.time()) + 600},
        LOCAL_JWT_SECRET,
        algorithm="HS256",
    )
    assert whoami(kiwi, KIWI_ACCESS_TOKEN=token)["user_id"] == other


def test_a_long_lived_command_renews_the_sessions_token_and_never_becomes_another_user(
    kiwi: Kiwi, user: str, config_home: Path, gotrue: FakeGoTrue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a command that outlives its access token (`kiwi serve` over stdio, an hour in)
    kept sending it. The CLI now names the token it took from the session and how to renew it,
    and the REST backend it connects asks for a fresh one; a renewal never hands the process
    another user's session, and a signed-out session is not renewed at all."""
    from runner import Refused, Settings, connect
    from runner.cli.main import use_session
    from runner.registry.storage import Storage
    from runner.supabase_auth.renewal import renewer_of

    assert login(kiwi).code == 0
    for name in ("KIWI_ACCESS_TOKEN", "KIWI_ADMIN", "KIWI_DATABASE_URL", "KIWI_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("SUPABASE_URL", gotrue.base)
    monkeypatch.setenv("SUPABASE_ANON_KEY", ANON_KEY)
    monkeypatch.setenv("KIWI_BACKEND", "rest")
    monkeypatch.chdir(tmp_path / "cwd")
    use_session()
    token = os.environ["KIWI_ACCESS_TOKEN"]
    renew = renewer_of(token)
    assert renew is not None and connect(Settings.load()).backend._renew is renew  # what the REST backend asks
    stored_files = Storage.configured(Settings.load())
    assert stored_files is not None and stored_files.renew is renew  # and what fetches files from Storage ask
    assert renew()[0] == token and gotrue.log == ["password"], "a fresh token is not refreshed"

    time.sleep(1.1)  # the fake signs the same claims within a second: a new iat tells the tokens apart
    expire(config_home)
    fresh, expires_at = renew()
    assert fresh != token and gotrue.log == ["password", "refresh_token"]
    assert expires_at > time.time() + 600 and from_token(fresh, secret=LOCAL_JWT_SECRET).user_id == user

    gotrue.add_user("grace@example.com", "another long passphrase")
    other = kiwi("login", "--email", "grace@example.com", "--password-stdin", stdin="another long passphrase\n")
    assert other.code == 0, other.err
    with pytest.raises(Refused, match="another user's"):
        renew()
    assert kiwi("logout").code == 0
    with pytest.raises(Refused, match="is gone") as gone:
        renew()
    assert gone.value.hint and "kiwi login" in gone.value.hint


def test_login_without_a_hosted_project_says_what_to_set(kiwi: Kiwi) -> None:
    done = login(kiwi, SUPABASE_URL="", SUPABASE_ANON_KEY="")
    assert done.code == 2 and "SUPABASE_URL" in done.err and "kiwi token" in done.err


def test_a_command_without_a_session_file_reads_nothing_more(tmp_path: Path) -> None:
    """Without a session, `kiwi run` loads nothing of the sign-in but a stat (no httpx)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    code = "from runner.cli.main import use_session; use_session()\nimport sys\nprint('httpx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_wrong_anon_key_is_named(kiwi: Kiwi, user: str) -> None:
    done = login(kiwi, SUPABASE_ANON_KEY="not-the-anon-key")
    assert done.code == 4
    assert one_line(done) == f"kiwi: sign-in refused for {EMAIL}: Invalid API key"
