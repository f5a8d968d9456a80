"""Tool references as the registry reads them (kiwi_internal.normalize_ref)."""

from __future__ import annotations

from .errors import UsageError


def normalize_ref(ref: str) -> str:
    """`public/x` and ` x ` mean `x`: the public namespace is the default one."""
    ref = ref.strip()
    return ref[len("public/") :] if ref.startswith("public/") else ref


def split_ref(tool: str, version: str | None) -> tuple[str, str | None]:
    """`tool@1.2.0` is the same as `tool --version 1.2.0`."""
    if "@" in tool:
        tool, _, at = tool.rpartition("@")
        if version is not None and version != at:
            raise UsageError(f"two versions given: @{at} and --version {version}")
        version = at
    if not tool:
        raise UsageError("no tool given", hint="name a tool: kiwi run hello_world")
    if version is not None and not version:
        raise UsageError("empty version", hint="give a version (tool@1.0.0 or --version 1.0.0), or none for the latest")
    return tool, version
