"""Text checks and renderings shared by what reads input from outside and what shows it."""

from __future__ import annotations

from typing import Any


def is_utf8(text: str) -> bool:
    """False for strings Postgres and JSON cannot carry (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_line(text: str | None) -> str:
    """The first line that holds anything ("" for None, empty or blank text)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def dependents_line(answer: dict[str, Any]) -> str:
    """What a publish changed for other tools: those whose executor chain runs through it."""
    names = [str(n) for n in answer.get("dependents") or []]
    count = int(answer.get("dependents_count") or len(names))
    more = f" and {count - len(names)} more" if count > len(names) else ""
    return f"this changes what {count} other tool(s) run: {', '.join(names)}{more}"
