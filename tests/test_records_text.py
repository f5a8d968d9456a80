"""The time a run record and an audit row are stamped with (runner/core/clock.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.core.clock import iso_at

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
@settings(max_examples=500, deadline=None)
def test_a_stamp_is_the_instant_to_the_microsecond(unix: float) -> None:
    stamp = iso_at(unix)
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == timedelta(0)
    assert abs(parsed.timestamp() - unix) < 2e-6
