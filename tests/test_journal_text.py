"""A journal line's JSON text (runner/harness/journal.py json_text): orjson's where it is ASCII,
else the json module's, and either way the value the json module would have written."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.harness.journal import _LINE, json_text

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # beyond 64 bits: orjson refuses, json writes
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),  # any text: beyond ASCII, control characters, U+2028
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_VALUES)
@settings(max_examples=400, deadline=None)
def test_a_line_holds_ascii_text_that_parses_to_what_json_would_write(value: Any) -> None:
    text = json_text(value)
    assert text.isascii() and "\n" not in text
    assert json.loads(text) == json.loads(_LINE.encode(value))


@dataclasses.dataclass
class _Shape:
    side: int


def test_what_json_cannot_hold_is_written_as_its_str_as_before() -> None:
    """Dates, dataclasses, paths and keys that are not text come out as _LINE has them."""
    when = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    value = {"when": when, "shape": _Shape(3), "where": Path("/tmp/x"), "n": {1: "one"}}
    assert json.loads(json_text(value)) == json.loads(_LINE.encode(value))
    assert json.loads(json_text(value))["when"] == str(when)
