"""What a run may still spend, handed down to the runs it starts: tokens, tool calls, seconds
and money.

A thread holds an `Allowance` made from its budget. Every call it makes carries it (the
runner's call_tool `limits`); a thread started by that call (a sub-thread, directly or through
a script's kernel socket) makes its own as a `child`, each limit the smaller of what it asks
and what is left above it, so a nested thread can only narrow its caller's limits. What a child
spends is charged to it and to every allowance above it, so the caller sees its sub-threads'
tokens, calls and cost as its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_DEPTH", "Allowance"]

MAX_DEPTH = 8  # runs started from runs (sub-threads, kernel calls), one inside another, at most


def _least(asked: float | None, left: float | None) -> float | None:
    if asked is None:
        return left
    return asked if left is None else min(asked, left)


@dataclass(eq=False)
class Allowance:
    """Limits (None: none) and what was spent under them, this allowance's and its children's."""

    tokens: int | None = None
    tool_calls: int | None = None
    deadline: float | None = None  # time.monotonic() by which the work ends
    cost_usd: float | None = None
    parent: Allowance | None = None
    depth: int = 0  # how many allowances are above this one
    spent: dict[str, float] = field(default_factory=lambda: {"tokens": 0, "tool_calls": 0, "cost_usd": 0.0})

    def left(self) -> dict[str, float | None]:
        """What may still be spent here: {tokens, tool_calls, seconds, cost_usd} (None: no limit)."""
        return {
            "tokens": None if self.tokens is None else self.tokens - self.spent["tokens"],
            "tool_calls": None if self.tool_calls is None else self.tool_calls - self.spent["tool_calls"],
            "seconds": None if self.deadline is None else self.deadline - time.monotonic(),
            "cost_usd": None if self.cost_usd is None else self.cost_usd - self.spent["cost_usd"],
        }

    def child(
        self,
        tokens: int | None = None,
        tool_calls: int | None = None,
        seconds: float | None = None,
        cost_usd: float | None = None,
    ) -> Allowance:
        """An allowance under this one: each limit what is asked, at most what is left here."""
        left = self.left()
        ask_deadline = None if seconds is None else time.monotonic() + seconds
        deadline = _least(ask_deadline, self.deadline)
        n_tokens, n_calls = _least(tokens, left["tokens"]), _least(tool_calls, left["tool_calls"])
        return Allowance(
            tokens=None if n_tokens is None else max(int(n_tokens), 0),
            tool_calls=None if n_calls is None else max(int(n_calls), 0),
            deadline=deadline,
            cost_usd=None if (c := _least(cost_usd, left["cost_usd"])) is None else max(c, 0.0),
            parent=self,
            depth=self.depth + 1,
        )

    def narrowed(self, asked: Any) -> Allowance:
        """A child for a request's `limits` ({tokens, tool_calls, seconds, cost_usd}; anything
        else, or none, asks for nothing more than what is left)."""
        asked = asked if isinstance(asked, dict) else {}

        def number(key: str) -> Any:
            value = asked.get(key)
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None

        return self.child(number("tokens"), number("tool_calls"), number("seconds"), number("cost_usd"))

    def charge(self, *, tokens: int = 0, tool_calls: int = 0, cost_usd: float = 0.0) -> None:
        """Count what was spent here and in every allowance above."""
        at: Allowance | None = self
        while at is not None:
            at.spent["tokens"] += tokens
            at.spent["tool_calls"] += tool_calls
            at.spent["cost_usd"] += cost_usd
            at = at.parent

    def limits(self) -> dict[str, float | None]:
        """The limits as a caller reads them (seconds from now)."""
        return {
            "tokens": self.tokens,
            "tool_calls": self.tool_calls,
            "seconds": None if self.deadline is None else round(self.deadline - time.monotonic(), 3),
            "cost_usd": self.cost_usd,
        }
