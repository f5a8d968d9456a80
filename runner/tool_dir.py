"""Load a tool directory: a `tool.yaml` manifest beside its files.

The same shape feeds `publish_tool_version(manifest, files, manifest_yaml)` whether it
comes from the seed, `kiwi publish DIR` or a local space, so it lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MANIFEST_NAME = "tool.yaml"


class ToolDirError(ValueError):
    """A tool directory that cannot be published as it is."""


@dataclass(frozen=True)
class ToolDir:
    manifest: dict[str, Any]
    files: list[dict[str, Any]]
    manifest_yaml: str

    @property
    def tool_id(self) -> str:
        return str(self.manifest["tool_id"])

    @property
    def executor(self) -> str | None:
        executor = self.manifest.get("executor")
        return str(executor) if executor else None


def load_tool_dir(path: Path) -> ToolDir:
    """Read `path/tool.yaml` and every other regular file under `path` (sorted, text only)."""
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ToolDirError(f"{path}: no {MANIFEST_NAME} found")
    manifest_yaml = manifest_path.read_text(encoding="utf-8")
    try:
        manifest = yaml.safe_load(manifest_yaml)
    except yaml.YAMLError as exc:
        raise ToolDirError(f"{manifest_path}: not valid YAML: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ToolDirError(f"{manifest_path}: must hold a mapping of manifest fields")
    entrypoint = manifest.get("entrypoint")
    files = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path).as_posix()
        if relative == MANIFEST_NAME or file.is_symlink():
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ToolDirError(f"{file}: only UTF-8 text files can be published") from exc
        files.append({"path": relative, "content_text": text, "is_entrypoint": relative == entrypoint})
    return ToolDir(manifest=manifest, files=files, manifest_yaml=manifest_yaml)
