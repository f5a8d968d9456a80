"""Some of the suite, run again in a pytest of its own: the environment cleared of Kiwi's and
Supabase's settings (but the stack's port), so the inner run finds its database as a fresh
shell would, plus whatever the caller sets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_inner_suite(tests: list[str], **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    env.update(env_extra)
    if "KIWI_DB_PORT" in os.environ:
        env["KIWI_DB_PORT"] = os.environ["KIWI_DB_PORT"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
