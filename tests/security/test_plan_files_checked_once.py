"""A plan's files are checked against their sha256 once per plan object (materialize.py keeps the
verdict by identity), never a refusal: a bad plan is refused every time it is asked for, and
the files on disk are still checked on every run however often the plan was seen."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from pathlib import Path

import pytest

from runner import IntegrityError, Plan, PlanFile
from runner.core.materialize import materialise


def _plan(text: str, recorded: str | None = None) -> Plan:
    sha = recorded or hashlib.sha256(text.encode()).hexdigest()
    return Plan(
        tool_id="t",
        version="1.0.0",
        tool_type="script",
        content_hash=uuid.uuid4().hex * 2,
        primitive=None,
        executor_id=None,
        chain=[],
        config={},
        parameters=None,
        files=[PlanFile("run.sh", sha, len(text), True, text)],
    )


def test_a_plan_whose_file_does_not_match_is_refused_every_time(tmp_path: Path) -> None:
    bad = _plan("echo hi\n", recorded=hashlib.sha256(b"something else").hexdigest())
    for _ in range(3):
        with pytest.raises(IntegrityError, match="does not match its sha256"):
            materialise(bad, tmp_path)
    assert not (tmp_path / "tools" / bad.content_hash).exists()


def test_the_disk_is_checked_on_every_run_of_a_plan_already_seen(tmp_path: Path) -> None:
    plan = _plan("echo hi\n")
    target = materialise(plan, tmp_path)
    assert materialise(plan, tmp_path) == target
    script = target / "run.sh"
    old = time.time() - 60
    os.utime(script, (old, old))  # an old stamp: one the check would remember as clean
    assert materialise(plan, tmp_path) == target
    script.write_text("echo HI\n")  # same size
    os.utime(script, (old, old))  # and the mtime it had
    with pytest.raises(IntegrityError, match="changed on disk"):
        materialise(plan, tmp_path)
