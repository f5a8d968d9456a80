"""Large outputs kept in the project instead of the answer.

A run whose output is larger than `Settings.large_output_bytes` (serialised as JSON), made
in a project (a directory holding `.ai/`) with its local spaces read, has the output written
to `<project>/.ai/outputs/tools/<tool>/output_<UTC time>_<ns>_<run>.json`; the result then points
at that file ({output_file, bytes, preview}) instead of carrying the output, so an agent's
context or a terminal gets a path and a glimpse, not megabytes. The last
`Settings.keep_outputs` files of each tool are kept; older ones are removed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ..config import Settings


class KeptResult(Protocol):
    """What keeping an output needs of a run's result (run.py's RunResult, whose run calls it)."""

    tool_id: str
    output: Any
    run_id: str | None
    warnings: list[str]


Result = TypeVar("Result", bound=KeptResult)

__all__ = ["PREVIEW_CHARS", "keep_large_output", "outputs_dir"]

PREVIEW_CHARS = 2000


def outputs_dir(settings: Settings, tool_id: str) -> Path:
    """`<project>/.ai/outputs/tools/<tool>/`: a namespace's tool under `<namespace>__<tool>`."""
    return settings.project_dir / ".ai" / "outputs" / "tools" / tool_id.replace("/", "__")


def keep_large_output(result: Result, settings: Settings) -> Result:
    """Write a large output to the project's outputs folder and point the result at it (see
    above); any other result, or one outside a project, as it is."""
    if result.output is None or settings.large_output_bytes <= 0:
        return result
    if isinstance(result.output, str) and 6 * len(result.output) + 2 <= settings.large_output_bytes:
        return result  # a text whose JSON, every character escaped to six bytes at most, is small
    if not os.path.isdir(_ai_folder(settings.project_dir)):
        return result
    text = json.dumps(result.output, ensure_ascii=False, indent=2, default=str)
    size = len(text.encode())
    if size <= settings.large_output_bytes:
        return result
    folder = outputs_dir(settings, result.tool_id)
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time_ns()
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now // 1_000_000_000))
    name = f"output_{stamp}_{now % 1_000_000_000:09d}_{(result.run_id or uuid.uuid4().hex)[:8]}.json"
    staged = folder / f".{name}.tmp"
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, folder / name)  # whole or not at all
    _prune(folder, settings.keep_outputs)
    result.output = _pointer(folder / name, size, text)
    result.warnings.append(f"the output ({size} bytes) was written to {folder / name}")
    return result


@functools.lru_cache(maxsize=16)
def _ai_folder(project: Path) -> str:
    """`<project>/.ai`, joined once: a server asks on every run, and a Path join costs more than the stat."""
    return os.path.join(project, ".ai")


def _pointer(path: Path, size: int, text: str) -> dict[str, Any]:
    return {"output_file": str(path), "bytes": size, "preview": text[:PREVIEW_CHARS]}


def _prune(folder: Path, keep: int) -> None:
    """Keep the newest `keep` outputs (their names sort by time)."""
    kept = sorted(p for p in folder.glob("output_*.json") if p.is_file())
    for old in kept[: max(0, len(kept) - max(1, keep))]:
        with contextlib.suppress(OSError):  # removed by another run meanwhile
            old.unlink()
