"""Two versions of a tool compared: the manifest and each file, as unified diffs (difflib)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["DiffPart", "version_diff"]

MAX_LINES = 5000


@dataclass(frozen=True)
class DiffPart:
    """One file's (or the manifest's) difference: its unified diff's lines, each with its kind
    (add, remove, hunk, context) for the page's colours."""

    name: str
    status: str  # changed, added, removed, same
    lines: list[tuple[str, str]]


def _manifest_text(source: dict[str, Any]) -> str:
    text = source.get("manifest_yaml")
    if isinstance(text, str) and text:
        return text
    return yaml.safe_dump(source.get("manifest") or {}, sort_keys=True, allow_unicode=True)


def _files(source: dict[str, Any]) -> dict[str, str]:
    files: dict[str, str] = {}
    for f in source.get("files") or []:
        text = f.get("content_text")
        files[str(f.get("path"))] = text if isinstance(text, str) else f"(binary, sha256 {f.get('sha256', '?')})\n"
    return files


def _kind(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+") and not line.startswith("+++"):
        return "add"
    if line.startswith("-") and not line.startswith("---"):
        return "remove"
    return "context"


def _part(name: str, before: str | None, after: str | None, old: str, new: str) -> DiffPart:
    a = (before or "").splitlines(keepends=False)
    b = (after or "").splitlines(keepends=False)
    status = "added" if before is None else "removed" if after is None else "same" if a == b else "changed"
    lines = list(difflib.unified_diff(a, b, f"{name} ({old})", f"{name} ({new})", lineterm=""))[:MAX_LINES]
    return DiffPart(name, status, [(_kind(line), line) for line in lines])


def version_diff(before: dict[str, Any], after: dict[str, Any]) -> list[DiffPart]:
    """The manifest's diff, then each file's (by path), between two version sources
    (public.tool_version_source answers)."""
    old, new = str(before.get("version")), str(after.get("version"))
    parts = [_part("tool.yaml", _manifest_text(before), _manifest_text(after), old, new)]
    files_a, files_b = _files(before), _files(after)
    for path in sorted(files_a.keys() | files_b.keys()):
        parts.append(_part(path, files_a.get(path), files_b.get(path), old, new))
    return parts
