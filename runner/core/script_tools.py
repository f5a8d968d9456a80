"""What a local space adds to a tool before it is previewed or published.

* A bare script (`.ai/tools/<name>.py` or `.sh`, no tool.yaml) is a tool whose manifest is
  read from the file itself: its identity is the file's name, its version `__version__`,
  its description the module docstring (a shell script's leading comment), its runtime the
  shebang's interpreter (else the extension), and `__namespace__`, `__category__`, `__tags__`
  and `__parameters__` when it sets them.
* A Python tool whose config has no `requires` gets them from its imports: every module
  imported that is neither the standard library's nor one of the tool's own files (nor the
  shared `lib`), by its distribution's name where the runner knows it (`yaml` is PyYAML).
* A tool that imports `lib` carries the spaces' shared `lib/` folders (project first, then
  user) as its own files under `lib/`, so they are verified and hashed as the rest of it.

Everything here reads files only; locking the detected requirements (with uv) is the CLI's.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tool_dir loads PyYAML, which finding a tool must not
    from .tool_dir import ToolDir

__all__ = ["SCRIPT_SUFFIXES", "bare_identity", "load_bare", "with_detected_requires", "with_shared_lib"]

SCRIPT_SUFFIXES = (".py", ".sh")
LIB = "lib"
PYTHON_RUNTIME = "python_runtime"
DEFAULT_VERSION = "0.0.0"
_INTERPRETERS = {
    "python": PYTHON_RUNTIME,
    "python3": PYTHON_RUNTIME,
    "bash": "bash_runtime",
    "sh": "bash_runtime",
    "node": "node_runtime",
    "deno": "deno_runtime",
}
_BY_SUFFIX = {".py": PYTHON_RUNTIME, ".sh": "bash_runtime"}
_SHELL_VAR = re.compile(r"""^__(version|namespace|category)__=["']?([^"'\s#]+)""", re.MULTILINE)
_PY_VARS = ("__version__", "__namespace__", "__category__", "__tags__", "__parameters__")


def executor_of(path: Path, text: str) -> str:
    """The runtime the shebang names (`#!/usr/bin/env python3`, `#!/bin/bash`), else the suffix's."""
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        words = first[2:].split()
        if words and Path(words[0]).name == "env":
            words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if words:
            name = Path(words[0]).name
            name = re.sub(r"^(python3?)[.\d]*$", r"\1", name)
            if name in _INTERPRETERS:
                return _INTERPRETERS[name]
            from .tool_dir import ToolDirError

            raise ToolDirError(
                f"{path}: its shebang names {name!r}, which no seeded runtime runs "
                f"(known: {', '.join(sorted(_INTERPRETERS))})"
            )
    return _BY_SUFFIX[path.suffix]


def _python_metadata(path: Path, text: str) -> dict[str, Any]:
    from .tool_dir import ToolDirError

    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise ToolDirError(f"{path}: not valid Python (line {e.lineno}): {e.msg}") from None
    found: dict[str, Any] = {"description": ast.get_docstring(tree)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in _PY_VARS:
                try:
                    found[name.strip("_")] = ast.literal_eval(node.value)
                except ValueError:
                    raise ToolDirError(f"{path}: {name} must be a literal (a string, list or dict)") from None
    return found


def _shell_metadata(text: str) -> dict[str, Any]:
    found: dict[str, Any] = {m.group(1): m.group(2) for m in _SHELL_VAR.finditer(text)}
    lines = text.split("\n")
    comment: list[str] = []
    for line in lines[1:] if lines and lines[0].startswith("#!") else lines:
        if not line.startswith("#"):
            break
        comment.append(line[1:].strip())
    found["description"] = "\n".join(comment).strip() or None
    return found


def bare_identity(path: Path) -> str:
    """The identity a bare script declares: its name, in `__namespace__`'s namespace if set."""
    try:
        head = path.read_bytes()[:65536].decode("utf-8", "replace")
    except OSError:
        return path.stem
    found = re.search(r"""^__namespace__\s*=\s*["']?([a-z0-9_-]+)""", head, re.MULTILINE)
    namespace = found.group(1) if found else "public"
    return path.stem if namespace == "public" else f"{namespace}/{path.stem}"


def load_bare(path: Path) -> ToolDir:
    """A bare `.py` or `.sh` file as a tool: its manifest derived from the file (see above)."""
    from .tool_dir import ToolDir, ToolDirError, read_text

    text = read_text(path)
    if "\0" in text:
        raise ToolDirError(f"{path}: holds NUL characters; only text files can be published")
    meta = _python_metadata(path, text) if path.suffix == ".py" else _shell_metadata(text)
    manifest: dict[str, Any] = {
        "tool_id": path.stem,
        "tool_type": "script",
        "executor": executor_of(path, text),
        "version": str(meta.get("version") or DEFAULT_VERSION),
        "entrypoint": path.name,
    }
    if meta.get("namespace"):
        manifest["namespace"] = str(meta["namespace"])
    if meta.get("description"):
        manifest["description"] = str(meta["description"])[:4000]
    for key in ("category", "tags", "parameters"):
        if meta.get(key) is not None:
            manifest[key] = meta[key]
    files = [{"path": path.name, "content_text": text, "is_entrypoint": True}]
    return ToolDir(manifest=manifest, files=files, manifest_yaml="", derived=True)


# -- requires from imports ----------------------------------------------------------------


def imported_modules(source: str) -> set[str]:
    """The top-level names a module imports (absolute imports only; relative ones are its own)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _distribution(module: str, known: Mapping[str, list[str]]) -> str:
    dists = known.get(module)
    return dists[0] if dists else module


def detected_requires(files: list[dict[str, Any]]) -> list[str]:
    """The third-party modules the tool's Python files import, as distribution names, sorted."""
    from importlib.metadata import packages_distributions

    own = {LIB, "__future__"}
    for file in files:
        top = str(file["path"]).split("/")[0]
        own.add(top.removesuffix(".py"))
    wanted: set[str] = set()
    for file in files:
        if str(file["path"]).endswith(".py") and isinstance(file.get("content_text"), str):
            wanted |= imported_modules(file["content_text"])
    wanted -= own | set(sys.stdlib_module_names)
    known = packages_distributions()
    return sorted({_distribution(m, known) for m in wanted}, key=str.lower)


def is_python_tool(manifest: dict[str, Any]) -> bool:
    executor = str(manifest.get("executor") or "")
    return executor == PYTHON_RUNTIME or executor.endswith("/" + PYTHON_RUNTIME)


def with_detected_requires(tool: ToolDir) -> ToolDir:
    """A Python tool without `config.requires`, given the requires its imports show (unpinned:
    publishing locks them). Any other tool, or one that says its requires, as it is."""
    config = tool.manifest.get("config")
    if not is_python_tool(tool.manifest) or (isinstance(config, dict) and "requires" in config):
        return tool
    requires = detected_requires(tool.files)
    if not requires:
        return tool
    manifest = {**tool.manifest, "config": {**(config if isinstance(config, dict) else {}), "requires": requires}}
    return replace(tool, manifest=manifest, detected=tuple(requires))


# -- the shared lib/ ----------------------------------------------------------------------


def imports_lib(tool: ToolDir) -> bool:
    return any(
        LIB in imported_modules(f["content_text"])
        for f in tool.files
        if str(f["path"]).endswith(".py") and isinstance(f.get("content_text"), str)
    )


def with_shared_lib(tool: ToolDir, libs: list[Path]) -> ToolDir:
    """A tool that imports `lib`, carrying the `.py` files of the shared lib folders (the first
    folder's file wins a name both hold) as its own `lib/...` files; its own lib/ files stay."""
    from .tool_dir import read_text

    if not imports_lib(tool):
        return tool
    have = {str(f["path"]) for f in tool.files}
    added: list[dict[str, Any]] = []
    for lib in libs:
        if not lib.is_dir():
            continue
        for file in sorted(lib.rglob("*.py")):
            relative = f"{LIB}/{file.relative_to(lib).as_posix()}"
            if relative in have or any(part.startswith(".") for part in file.relative_to(lib).parts):
                continue
            have.add(relative)
            added.append({"path": relative, "content_text": read_text(file), "is_entrypoint": False})
    if not added:
        return tool
    return replace(tool, files=[*tool.files, *added], shared=tuple(a["path"] for a in added))
