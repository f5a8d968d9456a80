"""A serving process tunes its garbage collector once start-up is done (runner/cli/long_lived.py):
start-up's objects frozen out of later collections, the youngest generation collected less often."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from runner.cli.long_lived import YOUNG_THRESHOLD, settle_heap
from runner.testing.http_serving import serve_env
from tests.conftest import ROOT


def test_settling_the_heap_freezes_what_exists_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    kept = [object() for _ in range(10)], {"a": [1, 2]}  # tracked containers alive across the call
    try:
        gc.unfreeze()
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert not any(o is kept or o is kept[0] for o in gc.get_objects())  # frozen: no collection sees them
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_kiwi_serve_over_stdio_settles_the_heap_before_it_serves(database_url: str, tmp_path: Path) -> None:
    """A real `serve` over stdio, its input closed at once: it serves nothing and returns, and the
    process's collector is as settle_heap leaves it."""
    script = (
        "import asyncio, gc\n"
        "from runner.cli import serve\n"
        "asyncio.run(serve.serve('stdio'))\n"
        "print(gc.get_freeze_count(), gc.get_threshold()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input="",  # a pipe, closed: the server reads its end and returns
        capture_output=True,
        text=True,
        env=serve_env(database_url, tmp_path / "cache"),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    frozen, young = map(int, done.stdout.split())
    assert frozen > 10_000  # the SDK's and Kiwi's modules, at the least
    assert young == YOUNG_THRESHOLD
