"""One confined process's command line and environment: what goes where, and what never does."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner import PrimitiveError, Sandbox, SandboxUnavailable
from runner.primitives.subprocess import ProcessSpec, spawn, to_outcome
from runner.sandbox import Limits, Mount, Profile
from runner.sandbox.confine import SANDBOX_PATH
from runner.sandbox.seccomp import write_filter


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    sb = Sandbox()
    yield sb
    await sb.aclose()


async def test_secrets_travel_in_the_environment_never_on_the_command_line(sandbox: Sandbox, tmp_path: Path) -> None:
    confine = await sandbox.confine(Profile(), [Mount(str(tmp_path), "/kiwi/tool")], "/kiwi/tool", os.environ)
    assert confine is not None
    argv, env = confine.command(["bash", "-c", "echo $TOKEN"], {"TOKEN": "s3cret-value", "PATH": os.environ["PATH"]})
    confine.release()
    assert not any("s3cret-value" in a for a in argv)
    assert env["TOKEN"] == "s3cret-value"
    assert env["PATH"] == SANDBOX_PATH and env["HOME"] == "/tmp" and env["TMPDIR"] == "/tmp"


async def test_the_hosts_proxy_settings_do_not_reach_a_sandbox_without_network(sandbox: Sandbox) -> None:
    confine = await sandbox.confine(Profile(), [], "/tmp", os.environ)
    assert confine is not None
    _, env = confine.command(["true"], {"HTTPS_PROXY": "http://corp:3128", "no_proxy": "x"})
    confine.release()
    assert "HTTPS_PROXY" not in env and "no_proxy" not in env


async def test_a_command_the_sandbox_cannot_see_is_a_clear_error(sandbox: Sandbox, tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.mkdir()
    confine = await sandbox.confine(Profile(), [Mount(str(tool), "/kiwi/tool")], "/kiwi/tool", os.environ)
    with pytest.raises(PrimitiveError, match=r"command not found: kiwi-no-such-command \(in the sandbox"):
        await spawn(ProcessSpec(argv=["kiwi-no-such-command"], env={"PATH": "/usr/bin"}, confine=confine))


async def test_each_limit_is_named_with_its_value(sandbox: Sandbox) -> None:
    confine = await sandbox.confine(Profile(limits=Limits(memory_mb=64, cpu_s=2)), [], "/tmp", os.environ)
    assert confine is not None
    confine.release()
    assert confine.describe_limit("memory_mb") == "the sandbox's memory limit (memory_mb: 64 MB) ended the run"
    assert confine.describe_limit("cpu_s") == "the sandbox's CPU time limit (cpu_s: 2 s) ended the run"


async def test_the_opt_out_makes_no_confinement_and_a_missing_sandbox_refuses() -> None:
    off = Sandbox(enabled=False)
    assert await off.confine(Profile(), [], "/tmp", os.environ) is None
    broken = Sandbox()
    broken._problem = "bubblewrap (bwrap) is not installed"  # what the probe says on such a machine
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        await broken.confine(Profile(), [], "/tmp", os.environ)


async def test_without_a_cgroup_rlimits_bound_what_they_can(sandbox: Sandbox) -> None:
    confine = await sandbox.confine(Profile(limits=Limits(memory_mb=64, pids=16)), [], "/tmp", os.environ, cgroup=False)
    assert confine is not None and confine.cgroup is None
    argv, _ = confine.command(["true"], {})
    assert f"--data={64 * 1024 * 1024}" in argv, "each process's data is bounded instead"
    assert ("--nproc=16" in argv) == (os.geteuid() != 0), "a process count binds only a uid that is not root's"


async def test_the_limits_hold_inside_whether_the_prelude_or_prlimit_sets_them(sandbox: Sandbox) -> None:
    """The shell that starts bubblewrap sets the limits bubblewrap can live within (no exec of
    prlimit for them); an open-files limit too small for bubblewrap's own start is set inside."""
    script = 'echo "$(ulimit -St) $(ulimit -Ht) $(ulimit -f) $(ulimit -c) $(ulimit -n)"'
    for open_files, via_prlimit in ((100, False), (16, True)):
        limits = Limits(cpu_s=5, file_mb=3, open_files=open_files)
        confine = await sandbox.confine(Profile(limits=limits), [], "/tmp", os.environ)
        assert confine is not None
        argv, _ = confine.command(["true"], {})
        assert ("/usr/bin/prlimit" in argv) == (via_prlimit or confine.cgroup is None)
        spec = ProcessSpec(argv=["bash", "-c", script], env={"PATH": "/usr/bin"}, confine=confine)
        result = await spawn(spec)
        assert result.exit_code == 0, result.stderr
        # bash counts -f in 1024-byte blocks: 3 MB
        assert result.stdout.split() == ["5", "7", "3072", "0", str(open_files)]


async def test_a_full_tmp_names_the_file_limit(sandbox: Sandbox) -> None:
    # many files, each under the per-file limit, fill the sandbox's /tmp (its size is file_mb)
    confine = await sandbox.confine(Profile(limits=Limits(file_mb=2)), [], "/tmp", os.environ)
    script = "for i in 1 2 3 4 5 6; do head -c 600000 /dev/zero > /tmp/f$i || exit 1; done"
    spec = ProcessSpec(argv=["bash", "-c", script], env={"PATH": "/usr/bin"}, confine=confine)
    outcome = to_outcome(await spawn(spec), spec)
    assert outcome.status == "error"
    assert "No space left on device" in (outcome.error or "")
    assert "the sandbox's /tmp holds at most its file_mb limit: 2 MB" in (outcome.error or "")


@pytest.mark.slow
async def test_cpu_time_ends_the_run_naming_cpu_s(sandbox: Sandbox) -> None:
    confine = await sandbox.confine(Profile(limits=Limits(cpu_s=1)), [], "/tmp", os.environ)
    spec = ProcessSpec(argv=["bash", "-c", "while :; do :; done"], env={"PATH": "/usr/bin"}, confine=confine)
    result = await spawn(spec)
    assert result.limit == "cpu_s" and not result.timed_out
    assert to_outcome(result, spec).error == "the sandbox's CPU time limit (cpu_s: 1 s) ended the run"


def test_no_libseccomp_is_said_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a fake of a machine without the library: the import the filter needs fails
    monkeypatch.setitem(sys.modules, "pyseccomp", None)
    why = write_filter(tmp_path / "f.bpf")
    assert why is not None and why.startswith("no seccomp filter: libseccomp is unavailable")
    assert not (tmp_path / "f.bpf").exists()


async def test_granted_directories_are_on_the_path_after_the_systems(sandbox: Sandbox, tmp_path: Path) -> None:
    """Where a runtime's interpreter is outside /usr its profile grants the directory; the sandbox
    finds the command there, and a system command of the same name still comes first."""
    tool = tmp_path / "bin"
    tool.mkdir()
    for name in ("only_here", "true"):
        (tool / name).write_text("#!/bin/sh\necho granted\n")
        (tool / name).chmod(0o755)
    tool.chmod(0o755)
    tmp_path.chmod(0o755)
    for name, expected in (("only_here", "granted"), ("true", "")):
        confine = await sandbox.confine(Profile(read=(str(tool),)), [], "/tmp", os.environ)
        assert confine is not None
        result = await spawn(ProcessSpec([name], {"PATH": os.environ["PATH"]}, None, None, 20, 10000, confine=confine))
        assert (result.exit_code, result.stdout.strip()) == (0, expected)


@pytest.mark.parametrize(
    ("stderr", "named"),
    [
        ("OSError: [Errno 24] Too many open files: '/dev/null'", "open_files"),
        ("Error: EMFILE: too many open files, open '/tmp/x'", "open_files"),
        ("bash: /dev/null: Too many open files", "open_files"),
        ("OSError: [Errno 23] Too many open files in system", None),  # ENFILE: the machine's, not ours
        ("Traceback: KeyError", None),
    ],
)
async def test_a_failure_saying_emfile_is_named_the_open_files_limit(
    sandbox: Sandbox, stderr: str, named: str | None
) -> None:
    confine = await sandbox.confine(Profile(), [], "/tmp", os.environ, cgroup=False)
    assert confine is not None
    assert confine.limit_hit(1, stderr) == named
    assert confine.limit_hit(0, stderr) is None, "a run that succeeded was ended by no limit"


def test_a_v1_cgroup_is_joined_by_thread_so_no_grace_period_is_waited(tmp_path: Path) -> None:
    """Regression: joining through cgroup.procs made the kernel wait an RCU grace period (about
    15 ms) for every run that did not follow another closely. The prelude's shell has one
    thread: moving it through `tasks` moves the whole process (the limit tests show it held)."""
    from runner.sandbox.cgroups import RunCgroup

    v1 = RunCgroup(1, (tmp_path / "memory" / "run-1", tmp_path / "pids" / "run-1"))
    assert [Path(f).name for f in v1.join_files()] == ["tasks", "tasks"]
    assert [Path(f).name for f in RunCgroup(2, (tmp_path / "run-1",)).join_files()] == ["cgroup.procs"]


async def test_what_is_worked_out_once_still_follows_each_confinements_own_inputs(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The layout, prelude and command lookups are cached per process: two confinements with other
    mount points, working directory and limits each get their own, and a command found once does
    not make a missing one found."""
    tool = tmp_path / "tool"
    tool.mkdir()
    a = await sandbox.confine(Profile(), [Mount(str(tool), "/kiwi/tool")], "/kiwi/tool", os.environ)
    b = await sandbox.confine(
        Profile(limits=Limits(cpu_s=7)), [Mount(str(tool), "/opt/x/tool")], "/tmp/work/here", os.environ
    )
    assert a is not None and b is not None
    argv_a, _ = a.command(["bash"], {})
    argv_b, _ = b.command(["bash"], {})
    a_again, _ = a.command(["bash"], {})
    for c in (a, b):
        c.release()
    assert argv_a[3:] == a_again[3:], "the same inputs, the same command line (the cgroup aside)"
    assert "/kiwi" in argv_a and "/opt/x" not in argv_a
    assert "/opt" in argv_b and "/opt/x" in argv_b and "/tmp/work/here" in argv_b
    assert "-S -t 7" in argv_b[2] and "-S -t 7" not in argv_a[2], "each confinement's own limits in its prelude"
    assert a.resolve("bash", SANDBOX_PATH) == "bash" and a.resolve("bash", SANDBOX_PATH) == "bash"
    with pytest.raises(PrimitiveError, match="command not found: kiwi-no-such-command"):
        a.resolve("kiwi-no-such-command", SANDBOX_PATH)
