"""`make demo`: the registry and the runner at work, end to end.

1. The registry, from SQL as anon (as PostgREST asks it): a chain, a merged execution plan,
   a batch with a bad id, search.
2. The seeded Python, Bash, Node and API tools run through their chains with the `kiwi`
   CLI (the API tool against a local echo server this script starts), then a knowledge
   entry, a bad parameter, and the run records they left.
3. The sandbox: the profile a tool's processes get (`kiwi show`), and a local tool that
   tries to read the host's secrets, reach the database and leave a daemon behind, and
   cannot.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from runner.config import stack_database_url

ROOT = Path(__file__).resolve().parent.parent
# the runner's login, as kiwi's default (runner/config.py): not a superuser
URL = os.environ.get("KIWI_DATABASE_URL") or stack_database_url()
DB_PORT = urlsplit(URL).port or 5432  # the one the sandboxed tool tries to reach
KIWI = [sys.executable, "-m", "runner.cli"]


def heading(text: str) -> None:
    print(f"\n== {text}", flush=True)


class EchoHandler(BaseHTTPRequestHandler):
    """Answers like httpbin's /anything: what it received, as JSON."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        answer = json.dumps(
            {
                "method": self.command,
                "url": self.path,
                "json": parsed,
                "headers": {k: v for k, v in self.headers.items() if k.lower() != "authorization"},
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: object) -> None:
        pass


def registry_tour() -> None:
    with psycopg.connect(URL, autocommit=True) as conn:
        # the login holds nothing itself: it reads the public registry as anon, as kiwi does for anyone
        conn.execute(
            "select set_config('role', 'anon', false), set_config('request.jwt.claims', %s, false)",
            ('{"role": "anon"}',),
        )
        heading("select * from resolve_executor_chain('format_bytes')")
        for depth, tool_id, tool_type, executor, version, content_hash in conn.execute(
            "select depth, tool_id, tool_type, executor_id, version, content_hash"
            " from resolve_executor_chain('format_bytes')"
        ):
            print(f"  {depth}  {tool_id:<16} {tool_type:<10} -> {executor or '-':<16} {version}  {content_hash[:12]}")

        heading("select resolve_execution_plan('format_bytes')  (config merged in SQL)")
        (plan,) = conn.execute("select resolve_execution_plan('format_bytes')").fetchall()[0]
        print("  chain:     ", " -> ".join(link["tool_id"] for link in plan["chain"]))
        print("  primitive: ", plan["primitive"])
        print("  config:")
        for key, value in plan["config"].items():
            text = json.dumps(value)
            print(f"    {key:<17} {text if len(text) <= 90 else text[:87] + '...'}")
        print("  parameters:", json.dumps(plan["parameters"]))
        print(
            "  files:     ",
            ", ".join(f"{f['path']} ({f['size_bytes']} B, sha256 {f['sha256'][:12]})" for f in plan["files"]),
        )

        heading("select * from resolve_executor_chains_batch(array['hello_world', 'no_such_tool', 'http_echo'])")
        for requested, depth, tool_id, error in conn.execute(
            "select requested_tool_id, depth, tool_id, error from "
            "resolve_executor_chains_batch(array['hello_world', 'no_such_tool', 'http_echo'])"
        ):
            print(f"  {requested:<14} {depth if depth is not None else '-'}  {tool_id or ''}{error or ''}")

        for query in ("helo wrld", "type:python"):
            heading(f"select * from search_tools('{query}')")
            rows = conn.execute(
                "select tool_id, tool_type, rank, description from search_tools(%s, p_limit => 5)", (query,)
            ).fetchall()
            for tool_id, tool_type, rank, description in rows:
                print(f"  {rank:6.2f}  {tool_id:<20} {tool_type:<10} {description[:60]}")


def kiwi(*args: str, env: dict[str, str], expect: int = 0) -> None:
    print(f"\n$ kiwi {shlex.join(args)}", flush=True)
    done = subprocess.run([*KIWI, *args], cwd=ROOT, env=env, text=True, capture_output=True, check=False)
    for line in done.stdout.rstrip().splitlines():
        print(f"  {line}")
    for line in done.stderr.rstrip().splitlines():
        print(f"  | {line}")
    print(f"  (exit {done.returncode})", flush=True)
    if done.returncode != expect:
        raise SystemExit(f"demo: `kiwi {shlex.join(args)}` exited {done.returncode}, expected {expect}")


def runner_tour() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "KIWI_DATABASE_URL": URL, "HTTP_ECHO_URL": f"http://127.0.0.1:{server.server_port}/anything"}
    try:
        heading("running the seeded tools through their chains")
        kiwi("run", "hello_world", "-p", "name=Ada", env=env)
        kiwi("run", "format_bytes", "-p", "bytes=123456789", "-p", "binary=true", env=env)
        kiwi("run", "word_count", "-p", "text=to be or not to be\nthat is the question", env=env)
        kiwi("run", "http_echo", "-p", "message=hello from kiwi", "--json", env=env)
        kiwi("run", "kiwi_tool_authoring", env=env)
        heading("bad input gets a clear error (and a run record)")
        kiwi("run", "format_bytes", "-p", "bytes=lots", env=env, expect=2)
        heading("what ran")
        kiwi("runs", "--limit", "6", env=env)
    finally:
        server.shutdown()


ESCAPE_YAML = """\
tool_id: escape_attempt
tool_type: script
executor: bash_runtime
version: 0.1.0
description: Tries to leave its sandbox.
entrypoint: escape.sh
"""
ESCAPE_SH = """\
echo "I am uid $(id -u) on $(hostname)"
[ -e /etc/shadow ] && echo "read /etc/shadow" || echo "no /etc/shadow"
ls "$HOME_OF_RUNNER" >/dev/null 2>&1 && echo "read the runner's home" || echo "no runner home"
(echo > /dev/tcp/127.0.0.1/$DB_PORT) 2>/dev/null && echo "reached the database" || echo "database: connection refused"
setsid bash -c 'exec -a "$0" sleep 600' $DAEMON_NAME </dev/null >/dev/null 2>&1 &
echo "left a daemon behind (it dies with the sandbox)"
"""


def sandbox_tour() -> None:
    env = {**os.environ, "KIWI_DATABASE_URL": URL}
    heading("every process a tool starts runs in a sandbox: its profile")
    kiwi("show", "format_bytes", env=env)
    heading("a tool that tries to get out (a local space's tool.yaml, run as the local owner)")
    with tempfile.TemporaryDirectory(prefix="kiwi-demo-") as project:
        tool = Path(project) / ".ai" / "tools" / "escape_attempt"
        tool.mkdir(parents=True)
        (tool / "tool.yaml").write_text(ESCAPE_YAML)
        # the daemon's name (its argv[0]) is this demo's own: only its leftovers are counted,
        # never another program's `sleep 600` on the same machine
        daemon = f"kiwi-demo-daemon-{uuid.uuid4().hex}"
        script = ESCAPE_SH.replace("$HOME_OF_RUNNER", str(Path.home())).replace("$DB_PORT", str(DB_PORT))
        (tool / "escape.sh").write_text(script.replace("$DAEMON_NAME", daemon))
        kiwi("run", "escape_attempt", env={**env, "KIWI_PROJECT_DIR": project})
    left = subprocess.run(["pgrep", "-f", daemon], capture_output=True, text=True, check=False).stdout.split()
    print(f"  daemons left on the host: {len(left)}")


def main() -> None:
    registry_tour()
    runner_tour()
    sandbox_tour()


if __name__ == "__main__":
    main()
