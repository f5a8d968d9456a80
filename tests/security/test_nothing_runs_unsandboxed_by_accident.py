"""Nothing runs unsandboxed by accident.

Where the sandbox cannot start, a run is refused with an error that names the missing piece
and the fix, rather than running on the host; the opt-out (KIWI_SANDBOX=off) is a runner
setting only, and a shared HTTP server refuses to start with it. `kiwi show` says which
sandbox a tool's processes get.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from runner import PostgresRegistry, Runner, local_owner
from runner.sandbox import sandbox as sandbox_module
from tests.conftest import local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi


async def test_a_machine_without_bubblewrap_refuses_every_run(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake for what cannot be undone here: bubblewrap is installed on this machine, so the
    # lookup the sandbox makes for it is told it is not.
    real_which = sandbox_module.shutil.which
    monkeypatch.setattr(
        sandbox_module.shutil, "which", lambda name, **kw: None if name == "bwrap" else real_which(name, **kw)
    )
    # and this process looks again (once a sandbox started here, it does not: kiwi agent's calls)
    monkeypatch.setattr(sandbox_module, "_started_here", False)
    settings = local_settings(database_url, tmp_path)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
    try:
        result = await runner.run("hello_world", {"name": "x"})
    finally:
        await runner.aclose()
    assert result.status == "error"
    assert result.error is not None
    assert "bubblewrap (bwrap) is not installed" in result.error
    assert "apt-get install bubblewrap" in result.error and "KIWI_SANDBOX=off" in result.error
    assert result.output is None
    assert result.failure is not None and result.failure.exit_code == 4, "kiwi run exits 4: refused"


def test_a_manifest_cannot_turn_the_sandbox_off(publish_tool: Callable[..., str]) -> None:
    with pytest.raises(Exception, match=r"sandbox"):
        publish_tool(
            "unsandboxed",
            {"tool_type": "script", "executor": "bash_runtime", "config": {"sandbox": {"enabled": False}}},
            {"run.sh": "echo hi\n"},
            entrypoint="run.sh",
        )


def test_the_http_server_refuses_to_start_with_the_sandbox_off(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_SANDBOX="off")
    done = run_kiwi(["serve", "--transport", "http", "--port", "0"], cwd=tmp_path, env=env, timeout=60)
    assert done.code != 0
    assert "refuses to start with the sandbox off" in done.err


def test_the_opt_out_runs_on_the_host_and_says_so(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_SANDBOX="off")
    done = run_kiwi(["show", "hello_world"], cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    assert "sandbox: off" in done.out


def test_kiwi_show_prints_the_effective_profile(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache")
    done = run_kiwi(["show", "hello_world", "--json"], cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    shown = json.loads(done.out)["sandbox"]
    assert shown["enabled"] is True and shown["network"] == "none"
    assert shown["fs"] == {"read": [], "write": []}
    assert shown["limits"]["pids"] > 0
    # how each limit holds here: these machines let the runner make cgroups
    assert shown["limits_apply"]["memory_mb"] == "the whole sandbox (cgroup)"
    assert shown["limits_apply"]["cpu_s"] == "each process (rlimit)"
    text = run_kiwi(["show", "hello_world"], cwd=tmp_path, env=env)
    assert "sandbox: network none; host paths none; limits memory_mb" in text.out
