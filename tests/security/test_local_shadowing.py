"""Local tools never shadow the registry silently (issue 13, item 5).

A repository's `.ai/tools/hello_world` used to replace the registry's `hello_world` from any
subdirectory with no word said, even under `[trust] policy = "require"`, which refuses the
registry's unsigned version. Now: the shadowing is announced on stderr and stored in the run
record (`tool_runs.source`); the trust policy judges the local tool as it judges the
registry's (trusted only as a published version of the same content, signed by a trusted
key); the MCP server ignores local spaces unless configured to read them.

Real parts: the CLI as a process, the real database, Runner objects over it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from runner import Runner, Settings, build_server
from tests.kiwi_cli import Done, kiwi_env, run_kiwi
from tests.trust.conftest import Chain, Project, chain, forget_signatures, make_key, project  # noqa: F401

LOCAL_SCRIPT = 'echo "the repository\'s own hello_world"\n'
LOCAL_MANIFEST = """tool_id: hello_world
tool_type: script
executor: bash_runtime
version: 9.9.9
entrypoint: hello.sh
"""


def repository(root: Path) -> Path:
    """A repository whose project space holds its own hello_world; returns a subdirectory of it."""
    tool = root / ".ai" / "tools" / "hello"
    tool.mkdir(parents=True)
    (tool / "tool.yaml").write_text(LOCAL_MANIFEST)
    (tool / "hello.sh").write_text(LOCAL_SCRIPT)
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    return sub


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    sub = repository(tmp_path / "repo")
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_USER_SPACE=str(tmp_path / "user-space"))

    def kiwi(*args: str, **extra: str) -> Done:
        return run_kiwi(args, cwd=sub, env={**env, **extra})

    return kiwi


def test_a_shadowing_local_tool_is_announced_and_recorded_as_project(
    cli: Callable[..., Done], conn: psycopg.Connection
) -> None:
    since = datetime.now(UTC)
    done = cli("run", "hello_world")
    assert done.code == 0, done.err
    assert "the repository's own hello_world" in done.out
    assert "shadows the registry's hello_world@1.0.0" in done.err, done.err
    assert "project space" in done.err and "--registry" in done.err
    row = conn.execute(
        "select source from tool_runs where tool_id = 'hello_world' and version = '9.9.9' and started_at >= %s"
        " order by started_at desc limit 1",
        (since,),
    ).fetchone()
    assert row == ("project",), "the run record says the tool came from the project space"


def test_the_registrys_tool_is_not_announced_and_recorded_as_registry(
    cli: Callable[..., Done], conn: psycopg.Connection
) -> None:
    since = datetime.now(UTC)
    done = cli("run", "hello_world", "--registry", "-p", "name=Ada")
    assert done.code == 0, done.err
    assert "shadows" not in done.err
    row = conn.execute(
        "select source from tool_runs where tool_id = 'hello_world' and version = '1.0.0' and started_at >= %s"
        " order by started_at desc limit 1",
        (since,),
    ).fetchone()
    assert row == ("registry",)


def test_require_refuses_an_unsigned_local_tool_as_it_refuses_the_registrys(cli: Callable[..., Done]) -> None:
    local = cli("run", "hello_world", KIWI_TRUST_POLICY="require")
    assert local.code == 4, (local.out, local.err)
    assert "the repository's own hello_world" not in local.out, "nothing ran"
    assert "trust policy refuses hello_world@9.9.9 (the project space's" in local.err, local.err
    assert "unsigned" in local.err and "shadows the registry's hello_world@1.0.0" in local.err
    registry = cli("run", "hello_world", "--registry", KIWI_TRUST_POLICY="require")
    assert registry.code == 4 and "unsigned" in registry.err, "the registry's unsigned version: refused as before"


def test_warn_runs_a_local_tool_saying_it_is_unsigned(cli: Callable[..., Done]) -> None:
    done = cli("run", "hello_world", KIWI_TRUST_POLICY="warn")
    assert done.code == 0, done.err
    assert "the repository's own hello_world" in done.out
    assert "hello_world@9.9.9 is unsigned" in done.err, done.err


def test_require_trusts_a_local_copy_of_a_signed_published_version(
    project: Project,  # noqa: F811 (the trust suite's fixtures, imported above)
    chain: Chain,  # noqa: F811
    make_key: Callable[[str], dict[str, str]],  # noqa: F811
    forget_signatures: list[str],  # noqa: F811
) -> None:
    """A pulled tool, unchanged, is the published version: judged by its signatures; edited,
    it is nobody's signed content and refused."""
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    for ref in (chain.tool, chain.runtime, "subprocess"):
        done = project.kiwi("sign", ref, "--key", "publisher")
        assert done.code == 0, done.err
    project.trust("require", {"*": [key["public_key"]]})
    assert project.kiwi("pull", chain.tool).code == 0
    same = project.kiwi("run", chain.tool, "-p", "word=pulled")
    assert same.code == 0 and "pulled" in same.out, same.err
    assert f"shadows the registry's {chain.tool}@1.0.0" in same.err
    entry = next((project.dir / ".ai" / "tools").rglob("say.sh"))
    entry.write_text("echo edited\n")
    edited = project.kiwi("run", chain.tool, "-p", "word=w")
    assert edited.code == 4 and "edited" not in edited.out, edited.err
    assert "is no published version, so nobody signed it" in edited.err


@pytest.fixture
async def local_runner(
    tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]
) -> Runner:
    repo = tmp_path / "repo"
    repository(repo)
    return make_runner(
        make_settings(cache_dir=tmp_path / "cache", project_dir=repo, user_space=tmp_path / "user-space")
    )


async def test_the_mcp_server_ignores_local_spaces_unless_configured(local_runner: Runner) -> None:
    assert (await local_runner.plan("hello_world")).source == "project", "the CLI's runner reads them"
    build_server(local_runner)
    plan = await local_runner.plan("hello_world")
    assert (plan.source, plan.version) == ("registry", "1.0.0"), "a server reads only the registry by default"
    result = await local_runner.run("hello_world", {"name": "Ada"})
    assert result.ok and "the repository's own" not in str(result.output)
    build_server(local_runner, local_spaces=True)
    assert (await local_runner.plan("hello_world")).source == "project", "unless told to read them"


def test_serve_reads_local_spaces_only_when_config_or_flag_say_so(tmp_path: Path) -> None:
    assert Settings.load({}, config_path=tmp_path / "none.toml").serve_local_spaces is False
    (tmp_path / "config.toml").write_text("[serve]\nlocal_spaces = true\n")
    assert Settings.load({}, config_path=tmp_path / "config.toml").serve_local_spaces is True
    from runner.cli.serve import main

    assert "--local-spaces" in _help(main)


def _help(main: Callable[[list[str]], int]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    return out.getvalue()
