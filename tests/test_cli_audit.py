"""The CLI's writes leave the audit rows their MCP counterparts leave.

`kiwi publish`, `yank`, `deprecate`, `delete`, `approve` and `deny` run as real processes, as a
signed-in user owning a throwaway namespace (and as the admin for the approval); each leaves
one row in public.audit_log naming the action, the tool and version it touched, the decision
and the outcome, in a `cli-` session; a refused publish is audited as refused, with the reason.
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
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

pytestmark = pytest.mark.slow


@pytest.fixture
def owner(conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    uid = str(uuid.uuid4())
    ns = f"au_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, uid))
    token = sign({"sub": uid, "role": "authenticated", "aud": "authenticated"}, LOCAL_JWT_SECRET)
    yield {"id": uid, "ns": ns, "token": token}
    conn.execute("delete from approvals where namespace = %s", (ns,))
    conn.execute("delete from tools where namespace = %s", (ns,))
    conn.execute("delete from namespaces where namespace = %s", (ns,))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(token: str | None, *args: str) -> Done:
        extra = {"KIWI_ACCESS_TOKEN": token} if token else {}
        return run_kiwi(args, cwd=cwd, env=kiwi_env(database_url, tmp_path / "cache", **extra))

    return run


def tool_dir(root: Path, ns: str, version: str, tool_type: str = "script") -> Path:
    folder = root / f"{tool_type}-{version}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    if tool_type == "script":
        manifest: dict[str, Any] = {"executor": "bash_runtime", "entrypoint": "run.sh", "tool_id": "audited"}
        (folder / "run.sh").write_text("echo audited\n")
    else:
        manifest = {"executor": "subprocess", "config": {"command": "sh"}, "tool_id": "audited_runtime"}
    manifest.update(namespace=ns, tool_type=tool_type, version=version, description="audited by the CLI")
    (folder / "tool.yaml").write_text(yaml.safe_dump(manifest))
    return folder


def rows(conn: psycopg.Connection, tool: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select action, version, decision, outcome, reason, session_id like 'cli-%%', content_hash is not null"
        " from audit_log where tool_id = %s order by at, id",
        (tool,),
    ).fetchall()


def test_publish_yank_deprecate_and_delete_from_the_cli_are_audited(
    kiwi: Callable[..., Done], owner: dict[str, str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    ref = f"{owner['ns']}/audited"
    for version in ("1.0.0", "1.1.0"):
        done = kiwi(owner["token"], "publish", str(tool_dir(tmp_path, owner["ns"], version)))
        assert done.code == 0, done
    assert kiwi(owner["token"], "deprecate", f"{ref}@1.0.0", "--message", "use 1.1.0").code == 0
    assert kiwi(owner["token"], "yank", f"{ref}@1.1.0", "--reason", "broken").code == 0
    assert kiwi(owner["token"], "yank", f"{ref}@9.9.9").code != 0
    assert kiwi(owner["token"], "delete", ref, "--yes").code == 0

    found = rows(conn, ref)
    assert [r[:4] for r in found] == [
        ("publish", "1.0.0", "allowed", "success"),
        ("publish", "1.1.0", "allowed", "success"),
        ("deprecate", "1.0.0", "allowed", "success"),
        ("yank", "1.1.0", "allowed", "success"),
        ("yank", "9.9.9", "refused", None),
        ("delete", None, "allowed", "success"),
    ], found
    assert all(r[5] for r in found), "each in a cli- session"
    assert found[0][6] and found[1][6], "a publish names the content_hash it stored"
    assert "9.9.9" in found[4][4], found[4]
    callers = conn.execute("select distinct caller from audit_log where tool_id = %s", (ref,)).fetchall()
    assert callers == [(owner["id"],)], "written as the caller, not the runner's login"


def test_a_refused_publish_and_an_approval_from_the_cli_are_audited(
    kiwi: Callable[..., Done], owner: dict[str, str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    ref = f"{owner['ns']}/audited_runtime"
    folder = tool_dir(tmp_path, owner["ns"], "1.0.0", "runtime")
    refused = kiwi(owner["token"], "publish", str(folder))
    assert refused.code == 4, refused
    asked = kiwi(owner["token"], "publish", str(folder), "--request-approval")
    found = re.search(r"approval requested: ([0-9a-f-]{36})", asked.out)
    assert found, asked
    approval = found.group(1)
    assert kiwi(None, "--admin", "approve", approval).code == 0
    assert kiwi(None, "--admin", "deny", approval).code != 0, "decided already"

    audited = rows(conn, ref)
    assert [r[:4] for r in audited] == [
        ("publish", None, "refused", None),
        ("approve", "1.0.0", "allowed", "success"),
    ], audited
    assert "only an admin may publish" in audited[0][4]
    denied = rows(conn, approval)
    assert [r[:4] for r in denied] == [("deny", None, "refused", None)], denied
