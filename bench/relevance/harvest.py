"""Harvest the `tools/list` of real MCP servers into the relevance set's catalog.

The search relevance bench (issue 16) needs a registry that looks like the real thing: real
tool names, descriptions and schemas, written by the servers' own authors, with their
overlaps (four browsers that all take screenshots, two forges that both open issues). This
script installs pinned MCP servers from npm and PyPI into a scratch directory outside the
repository, starts each over stdio with dummy credentials, asks it for its tools and writes
them, untouched, to one JSON catalog. It is run by hand, never by the tests:

  .venv/bin/python bench/relevance/harvest.py --out bench/relevance/catalog.json --workdir /tmp/harvest
  .venv/bin/python bench/relevance/harvest.py --check-queries   # every expected name exists

Progress goes to stderr, one line per server; a server that fails to install, to start or
to answer is skipped and named there (its own stderr is kept in WORKDIR/logs/NAME.log).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url

HERE = Path(__file__).resolve().parent

# Dummy credentials: enough for a server to start and list its tools, never to reach a service.
DUMMY = "dummy-harvest-token"


@dataclass(frozen=True)
class Server:
    """One MCP server to harvest: where it comes from and how it starts without real credentials."""

    name: str  # the short name tools are known by in the relevance set: <name>.<tool>
    registry: str  # "npm" or "pypi"
    package: str  # the package name, without a version
    version: str  # an exact version: the catalog must be reproducible
    bin: str | None = None  # the executable to run; default: the package's only one
    args: tuple[str, ...] = ()  # "{workdir}": the scratch directory, "{redis_url}": RedisStandIn
    env: dict[str, str] = field(default_factory=dict)
    extra: tuple[str, ...] = ()  # packages installed beside it: a dependency pin its own range misses

    @property
    def spec(self) -> str:
        sep = "@" if self.registry == "npm" else "=="
        return f"{self.package}{sep}{self.version}"


PG_URL = stack_database_url(login=STACK_SUPERUSER_LOGIN)
ATLASSIAN = {"ATLASSIAN_SITE_NAME": "example", "ATLASSIAN_USER_EMAIL": "a@example.com", "ATLASSIAN_API_TOKEN": DUMMY}
AWS = {"AWS_ACCESS_KEY_ID": DUMMY, "AWS_SECRET_ACCESS_KEY": DUMMY, "AWS_REGION": "us-east-1"}
BROWSERBASE = {"BROWSERBASE_API_KEY": DUMMY, "BROWSERBASE_PROJECT_ID": DUMMY, "GEMINI_API_KEY": DUMMY}
MCP = "@modelcontextprotocol/server-"

# fmt: off
SERVERS: tuple[Server, ...] = (
    # The reference servers of the Model Context Protocol project.
    Server("github", "npm", MCP + "github", "2025.4.8", env={"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    Server("gitlab", "npm", MCP + "gitlab", "2025.4.25", env={"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    Server("slack", "npm", MCP + "slack", "2025.4.25", env={"SLACK_BOT_TOKEN": DUMMY, "SLACK_TEAM_ID": "T0"}),
    Server("filesystem", "npm", MCP + "filesystem", "2026.8.31", args=("{workdir}/fsroot",)),
    Server("google_maps", "npm", MCP + "google-maps", "0.6.2", env={"GOOGLE_MAPS_API_KEY": DUMMY}),
    Server("brave_search", "npm", MCP + "brave-search", "0.6.2", env={"BRAVE_API_KEY": DUMMY}),
    Server("puppeteer", "npm", MCP + "puppeteer", "2025.5.12"),
    Server("everything", "npm", MCP + "everything", "2026.8.31", args=("stdio",)),
    Server("memory", "npm", MCP + "memory", "2026.8.31", env={"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"}),
    Server("sequential_thinking", "npm", MCP + "sequential-thinking", "2026.8.31"),
    Server("postgres", "npm", MCP + "postgres", "0.6.2", args=(PG_URL,)),
    Server("aws_kb_retrieval", "npm", MCP + "aws-kb-retrieval", "0.6.2", env=AWS),
    Server("everart", "npm", MCP + "everart", "0.6.2", env={"EVERART_API_KEY": DUMMY}),
    Server("gdrive", "npm", MCP + "gdrive", "2025.1.14",
           env={"GDRIVE_CREDENTIALS_PATH": "{workdir}/gdrive-credentials.json"}),
    Server("redis", "npm", MCP + "redis", "2025.4.25", args=("{redis_url}",)),
    Server("git", "pypi", "mcp-server-git", "2026.10.19", args=("--repository", "{workdir}/repo")),
    Server("time", "pypi", "mcp-server-time", "2026.10.19", args=("--local-timezone", "UTC")),
    Server("fetch", "pypi", "mcp-server-fetch", "2026.10.24"),
    # its code predates the mcp SDK's 2.x, which its open range would install
    Server("sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", args=("--db-path", "{workdir}/harvest.db"),
           extra=("mcp==1.9.4", "pydantic==2.11.7")),
    # Well-known servers of vendors and projects that list their tools without an account.
    Server("playwright", "npm", "@playwright/mcp", "0.0.83"),
    Server("chrome_devtools", "npm", "chrome-devtools-mcp", "1.11.0", bin="chrome-devtools-mcp"),
    Server("browserbase", "npm", "@browserbasehq/mcp-server-browserbase", "2.4.3", env=BROWSERBASE),
    Server("notion", "npm", "@notionhq/notion-mcp-server", "2.5.2", env={"NOTION_TOKEN": DUMMY}),
    Server("kubernetes", "npm", "mcp-server-kubernetes", "4.1.7"),
    Server("mongodb", "npm", "mongodb-mcp-server", "3.0.4", env={"MDB_MCP_TELEMETRY": "disabled"}),
    Server("firecrawl", "npm", "firecrawl-mcp", "3.26.0", env={"FIRECRAWL_API_KEY": "fc-" + DUMMY}),
    Server("tavily", "npm", "tavily-mcp", "0.2.22", env={"TAVILY_API_KEY": "tvly-" + DUMMY}),
    Server("exa", "npm", "exa-mcp-server", "3.4.1", env={"EXA_API_KEY": DUMMY}),
    Server("context7", "npm", "@upstash/context7-mcp", "4.1.1"),
    Server("sentry", "npm", "@sentry/mcp-server", "0.39.0", args=("--access-token", DUMMY)),
    Server("desktop_commander", "npm", "@wonderwhy-er/desktop-commander", "0.2.52", bin="desktop-commander"),
    Server("circleci", "npm", "@circleci/mcp-server-circleci", "0.20.0", env={"CIRCLECI_TOKEN": DUMMY}),
    Server("chart", "npm", "@antv/mcp-server-chart", "0.9.10"),
    Server("git_cyanheads", "npm", "@cyanheads/git-mcp-server", "2.15.3"),
    Server("figma", "npm", "figma-developer-mcp", "0.13.2", args=("--figma-api-key=" + DUMMY, "--stdio")),
    Server("perplexity", "npm", "@perplexity-ai/mcp-server", "1.2.1", env={"PERPLEXITY_API_KEY": DUMMY}),
    Server("youtube_transcript", "npm", "@kimtaeyoon83/mcp-server-youtube-transcript", "0.1.1"),
    Server("jira", "npm", "@aashari/mcp-server-atlassian-jira", "3.3.0", env=ATLASSIAN),
    Server("weather", "npm", "@h1deya/mcp-server-weather", "0.1.3"),
    Server("gmail", "npm", "@gongrzhe/server-gmail-autoauth-mcp", "1.1.11"),
    Server("google_calendar", "npm", "@cocal/google-calendar-mcp", "2.6.3",
           env={"GOOGLE_OAUTH_CREDENTIALS": "{workdir}/gcp-oauth.keys.json"}),
    Server("trello", "npm", "@delorenj/mcp-server-trello", "1.8.1", env={"TRELLO_API_KEY": DUMMY, "TRELLO_TOKEN": "t"}),
    Server("discord", "npm", "mcp-discord", "1.3.4", env={"DISCORD_TOKEN": DUMMY}),
)
# fmt: on

# Tried and left out, so that nobody tries them again for nothing:
LEFT_OUT = {
    "@heroku/mcp-server@1.2.8": "imports the MCP SDK by extensionless ESM paths: Node cannot start it",
    "@supabase/mcp-server-supabase@0.13.0": "tools/list calls api.supabase.com first (fetch failed)",
    "@stripe/mcp@0.3.3": "a proxy to mcp.stripe.com: lists nothing without that service",
    "mcp-server-docker==0.3.0": "needs Python 3.12 and a Docker daemon to start",
    "@0xshariq/docker-mcp-server@2.0.4": "its bin is a CLI wrapper that prints help, not a stdio server",
    "@atlassian-dc-mcp/confluence@0.34.0": "depends on @atlassian-dc-mcp/common@^0.34.0, which npm does not have",
}


# ---- installing ----------------------------------------------------------------------------


# Packages that fetch a browser build while installing: there is none to fetch, and listing
# tools never needs one.
NO_DOWNLOADS = {"PUPPETEER_SKIP_DOWNLOAD": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}


def _run(argv: list[str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        env = {**os.environ, **NO_DOWNLOADS}
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=True, timeout=900, env=env)


def _uv() -> str:
    """uv from the project's venv (pinned in pyproject.toml), else the one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else (shutil.which("uv") or "uv")


def _npm_bin(prefix: Path, server: Server) -> Path:
    manifest = json.loads((prefix / "node_modules" / server.package / "package.json").read_text())
    bins = manifest.get("bin")
    if isinstance(bins, str):
        name = manifest["name"].split("/")[-1]
    elif server.bin is not None:
        name = server.bin
    elif isinstance(bins, dict) and len(bins) == 1:
        name = next(iter(bins))
    else:
        raise RuntimeError(f"{server.package} has bins {sorted(bins or {})}: say which in Server.bin")
    return prefix / "node_modules" / ".bin" / name


def install(server: Server, workdir: Path, log: Path) -> str:
    """Install the pinned package once (kept in WORKDIR) and return the program that starts it."""
    prefix = workdir / server.registry / server.name
    stamp = prefix / ".installed"
    wanted = " ".join((server.spec, *server.extra))
    if server.registry == "npm":
        if not stamp.exists() or stamp.read_text() != wanted:
            prefix.mkdir(parents=True, exist_ok=True)
            _run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), server.spec, *server.extra], log
            )
            stamp.write_text(wanted)
        return str(_npm_bin(prefix, server))
    if not stamp.exists() or stamp.read_text() != wanted:
        _run([_uv(), "venv", "--quiet", "--clear", "--python", "python3", str(prefix)], log)
        python = str(prefix / "bin" / "python")
        _run([_uv(), "pip", "install", "--quiet", "--python", python, server.spec, *server.extra], log)
        stamp.write_text(wanted)
    return str(prefix / "bin" / (server.bin or server.package))


def _expand(text: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        text = text.replace("{" + key + "}", value)
    return text


# ---- listing -------------------------------------------------------------------------------


def _tool_entry(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the server described it: name, description and input schema, untouched."""
    return {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "inputSchema": tool.get("inputSchema", {}),
    }


PROTOCOL = "2025-06-18"


class _Peer:
    """A bare JSON-RPC peer over a server's stdio.

    Not the mcp SDK's ClientSession on purpose: the SDK validates and filters a listing (a
    schema without "type" fails it, 2026 clients drop some tools), and the catalog must hold
    the tools exactly as the server sent them.
    """

    def __init__(self, proc: asyncio.subprocess.Process, log: Any) -> None:
        self.proc, self.log, self.next_id = proc, log, 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise ConnectionError(f"the server exited (code {await self.proc.wait()}) before answering {method}")
            try:
                message = json.loads(line)
            except ValueError:
                self.log.write(f"[stdout, not JSON] {line.decode(errors='replace')}")
                continue
            if not isinstance(message, dict):
                continue
            if "method" in message and "id" in message:  # the server asks something: roots, ping
                answer: dict[str, list[str]] = {"roots": []} if message["method"] == "roots/list" else {}
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]


async def list_tools(argv: list[str], env: dict[str, str], cwd: Path, log: Path, timeout_s: float) -> list[dict]:
    """Start the server over stdio, initialize, page through tools/list, stop it."""
    with log.open("a", encoding="utf-8") as errlog:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errlog,
            env={**os.environ, **env},
            cwd=cwd,
            start_new_session=True,
            limit=64 * 1024 * 1024,
        )
        peer = _Peer(proc, errlog)
        try:
            async with asyncio.timeout(timeout_s):
                info = {"name": "kiwi-relevance-harvest", "version": "1.0.0"}
                await peer.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
                await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                tools: list[dict] = []
                cursor: str | None = None
                while True:
                    page = await peer.request("tools/list", {"cursor": cursor} if cursor else {})
                    tools.extend(_tool_entry(t) for t in page.get("tools", []))
                    cursor = page.get("nextCursor")
                    if not cursor:
                        return tools
        finally:
            await _stop(proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End the server and whatever it started: its own session, so one process group."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # also the group's other members, once the leader is gone
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)


def _server_env(server: Server, workdir: Path, places: dict[str, str]) -> dict[str, str]:
    env = {k: _expand(v, places) for k, v in server.env.items()}
    # no telemetry, no update checks, no browser downloads: a harvest talks to nobody
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HOME", str(workdir / "home"))
    env.setdefault("NO_UPDATE_NOTIFIER", "1")
    env.update(NO_DOWNLOADS)
    return env


def _prepare(workdir: Path) -> None:
    """What some servers want to exist: an allowed directory, a git repository, a home."""
    for sub in ("fsroot", "home", "logs"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    repo = workdir / "repo"
    if not (repo / ".git").exists():
        repo.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    # the Google servers refuse to start without an OAuth client or saved tokens; listing uses neither
    client = {"installed": {"client_id": DUMMY, "client_secret": DUMMY, "redirect_uris": ["http://localhost"]}}
    for path, content in (
        (workdir / "gdrive-credentials.json", {"access_token": DUMMY, "token_type": "Bearer"}),
        (workdir / "gcp-oauth.keys.json", client),
        (workdir / "home" / ".gmail-mcp" / "gcp-oauth.keys.json", client),
        (workdir / "home" / ".gmail-mcp" / "credentials.json", {"access_token": DUMMY, "token_type": "Bearer"}),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))


class RedisStandIn:
    """Answers +OK to every command on a loopback port: the Redis server connects at start."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                # one RESP array per command; its header is "*<n>" at the start of a line
                commands = sum(1 for line in data.split(b"\r\n") if line.startswith(b"*")) or 1
                conn.sendall(b"+OK\r\n" * commands)

    def close(self) -> None:
        self.sock.close()


def harvest(servers: list[Server], workdir: Path, timeout_s: float) -> tuple[list[dict], list[tuple[str, str]]]:
    _prepare(workdir)
    redis = RedisStandIn()
    places = {"workdir": str(workdir), "redis_url": redis.url}
    try:
        return _harvest_each(servers, workdir, places, timeout_s)
    finally:
        redis.close()


def _harvest_each(
    servers: list[Server], workdir: Path, places: dict[str, str], timeout_s: float
) -> tuple[list[dict], list[tuple[str, str]]]:
    harvested: list[dict] = []
    failed: list[tuple[str, str]] = []
    for i, server in enumerate(servers, 1):
        log = workdir / "logs" / f"{server.name}.log"
        log.write_text("")
        started = time.monotonic()
        try:
            argv = [install(server, workdir, log), *(_expand(a, places) for a in server.args)]
            tools = asyncio.run(list_tools(argv, _server_env(server, workdir, places), workdir, log, timeout_s))
            if not tools:
                raise RuntimeError("listed no tools")
        except BaseException as exc:  # one server's failure never stops the harvest
            if isinstance(exc, KeyboardInterrupt):
                raise
            reason = _reason(exc)
            failed.append((server.name, reason))
            print(f"[{i}/{len(servers)}] {server.name:<20} FAILED  {reason} (see {log})", file=sys.stderr)
            continue
        harvested.append({"server": server.name, "package": f"{server.registry}:{server.spec}", "tools": tools})
        took = time.monotonic() - started
        print(f"[{i}/{len(servers)}] {server.name:<20} {len(tools):>4} tools  {took:5.1f} s", file=sys.stderr)
    return harvested, failed


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, subprocess.CalledProcessError):
        return f"install failed (exit {exc.returncode})"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}"[:200]


def write_catalog(out: Path, servers: list[dict], keep: Path | None) -> None:
    """Write the catalog; servers harvested before and not in this run are kept (--only)."""
    merged: dict[str, dict] = {}
    if keep is not None and keep.exists():
        merged = {s["server"]: s for s in json.loads(keep.read_text())["servers"]}
    merged.update({s["server"]: s for s in servers})
    order = [s.name for s in SERVERS]
    ordered = sorted(merged.values(), key=lambda s: order.index(s["server"]) if s["server"] in order else len(order))
    catalog = {"harvested": datetime.now(UTC).date().isoformat(), "servers": ordered}
    out.write_text(json.dumps(catalog, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# ---- checking the queries ------------------------------------------------------------------

NAME = re.compile(r"^[a-z0-9_]+$")


def seed_ids(seed_dir: Path) -> set[str]:
    """The seeded Kiwi tools' registry ids, as their tool.yaml writes them."""
    ids = set()
    for manifest in sorted(seed_dir.glob("*/tool.yaml")):
        match = re.search(r"^tool_id:\s*(\S+)\s*$", manifest.read_text(), re.MULTILINE)
        if match:
            ids.add(match.group(1))
    return ids


def check_queries(catalog_path: Path, queries_path: Path, seed_dir: Path) -> int:
    """Every expected name exists; print the counts. Returns the number of problems."""
    import yaml

    catalog = json.loads(catalog_path.read_text())
    known: set[str] = set()
    problems: list[str] = []
    servers = [s["server"] for s in catalog["servers"]]
    for dup, n in Counter(servers).items():
        if n > 1:
            problems.append(f"server name {dup} is used {n} times")
    for server in catalog["servers"]:
        if not NAME.match(server["server"]):
            problems.append(f"server name {server['server']!r} is not [a-z0-9_]+")
        names = Counter(t["name"] for t in server["tools"])
        problems += [f"{server['server']} lists tool {n} {k} times" for n, k in names.items() if k > 1]
        known.update(f"{server['server']}.{name}" for name in names)
    known.update(f"seed:{i}" for i in seed_ids(seed_dir))
    queries = yaml.safe_load(queries_path.read_text())
    texts = Counter(q["query"].strip().lower() for q in queries)
    problems += [f"query {t!r} appears {n} times" for t, n in texts.items() if n > 1]
    used: Counter[str] = Counter()
    for q in queries:
        if not q.get("expected"):
            problems.append(f"query {q['query']!r} expects nothing")
        for name in q.get("expected") or []:
            used[name.split(".")[0] if not name.startswith("seed:") else "seed"] += 1
            if name not in known:
                problems.append(f"query {q['query']!r}: {name} is not in the catalog")
    n_tools = sum(len(s["tools"]) for s in catalog["servers"])
    print(f"catalog: {len(servers)} servers, {n_tools} tools; seed: {len(seed_ids(seed_dir))} tools")
    print(
        f"queries: {len(queries)}, expected names: {sum(len(q.get('expected') or []) for q in queries)}, "
        f"with a seed tool: {sum(any(e.startswith('seed:') for e in q.get('expected') or []) for q in queries)}"
    )
    print("expected names per server: " + ", ".join(f"{k} {v}" for k, v in sorted(used.items())))
    for p in problems:
        print(f"PROBLEM: {p}")
    print("ok" if not problems else f"{len(problems)} problems")
    return len(problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "catalog.json", help="the catalog to write")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/harvest"), help="scratch dir, outside the repo")
    parser.add_argument("--only", default="", help="comma-separated server names; the others are kept from --out")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds for a server to start and list")
    parser.add_argument("--check-queries", action="store_true", help="check queries.yaml against the catalog")
    parser.add_argument("--queries", type=Path, default=HERE / "queries.yaml")
    parser.add_argument("--seed", type=Path, default=HERE.parents[1] / "supabase" / "seed")
    args = parser.parse_args(argv)
    if args.check_queries:
        return 1 if check_queries(args.out, args.queries, args.seed) else 0
    names = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = names - {s.name for s in SERVERS}
    if unknown:
        parser.error(f"no such server: {', '.join(sorted(unknown))}")
    chosen = [s for s in SERVERS if not names or s.name in names]
    args.workdir.mkdir(parents=True, exist_ok=True)
    servers, failed = harvest(chosen, args.workdir.resolve(), args.timeout)
    write_catalog(args.out, servers, keep=args.out if names else None)
    total = sum(len(s["tools"]) for s in servers)
    print(
        f"harvested {len(servers)} servers, {total} tools; failed: "
        f"{', '.join(f'{n} ({r})' for n, r in failed) or 'none'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
