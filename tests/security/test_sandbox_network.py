"""A sandboxed tool reaches exactly the network its profile allows.

A tool allowed `127.0.0.1:<port>` reaches that port through the runner's egress proxy, and
nothing else: not another port of the same host, not the host's loopback directly (its own
network namespace holds only `lo`). A tool without network reaches nothing. Two real local
HTTP servers stand for an allowed service and a forbidden one (the database, say).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator

import pytest

from runner import Runner

# bash speaks HTTP through the proxy itself: no client the sandbox might lack
THROUGH_PROXY = (
    'for port in "$@"; do\n'
    "  if exec 3<>/dev/tcp/127.0.0.1/3128; then\n"
    '    printf "GET http://127.0.0.1:%s/ HTTP/1.0\\r\\n\\r\\n" "$port" >&3\n'
    "    read -r status <&3; echo \"proxy $port: ${status%$'\\r'}\"; exec 3>&-\n"
    '  else echo "proxy $port: no proxy"; fi\n'
    '  if (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "direct $port: open"; '
    'else echo "direct $port: closed"; fi\n'
    "done\n"
)


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    made = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok) for _ in range(2)]
    for s in made:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield made[0].server_address[1], made[1].server_address[1]
    for s in made:
        s.shutdown()
        s.server_close()


def probe(publish_tool: Callable[..., str], network: list[str] | None) -> str:
    config: dict[str, object] = {"command": "bash", "args": ["{entrypoint}", "{param_values...}"], "timeout": 30}
    if network is not None:
        config["sandbox"] = {"network": network}
    manifest = {
        "tool_type": "script",
        "executor": "bash_runtime",
        "config": config,
        "parameters": [{"name": "allowed", "type": "string"}, {"name": "other", "type": "string"}],
    }
    return publish_tool("netprobe", manifest, {"probe.sh": THROUGH_PROXY}, entrypoint="probe.sh")


async def test_an_allowed_port_is_reached_through_the_proxy_and_nothing_else(
    runner: Runner, publish_tool: Callable[..., str], servers: tuple[int, int]
) -> None:
    allowed, other = servers
    tool = probe(publish_tool, [f"127.0.0.1:{allowed}"])
    result = await runner.run(tool, {"allowed": str(allowed), "other": str(other)})
    assert result.status == "success", result.error
    lines = set(str(result.output).splitlines())
    assert f"proxy {allowed}: HTTP/1.0 200 OK" in lines, lines
    assert any(line.startswith(f"proxy {other}: HTTP/1.") and " 403 " in line for line in lines), lines
    assert {f"direct {allowed}: closed", f"direct {other}: closed"} <= lines
    assert result.detail["sandbox"]["network"] == [f"127.0.0.1:{allowed}"]


async def test_a_tool_without_network_reaches_nothing(
    runner: Runner, publish_tool: Callable[..., str], servers: tuple[int, int]
) -> None:
    allowed, other = servers
    tool = probe(publish_tool, None)
    result = await runner.run(tool, {"allowed": str(allowed), "other": str(other)})
    assert result.status == "success", result.error
    lines = set(str(result.output).splitlines())
    assert {f"proxy {allowed}: no proxy", f"direct {allowed}: closed", f"direct {other}: closed"} <= lines, lines
    assert result.detail["sandbox"]["network"] == "none"
