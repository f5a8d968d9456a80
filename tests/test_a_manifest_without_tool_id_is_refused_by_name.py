"""`kiwi publish` of a tool.yaml naming no tool_id answers with the registry's refusal, naming the
field, and never a traceback. (The CLI's audit row once read manifest["tool_id"] before the
registry could refuse it: the fuzz test found `{}`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.db


def test_a_manifest_without_tool_id_is_refused_by_name(database_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "nameless"
    directory.mkdir()
    (directory / "tool.yaml").write_text("{}\n")
    done = run_kiwi(["publish", str(directory)], cwd=ROOT, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code in (2, 4), (done.code, done.err)
    assert "Traceback" not in done.err, done.err
    assert "tool_id" in done.err, done.err
