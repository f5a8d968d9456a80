"""Two sandboxes in one process (two runners, as the sandbox bench has) share the process's
cgroup parent, kiwi-<pid>: each run's cgroup must have a name of its own. Both once named
their first run-1, and the second run fell back to rlimits only (no memory or pids limit
for the whole sandbox)."""

from __future__ import annotations

import os

import pytest

from runner import Sandbox
from runner.sandbox import Limits, Profile


async def test_each_runs_cgroup_has_a_name_of_its_own() -> None:
    one, two = Sandbox(), Sandbox()
    if not one.cgroups.available:
        pytest.skip(f"no cgroups here: {one.cgroups.reason}")
    try:
        profile = Profile(limits=Limits(memory_mb=128, pids=32))
        a = await one.confine(profile, [], "/tmp", os.environ)
        b = await two.confine(profile, [], "/tmp", os.environ)
        assert a is not None and b is not None
        assert a.cgroup is not None and b.cgroup is not None, "both runs are limited by a cgroup"
        assert set(a.cgroup.dirs).isdisjoint(b.cgroup.dirs)
        a.release()
        b.release()
    finally:
        await one.aclose()
        await two.aclose()
