"""A tenant's tool runs in its sandbox: no route to the host, the database, other tenants or
the server's secrets.

Found on a clean checkout: a Bash tool published by one user read the server's environment
through /proc/$PPID/environ (base64, past the output masking), reached the database as its
superuser, wrote beside another tool's files in the shared cache and into the run journal,
read ~/.ssh and /etc/shadow, froze the server with `kill -STOP $PPID`, and forked, allocated
and wrote without limit. One test per route, each now failing to reach its target; and the
fork bomb, the memory hog and the disk fill each ended by their limit, with an error naming it.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from runner import Runner, Settings
from tests.conftest import stack_url
from tests.security.test_no_orphans import none_left

SECRET = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture
async def runner(
    database_url: str, tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]
) -> Runner:
    environ = {**os.environ, "KIWI_TOKEN_KEY": SECRET, "KIWI_DATABASE_URL": database_url}
    return make_runner(make_settings(cache_dir=tmp_path / "c"), environ=environ)


@pytest.fixture
def bash_tool(publish_tool: Callable[..., str]) -> Callable[..., str]:
    def make(script: str, **config: object) -> str:
        manifest = {
            "tool_type": "script",
            "executor": "bash_runtime",
            "config": {"timeout": 20, **config},
            "parameters": [{"name": "arg", "type": "string"}],
        }
        return publish_tool("contained", manifest, {"run.sh": script}, entrypoint="run.sh")

    return make


async def run(runner: Runner, tool: str, arg: str = "") -> tuple[str, str, str | None]:
    result = await runner.run(tool, {"arg": arg})
    return result.status, str(result.output), result.error


async def test_the_servers_environment_is_out_of_reach(runner: Runner, bash_tool: Callable[..., str]) -> None:
    script = (
        'for p in $PPID 1 self; do base64 -w0 "/proc/$p/environ" 2>/dev/null; echo; done\n'
        "env | base64 -w0; echo\n"
        "cat /proc/*/environ 2>/dev/null | base64 -w0\n"
    )
    status, output, _ = await run(runner, bash_tool(script))
    assert status == "success"
    decoded = b"".join(base64.b64decode(line + "===") for line in output.split() if line.strip())
    assert SECRET.encode() not in decoded
    assert b"KIWI_DATABASE_URL" not in decoded and b"postgres:postgres" not in decoded


async def test_host_files_are_out_of_reach(runner: Runner, bash_tool: Callable[..., str], tmp_path: Path) -> None:
    home = Path.home()
    targets = ["/etc/shadow", f"{home}/.ssh", f"{home}/.config/kiwi/keys", str(tmp_path), "/root", "/home", "/var"]
    script = "".join(f'[ -e "{t}" ] && echo "SEEN {t}"\n' for t in targets) + "id -u; echo done\n"
    status, output, error = await run(runner, bash_tool(script))
    assert status == "success", error
    assert "SEEN" not in output
    assert "65534" in output or os.geteuid() != 0, "as root the tool runs as nobody"


async def test_the_database_is_not_reachable_over_loopback(runner: Runner, bash_tool: Callable[..., str]) -> None:
    database = urlsplit(stack_url()).port or 5432
    script = (
        f"for port in {database} 5432 80; do\n"
        '  if (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "OPEN $port"; else echo "closed $port"; fi\n'
        "done\n"
    )
    status, output, error = await run(runner, bash_tool(script))
    assert status == "success", error
    assert "OPEN" not in output and f"closed {database}" in output


async def test_another_tools_cache_directory_cannot_be_written(
    runner: Runner, bash_tool: Callable[..., str], tmp_path: Path
) -> None:
    victim = bash_tool('echo "victim ran"\n')
    assert (await run(runner, victim))[0] == "success"
    cache = tmp_path / "c" / "tools"
    attack = bash_tool(
        'touch "$PWD/planted" 2>/dev/null && echo "WROTE own dir"\n'
        f'for d in {cache}/*/; do touch "$d/planted" 2>/dev/null && echo "WROTE $d"; done\n'
        "ls /kiwi; echo done\n"
    )
    status, output, error = await run(runner, attack)
    assert status == "success", error
    assert "WROTE" not in output
    assert not list(cache.glob("*/planted"))


async def test_the_journal_is_out_of_sight(runner: Runner, bash_tool: Callable[..., str], tmp_path: Path) -> None:
    journal = tmp_path / "c" / "journal"
    script = (
        f'ls -R "{journal}" 2>/dev/null && echo SEEN\n'
        f'(echo x >> "{journal}/forged.jsonl") 2>/dev/null && echo WROTE\n'
        "echo done\n"
    )
    status, output, error = await run(runner, bash_tool(script))
    assert status == "success", error
    assert "SEEN" not in output and "WROTE" not in output
    assert not (journal / "forged.jsonl").exists()


async def test_the_server_cannot_be_signalled(runner: Runner, bash_tool: Callable[..., str]) -> None:
    me = os.getpid()
    script = (
        "kill -STOP $PPID 2>/dev/null && echo STOPPED-PARENT\n"
        f"kill -STOP {me} 2>/dev/null && echo STOPPED-ME\n"
        "echo done\n"
    )
    status, output, error = await run(runner, bash_tool(script))
    assert status == "success", error
    assert "STOPPED" not in output
    assert (
        "State:\tS" in Path(f"/proc/{me}/status").read_text() or "State:\tR" in Path(f"/proc/{me}/status").read_text()
    )


async def test_a_setsid_daemon_dies_with_its_run(runner: Runner, bash_tool: Callable[..., str]) -> None:
    marker = f"kiwi-daemon-{uuid.uuid4().hex}"
    script = 'setsid sh -c \'sleep 300; echo "$0"\' "$KIWI_PARAM_ARG" </dev/null >/dev/null 2>&1 &\necho started\n'
    status, output, error = await run(runner, bash_tool(script), marker)
    assert status == "success", error
    assert output == "started"
    assert await none_left(marker) == {}


async def test_a_fork_bomb_ends_at_the_process_limit(runner: Runner, bash_tool: Callable[..., str]) -> None:
    script = "for i in $(seq 1000); do sleep 30 & done; wait\n"
    status, _, error = await run(runner, bash_tool(script, sandbox={"limits": {"pids": 32}}))
    assert status == "error"
    assert error is not None and "pids" in error and "limit" in error, error


async def test_a_memory_hog_ends_at_the_memory_limit(runner: Runner, bash_tool: Callable[..., str]) -> None:
    script = 'x=$(head -c 300000000 /dev/zero | tr "\\0" a); echo "${#x}"\n'
    status, _, error = await run(runner, bash_tool(script, sandbox={"limits": {"memory_mb": 64}}))
    assert status == "error"
    assert error is not None and "memory_mb" in error, error


async def test_a_disk_fill_ends_at_the_file_limit(runner: Runner, bash_tool: Callable[..., str]) -> None:
    script = "dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1\n"
    status, _, error = await run(runner, bash_tool(script, sandbox={"limits": {"file_mb": 8}}))
    assert status == "error"
    assert error is not None and "file_mb" in error, error


async def test_a_descriptor_leak_ends_at_the_open_files_limit(runner: Runner, bash_tool: Callable[..., str]) -> None:
    script = "for i in $(seq 100); do exec {fd}</dev/null || exit 1; done; echo all open\n"
    status, output, error = await run(runner, bash_tool(script, sandbox={"limits": {"open_files": 16}}))
    assert status == "error" and "all open" not in output
    assert error is not None and "open_files: 16" in error and "open files limit" in error, error
    status, output, error = await run(runner, bash_tool("echo 'too many open files' >&2; exit 3\n"))
    assert status == "error" and error is not None and "open_files" in error, "EMFILE said on a failure is named"
    status, output, error = await run(runner, bash_tool("echo 'too many open files' >&2\n"))
    assert status == "success", "a run that succeeded was ended by no limit"


async def test_the_run_says_it_was_sandboxed_and_with_which_profile(
    runner: Runner, bash_tool: Callable[..., str]
) -> None:
    result = await runner.run(bash_tool("echo hi\n", sandbox={"limits": {"pids": 64}}), {"arg": ""})
    assert result.status == "success", result.error
    shown = result.detail["sandbox"]
    assert shown["enabled"] is True and shown["network"] == "none"
    assert shown["limits"]["pids"] == 64


async def test_no_new_user_namespace_or_mount_inside(runner: Runner, bash_tool: Callable[..., str]) -> None:
    # where a process without capabilities would get them back (over namespaces of its own):
    # refused by the sandbox's seccomp filter
    script = (
        "unshare -U true 2>/dev/null && echo USERNS || echo no-userns\n"
        "unshare -r true 2>/dev/null && echo ROOTMAP || echo no-rootmap\n"
        "mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED || echo no-mount\n"
    )
    status, output, error = await run(runner, bash_tool(script))
    assert status == "success", error
    assert output.split() == ["no-userns", "no-rootmap", "no-mount"]


async def test_a_granted_path_is_checked_again_on_every_run(
    runner: Runner, bash_tool: Callable[..., str], tmp_path: Path
) -> None:
    """The sandbox profile is made when a run first confines a process, and on every run that
    does: a granted path gone since the last run refuses the next one, naming it."""
    granted = tmp_path / "granted"
    granted.mkdir()
    (granted / "note").write_text("hi\n")
    tool = bash_tool(f"cat {granted}/note\n", sandbox={"fs": {"read": [str(granted)]}})
    assert await run(runner, tool) == ("success", "hi", None)
    (granted / "note").unlink()
    granted.rmdir()
    status, _, error = await run(runner, tool)
    assert status == "error" and error is not None and "does not exist on this machine" in error, error
