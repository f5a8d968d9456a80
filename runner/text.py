"""Text checks and renderings shared by what reads input from outside and what shows it."""

from __future__ import annotations


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
