"""The shortcuts three steps take for an object of scalars (runner/core/flat.py), each held to
the full path it skips, on one strategy of such objects."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.core.params import _flat_json, _not_json
from runner.core.payloads import _fit, _jsonb_safe, _plain
from runner.core.records import params_digest

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def flat_objects(*, finite: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of text (any: beyond ASCII, NUL, lone surrogates), integers beyond 64 bits,
    floats (NaN and infinities unless `finite`), booleans and nulls."""
    return st.dictionaries(
        st.text(max_size=12),
        st.one_of(
            st.text(max_size=40),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.floats(allow_nan=not finite, allow_infinity=not finite),
            st.booleans(),
            st.none(),
        ),
        max_size=6,
    )


@given(flat_objects(finite=False))
@settings(max_examples=300, deadline=None)
def test_the_flat_shortcut_passes_only_what_the_full_walk_passes(params: dict[str, Any]) -> None:
    """validate_params skips the shape walk for an object of scalars JSON carries as they are
    (_flat_json): whatever the shortcut lets through, the walk finds nothing wrong with."""
    if _flat_json(params):
        assert list(_not_json(params)) == []
    else:
        assert list(_not_json(params)) != []


@given(flat_objects(finite=False), st.integers(min_value=2, max_value=600))
@settings(max_examples=400, deadline=None)
def test_parameters_kept_unwalked_are_what_the_walk_would_keep(params: dict[str, Any], budget: int) -> None:
    """run_payload keeps a flat object of plain scalars as it is (_plain) when its JSON surely
    fits: then cleaning it would change nothing and fitting it would not cut it."""
    if _plain(params, budget):
        assert _jsonb_safe(params) == params
        assert _fit(params, budget, tail=False) == (params, False)


@given(flat_objects(finite=True))
@settings(max_examples=500, deadline=None)
def test_the_digest_is_of_the_canonical_json_whichever_encoder_wrote_it(params: dict[str, Any]) -> None:
    """The database checks an approval's parameters against this digest (605_approval_parameters.sql):
    the text hashed must be the canonical JSON byte for byte, orjson's shortcut or not."""
    data = _CANONICAL.encode(params).encode("utf-8", "surrogatepass")
    assert params_digest(params) == (hashlib.sha256(data).hexdigest(), len(data))
