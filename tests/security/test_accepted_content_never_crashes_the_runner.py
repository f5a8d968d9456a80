"""Nothing the registry accepts makes the runner crash (issue 13, item 4).

Hypothesis makes manifests and files, with paths from an alphabet holding `/`, `.`,
unicode and very long names, and file fields of every JSON type, and publishes each
through SQL as an admin into a throwaway namespace. What the registry refuses is skipped
(it must be a 22023 naming a field: never another error). What it accepts is then run
through the Runner as every entry point makes it: a dry run for scripts (enough to
materialise their files) and a real run for knowledge tools and for scripts whose
entrypoint is a harmless command. run() must return a result whose failure, if any, is
a KiwiError, and nothing may be logged with a traceback.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from runner import KiwiError, PostgresRegistry, Runner, admin
from tests.conftest import local_settings

NS = f"fzlim_{uuid.uuid4().hex[:8]}"
COUNTER = itertools.count()
BOUNDED = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

# --- strategies -------------------------------------------------------------------------------

# PostgreSQL's jsonb cannot hold NUL or a lone surrogate: such text never reaches publish.
CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")


def text(max_size: int) -> st.SearchStrategy[str]:
    return st.text(CHARS, max_size=max_size)


names = st.text(alphabet=st.sampled_from([*"ab.-_ é中\u200b~$*", "\U0001f600"]), min_size=1, max_size=6)
LONG = ("s" * 255, "s" * 256, "é" * 128)
segments = st.one_of(
    names,
    names,
    names,
    names,
    st.sampled_from([*("", ".", "..", "x", "y", ".kiwi-complete", ".KIWI-complete", ".kiwi", ".kiwix"), *LONG]),
    st.integers(min_value=200, max_value=400).map(lambda n: "L" * n),
)
paths = st.one_of(
    st.lists(segments, min_size=1, max_size=4).map("/".join),
    st.lists(segments, min_size=1, max_size=4).map("/".join),
    st.text(alphabet=st.sampled_from(list("ab/.é:\\")), min_size=0, max_size=8),
    st.sampled_from(["x", "x/y", "x/y/z", "/abs", "a//b", "./a", "a/./b", "a/../b"]),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), text(max_size=20)
)
any_json = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(text(max_size=4), kids, max_size=2),
    max_leaves=4,
)
contents = st.one_of(
    text(max_size=40),
    text(max_size=40),
    text(max_size=40),
    any_json,
    st.integers(min_value=0, max_value=3).map(lambda k: "z" * (k * 300_000)),  # up to ~0.9 MB
)


def rarely(strategy: st.SearchStrategy[Any], often: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`often` nine times in ten, else `strategy`."""
    return st.integers(min_value=0, max_value=9).flatmap(lambda n: strategy if n == 0 else often)


# Names the registry takes, at their edges: unicode, dots, spaces, 255 bytes.
fair_segments = st.one_of(
    names, names, names, st.sampled_from(["x", "y", "s" * 255, "é" * 127 + "s", "a..b", " ", "-", "~"])
)
fair_paths = st.lists(fair_segments, min_size=1, max_size=4).map("/".join)


@st.composite
def files(draw: Any, nasty: bool) -> dict[str, Any]:
    if not nasty:
        return {"path": draw(fair_paths), "content_text": draw(rarely(contents, text(max_size=40)))}
    file: dict[str, Any] = {"path": draw(rarely(any_json, paths))}
    if draw(st.integers(min_value=0, max_value=9)) > 0:  # now and then a file without content
        file["content_text"] = draw(contents)
    optional = {
        "is_entrypoint": st.one_of(st.booleans(), any_json),
        "media_type": st.one_of(text(max_size=10), any_json),
        "size_bytes": any_json,
        "storage_key": st.one_of(text(max_size=10), st.none()),
        "sha256": st.sampled_from(["a" * 64, "nothex"]),
        "colour": any_json,
    }
    for key, strategy in optional.items():
        if draw(st.integers(min_value=0, max_value=15)) == 0:
            file[key] = draw(strategy)
    return file


@st.composite
def tools(draw: Any) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """(manifest, files, run for real): one in four nasty (most of those are refused), the rest fair."""
    nasty = draw(st.integers(min_value=0, max_value=3)) == 0
    kind = draw(st.sampled_from(["knowledge", "script"]))
    manifest: dict[str, Any] = {"tool_id": f"{NS}/t{next(COUNTER)}", "tool_type": kind, "version": "1.0.0"}
    listed = draw(st.lists(files(nasty), max_size=4))
    real = kind == "knowledge"
    if kind == "script":
        manifest["executor"] = "bash_runtime"
        entry = draw(paths if nasty else fair_paths)
        command = draw(st.sampled_from(["echo ok\n", "exit 3\n", "cat ./nothing-here\n", "printf '%s' \"$PWD\"\n"]))
        listed.insert(draw(st.integers(0, len(listed))), {"path": entry, "content_text": command})
        manifest["entrypoint"] = entry
        real = draw(st.booleans())
    if draw(st.booleans()):
        manifest["tags"] = draw(st.lists(text(max_size=60 if nasty else 20), max_size=60 if nasty else 5))
    if draw(st.booleans()):
        manifest["description"] = draw(text(max_size=50) | st.just("d" * 4001)) if nasty else draw(text(max_size=50))
    return manifest, listed, real


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def owner_conn(database_url: str) -> Iterator[psycopg.Connection]:
    """An admin connection (autocommit: the runner reads what it publishes), and the namespace."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (NS, uuid.uuid4()))
        yield connection
        connection.execute("delete from tools where namespace = %s", (NS,))
        connection.execute("delete from namespaces where namespace = %s", (NS,))


@pytest.fixture(scope="module")
def runner(
    database_url: str, loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runner]:
    r = Runner(
        PostgresRegistry(database_url, principal=admin()),
        local_settings(
            database_url,
            tmp_path_factory.mktemp("limits-cache"),
            record_runs=False,
            project_dir=tmp_path_factory.mktemp("limits-project"),
        ),
    )
    yield r
    loop.run_until_complete(r.aclose())


# --- the property -----------------------------------------------------------------------------


@BOUNDED
@given(tool=tools())
def test_whatever_the_registry_accepts_runs_or_fails_with_a_kiwi_error(
    tool: tuple[dict[str, Any], list[dict[str, Any]], bool],
    owner_conn: psycopg.Connection,
    runner: Runner,
    loop: asyncio.AbstractEventLoop,
    caplog: pytest.LogCaptureFixture,
) -> None:
    manifest, listed, real = tool
    try:
        with owner_conn.transaction():
            owner_conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(listed)))
    except psycopg.Error as e:
        assert e.sqlstate == "22023", f"a refusal must be 22023 naming a field, got {e.sqlstate}: {e}"
        event("refused: " + re.sub(r"[\d\"].*", "", str(e.diag.message_primary).split(": ", 1)[-1])[:40])
        return
    event(f"accepted, {'run' if real else 'dry run'}")
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        result = loop.run_until_complete(runner.run(manifest["tool_id"], {}, dry_run=not real))
    assert result.failure is None or isinstance(result.failure, KiwiError), repr(result.failure)
    if result.failure is not None:
        event(f"failed: {type(result.failure).__name__}: {result.error[:60]}")
    assert "Traceback" not in (result.error or "")
    logged = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not logged, [r.getMessage() for r in logged]
