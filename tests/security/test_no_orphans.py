"""No process outlives its run.

Found: grandchildren that call `setsid` left the process group and outlived both a timeout
and a normal exit (4 of 4, from the CLI and from MCP), while the message said "process group
killed". Each tool here leaves such processes behind, tagged with a marker unique to the
test (in their argv, and in their environment as KIWI_PARAM_MARKER), so the test finds them
in /proc and never touches anything else; whatever a test leaves is killed in `finally`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from runner import PostgresRegistry, Runner, local_owner
from runner.primitives import reaper
from tests.conftest import local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi

# `setsid sh -c 'sleep 300' &`, as found: a new session, still holding the run's stdout.
SETSID = 'setsid sh -c \'sleep 300; echo "$0"\' "$KIWI_PARAM_MARKER" &\n'
# A daemon's double fork: a subshell starts a new session whose leader starts the sleeper and
# exits, then the subshell exits; the sleeper holds none of the run's pipes.
DAEMON = (
    '( setsid sh -c \'sh -c "sleep 300; echo \\$0" "$0" </dev/null >/dev/null 2>&1 &\' '
    '"$KIWI_PARAM_MARKER" </dev/null >/dev/null 2>&1 & )\n'
)
EXITS = "sleep 0.5\necho started\n"  # time for the leftovers to escape first
AT_ONCE = "echo started\n"  # no time: the run ends while its leftovers escape, before any look at its tree
TIMES_OUT = "echo started\nsleep 30\n"


def tagged(marker: str) -> dict[int, str]:
    """pid -> command name of every live process whose argv or environment holds the marker."""
    found: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if state not in (b"Z", b"X") and (marker.encode() in argv or marker.encode() in environ):
            found[int(name)] = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode()
    return found


def kill_tagged(marker: str) -> None:
    for pid in tagged(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def none_left(marker: str, within: float = 2.0) -> dict[int, str]:
    """What still runs with the marker once `within` seconds have passed (empty: all gone)."""
    deadline = time.monotonic() + within
    while (left := tagged(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


@pytest.fixture
def marker() -> Iterator[str]:
    value = f"kiwi-orphan-{uuid.uuid4().hex}"
    try:
        yield value
    finally:
        kill_tagged(value)


@pytest.fixture
def orphan_tool(publish_tool: Callable[..., str]) -> Callable[[str, str, float], str]:
    """A bash tool that runs `leave` (leaving processes behind) and then `then`."""

    def make(leave: str, then: str, timeout_s: float = 60) -> str:
        manifest = {
            "tool_type": "script",
            "executor": "bash_runtime",
            "config": {"timeout_s": timeout_s},
            "parameters": [{"name": "marker", "type": "string", "required": True}],
        }
        return publish_tool("orphans", manifest, {"run.sh": leave + then}, entrypoint="run.sh")

    return make


def sandbox_runner(database_url: str, cache: Path, *, sandbox: bool) -> Runner:
    settings = local_settings(database_url, cache, sandbox=sandbox)
    return Runner(PostgresRegistry(database_url, principal=local_owner()), settings)


@pytest.fixture
async def runner(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runner]:
    """A runner with the sandbox off (KIWI_SANDBOX=off): the reaper is then the only guard,
    and these tests hold it to its word."""
    r = sandbox_runner(database_url, tmp_path_factory.getbasetemp() / "no-orphans-cache", sandbox=False)
    yield r
    await r.aclose()


@pytest.fixture
async def sandboxed(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runner]:
    r = sandbox_runner(database_url, tmp_path_factory.getbasetemp() / "no-orphans-sandboxed", sandbox=True)
    yield r
    await r.aclose()


CASES = [
    pytest.param(SETSID, EXITS, "success", id="setsid-then-exit"),
    pytest.param(DAEMON, EXITS, "success", id="daemon-then-exit"),
    pytest.param(SETSID, TIMES_OUT, "timeout", id="setsid-then-timeout"),
    pytest.param(DAEMON, TIMES_OUT, "timeout", id="daemon-then-timeout"),
]


@pytest.mark.parametrize(("leave", "then", "status"), CASES)
async def test_nothing_a_run_started_outlives_it(
    runner: Runner, orphan_tool: Callable[..., str], marker: str, leave: str, then: str, status: str
) -> None:
    tool = orphan_tool(leave, then, timeout_s=2)
    result = await runner.run(tool, {"marker": marker})
    assert result.status == status, result.error
    assert await none_left(marker) == {}
    assert result.error is not None and "killed " in result.error
    assert "process group killed" not in result.error
    if status == "timeout":
        assert result.error.startswith("timed out after 2 s; killed ")
    else:
        assert "the tool left running: " in result.error
    named = {(k["pid"], k["name"]) for k in result.detail["killed"]}
    assert any(name in ("sh", "sleep") for _, name in named), named
    for pid, name in named:
        assert f"{pid} {name}" in result.error or " more" in result.error


@pytest.mark.parametrize(("leave", "then", "status"), CASES)
def test_nothing_a_cli_run_started_outlives_it(
    database_url: str,
    orphan_tool: Callable[..., str],
    marker: str,
    tmp_path: Path,
    leave: str,
    then: str,
    status: str,
) -> None:
    tool = orphan_tool(leave, then, timeout_s=2)
    env = {**kiwi_env(database_url, tmp_path / "cache"), "KIWI_SANDBOX": "off"}
    done = run_kiwi(["run", tool, "--params", json.dumps({"marker": marker}), "--json"], cwd=tmp_path, env=env)
    result = done.json()
    assert result["status"] == status, done.err
    assert asyncio.run(none_left(marker)) == {}
    assert "killed " in result["error"] and "process group killed" not in result["error"]


async def test_a_run_that_ends_at_once_leaves_nothing(
    runner: Runner, orphan_tool: Callable[..., str], marker: str
) -> None:
    # The run ends before the runner first looks at its tree (a run's root is not read while it
    # execs, reaper.Watch): what it left in its process group and session is still found and
    # killed, by the group's start time. (A daemon that both leaves the session and loses its
    # whole ancestry before any look, DAEMON with AT_ONCE, can still escape: a known limit.)
    tool = orphan_tool(SETSID, AT_ONCE)
    for _ in range(3):
        result = await runner.run(tool, {"marker": marker})
        assert result.status == "success", result.error
        assert await none_left(marker, within=0.5) == {}
        assert result.error is not None and "the tool left running: " in result.error


def adopted_zombies() -> set[int]:
    """This process's children that have exited and wait to be reaped."""
    me = os.getpid()
    found = set()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except (OSError, ValueError):
            continue
        state, ppid = stat[stat.rfind(b")") + 2 :].split()[:2]
        if state == b"Z" and int(ppid) == me:
            found.add(int(name))
    return found


@pytest.mark.parametrize("sandbox", [False, True], ids=["sandbox-off", "sandboxed"])
async def test_a_daemonising_run_leaves_no_zombie_behind(
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    orphan_tool: Callable[..., str],
    marker: str,
    sandbox: bool,
) -> None:
    """Regression: a daemon's double fork leaves the `setsid` child that started it, exited
    before any look at the run's tree, adopted by the runner and never reaped: every such run
    left a zombie for the life of the server, and a tenant repeating it could fill the process
    table. Sandboxed, in a runner that had become a subreaper (any run without the sandbox makes
    it one), bubblewrap's inner processes, adopted as they outlive its outer one, did the same.
    The runner reaps exited orphans of other sessions at the end of every run: what one run
    leaves, the end of the next reaps at the latest."""
    assert reaper.become_subreaper()
    before = adopted_zombies()
    leaves = orphan_tool(DAEMON + SETSID, EXITS)
    plain = orphan_tool("", AT_ONCE)
    runner = sandbox_runner(database_url, tmp_path_factory.getbasetemp() / f"zombies-{sandbox}", sandbox=sandbox)
    try:
        for _ in range(3):
            result = await runner.run(leaves, {"marker": marker})
            assert result.status == "success", result.error
            assert await none_left(marker) == {}
        await asyncio.sleep(0.3)  # what the last run left has ended by now
        left = adopted_zombies() - before
        assert len(left) <= 3, "no more than the last run's own"
        assert (await runner.run(plain, {"marker": marker})).status == "success"
        assert left & adopted_zombies() == set(), "the next run reaped them"
    finally:
        await runner.aclose()


async def test_concurrent_runs_each_kill_only_their_own(
    runner: Runner, orphan_tool: Callable[..., str], marker: str
) -> None:
    # A daemon whose whole ancestry exited before it was seen cannot be told apart between
    # runs that were both running when it started: it is killed when the last of them ends,
    # never while one that may own it still runs. Everything else goes with its own run.
    other = f"kiwi-orphan-{uuid.uuid4().hex}"  # not a prefix or suffix of marker
    slow = orphan_tool(SETSID + DAEMON, "sleep 3\necho done\n")
    quick = orphan_tool(SETSID + DAEMON, EXITS)
    try:
        slow_run = asyncio.create_task(runner.run(slow, {"marker": other}))
        deadline = time.monotonic() + 20
        while len(tagged(other)) < 5:  # bash, and the sh and sleep of each leftover
            assert time.monotonic() < deadline and not slow_run.done()
            await asyncio.sleep(0.05)
        before = tagged(other)
        result = await runner.run(quick, {"marker": marker})
        assert result.status == "success", result.error
        assert tagged(other).keys() >= before.keys(), "the quick run killed processes of the slow one"
        killed = {k["pid"] for k in result.detail["killed"]}
        assert killed and killed.isdisjoint(before)
        assert {"sh", "sleep"} <= {k["name"] for k in result.detail["killed"]}, "its setsid child was not killed"
        assert killed.isdisjoint(tagged(marker))
        slow_result = await slow_run
        assert slow_result.status == "success", slow_result.error
        assert await none_left(other) == {}
        assert await none_left(marker) == {}
        assert "the tool left running" in (slow_result.error or "")
    finally:
        kill_tagged(other)


@pytest.mark.parametrize(
    ("leave", "then", "status"),
    [*CASES, pytest.param(DAEMON, AT_ONCE, "success", id="daemon-at-once")],
)
async def test_in_the_sandbox_nothing_outlives_its_run(
    sandboxed: Runner, orphan_tool: Callable[..., str], marker: str, leave: str, then: str, status: str
) -> None:
    # The sandbox's PID namespace dies with its run: even the daemon that leaves its session
    # and loses its whole ancestry before any look (the reaper's known limit above) goes too,
    # and the runner has nothing left to kill.
    tool = orphan_tool(leave, then, timeout_s=2)
    result = await sandboxed.run(tool, {"marker": marker})
    assert result.status == status, result.error
    assert await none_left(marker) == {}
    assert "killed" not in result.detail


def test_in_the_sandbox_nothing_a_cli_run_started_outlives_it(
    database_url: str, orphan_tool: Callable[..., str], marker: str, tmp_path: Path
) -> None:
    tool = orphan_tool(DAEMON + SETSID, EXITS)
    env = kiwi_env(database_url, tmp_path / "cache")
    done = run_kiwi(["run", tool, "--params", json.dumps({"marker": marker}), "--json"], cwd=tmp_path, env=env)
    assert done.json()["status"] == "success", done.err
    assert asyncio.run(none_left(marker)) == {}
