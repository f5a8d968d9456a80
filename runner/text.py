"""Text checks shared by what reads input from outside (parameters, tool directories)."""

from __future__ import annotations


def is_utf8(text: str) -> bool:
    """False for strings Postgres and JSON cannot carry (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
