"""Network egress for sandboxed tools: an allow-list proxy reached over a unix socket.

A sandboxed tool has its own network namespace with only `lo`, so it can reach nothing. When
its profile allows `host:port` destinations, the runner starts (once per distinct allow-list,
then reuses) a Debian `tinyproxy` on 127.0.0.1 that lets through exactly those pairs, plain
HTTP and CONNECT alike, and a `socat` that bridges a unix socket to it. The caller bind-mounts
that socket into the sandbox, where `inside()` starts a second socat listening on the
sandbox's own 127.0.0.1 and points the usual proxy variables at it. The host's network
namespace is never shared.

How tinyproxy is held to host AND port: `FilterURLs On` makes its filter see the request
target as sent, which is `http://host[:port]/path` for plain HTTP and `host:port` for
CONNECT; `FilterType ere` and `FilterDefaultDeny Yes` make the filter file a list of POSIX
regular expressions of which one must match. Each entry gets two, anchored at both ends of
the authority: `^http://HOST:PORT(/|$)` and `^HOST:PORT$` (the port optional only where
tinyproxy's default for that form is the same port: 80 for HTTP, 443 for CONNECT). So
`127.0.0.1:8080` lets through neither `127.0.0.1:80801` nor `127.0.0.1.evil.com:8080` nor
`http://127.0.0.1:8080@evil.com/` (tinyproxy would strip that user part and go to evil.com).
A request in origin form (`GET /` with a Host header) is turned by tinyproxy's transparent
mode into `http://HOST:PORT/path` from that header before the filter runs; a Host that makes
the URL match without being the host (`allowed.com/x`) is not a name glibc resolves.
Refusals are 403 "Filtered" to the tool and a line in the proxy's log (see `refused`).

No process outlives its owner: each starts in its own process group (a socat's forked
children with it), is killed with that group at close and at interpreter exit, and gets
SIGKILL from the kernel if the thread that started it dies first (PR_SET_PDEATHSIG): start
them from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import functools
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core import awaited
from ..errors import ConfigError, PrimitiveError

__all__ = ["Egress", "inside", "normalise_allow", "proxy_env"]

START_TIMEOUT_S = 10.0
_POLL_S = 0.002
_PORT_TRIES = 3  # a free port is free when picked, not necessarily when tinyproxy binds it
_PR_SET_PDEATHSIG = 1
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_REFUSED = re.compile(r'Proxying refused on filtered url "([^"]*)"')
_INSTALL_HINT = "install them (apt-get install tinyproxy socat)"


def normalise_allow(allow: Sequence[str]) -> tuple[str, ...]:
    """The allow-list as the proxy is keyed by: each entry checked and in canonical form
    (lower case, IP addresses compressed, port without leading zeros), deduplicated, sorted."""
    if isinstance(allow, str):
        raise ConfigError(f"the egress allow-list must be a list of host:port, not the string {allow!r}")
    return tuple(sorted({_normalise_entry(entry) for entry in allow}))


def _normalise_entry(entry: object) -> str:
    """One `host:port` entry in canonical form, or a ConfigError naming it."""
    hint = "write host:port, with host a DNS name, an IPv4 address or an [IPv6] address and port 1-65535"
    if not isinstance(entry, str):
        raise ConfigError(f"egress allow-list entry {entry!r} is not a string", hint=hint)
    host, sep, port = entry.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"egress allow-list entry {entry!r} has no port 1-65535", hint=hint)
    host = host.lower()
    try:
        if host.startswith("[") and host.endswith("]") and "%" not in host:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]:{int(port)}"
        return f"{ipaddress.IPv4Address(host)}:{int(port)}"
    except ValueError:
        pass
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise ConfigError(f"egress allow-list entry {entry!r} has no valid host", hint=hint)
    return f"{host}:{int(port)}"


def _filter_lines(allow: Sequence[str]) -> list[str]:
    """tinyproxy filter regexes (POSIX ERE, case-insensitive) letting through exactly `allow`,
    which is normalised: hosts hold only letters, digits, `-`, `.`, `:` and brackets."""
    lines = []
    for entry in allow:
        host, _, port = entry.rpartition(":")
        h = host.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")
        lines.append(f"^http://{h}{'(:80)?' if port == '80' else ':' + port}(/|$)")
        lines.append(f"^{h}{'(:443)?' if port == '443' else ':' + port}$")
    return lines


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(table: str, needle: str, pid: int) -> bool:
    """Whether process `pid` listens on `needle`, a local address:port in hex in /proc/net/tcp or
    a path in /proc/net/unix: readiness without a probe connection (which would reach the
    proxy and its log), and not fooled by another process that took the port."""
    inodes = set()
    with contextlib.suppress(OSError), open(f"/proc/net/{table}") as f:
        for line in f:
            cols = line.split()
            if table == "tcp" and len(cols) > 9 and cols[1] == needle and cols[3] == "0A":
                inodes.add(cols[9])
            elif table == "unix" and len(cols) > 7 and cols[7] == needle and cols[3] == "00010000":
                inodes.add(cols[6])
    if inodes:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return True
    return False


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_owner(owner: int) -> None:
    """In the child before exec: SIGKILL when the thread that spawned us dies (or already has)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != owner:
        os._exit(1)


def _tail(path: Path, lines: int = 15) -> str:
    """The end of a log, for an error message."""
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


@dataclass
class _Proxy:
    """One allow-list's tinyproxy and its socat bridge."""

    allow: tuple[str, ...]
    socket: Path
    log: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def alive(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        """SIGKILL each process group (socat's forked children are in it), then reap."""
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=2)
            if p.returncode is not None:
                awaited.forget(p.pid)
        self.procs.clear()


class Egress:
    """The runner process's egress proxies, one per distinct allow-list, started on first use."""

    def __init__(self, *, start_timeout: float = START_TIMEOUT_S) -> None:
        self.start_timeout = start_timeout
        self._dir: Path | None = None
        self._proxies: dict[tuple[str, ...], _Proxy] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}
        self._count = 0

    async def __aenter__(self) -> Egress:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def directory(self) -> Path | None:
        """The private runtime directory (config, logs, sockets), once a proxy was started."""
        return self._dir

    async def socket_for(self, allow: Sequence[str]) -> Path:
        """The host-side unix socket of the proxy for `allow`, starting it if need be."""
        key = normalise_allow(allow)
        if not key:
            raise ConfigError(
                "an empty egress allow-list needs no proxy",
                hint="run the tool without the egress socket: it reaches nothing",
            )
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            proxy = self._proxies.get(key)
            if proxy is not None and proxy.alive():
                return proxy.socket
            if proxy is not None:  # died (killed from outside?): start afresh
                proxy.kill()
            self._proxies[key] = proxy = await self._start(key)
            return proxy.socket

    def refused(self, allow: Sequence[str]) -> list[str]:
        """What the proxy for `allow` refused so far (URLs, or host:port for CONNECT), oldest first."""
        proxy = self._proxies.get(normalise_allow(allow))
        if proxy is None:
            return []
        with contextlib.suppress(OSError):
            return _REFUSED.findall(proxy.log.read_text(errors="replace"))
        return []

    def _runtime_dir(self) -> Path:
        """The private directory, made on first use; close() registered for interpreter exit."""
        if self._dir is None:
            name = f"kiwi-egress-{os.getuid()}-"
            self._dir = Path(tempfile.mkdtemp(prefix=name, dir=tempfile.gettempdir()))  # 0700
            atexit.register(self.close)
        return self._dir

    async def _start(self, allow: tuple[str, ...]) -> _Proxy:
        """Write the config, start tinyproxy then socat, and wait until both listen."""
        tinyproxy, socat = shutil.which("tinyproxy"), shutil.which("socat")
        if tinyproxy is None or socat is None:
            raise PrimitiveError("the egress proxy needs tinyproxy and socat", hint=_INSTALL_HINT)
        d = self._runtime_dir()
        self._count += 1
        n = self._count
        proxy = _Proxy(allow, d / f"egress-{n}.sock", d / f"tinyproxy-{n}.log")
        (d / f"filter-{n}").write_text("".join(line + "\n" for line in _filter_lines(allow)))
        try:
            port = await self._start_tinyproxy(proxy, tinyproxy, n)
            bridge = f"UNIX-LISTEN:{proxy.socket},fork,mode=0666,backlog=128"
            proxy.procs.append(self._spawn([socat, "-lp", "kiwi-egress", bridge, f"TCP:127.0.0.1:{port}"], proxy))
            if not await self._ready(proxy, "unix", str(proxy.socket)):
                raise PrimitiveError(
                    f"the egress bridge (socat) for {', '.join(allow)} did not start",
                    hint=f"its log ({proxy.log}) ends with:\n{_tail(proxy.log)}",
                )
        except BaseException:
            proxy.kill()
            raise
        return proxy

    async def _start_tinyproxy(self, proxy: _Proxy, tinyproxy: str, n: int) -> int:
        """Start tinyproxy on a free port (another if a race took it); the port."""
        d = self._runtime_dir()
        conf = d / f"tinyproxy-{n}.conf"
        for _ in range(_PORT_TRIES):
            port = _free_port()
            conf.write_text(
                f"Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 600\nMaxClients 256\n"
                f'LogFile "{proxy.log}"\nLogLevel Notice\nDisableViaHeader Yes\nXTinyproxy No\n'
                f'StatHost "stats.kiwi-egress.invalid"\nFilter "{d / f"filter-{n}"}"\n'
                "FilterURLs On\nFilterType ere\nFilterDefaultDeny Yes\nFilterCaseSensitive No\n"
            )
            proc = self._spawn([tinyproxy, "-d", "-c", str(conf)], proxy)
            proxy.procs.append(proc)
            if await self._ready(proxy, "tcp", f"0100007F:{port:04X}"):
                return port
            proxy.kill()
            if proc.returncode == -signal.SIGKILL:  # killed by us: it hung rather than lost a race
                break
        raise PrimitiveError(
            f"the egress proxy (tinyproxy) for {', '.join(proxy.allow)} did not start",
            hint=f"its log ({proxy.log}) ends with:\n{_tail(proxy.log)}",
        )

    def _spawn(self, argv: list[str], proxy: _Proxy) -> subprocess.Popen[bytes]:
        """A child in its own process group, dying with us, its output in the proxy's log. Noted
        as awaited (its Popen reaps it): the reaper, which reaps exited children of other
        sessions at the end of every run, would otherwise take its exit status, and its pid
        could be reused while `kill` still signals its group."""
        with open(proxy.log, "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=functools.partial(_die_with_owner, os.getpid()),
            )
        awaited.started(proc.pid)
        return proc

    async def _ready(self, proxy: _Proxy, table: str, needle: str) -> bool:
        """Wait, bounded, until the newest process listens; False if it exited or timed out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        while loop.time() < deadline:
            if _listening(table, needle, proxy.procs[-1].pid):
                return True
            if any(p.poll() is not None for p in proxy.procs):
                return False
            await asyncio.sleep(_POLL_S)
        return False

    async def aclose(self) -> None:
        """Kill every proxy and bridge and remove the runtime directory."""
        self.close()

    def close(self) -> None:
        """Kill every proxy and bridge and remove the runtime directory (idempotent, sync for atexit)."""
        for proxy in self._proxies.values():
            proxy.kill()
        self._proxies.clear()
        self._locks.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            atexit.unregister(self.close)


_INSIDE = r"""s=$1 p=$2 x=$3 i=0; shift 3
w=; command -v setpriv >/dev/null 2>&1 && w="setpriv --pdeathsig KILL"
l=TCP-LISTEN:$p,bind=127.0.0.1,fork,reuseaddr,backlog=128
$w socat -lp kiwi-egress "$l" UNIX-CONNECT:"$s" </dev/null >/dev/null &
up() { while read -r _ a _ st _; do [ "$a" = "$x" ] && [ "$st" = 0A ] && return 0; done </proc/net/tcp; return 1; }
until up 2>/dev/null; do
  if ! kill -0 $! 2>/dev/null || [ $i -ge 5000 ]; then
    echo "kiwi: the egress bridge (socat) did not start in the sandbox (needs socat and /proc)" >&2; exit 127
  fi
  i=$((i+1)); [ $i -gt 20 ] && sleep 0.001
done
exec "$@"
"""


def proxy_env(port: int = 3128) -> dict[str, str]:
    """The variables that point HTTP clients at the sandbox's bridge; NO_PROXY empty, since
    the sandbox's own 127.0.0.1 has nothing and the host's must go through the proxy too."""
    url = f"http://127.0.0.1:{port}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    env |= {k.lower(): v for k, v in env.items()}
    return env | {"NO_PROXY": "", "no_proxy": ""}


def inside(socket_in_sandbox: str, port: int = 3128) -> tuple[list[str], dict[str, str]]:
    """What a sandbox needs to use the proxy whose socket is bind-mounted at `socket_in_sandbox`:
    an argv prefix (put the tool's command after it) that starts socat on the sandbox's
    127.0.0.1:`port`, waits until it listens (exit 127 with a message if it cannot), then
    execs the command; and the environment variables for the tool. socat dies with the tool
    (setpriv --pdeathsig where there is setpriv; else with the sandbox's pid namespace)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"the egress port inside the sandbox must be 1-65535, not {port}")
    needle = f"0100007F:{port:04X}"  # 127.0.0.1:port as /proc/net/tcp writes it
    return ["/bin/sh", "-c", _INSIDE, "kiwi-egress", socket_in_sandbox, str(port), needle], proxy_env(port)
