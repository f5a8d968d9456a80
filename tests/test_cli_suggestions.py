"""`kiwi run NAME` / `kiwi show NAME` where NAME lives only in a namespace: the not-found error
suggests the namespaced ids the caller can see ("did you mean local/shout?"), and close names.

Real processes, the real database; tools written into namespaces by the admin connection."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner.testing.http_serving import two_tenants
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

Kiwi = Callable[..., Done]


FILES = Jsonb([{"path": "k.md", "content_text": "SHOUT", "is_entrypoint": True}])


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Kiwi:
    """`kiwi(*args)`: the CLI as the local stack's owner (its namespace: `local`)."""

    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))

    return run


@pytest.fixture
def in_local(conn: psycopg.Connection) -> Iterator[Callable[[str], str]]:
    """`in_local(stem)`: a script tool `local/<stem>_<hex>`; returns its name (without `local/`)."""
    made: list[str] = []

    def publish(stem: str) -> str:
        name = f"{stem}_{uuid.uuid4().hex[:8]}"
        conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest(f"local/{name}")), FILES))
        made.append(name)
        return name

    yield publish
    for name in made:
        conn.execute("delete from tools where ref = %s", (f"local/{name}",))


def manifest(tool_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "tool_id": tool_id,
        "tool_type": "knowledge",
        "version": "1.0.0",
        "description": "Shouts, for the suggestion tests.",
        "entrypoint": "k.md",
        **extra,
    }


def test_run_of_a_bare_name_suggests_the_callers_namespaced_tool(kiwi: Kiwi, in_local: Callable[[str], str]) -> None:
    name = in_local("shout")
    done = kiwi("run", name)
    assert done.code == 3, "not found, as before"
    assert f'kiwi: tool "{name}" not found' in done.err
    assert f"hint: did you mean local/{name}?" in done.err.splitlines()
    assert kiwi("run", f"local/{name}").code == 0, "the suggestion runs"


def test_show_suggests_too(kiwi: Kiwi, in_local: Callable[[str], str]) -> None:
    name = in_local("shout")
    done = kiwi("show", name)
    assert done.code == 3 and f"hint: did you mean local/{name}?" in done.err.splitlines()


def test_a_misspelt_name_suggests_the_close_one(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_wrld")
    assert done.code == 3 and "hint: did you mean hello_world?" in done.err.splitlines()


def test_a_missing_version_or_an_unknown_name_suggests_nothing(kiwi: Kiwi) -> None:
    assert "did you mean" not in kiwi("run", "hello_world@9.9.9").err
    done = kiwi("run", f"zz_{uuid.uuid4().hex}")
    assert done.code == 3 and "did you mean" not in done.err


def test_a_tool_not_found_says_so_in_one_line_with_a_hint(kiwi: Kiwi) -> None:
    """Before, the failure came after a run's status line for a run that never started
    ("error: nosuch via ? in 42 ms"), and with nothing to suggest, no hint at all."""
    name = f"nosuch_{uuid.uuid4().hex[:8]}"
    done = kiwi("run", name)
    assert done.code == 3 and done.out == ""
    assert done.err.splitlines() == [
        f'kiwi: tool "{name}" not found',
        f"hint: find tools by what they do with: kiwi search {name}",
    ]
    ran = kiwi("run", "hello_world")
    assert "success: hello_world@1.0.0 via hello_world -> bash_runtime -> subprocess" in ran.err, "a run still says how"


def test_a_bare_name_suggests_an_mcp_servers_tool_of_that_name_the_caller_can_see(
    database_url: str, tmp_path: Path, conn: psycopg.Connection
) -> None:
    """`kiwi run echo` suggests `local/everything_mcp.echo` (an imported server's tools are
    `<server>.<tool>`), as each caller sees the registry: another user's private tool of the
    same name stays unnamed. Before, only the very same name in another namespace was found."""
    name = f"echo{uuid.uuid4().hex[:6]}"  # too far from `<server>.<name>` for a close name
    with two_tenants(conn, "sg") as tenants:
        refs = {}
        for who, user in tenants.items():
            refs[who] = f"{user['ns']}/everything_of_{who}.{name}"
            conn.execute(
                "select publish_tool_version(%s, %s)", (Jsonb(manifest(refs[who], visibility="private")), FILES)
            )
        for who, other in (("a", "b"), ("b", "a")):
            env = kiwi_env(database_url, tmp_path / "cache", KIWI_ACCESS_TOKEN=tenants[who]["token"])
            done = run_kiwi(("run", name), cwd=tmp_path, env=env)
            assert done.code == 3 and f"hint: did you mean {refs[who]}?" in done.err.splitlines(), done.err
            assert refs[other] not in done.err, "another user's private tool is never named"
