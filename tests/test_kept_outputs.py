"""A large output goes to the project's outputs folder; a text output is measured by its JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from runner import Settings
from runner.harness.kept_outputs import keep_large_output


@dataclasses.dataclass
class _Result:
    tool_id: str
    output: Any
    run_id: str | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)


def _settings(project: Path) -> Settings:
    (project / ".ai").mkdir(exist_ok=True)
    base = Settings(backend="postgres", database_url="", supabase_url=None, supabase_key=None, cache_dir=project)
    return dataclasses.replace(base, project_dir=project, large_output_bytes=100)


def test_a_text_is_kept_exactly_when_its_json_is_over_the_limit(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    # sixteen NULs are 98 bytes of JSON (each \u0000, and the quotes): at the limit, not over
    small = keep_large_output(_Result("t", "\x00" * 16), settings)
    assert small.output == "\x00" * 16 and not small.warnings
    large = keep_large_output(_Result("t", "\x00" * 17), settings)  # 104 bytes
    assert set(large.output) == {"output_file", "bytes", "preview"} and large.output["bytes"] == 104
    assert json.loads(Path(large.output["output_file"]).read_text()) == "\x00" * 17
    plain = keep_large_output(_Result("t", "a" * 99), settings)  # 101 bytes
    assert isinstance(plain.output, dict) and plain.output["bytes"] == 101
    assert keep_large_output(_Result("t", "a" * 98), settings).output == "a" * 98
