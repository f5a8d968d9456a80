"""The runner's database login is not a superuser and holds nothing of its own.

Before, `kiwi` logged in as the `postgres` superuser and only SET ROLE to its caller, so
whoever read the runner's environment had a superuser login. Now the default URL names
`kiwi_runner` (supabase/local_runner_login.sql, applied by scripts/stack), made like
Supabase's `authenticator`: it can log in and SET ROLE to anon, authenticated and
service_role, and as itself it is refused everything the registry holds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url
from runner.mcp_server.registry_events import CHANNEL as REGISTRY_CHANNEL
from runner.registry.plan_cache import CHANNEL as PLANS_CHANNEL
from tests.conftest import ROOT, runner_url
from tests.kiwi_cli import kiwi_env, run_kiwi

API_ROLES = {"anon", "authenticated", "service_role"}


@pytest.fixture
def runner_conn(runner_database_url: str) -> Iterator[psycopg.Connection]:
    """The runner's login as itself: no SET ROLE, no claims."""
    with psycopg.connect(runner_database_url, autocommit=True) as connection:
        yield connection


def test_the_default_url_is_the_runner_login_the_stack_creates(monkeypatch: pytest.MonkeyPatch) -> None:
    """runner/config.py's default, the tests' runner URL on the default stack and the login
    supabase/local_runner_login.sql creates are one and the same."""
    monkeypatch.delenv("KIWI_DATABASE_URL", raising=False)
    monkeypatch.delenv("KIWI_RUNNER_DATABASE_URL", raising=False)
    default = stack_database_url()
    assert runner_url(stack_database_url(login=STACK_SUPERUSER_LOGIN)) == default
    login = urlsplit(default)
    sql = (ROOT / "supabase" / "local_runner_login.sql").read_text()
    assert f"create role {login.username} " in sql and f"password '{login.password}'" in sql


def test_the_login_is_no_superuser_and_holds_only_membership(
    conn: psycopg.Connection, runner_conn: psycopg.Connection
) -> None:
    """Its attributes, and its memberships: the three API roles, to SET ROLE to, none inherited."""
    login = runner_conn.execute("select session_user").fetchone()[0]
    row = conn.execute(
        "select rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication, rolinherit, rolcanlogin"
        " from pg_roles where rolname = %s",
        (login,),
    ).fetchone()
    assert row == (False, False, False, False, False, False, True)
    grants = conn.execute(
        "select roleid::regrole::text, inherit_option, set_option, admin_option"
        " from pg_auth_members where member = %s::regrole",
        (login,),
    ).fetchall()
    assert {g[0] for g in grants} == API_ROLES, "a member of the API roles, and of nothing else (no pg_* role)"
    assert all(g[1:] == (False, True, False) for g in grants), grants
    assert runner_conn.execute("select current_setting('is_superuser')").fetchone() == ("off",)


def test_the_login_cannot_run_programs_on_the_server(runner_conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runner_conn.execute("copy (select 1) to program 'id'")


@pytest.mark.parametrize("role", ["postgres", "pg_execute_server_program", "pg_read_server_files"])
def test_the_login_cannot_become_another_role(runner_conn: psycopg.Connection, role: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runner_conn.execute(f"set role {role}")


def test_as_itself_the_login_reads_nothing(runner_conn: psycopg.Connection) -> None:
    """Without SET ROLE and claims: not the sealed MCP OAuth tokens, not the tools, not the runs."""
    for table in ("kiwi_internal.mcp_oauth_tokens", "public.tools", "public.tool_versions", "public.tool_runs"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runner_conn.execute(f"select count(*) from {table}")


@pytest.fixture
def private_tool(conn: psycopg.Connection) -> Iterator[str]:
    """A private tool in another tenant's namespace, published by the admin connection."""
    owner, ns = str(uuid.uuid4()), f"tx_{uuid.uuid4().hex[:10]}"
    tool_id = f"secret_{uuid.uuid4().hex[:8]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, owner))
    manifest = {
        "tool_id": tool_id,
        "namespace": ns,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "visibility": "private",
        "description": "a private tool",
        "entrypoint": "run.sh",
    }
    files = [{"path": "run.sh", "content_text": "echo private", "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    yield f"{ns}/{tool_id}"
    conn.execute("delete from tools where namespace = %s", (ns,))
    conn.execute("delete from namespaces where namespace = %s", (ns,))


def test_another_tenants_private_tool_stays_hidden(runner_conn: psycopg.Connection, private_tool: str) -> None:
    """As itself the login may not look; as anon or as another user it sees no such tool."""
    ns = private_tool.split("/")[0]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runner_conn.execute("select count(*) from public.tools where namespace = %s", (ns,))
    stranger = {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}
    for role, claims in (("anon", {"role": "anon"}), ("authenticated", stranger)):
        runner_conn.execute(
            "select set_config('role', %s, false), set_config('request.jwt.claims', %s, false)",
            (role, json.dumps(claims)),
        )
        assert runner_conn.execute("select count(*) from public.tools where namespace = %s", (ns,)).fetchone() == (0,)
        runner_conn.execute("reset role")


def test_a_plain_login_acting_as_itself_is_not_an_admin(conn: psycopg.Connection, runner_database_url: str) -> None:
    """kiwi_internal.caller_is_admin() with no SET ROLE: a login that neither is a superuser nor
    bypasses RLS does not count (it is allowed to call it here only, in a rolled-back transaction)."""
    login = urlsplit(runner_database_url).username
    with conn.transaction(force_rollback=True):
        conn.execute(f"grant usage on schema kiwi_internal to {login}")
        conn.execute(f"grant execute on function kiwi_internal.caller_is_admin() to {login}")
        conn.execute(f"set local session authorization {login}")
        assert conn.execute("select current_setting('role'), session_user::text").fetchone() == ("none", login)
        assert conn.execute("select kiwi_internal.caller_is_admin()").fetchone() == (False,)


def test_the_login_can_listen_for_the_registrys_notifications(runner_conn: psycopg.Connection) -> None:
    """The plan cache and the MCP server's registry notifications LISTEN as the login itself."""
    for channel in (PLANS_CHANNEL, REGISTRY_CHANNEL):
        runner_conn.execute(f"listen {channel}")


def test_kiwi_runs_and_searches_through_the_runner_login(runner_database_url: str, tmp_path: Path) -> None:
    # exactly this URL (kiwi_env alone would map only the stack's superuser URL to it)
    env = {**kiwi_env(runner_database_url, tmp_path / "cache"), "KIWI_DATABASE_URL": runner_database_url}
    done = run_kiwi(["run", "hello_world", "--json"], cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    assert done.json()["output"] == {"greeting": "Hello, world!"}
    found = run_kiwi(["--admin", "search", "hello"], cwd=tmp_path, env=env)
    assert found.code == 0, found.err
    assert "hello_world" in found.out
