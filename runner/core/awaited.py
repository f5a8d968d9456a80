"""The children of this process whose exit someone awaits, so that nobody else reaps them.

The runner adopts orphans (primitives/reaper.py) and reaps those that exited, but a child it
started itself in a session of its own is someone's to wait for: a run's root, an MCP server,
an egress proxy (sandbox/egress.py, whose Popen waits for it). Reaping such a child elsewhere
loses its exit status, and frees its pid for reuse while its owner may still signal it. Each
owner notes its child here when it starts it and forgets it once it has reaped it; the
reaper passes over every child noted. A set in this low layer, so that both the sandbox and
the primitives can note their children.
"""

from __future__ import annotations

__all__ = ["forget", "is_started", "started"]

_awaited: set[int] = set()


def started(pid: int) -> None:
    """Note a child this process started in a session of its own, whose exit someone awaits
    (a run's root, an MCP server, an egress proxy): the reaper never takes it for an orphan."""
    _awaited.add(pid)


def is_started(pid: int) -> bool:
    """Whether `pid` is a child noted by started() and not reaped yet."""
    return pid in _awaited


def forget(pid: int) -> None:
    """A child noted by started() has been reaped by whoever awaited it."""
    _awaited.discard(pid)
