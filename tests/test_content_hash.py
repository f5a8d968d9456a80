"""content_hash is documented well enough to recompute outside the database.

runner/trust/content_hash.py is an independent Python implementation of the algorithm
written in supabase/migrations/*_content_hash.sql (the runner uses it to verify signed
chains); it must agree with the database on every seeded version and on arbitrary
manifests and files (hypothesis).
"""

from __future__ import annotations

import json
import posixpath
import string
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.trust.content_hash import canonical_json, content_hash, sha256_hex


def load_exact(text: str) -> Any:
    """Parse JSON keeping numbers exact, as the database stores them."""
    return json.loads(text, parse_float=Decimal)


def test_every_stored_version_matches_the_python_recomputation(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        """select t.ref, v.version, v.manifest::text, v.content_hash,
                  coalesce(json_agg(json_build_array(f.path, f.sha256)) filter (where f.path is not null), '[]')
             from tool_versions v join tools t on t.id = v.tool_uuid
             left join tool_version_files f on f.version_id = v.id
            group by t.ref, v.version, v.manifest, v.content_hash"""
    ).fetchall()
    assert len(rows) >= 17, "the seed should be loaded"
    mismatches = [
        f"{ref}@{version}"
        for ref, version, manifest, stored, files in rows
        if content_hash(load_exact(manifest), [tuple(f) for f in files]) != stored
    ]
    assert mismatches == []


def test_file_sha256_is_the_hash_of_the_utf8_content(conn: psycopg.Connection) -> None:
    rows = conn.execute("select path, content_text, sha256, size_bytes from tool_version_files").fetchall()
    assert rows
    for path, text, sha, size in rows:
        assert sha == sha256_hex(text), path
        assert size == len(text.encode("utf-8")), path


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
file_names = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=8)
file_paths = st.lists(file_names, min_size=1, max_size=3).map("/".join)
file_texts = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=200)


def _no_file_is_a_directory(files: dict[str, str]) -> bool:
    """The registry refuses a file that is also another's directory ("x" beside "x/y")."""
    return not any(other.startswith(path + "/") for path in files for other in files)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=st.dictionaries(st.text(max_size=8).filter(lambda s: "\x00" not in s), json_values, max_size=5),
    description=file_texts,
    files=st.dictionaries(file_paths, file_texts, min_size=1, max_size=4).filter(_no_file_is_a_directory),
)
def test_the_database_and_python_agree_on_arbitrary_content(
    database_url: str, config: dict[str, Any], description: str, files: dict[str, str]
) -> None:
    manifest = {
        "tool_id": "hash_fuzz",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "description": description,
        "metadata": config,  # free-form (config is held to its chain's contract)
        "entrypoint": sorted(files)[0],
    }
    payload = [{"path": p, "content_text": t} for p, t in files.items()]
    with psycopg.connect(database_url) as conn:  # one transaction, rolled back
        result = conn.execute(
            "select publish_tool_version(%s::jsonb, %s::jsonb)",
            (json.dumps(manifest), json.dumps(payload)),
        ).fetchone()[0]
        stored = conn.execute(
            "select v.manifest::text from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'hash_fuzz'"
        ).fetchone()[0]
        conn.rollback()
    expected = content_hash(load_exact(stored), [(p, sha256_hex(t)) for p, t in files.items()])
    assert result["content_hash"] == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(alphabet="ab./\\:\té", max_size=12))
def test_every_path_the_database_accepts_stays_inside_the_tool(conn: psycopg.Connection, path: str) -> None:
    safe = conn.execute("select kiwi_internal.is_safe_path(%s)", (path,)).fetchone()[0]
    if safe:
        joined = posixpath.normpath(posixpath.join("/tool", path))
        assert joined.startswith("/tool/"), path
        assert ".." not in path.split("/") and "\\" not in path and ":" not in path, path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [True, None]}, '{"a":[true,null],"b":1}'),
        (Decimal("1.50"), "1.5"),
        (Decimal("1E+3"), "1000"),
        ("tab\there \u0001 é", '"tab\\there \\u0001 é"'),
    ],
)
def test_the_python_canonical_form_matches_the_documented_rules(
    conn: psycopg.Connection, value: Any, expected: str
) -> None:
    assert canonical_json(value) == expected
    as_json = json.dumps(value, default=str) if not isinstance(value, Decimal) else str(value)
    assert conn.execute("select kiwi_internal.canonical_json(%s::jsonb)", (as_json,)).fetchone()[0] == expected
