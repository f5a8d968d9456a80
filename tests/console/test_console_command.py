"""`kiwi console` as a real process: it binds 127.0.0.1, prints the console's URL, and serves
the sign-in page there."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from runner.testing.http_serving import ROOT, serve_env, stop

pytestmark = pytest.mark.slow  # a kiwi process


def test_kiwi_console_prints_its_url_on_the_loopback_and_serves_there(database_url: str, tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli.main", "console", "--port", "0"],
            cwd=ROOT,
            env=serve_env(database_url, tmp_path / "cache"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"http://127\.0\.0\.1:(\d+)/console/", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        page = httpx.get(f"{found.group(0)}signin")
        assert page.status_code == 200 and "Access token" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert httpx.get(f"http://127.0.0.1:{found.group(1)}/", follow_redirects=True).url.path == "/console/signin"
    finally:
        stop(proc)
