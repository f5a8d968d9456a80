"""A run's cgroup is handed to a later run only as a new one would be: empty, no limit ever
hit in it, with the later run's own limits; any other is removed."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest

from runner import Sandbox
from runner.primitives.subprocess import ProcessSpec, spawn
from runner.sandbox import Limits, Profile
from runner.sandbox.cgroups import RunCgroup

pytestmark = pytest.mark.slow  # each waits for a run's last process to be released


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    sb = Sandbox()
    if not sb.cgroups.available:
        pytest.skip(f"no cgroups here: {sb.cgroups.reason}")
    yield sb
    await sb.aclose()


def _limits(group: RunCgroup) -> tuple[str, str]:
    memory = "memory.limit_in_bytes" if group.version == 1 else "memory.max"
    return (group.dirs[0] / memory).read_text().strip(), (group.dirs[-1] / "pids.max").read_text().strip()


async def _released(group: RunCgroup) -> None:
    deadline = time.monotonic() + 60  # seconds on a loaded machine
    while group.reusable() is None and time.monotonic() < deadline:  # its last process on its way out
        await asyncio.sleep(0.05)


async def _warm(sandbox: Sandbox) -> RunCgroup | None:
    """One run before the test's own: the files a run reads are charged to the first cgroup that
    reads them into the page cache (on a fresh machine, megabytes), never to a later one."""
    warm = await sandbox.confine(Profile(limits=Limits(memory_mb=256, pids=64)), [], "/tmp", os.environ)
    assert warm is not None
    done = await spawn(ProcessSpec(argv=["sh", "-c", "echo hi"], env={"PATH": "/usr/bin:/bin"}, confine=warm))
    assert done.exit_code == 0
    return warm.cgroup


async def test_a_clean_runs_cgroup_is_reused_with_the_next_runs_limits(sandbox: Sandbox) -> None:
    warmed = await _warm(sandbox)
    first = await sandbox.confine(Profile(limits=Limits(memory_mb=256, pids=64)), [], "/tmp", os.environ)
    assert first is not None and first.cgroup is not None
    done = await spawn(ProcessSpec(argv=["true"], env={"PATH": "/usr/bin:/bin"}, confine=first))
    assert done.exit_code == 0
    group = first.cgroup
    await _released(group)
    assert group.reusable() is True
    second = await sandbox.confine(Profile(limits=Limits(memory_mb=128, pids=48)), [], "/tmp", os.environ)
    # a released cgroup, not a new one: this run's, or the warm-up's if it was clean too (the
    # pool hands out the longest released first)
    assert second is not None and second.cgroup is not None and second.cgroup in (group, warmed)
    assert _limits(second.cgroup) == (str(128 * 1024 * 1024), "48")
    again = await spawn(ProcessSpec(argv=["sh", "-c", "echo hi"], env={"PATH": "/usr/bin:/bin"}, confine=second))
    assert (again.exit_code, again.stdout) == (0, "hi\n")


async def test_a_cgroup_whose_limit_was_hit_is_removed_not_reused(sandbox: Sandbox) -> None:
    bomb = await sandbox.confine(Profile(limits=Limits(pids=16)), [], "/tmp", os.environ)
    assert bomb is not None and bomb.cgroup is not None
    script = "for i in $(seq 64); do sleep 30 & done; wait"
    spec = ProcessSpec(argv=["sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, timeout_s=20, confine=bomb)
    done = await spawn(spec)
    assert done.limit == "pids", done
    group = bomb.cgroup
    await _released(group)
    assert group.reusable() is False
    after = await sandbox.confine(Profile(limits=Limits(pids=16)), [], "/tmp", os.environ)
    assert after is not None and after.cgroup is not None and after.cgroup is not group
    assert not any(d.exists() for d in group.dirs)
    after.release()
