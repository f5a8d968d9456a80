"""What a run record and an audit row are stamped with: the parameters' digest and the time
(runner/core/records.py, runner/core/clock.py)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.core.clock import iso_at
from runner.core.records import params_digest

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@given(
    st.dictionaries(
        st.text(max_size=10),
        st.one_of(
            st.text(max_size=20),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.booleans(),
            st.none(),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=6,
    )
)
@settings(max_examples=500, deadline=None)
def test_the_digest_is_of_the_canonical_json_whichever_encoder_wrote_it(params: dict[str, Any]) -> None:
    """The database checks an approval's parameters against this digest (605_approval_parameters.sql):
    the text hashed must be the canonical JSON byte for byte, orjson's shortcut or not."""
    data = _CANONICAL.encode(params).encode("utf-8", "surrogatepass")
    assert params_digest(params) == (hashlib.sha256(data).hexdigest(), len(data))


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
@settings(max_examples=500, deadline=None)
def test_a_stamp_is_the_instant_to_the_microsecond(unix: float) -> None:
    stamp = iso_at(unix)
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == timedelta(0)
    assert abs(parsed.timestamp() - unix) < 2e-6
