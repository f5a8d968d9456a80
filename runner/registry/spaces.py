"""Local spaces: tools kept as code, a `tool.yaml` beside its files, outside the registry.

Two spaces, searched in this order before the registry:

    project   <project>/.ai/tools    (Settings.project_space; KIWI_PROJECT_DIR)
    user      ~/.ai/tools            (Settings.user_space; KIWI_USER_SPACE)

A tool is any directory under a space that holds a `tool.yaml` (searched to MAX_DEPTH
levels, hidden directories skipped; a tool's subdirectories are its files, never other
tools). Its identity is its manifest's, not its directory's name: `tool_id`, in the
namespace of `namespace:` or of a `namespace/tool_id` form, else `public`. Two tools of
one identity in one space are an error naming both paths; the project space shadows the
user space, and both shadow the registry.

Looking a tool up must cost next to nothing when no space holds it: a missing space is
one stat, and a `tool.yaml` is parsed (PyYAML imported) only when its text mentions the
name asked for. Parsed identities are remembered per process while the file is unchanged.

`pull` goes the other way: it writes a published version into a space, its `tool.yaml`
being the version's stored `manifest_yaml` byte for byte, so publish then pull returns
what was written.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.materialize import is_safe_relative
from ..core.refs import ToolRef, normalize_ref, tool_name
from ..core.script_tools import SCRIPT_SUFFIXES, bare_identity
from ..errors import Refused, UsageError

if TYPE_CHECKING:
    from ..config import Settings
    from ..core.tool_dir import ToolDir
    from .base import Registry

logger = logging.getLogger("kiwi.spaces")

MANIFEST_NAME = "tool.yaml"  # as tool_dir.MANIFEST_NAME, which imports PyYAML
PROJECT, USER = "project", "user"
MAX_DEPTH = 4  # <space>/<namespace>/<tool>/ needs two levels; the rest is room for grouping folders
SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
LIB_DIR = "lib"  # <space>/lib/: Python modules the space's tools share (`from lib import x`)


@dataclass(frozen=True)
class LocalTool:
    """A tool found in a space: its identity, its directory and which space holds it."""

    ref: str
    path: Path  # its folder, or a bare script (a .py or .sh file with no tool.yaml)
    space: str  # PROJECT | USER
    libs: tuple[Path, ...] = ()  # the spaces' shared lib/ folders, project first

    def load(self) -> ToolDir:
        """The manifest and files, read as `kiwi publish` reads them, with what a space adds: a
        bare script's manifest, requires detected from imports, the shared lib/ (script_tools.py)."""
        from ..core.script_tools import load_bare, with_detected_requires, with_shared_lib
        from ..core.tool_dir import ToolDirError, load_tool_dir

        try:
            tool = load_bare(self.path) if self.path.is_file() else load_tool_dir(self.path)
            return with_detected_requires(with_shared_lib(tool, list(self.libs)))
        except ToolDirError as e:
            where = self.path if self.path.is_file() else self.path / MANIFEST_NAME
            raise UsageError(f"{self.space} space: {e}", hint=f"fix {where}") from e


@dataclass(frozen=True)
class Pulled:
    """What `pull` did: where the version now lives, and whether anything changed."""

    ref: str
    version: str
    path: Path
    space: str
    changed: bool
    files: int

    def as_json(self) -> dict[str, Any]:
        return {
            "tool_id": self.ref,
            "version": self.version,
            "path": str(self.path),
            "space": self.space,
            "changed": self.changed,
            "files": self.files,
        }


def spaces(settings: Settings) -> tuple[tuple[str, Path], ...]:
    """The spaces in resolution order; the user space is skipped when it is the project's."""
    return _spaces(settings.project_space, settings.user_space)


@functools.lru_cache(maxsize=64)
def _spaces(project: Path, user: Path) -> tuple[tuple[str, Path], ...]:
    """Remembered: resolving paths costs a system call per component, and a long-lived
    server asks on every run."""
    try:
        same = user.resolve() == project.resolve()
    except OSError:
        same = False
    return ((PROJECT, project),) if same else ((PROJECT, project), (USER, user))


def space_root(settings: Settings, space: str) -> Path:
    return settings.project_space if space == PROJECT else settings.user_space


def find(ref: str, settings: Settings | tuple[tuple[str, Path], ...]) -> LocalTool | None:
    """The local tool `ref` names: the project space's, else the user space's, else None.
    A caller that looks often passes the spaces (`spaces(settings)`) it computed once."""
    listed = spaces(settings) if not isinstance(settings, tuple) else settings
    libs = _libs(listed)
    for space, root in listed:
        tool = find_in(root, space, ref, libs)
        if tool is not None:
            return tool
    return None


@functools.lru_cache(maxsize=64)
def _libs(listed: tuple[tuple[str, Path], ...]) -> tuple[Path, ...]:
    """The spaces' shared lib/ folders, made once per list of spaces (a server looks on every run)."""
    return tuple(root / LIB_DIR for _, root in listed)


def find_in(root: Path, space: str, ref: str, libs: tuple[Path, ...] = ()) -> LocalTool | None:
    """The tool of identity `ref` in one space (a tool.yaml's, or a bare script's); two of them
    is an error naming both."""
    if not os.path.isdir(root):
        return None
    ref = normalize_ref(ref)
    name = tool_name(ref)
    if not name:
        return None
    matches: list[Path] = []
    for folder in tool_dirs(root):
        if _identity(folder / MANIFEST_NAME, name) == ref:
            matches.append(folder)
    for script in bare_scripts(root, name):
        if bare_identity(script) == ref:
            matches.append(script)
    if len(matches) > 1:
        listed = "\n".join(f"  - {m if m.is_file() else m / MANIFEST_NAME}" for m in matches)
        raise UsageError(
            f'the {space} space holds {len(matches)} tools with tool_id "{ref}":\n{listed}',
            hint="a tool's identity is its manifest's tool_id (and namespace), not its folder: rename or remove one",
        )
    return LocalTool(ref=ref, path=matches[0], space=space, libs=libs) if matches else None


def bare_scripts(root: Path, name: str | None = None) -> Iterator[Path]:
    """The bare scripts under `root` (named `name`.py or .sh, when given): .py and .sh files
    outside every tool's folder, outside the shared lib/ and hidden folders, none starting
    with `_`, to MAX_DEPTH levels."""

    def skipped(entry: os.DirEntry[str], depth: int) -> bool:
        return entry.name.startswith("_") or (depth == 0 and entry.name == LIB_DIR)

    for _, entries, is_tool in _walk(root, skipped):
        if is_tool:
            continue  # a tool's folder: its scripts are its files
        for entry in entries:
            if (
                not entry.name.startswith((".", "_"))
                and entry.name.endswith(SCRIPT_SUFFIXES)
                and (name is None or entry.name.rsplit(".", 1)[0] == name)
                and _is_file(entry)
            ):
                yield Path(entry.path)


def tool_dirs(root: Path) -> Iterator[Path]:
    """Every directory under `root` holding a tool.yaml, in a stable order. A tool's own
    subdirectories are its files, so the walk does not descend into a tool."""
    for folder, _, is_tool in _walk(root, lambda entry, depth: False):
        if is_tool:
            yield folder


def _walk(
    root: Path, skipped: Callable[[os.DirEntry[str], int], bool]
) -> Iterator[tuple[Path, list[os.DirEntry[str]], bool]]:
    """Each folder under `root` to MAX_DEPTH levels, in a stable order, with its entries and
    whether it holds a tool.yaml; a tool's folder is not entered (its subfolders are its files),
    nor hidden folders, SKIP_DIRS, or a subfolder `skipped(entry, depth)` leaves out."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        is_tool = any(e.name == MANIFEST_NAME and _is_file(e) for e in entries)
        yield folder, entries, is_tool
        if is_tool or depth >= MAX_DEPTH:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name in SKIP_DIRS or skipped(entry, depth):
                continue
            if _is_dir(entry):
                stack.append((Path(entry.path), depth + 1))


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


# path -> (mtime_ns, size, identity or None, problem or None): parsed once per process per change
_parsed: dict[Path, tuple[int, int, str | None, str | None]] = {}


def _identity(manifest_path: Path, name: str) -> str | None:
    """The identity a tool.yaml declares, or None when it cannot be `name`'s (its text does
    not mention the name) or cannot be read. A broken tool.yaml whose folder is named like the
    tool asked for is an error (it is most likely the one meant); any other is skipped, with a
    warning."""
    try:
        stat = manifest_path.stat()
        raw = manifest_path.read_bytes()
    except OSError as e:
        logger.warning("skipping %s: %s", manifest_path, e.strerror or e)
        return None
    if name.encode("utf-8", "surrogatepass") not in raw:
        return None
    cached = _parsed.get(manifest_path)
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        identity, problem = cached[2], cached[3]
    else:
        identity, problem = _parse_identity(raw)
        if len(_parsed) >= 4096:
            _parsed.clear()
        _parsed[manifest_path] = (stat.st_mtime_ns, stat.st_size, identity, problem)
    if problem is not None:
        if manifest_path.parent.name == name:
            raise UsageError(f"{manifest_path}: {problem}", hint="fix it, or run the registry's with --registry")
        logger.warning("skipping %s: %s", manifest_path, problem)
    return identity


def _parse_identity(raw: bytes) -> tuple[str | None, str | None]:
    import yaml

    from ..core.yaml_safe import YamlTooLarge, load_yaml

    try:
        manifest = load_yaml(raw)
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except YamlTooLarge as e:
        return None, str(e)
    except yaml.YAMLError as e:
        return None, f"not valid YAML: {e}"
    named = ToolRef.of_manifest(manifest)
    identity = named.ref if named else None
    return (identity, None) if identity else (None, "has no tool_id (a string)")


# -- pull ---------------------------------------------------------------------------------


async def pull(
    registry: Registry, ref: str, version: str | None, settings: Settings, space: str = PROJECT, *, force: bool = False
) -> Pulled:
    """Write a published version into a space: `<space>/<tool_id>/` (`<space>/<ns>/<tool_id>/`
    outside public), or over the space's existing copy of that tool wherever it lives."""
    source = await registry.version_source(ref, version)
    return write(source, space_root(settings, space), space, force=force)


def write(source: dict[str, Any], root: Path, space: str, *, force: bool = False) -> Pulled:
    """Write `source` (public.tool_version_source's answer) under `root`: all or nothing."""
    ref, version = str(source["tool_id"]), str(source["version"])
    wanted = {MANIFEST_NAME: _manifest_text(source).encode("utf-8")}
    for file in source.get("files") or []:
        path = _safe_relative(str(file["path"]), ref)
        if path == MANIFEST_NAME:
            raise Refused(f"{ref}@{version} has a file named {MANIFEST_NAME}, which its manifest would overwrite")
        if file.get("content_text") is None:
            raise Refused(
                f'{ref}@{version}: file "{path}" is kept in storage, not as text; pull writes text files only'
            )
        wanted[path] = str(file["content_text"]).encode("utf-8")

    existing = find_in(root, space, ref)
    if existing is not None and existing.path.is_file():
        raise Refused(
            f"{existing.path} is {ref} already, as a bare script: a pull writes a folder with a tool.yaml",
            hint="publish the script (kiwi publish), or move it aside and pull again",
        )
    namespace = str(source.get("namespace") or "public")
    name = tool_name(ref)
    target = existing.path if existing else (root / name if namespace == "public" else root / namespace / name)
    _check_within(target, root, ref)
    for path in wanted:
        _check_within(target / path, target, ref)

    if target.exists():
        if _tree(target) == wanted:
            return Pulled(ref, version, target, space, changed=False, files=len(wanted) - 1)
        if not force:
            raise Refused(
                f"{target} already holds a different copy of {ref}",
                hint=f"publish your changes first, or replace them: kiwi pull {ref}@{version} --force",
            )
    _replace(target, wanted)
    return Pulled(ref, version, target, space, changed=True, files=len(wanted) - 1)


def _manifest_text(source: dict[str, Any]) -> str:
    """The stored manifest_yaml as written; a dump of the manifest when the version has none
    (published as JSON) or when its YAML does not say what its manifest says."""
    import yaml

    from ..core.yaml_safe import YamlTooLarge, load_yaml

    manifest = source["manifest"]
    text = source.get("manifest_yaml")
    if isinstance(text, str):
        try:
            if load_yaml(text) == manifest:
                return text
        except (yaml.YAMLError, YamlTooLarge):
            pass
        logger.warning("%s: the stored tool.yaml disagrees with its manifest; writing the manifest", source["tool_id"])
    return yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True)


def _safe_relative(path: str, ref: str) -> str:
    """A file path the registry gave, refused unless it is relative and stays inside the tool."""
    if (
        not is_safe_relative(path)
        or any(p in ("", ".") for p in path.split("/"))  # stricter than a plan: no `./a`, `a//b`
        or ":" in path
        or any(ord(c) < 32 or ord(c) == 127 for c in path)
    ):
        raise Refused(f'{ref}: refusing to write file "{path}": a path must be relative and stay inside the tool')
    return path


def _check_within(path: Path, root: Path, ref: str) -> None:
    resolved, base = path.resolve(), root.resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise Refused(f"{ref}: refusing to write {path}: it resolves outside {root}")


def _tree(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (tool.yaml included), by relative POSIX path."""
    found: dict[str, bytes] = {}
    for file in folder.rglob("*"):
        relative = file.relative_to(folder).as_posix()
        if file.is_symlink():
            found[relative] = b"\0a symlink"  # never what a pull writes
        elif file.is_file():
            found[relative] = file.read_bytes()
    return found


def _replace(target: Path, wanted: dict[str, bytes]) -> None:
    """Write the files beside `target`, then swap them in: a failure leaves `target` as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.pull-{uuid.uuid4().hex[:8]}"
    try:
        for path, data in wanted.items():
            file = staging / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
            if data.startswith(b"#!"):
                file.chmod(0o755)
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
