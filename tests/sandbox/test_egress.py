"""The egress proxy with real tinyproxy, socat and HTTP servers on 127.0.0.1 (and bubblewrap).

A client speaks HTTP-proxy straight to the host-side unix socket; one test runs curl in a
real sandbox with its own network namespace.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner import ConfigError, PrimitiveError
from runner.sandbox import egress
from runner.sandbox.egress import Egress, inside, normalise_allow

ROOT = Path(__file__).resolve().parents[2]
needs_tools = pytest.mark.skipif(
    not (shutil.which("tinyproxy") and shutil.which("socat")), reason="needs tinyproxy and socat"
)


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[list[int]]:
    """Two HTTP servers on 127.0.0.1, free ports; their ports."""
    started = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for s in started:
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield [s.server_address[1] for s in started]
    for s in started:
        s.shutdown()
        s.server_close()


def ask(sock: Path, request: str, tunnel: str | None = None) -> str:
    """Send `request` to the proxy at `sock` (through a CONNECT to `tunnel` first, if given);
    the status line of the answer, and its body after a blank line."""
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(10)
        c.connect(str(sock))
        if tunnel is not None:
            c.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = c.recv(4096)
                if not chunk:
                    break
                head += chunk
            if b" 200 " not in head.split(b"\r\n", 1)[0]:
                return head.split(b"\r\n", 1)[0].decode()
        c.sendall(request.encode())
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode() + "\n\n" + body.decode(errors="replace")


def get(port: int, host: str = "127.0.0.1") -> str:
    return f"GET http://{host}:{port}/ HTTP/1.0\r\n\r\n"


def origin_get(host: str) -> str:
    return f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n"


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line holds `text` (the runtime directory: every proxy and bridge)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_normalise_allow() -> None:
    got = normalise_allow(["Example.COM:0443", "127.0.0.1:80", "[0:0::1]:8080", "example.com:443", "a-b.c.io:1"])
    assert got == ("127.0.0.1:80", "[::1]:8080", "a-b.c.io:1", "example.com:443")
    for bad in [
        "example.com",
        "example.com:0",
        "example.com:65536",
        "example.com:-1",
        "example.com:8o",
        ":80",
        "exa mple.com:80",
        "-x.com:80",
        "x..com:80",
        "1.2.3:80",
        "::1:80",
        "[::1%lo]:80",
        "[example.com]:80",
        "user@host:80",
        "host/x:80",
        "*.example.com:443",
        "127.0.0.1:80:81",
        "é.com:80",
    ]:
        with pytest.raises(ConfigError, match="egress allow-list entry"):
            normalise_allow([bad])
    with pytest.raises(ConfigError):
        normalise_allow("127.0.0.1:80")


def test_filter_lines_are_anchored() -> None:
    assert egress._filter_lines(("127.0.0.1:8080", "example.com:80", "[::1]:443")) == [
        r"^http://127\.0\.0\.1:8080(/|$)",
        r"^127\.0\.0\.1:8080$",
        r"^http://example\.com(:80)?(/|$)",
        r"^example\.com:80$",
        r"^http://\[::1\]:443(/|$)",
        r"^\[::1\](:443)?$",
    ]


def test_inside_prefix_and_env() -> None:
    argv, env = inside("/run/kiwi/egress.sock", 3128)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[3:] == ["kiwi-egress", "/run/kiwi/egress.sock", "3128", "0100007F:0C38"]
    url = "http://127.0.0.1:3128"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert env[name] == env[name.lower()] == url
    assert env["NO_PROXY"] == env["no_proxy"] == ""
    with pytest.raises(ConfigError):
        inside("/x", 0)


async def test_missing_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(egress.shutil, "which", lambda name: None)
    async with Egress() as e:
        with pytest.raises(PrimitiveError, match="needs tinyproxy and socat") as info:
            await e.socket_for(["127.0.0.1:80"])
    assert "apt-get install tinyproxy socat" in str(info.value)


async def test_empty_allow_list_is_refused() -> None:
    async with Egress() as e:
        with pytest.raises(ConfigError, match="empty"):
            await e.socket_for([])


@pytest.mark.slow
@needs_tools
async def test_allowed_reached_others_refused(servers: list[int]) -> None:
    ok, other = servers
    async with Egress() as e:
        sock = await e.socket_for([f"127.0.0.1:{ok}"])
        assert ask(sock, get(ok)) == f"HTTP/1.0 200 OK\n\nhello from {ok}"
        assert ask(sock, get(ok, "127.0.0.1").replace("http://", "HTTP://")).startswith("HTTP/1.0 200")
        assert ask(sock, origin_get(f"127.0.0.1:{ok}"), tunnel=f"127.0.0.1:{ok}").endswith(f"hello from {ok}")
        refused = [
            (get(other), None),  # another port on the same host
            (get(int(f"{ok}0")), None),  # the port as a prefix
            (f"GET http://127.0.0.1:{ok}@127.0.0.1:{other}/ HTTP/1.0\r\n\r\n", None),
            (f"GET http://127.0.0.1:{ok}?@127.0.0.1:{other} HTTP/1.0\r\n\r\n", None),
            (get(ok, "127.0.0.1.nip.io"), None),  # the host as a prefix
            (get(ok, "localhost"), None),  # not what the list says, though it is the same address
            (origin_get(f"127.0.0.1:{other}"), None),  # origin form: the Host header decides
            (origin_get("127.0.0.1.nip.io"), None),
            (origin_get(f"127.0.0.1/:{ok}"), None),
            ("", f"127.0.0.1:{other}"),
            ("", f"127.0.0.1:{ok}0"),
            ("", f"127.0.0.1:{ok}/x"),
            ("", f"127.0.0.1.nip.io:{ok}"),
            ("", f"x@127.0.0.1:{other}"),
        ]
        for request, tunnel in refused:
            status = ask(sock, request, tunnel=tunnel).split("\n")[0]
            assert status.split()[1] in {"403", "400"}, (request, tunnel, status)
        assert ask(sock, get(other)).startswith("HTTP/1.0 403 Filtered")
        assert ask(sock, "", tunnel=f"127.0.0.1:{other}").startswith("HTTP/1.1 403 Filtered")
        logged = e.refused([f"127.0.0.1:{ok}"])
        assert f"http://127.0.0.1:{other}/" in logged and f"127.0.0.1:{other}" in logged


@pytest.mark.slow
@needs_tools
async def test_two_allow_lists_two_proxies(servers: list[int]) -> None:
    a, b = servers
    async with Egress() as e:
        sa = await e.socket_for([f"127.0.0.1:{a}"])
        sb = await e.socket_for([f"127.0.0.1:{b}"])
        sab = await e.socket_for([f"127.0.0.1:{b}", f"127.0.0.1:{a}"])
        assert len({sa, sb, sab}) == 3
        assert await e.socket_for([f"127.0.0.1:{a}", f"127.0.0.1:{b}", f"127.0.0.1:0{a}"]) == sab  # reused
        assert ask(sa, get(a)).startswith("HTTP/1.0 200") and ask(sa, get(b)).startswith("HTTP/1.0 403")
        assert ask(sb, get(b)).startswith("HTTP/1.0 200") and ask(sb, get(a)).startswith("HTTP/1.0 403")
        assert ask(sab, get(a)).startswith("HTTP/1.0 200") and ask(sab, get(b)).startswith("HTTP/1.0 200")


@needs_tools
async def test_close_leaves_nothing(servers: list[int]) -> None:
    e = Egress()
    sock = await e.socket_for([f"127.0.0.1:{servers[0]}"])
    await e.socket_for([f"127.0.0.1:{servers[1]}"])
    directory = e.directory
    assert directory is not None and (directory.stat().st_mode & 0o777) == 0o700
    tunnel = socket.socket(socket.AF_UNIX)  # an open connection: socat has forked a child for it
    tunnel.connect(str(sock))
    tunnel.sendall(f"CONNECT 127.0.0.1:{servers[0]} HTTP/1.1\r\n\r\n".encode())
    assert b" 200 " in tunnel.recv(4096)
    assert len(processes_mentioning(str(directory))) >= 5  # 2 tinyproxy, 2 socat, 1 socat child
    await e.aclose()
    tunnel.close()
    assert processes_mentioning(str(directory)) == []
    assert not directory.exists()
    await e.aclose()  # idempotent


@needs_tools
@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_process_outlives_its_owner(how: str, tmp_path: Path) -> None:
    """At interpreter exit (atexit) and when the owner is SIGKILLed (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        from runner.sandbox.egress import Egress
        async def main():
            e = Egress()
            await e.socket_for(["127.0.0.1:9"])
            print(e.directory, flush=True)
            if {how!r} == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30)
    directory = out.stdout.strip()
    assert directory.startswith(os.path.join(egress.tempfile.gettempdir(), "kiwi-egress-")), out
    deadline = time.monotonic() + 5
    while processes_mentioning(directory) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_mentioning(directory) == []
    if how == "exit":
        assert not Path(directory).exists()
    else:
        shutil.rmtree(directory, ignore_errors=True)


@needs_tools
async def test_a_proxy_that_cannot_start_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    monkeypatch.setattr(egress, "_free_port", lambda: taken.getsockname()[1])
    async with Egress() as e:
        with pytest.raises(PrimitiveError, match=r"egress proxy \(tinyproxy\) for 127.0.0.1:80 did not start") as info:
            await e.socket_for(["127.0.0.1:80"])
        assert processes_mentioning(str(e.directory)) == []
    taken.close()
    assert "its log" in str(info.value) and "tinyproxy" in str(info.value).split("its log", 1)[1]


@needs_tools
async def test_a_dead_proxy_is_started_again(servers: list[int]) -> None:
    async with Egress() as e:
        allow = [f"127.0.0.1:{servers[0]}"]
        first = await e.socket_for(allow)
        for p in e._proxies[normalise_allow(allow)].procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        second = await e.socket_for(allow)
        assert second != first and ask(second, get(servers[0])).startswith("HTTP/1.0 200")


def _bwrap_works() -> bool:
    if not (shutil.which("bwrap") and shutil.which("curl") and shutil.which("tinyproxy") and shutil.which("socat")):
        return False
    probe = subprocess.run(["bwrap", "--unshare-net", "--dev-bind", "/", "/", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _bwrap_works(), reason="needs bwrap (usable here), curl, tinyproxy and socat")
async def test_inside_a_bubblewrap_sandbox(servers: list[int]) -> None:
    ok, other = servers
    async with Egress() as e:
        sock = await e.socket_for([f"127.0.0.1:{ok}"])
        prefix, env = inside("/run/kiwi/egress.sock")
        bwrap = ["bwrap", "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/usr", "/usr"]
        bwrap += ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"]
        bwrap += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(sock), "/run/kiwi/egress.sock"]
        bwrap += ["--clearenv", "--setenv", "PATH", "/usr/bin"]
        for k, v in env.items():
            bwrap += ["--setenv", k, v]

        def curl(*args: str) -> subprocess.CompletedProcess[str]:
            argv = [*bwrap, "--", *prefix, "curl", "-s", "-w", "\n%{http_code}", *args]
            return subprocess.run(argv, capture_output=True, text=True, timeout=30)

        reached = curl(f"http://127.0.0.1:{ok}/")
        assert reached.returncode == 0 and reached.stdout == f"hello from {ok}\n200", reached
        tunnelled = curl("-p", f"http://127.0.0.1:{ok}/")
        assert tunnelled.stdout == f"hello from {ok}\n200", tunnelled
        assert curl(f"http://127.0.0.1:{other}/").stdout.endswith("\n403")
        assert curl("-p", f"http://127.0.0.1:{other}/").returncode == 56  # CONNECT answered 403
        direct = curl("--noproxy", "*", f"http://127.0.0.1:{ok}/")
        assert direct.returncode == 7, direct  # connection refused: the sandbox's own lo
        no_socat = [*bwrap, "--setenv", "PATH", "/nowhere", "--", *prefix, "/usr/bin/true"]
        failed = subprocess.run(no_socat, capture_output=True, text=True, timeout=30)
        assert failed.returncode == 127 and "egress bridge (socat) did not start" in failed.stderr, failed
