"""Load a tool directory: a `tool.yaml` manifest beside its files.

The same shape feeds `publish_tool_version(manifest, files, manifest_yaml)` whether it
comes from the seed, `kiwi publish DIR` or a local space, so it lives in one place.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .text import is_utf8
from .yaml_safe import YamlTooLarge, load_yaml

MANIFEST_NAME = "tool.yaml"


class ToolDirError(ValueError):
    """A tool directory that cannot be published as it is."""


@dataclass(frozen=True)
class ToolDir:
    manifest: dict[str, Any]
    files: list[dict[str, Any]]
    manifest_yaml: str
    derived: bool = False  # the manifest was read from a bare script (core/script_tools.py), not a tool.yaml
    detected: tuple[str, ...] = ()  # requires found in its imports, not written in its config
    shared: tuple[str, ...] = ()  # files it carries from the spaces' shared lib/

    @property
    def as_written(self) -> str | None:
        """tool.yaml as written, when it is the whole manifest (kept by the registry, pulled back)."""
        return None if self.derived or self.detected else self.manifest_yaml

    @property
    def tool_id(self) -> str:
        """The manifest's tool_id as written ("" when it has none: publish then refuses it by name)."""
        named = self.manifest.get("tool_id") if isinstance(self.manifest, dict) else None
        return str(named) if named is not None else ""

    @property
    def executor(self) -> str | None:
        executor = self.manifest.get("executor")
        return str(executor) if executor else None


def load_tool_dir(path: Path) -> ToolDir:
    """Read `path/tool.yaml` and every other regular file under `path` (sorted, text only)."""
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ToolDirError(f"{path}: no {MANIFEST_NAME} found")
    manifest_yaml = _read_text(manifest_path)
    try:
        manifest = load_yaml(manifest_yaml)
    except YamlTooLarge as exc:
        raise ToolDirError(f"{manifest_path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ToolDirError(f"{manifest_path}: not valid YAML: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ToolDirError(f"{manifest_path}: must hold a mapping of manifest fields")
    problems = sorted(set(_not_json(manifest)))
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ToolDirError(f"{manifest_path}: not representable as a JSON manifest:\n{lines}")
    entrypoint = manifest.get("entrypoint")
    files = []
    try:
        found = sorted(p for p in path.rglob("*") if p.is_file())
    except OSError as exc:  # an unreadable subdirectory, a name the filesystem refuses
        raise ToolDirError(f"{path}: cannot be listed: {exc.strerror or exc}") from exc
    for file in found:
        relative = file.relative_to(path).as_posix()
        if relative == MANIFEST_NAME or file.is_symlink():
            continue
        if not is_utf8(relative):
            raise ToolDirError(f"{file}: file names must be UTF-8")
        text = _read_text(file)
        if "\0" in text:
            raise ToolDirError(f"{file}: holds NUL characters; only text files can be published")
        files.append({"path": relative, "content_text": text, "is_entrypoint": relative == entrypoint})
    return ToolDir(manifest=manifest, files=files, manifest_yaml=manifest_yaml)


def read_text(file: Path) -> str:
    """A file's text, as written, or a ToolDirError saying why it cannot be published."""
    return _read_text(file)


def _read_text(file: Path) -> str:
    try:
        return file.read_bytes().decode("utf-8")  # as written: no newline translation (\r\n stays)
    except UnicodeDecodeError as exc:
        raise ToolDirError(f"{file}: only UTF-8 text files can be published") from exc
    except OSError as exc:
        raise ToolDirError(f"{file}: cannot be read: {exc.strerror or exc}") from exc


MAX_MANIFEST_NODES = 100_000  # YAML aliases can make a small file an enormous (or endless) document


def _not_json(manifest: dict[str, Any]) -> Iterator[str]:
    """Where a YAML manifest holds what a JSON manifest cannot: NUL or a lone surrogate in text
    (PostgreSQL's jsonb refuses both), NaN or an infinity, a field name that is not text, a
    YAML-only type such as a date (quote it), or an alias that contains itself."""
    stack: list[tuple[str, Any, frozenset[int]]] = [("", manifest, frozenset())]
    visited = 0
    while stack:
        path, value, ancestors = stack.pop()
        visited += 1
        if visited > MAX_MANIFEST_NODES:
            yield f"(manifest): more than {MAX_MANIFEST_NODES} values (YAML aliases expanding?)"
            return
        where = path or "(manifest)"
        if isinstance(value, str):
            if "\0" in value:
                yield f"{where}: holds a NUL character"
            elif not is_utf8(value):
                yield f"{where}: holds a lone surrogate"
        elif isinstance(value, float):
            if not math.isfinite(value):
                yield f"{where}: must be a finite number"
        elif isinstance(value, dict | list):
            if id(value) in ancestors:
                yield f"{where}: contains itself (a recursive YAML alias)"
                continue
            inner = ancestors | {id(value)}
            if isinstance(value, list):
                stack.extend((f"{path}[{i}]", child, inner) for i, child in enumerate(value))
                continue
            for key, child in value.items():
                if not isinstance(key, str):
                    yield f"{where}: the key {key!r} is not text (quote it)"
                elif "\0" in key or not is_utf8(key):
                    yield f"{where}: a key holds a NUL character or a lone surrogate"
                else:
                    stack.append((f"{path}.{key}" if path else key, child, inner))
        elif value is not None and not isinstance(value, bool | int):
            yield f"{where}: a YAML {type(value).__name__} is not a JSON value (quote it)"
