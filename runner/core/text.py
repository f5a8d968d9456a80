"""Text checks and renderings shared by what reads input from outside and what shows it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def is_utf8(text: str) -> bool:
    """False for strings Postgres and JSON cannot carry (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain NUL (\\u0000): PostgreSQL text cannot hold it"
    if not is_utf8(text):
        return "must be valid Unicode text (it holds a lone surrogate)"
    return None


def unstorable_text(value: Any, where: str) -> Iterator[str]:
    """Each place of `value` (JSON: dicts, lists, strings...) holding text the registry cannot
    store, a NUL or a lone surrogate, as `where.key[1]: why` (lists counted from 1, as the
    registry counts them). Walked without recursion: a value may be nested deeply."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                yield f"{path}: {problem}"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                problem = _text_problem(key) if isinstance(key, str) else None
                if problem:
                    yield f"{path}: a key {problem}"
                else:
                    stack.append((f"{path}.{key}", child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", child) for i, child in reversed(list(enumerate(item, start=1))))


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
