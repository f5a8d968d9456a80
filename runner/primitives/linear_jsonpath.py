"""JSONPath for response transforms, with every regular expression matched in linear time.

A tool's `response_transform` is tenant data, and python-jsonpath matches `=~ /re/`,
`match()` and `search()` with Python's backtracking `re` on the server's event loop: a
filter such as `$[?@.name =~ /(a+)+$/]` over an almost-matching name would stall every
other caller. This environment hands those three to the linear engine tenants' schema
patterns use (runner.core.linear_regex); a pattern that engine cannot compile matches
nothing, as RFC 9535 says of an invalid pattern.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import jsonpath
from jsonpath.function_extensions import ExpressionType, FilterFunction

from ..core.linear_regex import LinearPattern, linear_pattern

__all__ = ["LINEAR_JSONPATH"]


def _compiled(pattern: str, *, whole: bool, ignore_case: bool = False, python: bool = False) -> LinearPattern | None:
    """The linear pattern (None when it cannot be compiled); `python`: written for Python's re."""
    source = f"^(?:{pattern})$" if whole else pattern
    try:
        return linear_pattern(("(?i)" if ignore_case else "") + source, python=python)
    except ValueError:
        return None


class _LinearRegexFunction(FilterFunction):
    """`match(value, pattern)` (the whole value) or `search(value, pattern)` (anywhere)."""

    arg_types: ClassVar[list[ExpressionType]] = [ExpressionType.VALUE, ExpressionType.VALUE]
    return_type = ExpressionType.LOGICAL

    def __init__(self, *, whole: bool) -> None:
        self._whole = whole

    def __call__(self, value: object, pattern: object) -> bool:
        if not isinstance(value, str) or not isinstance(pattern, str):
            return False
        compiled = _compiled(pattern, whole=self._whole)
        return compiled is not None and compiled.search(value)


class _LinearEnvironment(jsonpath.JSONPathEnvironment):
    """The default environment, its regular expressions moved to the linear engine."""

    def setup_function_extensions(self) -> None:
        super().setup_function_extensions()
        self.function_extensions["match"] = _LinearRegexFunction(whole=True)
        self.function_extensions["search"] = _LinearRegexFunction(whole=False)

    def compare(self, left: object, operator: str, right: object) -> bool:
        if operator == "=~":
            if not isinstance(right, re.Pattern) or not isinstance(left, str):
                return False
            ignore_case = bool(right.flags & re.IGNORECASE)
            compiled = _compiled(right.pattern, whole=True, ignore_case=ignore_case, python=True)
            return compiled is not None and compiled.search(left)
        return bool(super().compare(left, operator, right))


LINEAR_JSONPATH: Any = _LinearEnvironment()
