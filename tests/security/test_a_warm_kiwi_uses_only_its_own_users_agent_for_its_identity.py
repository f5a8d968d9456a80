"""`kiwi run` and `kiwi search` hand a call (with the caller's environment, tokens included, and
its terminal) to a `kiwi agent` only when that agent is certainly this user's, for this identity
and this registry. Another user cannot reach an agent (the directory is 0700, and the agent checks
SO_PEERCRED); a socket someone else planted (another owner, loose modes, a link, another user
listening) is never used; an agent of another identity or database is never used, and an agent
refuses a call that would act as another identity."""

from __future__ import annotations

import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.cli import warm_target as warm
from tests.agent_process import WARM_ONLY, agent, runtime_dir
from tests.agent_process import warm as warm_kiwi
from tests.kiwi_cli import kiwi_env

pytestmark = pytest.mark.slow
NOBODY = 65534
CALL = ["run", "hello_world", "-p", "name=Ada"]


@pytest.fixture
def place(database_url: str) -> Iterator[tuple[dict[str, str], Path]]:
    """An environment whose runtime directory another user could reach if its modes allowed."""
    root = Path(tempfile.mkdtemp(prefix="kiwi-agent-test-"))
    root.chmod(0o755)
    cwd = root / "cwd"
    cwd.mkdir()
    env = kiwi_env(database_url, root / "cache", XDG_RUNTIME_DIR=str(runtime_dir(root)), HOME=str(root))
    yield env, cwd
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    root.rmdir()


def expected_socket(env: dict[str, str], **changes: str) -> Path:
    stated = warm.target({**env, **changes})
    assert stated is not None
    return Path(warm.socket_path(env, stated))


class Fake:
    """A listener at `path` that greets like an agent stating `greeting`, and keeps what callers send."""

    def __init__(self, path: Path, greeting: dict[str, object]) -> None:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        path.chmod(0o600)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.greeting = greeting
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                conn.sendall(warm.frame(self.greeting))
                got = b""
                try:
                    while chunk := conn.recv(65536):
                        got += chunk
                except TimeoutError:
                    pass
                self.received.append(got)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def as_nobody(action: str, path: Path) -> str:
    """Run a connect to `path` as another user (a forked child that drops to uid 65534); what happened."""
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user: connects, and reports what it got
        os.close(read)
        answer = "?"
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(str(path))
                answer = "greeted " + repr(s.recv(4096)) if action == "greet" else "connected"
        except PermissionError:
            answer = "permission denied"
        except OSError as e:
            answer = f"error {e}"
        finally:
            os.write(write, answer.encode())
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as r:
        return r.read()


def test_another_user_can_neither_reach_nor_be_served_by_an_agent(place: tuple[dict[str, str], Path]) -> None:
    env, cwd = place
    with agent(env, cwd) as path:
        assert as_nobody("greet", path) == "permission denied"  # the directory is 0700
        folder = path.parent
        for loosened in (folder.parent, folder):
            loosened.chmod(0o711)
        path.chmod(0o666)  # as if someone loosened every mode: SO_PEERCRED still refuses
        try:
            assert as_nobody("greet", path) == "greeted b''"  # closed without a word
        finally:
            path.chmod(0o600)
            for loosened in (folder.parent, folder):
                loosened.chmod(0o700)


def planted(env: dict[str, str], fake_at: Path) -> Fake:
    stated = warm.target(env)
    assert stated is not None
    return Fake(fake_at, {"protocol": warm.PROTOCOL, **stated, "pid": 1})


def test_a_planted_socket_is_never_used(place: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, cwd = place
    path = expected_socket(env)
    other_owner, loose, link = (lambda: os.chown(path, NOBODY, NOBODY)), (lambda: path.chmod(0o666)), None
    for plant in (other_owner, loose, (lambda: path.parent.chmod(0o755)), link):
        if plant is link:  # a link to a socket of ours elsewhere
            fake = planted(env, tmp_path / "elsewhere.sock")
            path.parent.mkdir(mode=0o700, exist_ok=True)
            path.symlink_to(tmp_path / "elsewhere.sock")
        else:
            fake = planted(env, path)
            plant()
        try:
            done, _ = warm_kiwi(CALL, cwd=cwd, env=env, note=tmp_path / "note")
            assert done.code == 99 and done.out == "", "a planted socket was used"
        finally:
            fake.close()
            path.unlink()
            path.parent.chmod(0o700)
        assert fake.received == [], "the client connected to a planted socket"


def test_a_socket_whose_listener_is_another_user_is_never_used(
    place: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    """The file is ours and 0600, but another user listens on it: SO_PEERCRED says so."""
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    env, cwd = place
    path = expected_socket(env)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    shared = Path(tempfile.mkdtemp(prefix="kiwi-planted-"))
    shared.chmod(0o777)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            fake = planted(env, shared / "agent.sock")
            os.write(write, b"listening")
            for _ in range(400):  # until the client has been and gone: what did it hand over?
                if fake.received:
                    break
                time.sleep(0.05)
            os.write(write, f"got {sum(map(len, fake.received))} bytes".encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 64) == b"listening"
        os.rename(shared / "agent.sock", path)
        os.chown(path, 0, 0)
        path.chmod(0o600)
        done, _ = warm_kiwi(CALL, cwd=cwd, env=env, note=tmp_path / "note")
        assert done.code == 99 and done.out == "", "another user's listener was handed the call"
        assert os.read(read, 64) == b"got 0 bytes", "the client sent its call to another user's listener"
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(read)
        path.unlink(missing_ok=True)
        shared.rmdir()


@pytest.mark.parametrize("differs", ["identity", "database", "fingerprint"])
def test_an_agent_of_another_identity_or_database_is_never_used(
    place: tuple[dict[str, str], Path], tmp_path: Path, differs: str
) -> None:
    env, cwd = place
    path = expected_socket(env)
    stated = warm.target(env)
    assert stated is not None
    other = {"identity": "service_role", "database": "postgres postgresql://x@127.0.0.1:1/postgres"}
    fake = Fake(path, {"protocol": warm.PROTOCOL, **stated, differs: other.get(differs, "0" * 64), "pid": 1})
    try:
        done, _ = warm_kiwi(CALL, cwd=cwd, env=env, note=tmp_path / "note")
    finally:
        fake.close()
    assert done.code == 99 and done.out == ""
    assert fake.received == [b""], "the client sent its call (environment, tokens) to another identity's agent"


def test_an_agent_refuses_a_call_acting_as_another_identity(place: tuple[dict[str, str], Path]) -> None:
    """A caller that skipped the client's check still gets nothing run as another identity."""
    env, cwd = place
    with agent(env, cwd) as path, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        greeting, _ = warm.read_frame(s.recv)
        assert greeting is not None and greeting["identity"] == "local owner"
        for_admin = {**env, "KIWI_ADMIN": "1"}
        request = {
            "argv": CALL,
            "env": for_admin,
            "cwd": str(cwd),
            "umask": 0o022,
            "stdio": [["utf-8", "strict", 0, 0]] * 3,
        }
        null = os.open(os.devnull, os.O_RDWR)
        try:
            fds = struct.pack("3i", null, null, null)
            s.sendmsg([warm.frame(request)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        finally:
            os.close(null)
        assert warm.read_frame(s.recv)[0] == {"refused": "another identity or registry"}


def test_the_warm_client_is_the_stdlib_only(place: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """What the warm path runs before it trusts a socket: nothing of psycopg, the MCP SDK or httpx."""
    env, cwd = place
    done, heavy = warm_kiwi(CALL, cwd=cwd, env=env, note=tmp_path / "note")
    assert done.code == 99 and heavy == ""  # no agent: the snippet stops before going cold
    assert "runner.cli.main" not in WARM_ONLY
