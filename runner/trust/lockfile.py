"""kiwi.lock: the exact chain a project runs, kept in the project.

For each locked tool it records the version and content_hash of every element of its
chain. A run of a locked tool runs the locked version and is refused, naming the
element, when anything in its chain moved (a runtime upgraded, an executor changed, a
version altered). `kiwi lock --update` moves it on purpose. The file is JSON with
sorted keys, so that diffs in review show exactly what moved.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.plan import Plan
from ..core.refs import normalize_ref
from ..errors import Refused, UsageError

LOCKFILE_VERSION = 1


@dataclass(frozen=True)
class LockedLink:
    tool_id: str
    version: str
    content_hash: str

    def at(self) -> str:
        return f"{self.version} ({self.content_hash[:12]})"


@dataclass(frozen=True)
class LockedTool:
    tool_id: str
    version: str
    content_hash: str
    chain: tuple[LockedLink, ...]

    @classmethod
    def from_plan(cls, plan: Plan) -> LockedTool:
        return cls(
            tool_id=plan.tool_id,
            version=plan.version,
            content_hash=plan.content_hash,
            chain=tuple(LockedLink(c.tool_id, c.version, c.content_hash) for c in plan.chain),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "content_hash": self.content_hash,
            "chain": [{"tool_id": c.tool_id, "version": c.version, "content_hash": c.content_hash} for c in self.chain],
        }

    def drift(self, plan: Plan) -> list[str]:
        """What moved between the lock and this plan, one line per element; empty when none."""
        now = LockedTool.from_plan(plan)
        if [c.tool_id for c in now.chain] != [c.tool_id for c in self.chain]:
            return [
                "the chain changed: locked "
                + " -> ".join(c.tool_id for c in self.chain)
                + ", now "
                + " -> ".join(c.tool_id for c in now.chain)
            ]
        return [
            f"{old.tool_id} moved from {old.at()} to {new.at()}"
            for old, new in zip(self.chain, now.chain, strict=True)
            if (old.version, old.content_hash) != (new.version, new.content_hash)
        ]


class Lockfile:
    """The lockfile of one project, re-read when it changes on disk (a long-lived MCP
    server sees `kiwi lock --update` at once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._where = os.fspath(path)
        self._stamp: tuple[int, int] | None = None
        self._tools: dict[str, LockedTool] = {}

    def tools(self) -> dict[str, LockedTool]:
        # most projects have no lockfile: asking whether it exists raises nothing (a server asks
        # on every run), where a stat of a missing file raises FileNotFoundError
        if not os.access(self._where, os.F_OK):
            self._stamp, self._tools = None, {}
            return self._tools
        try:
            st = os.stat(self._where)
        except FileNotFoundError:
            self._stamp, self._tools = None, {}
            return self._tools
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._tools = _parse(self.path)
            self._stamp = stamp
        return self._tools

    def get(self, tool_id: str) -> LockedTool | None:
        return self.tools().get(normalize_ref(tool_id))

    def check(self, plan: Plan, locked: LockedTool) -> None:
        """Refuse a registry plan that drifted from its tool's entry in the lock."""
        if plan.version != locked.version:
            raise Refused(
                f"{locked.tool_id} is locked at {locked.version} in {self.path}, not {plan.version}",
                hint=f"run it without a version, or move the lock: kiwi lock --update {locked.tool_id}",
            )
        moved = locked.drift(plan)
        if moved:
            raise Refused(
                f"lockfile drift for {locked.tool_id} ({self.path}): " + "; ".join(moved),
                hint=f"if this change is wanted: kiwi lock --update {locked.tool_id}",
            )

    def write(self, tools: dict[str, LockedTool]) -> None:
        """Replace the file atomically: a crash leaves the old lock or the new, never half."""
        import tempfile  # only when writing: `kiwi run` start-up stays short

        body = {
            "lockfile_version": LOCKFILE_VERSION,
            "tools": {ref: tools[ref].as_json() for ref in sorted(tools)},
        }
        text = json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kiwi.lock.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._stamp = None


def _parse(path: Path) -> dict[str, LockedTool]:
    def bad(why: str) -> UsageError:
        return UsageError(f"{path}: {why}", hint="fix it, or delete it and run `kiwi lock TOOL` again")

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise bad(f"not valid JSON: {e}") from e
    if not isinstance(data, dict) or data.get("lockfile_version") != LOCKFILE_VERSION:
        raise bad(f"not a version {LOCKFILE_VERSION} kiwi lockfile")
    tools = data.get("tools")
    if not isinstance(tools, dict):
        raise bad('"tools" must be an object')
    out = {}
    for ref, entry in tools.items():
        try:
            chain = tuple(
                LockedLink(str(c["tool_id"]), str(c["version"]), str(c["content_hash"])) for c in entry["chain"]
            )
            out[normalize_ref(ref)] = LockedTool(
                normalize_ref(ref), str(entry["version"]), str(entry["content_hash"]), chain
            )
        except (KeyError, TypeError) as e:
            raise bad(f"the entry for {ref!r} is missing {e}") from e
    return out
