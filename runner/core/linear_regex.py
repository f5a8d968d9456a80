"""Regular expressions that tenants write, matched in time linear in the text.

Python's `re` backtracks: `^(a+)+$` takes exponential time on forty characters that almost
match, and a shared server runs parameter checks, output checks and a tool's validation rules
on its event loop. Every pattern that comes from the registry (a schema's `pattern` and
`patternProperties`, a runtime's `pattern_check`) is therefore compiled by jsonschema-rs with
its linear-time engine (Rust's regex crate, `RegexOptions`): no lookaround and no
backreferences, the two features only a backtracking engine offers. A pattern that needs
them is refused with NO_BACKTRACKING, naming where it was written.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import jsonschema_rs

__all__ = ["NO_BACKTRACKING", "PATTERN_OPTIONS", "LinearPattern", "linear_pattern"]

# The engine every tenant pattern is compiled with (jsonschema-rs's `pattern_options`).
PATTERN_OPTIONS = jsonschema_rs.RegexOptions()
NO_BACKTRACKING = (
    "patterns must be regular expressions that need no backtracking: "
    "no lookaround ((?=, (?!, (?<=, (?<!) and no backreferences (\\1)"
)
# Python reads `{` that starts no repetition as a literal (`:(){ :|:& };:`), Rust refuses it;
# `{,3}` is Python's {0,3}. Both are rewritten before compiling (outside [...] and escapes).
_BRACES = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]?|\{(\d*)(,?)(\d*)\}|\{|\}|\\Z", re.DOTALL)


class LinearPattern:
    """One compiled pattern: `search` says whether it occurs anywhere in a text."""

    def __init__(self, validator: Any) -> None:
        self._validator = validator

    def search(self, text: str) -> bool:
        return bool(self._validator.is_valid(text))

    def first_line(self, text: str) -> int | None:
        """The line (from 1) on which the first match ends, found by halving the text at line
        ends (a logarithmic number of linear searches); None when it does not occur."""
        if not self.search(text):
            return None
        ends = [i + 1 for i, c in enumerate(text) if c == "\n"]
        low, high = 0, len(ends)  # the answer is the smallest k with a match in text[:ends[k]] (len: all)
        while low < high:
            middle = (low + high) // 2
            if self.search(text[: ends[middle]]):
                high = middle
            else:
                low = middle + 1
        return low + 1


def _python_spelling(pattern: str) -> str:
    """The pattern with Python's literal braces escaped and `\\Z` spelt `\\z`, as Rust reads them."""

    def one(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "\\Z":
            return "\\z"
        if token in ("{", "}"):
            return "\\" + token
        if token.startswith("{"):
            low, comma, high = m.group(1), m.group(2), m.group(3)
            if not low and not high:
                return "\\{" + token[1:-1] + "\\}"
            return "{" + (low or "0") + comma + high + "}"
        return token

    return _BRACES.sub(one, pattern)


@lru_cache(maxsize=1024)
def linear_pattern(pattern: str, *, multiline: bool = False, python: bool = False) -> LinearPattern:
    """`pattern` compiled for the linear engine (`multiline`: `^`/`$` at each line; `python`:
    written for Python's re, whose literal braces are kept literal). ValueError says why a
    pattern cannot be compiled."""
    source = _python_spelling(pattern) if python else pattern
    try:
        validator = jsonschema_rs.validator_for(
            {"type": "string", "pattern": ("(?m)" if multiline else "") + source}, pattern_options=PATTERN_OPTIONS
        )
    except jsonschema_rs.ValidationError:
        raise ValueError(f"{pattern!r} is not a regular expression this runner accepts: {NO_BACKTRACKING}") from None
    return LinearPattern(validator)
