"""Content altered behind the registry's back is never run (issue 13, item 6).

Found: with the default trust policy, a version whose stored file was altered in the
database (content, sha256 and size changed together, triggers bypassed) ran from a fresh
cache; from a warm cache the error blamed the disk, and its hint (remove the directory)
led to running the altered code. A long-running process missed an edit of a cached file
that kept its size and mtime. Now the runner recomputes the content_hash from the plan's
manifest and files under every policy and refuses a mismatch, blaming the registry; a
cached file is checked by content (stat stamps include ctime, which a write always moves).
An edited cached copy is refused (not silently re-materialised), naming the disk.

Real parts: the real database (altered as an attacker with SQL access would), Runner
objects and the CLI as a process.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from runner import IntegrityError, Runner, Settings, TrustSettings
from tests.conftest import local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi

ORIGINAL = "echo original\n"
TAMPERED = "echo TAMPERED-and-longer\n"


def tamper(conn: psycopg.Connection, tool: str, text: str = TAMPERED) -> None:
    """Alter the stored file as someone with SQL access would: content, sha256 and size together
    (a check constraint ties the first two), every trigger bypassed, and the precomputed plan
    dropped so the altered one is served."""
    sha = hashlib.sha256(text.encode()).hexdigest()
    with conn.transaction():
        conn.execute("set local session_replication_role = replica")
        conn.execute(
            "update tool_version_files f set content_text = %s, sha256 = %s, size_bytes = octet_length(%s)"
            " from tool_versions v join tools t on t.id = v.tool_uuid where f.version_id = v.id and t.ref = %s",
            (text, sha, text, tool),
        )
        conn.execute("delete from kiwi_internal.plan_cache where tool_ref = %s", (tool,))


@pytest.fixture
def tool(publish_tool: Callable[..., str]) -> str:
    return publish_tool(
        "tamper", {"tool_type": "script", "executor": "bash_runtime"}, {"run.sh": ORIGINAL}, entrypoint="run.sh"
    )


def settings_for(database_url: str, cache: Path, policy: str = "off") -> Settings:
    return local_settings(database_url, cache, trust=TrustSettings(policy=policy), project_dir=cache.parent)


@pytest.fixture
def runners(database_url: str, make_runner: Callable[..., Runner]) -> Callable[..., Runner]:
    def make(cache: Path, policy: str = "off") -> Runner:
        runner = make_runner(settings_for(database_url, cache, policy))
        runner.local_spaces = False
        return runner

    return make


def blames_the_registry(message: str, tool: str) -> None:
    assert f"the registry content of {tool}@1.0.0 does not match its content_hash" in message, message
    assert "on disk" not in message and "remove " not in message, "the cached copy is not blamed"


@pytest.mark.parametrize("policy", ["off", "warn", "require"])
async def test_a_fresh_cache_refuses_content_altered_in_the_database(
    runners: Callable[..., Runner], conn: psycopg.Connection, tool: str, tmp_path: Path, policy: str
) -> None:
    tamper(conn, tool)
    runner = runners(tmp_path / "cache", policy)
    result = await runner.run(tool)
    assert isinstance(result.failure, IntegrityError), (result.status, result.error, result.output)
    blames_the_registry(str(result.failure), tool)
    assert "TAMPERED" not in str(result.output)
    assert not (tmp_path / "cache" / "tools").exists() or not any((tmp_path / "cache" / "tools").iterdir()), (
        "nothing of the altered version was written"
    )


async def test_a_warm_cache_refuses_altered_content_blaming_the_registry_not_the_disk(
    runners: Callable[..., Runner], conn: psycopg.Connection, tool: str, tmp_path: Path, database_url: str
) -> None:
    cache = tmp_path / "cache"
    runner = runners(cache)
    first = await runner.run(tool)
    assert first.ok and "original" in str(first.output), first.error
    tamper(conn, tool)
    again = await runner.run(tool)  # the same long-running runner
    assert isinstance(again.failure, IntegrityError), (again.status, again.output)
    blames_the_registry(str(again.failure), tool)
    done = run_kiwi(["run", tool], cwd=tmp_path, env=kiwi_env(database_url, cache))  # a new process, same cache
    assert done.code == 4, (done.out, done.err)
    assert "TAMPERED" not in done.out and "original" not in done.out
    blames_the_registry(done.err, tool)


async def test_a_cached_file_edited_keeping_size_and_mtime_is_refused(
    runners: Callable[..., Runner], tool: str, tmp_path: Path
) -> None:
    runner = runners(tmp_path / "cache")
    assert (await runner.run(tool)).ok
    time.sleep(0.1)  # past the filesystem clock's tick (materialize.RACY_NS): the stamp is remembered
    assert (await runner.run(tool)).ok
    cached = next((tmp_path / "cache" / "tools").glob("*/run.sh"))
    before = cached.stat()
    forged = "echo 0riginal\n"
    assert len(forged) == len(ORIGINAL)
    cached.write_text(forged)
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = cached.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    result = await runner.run(tool)
    assert isinstance(result.failure, IntegrityError), (result.status, result.output)
    assert "0riginal" not in str(result.output)
    assert "materialised file run.sh" in str(result.failure) and "changed on disk" in str(result.failure)
