"""The anonymous registry edge function used to connect as the superuser (its local default,
and SUPABASE_DB_URL when deployed). Now it connects with a login that can become anon and no
more, and refuses a login that is a superuser or bypasses Row Level Security."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import psycopg

from tests.conftest import runner_url
from tests.test_edge_function import edge_function

LIST = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "search", "arguments": {"query": "hello"}},
}


def call_search(url: str) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(LIST).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        body = resp.read().decode()
    data = body.split("data: ", 1)[1] if body.startswith("event:") else body
    return json.loads(data)["result"]


def test_a_superuser_login_is_refused(database_url: str, tmp_path: Path) -> None:
    with edge_function({"KIWI_DATABASE_URL": database_url}, tmp_path / "deno.log") as url:
        result = call_search(url)
    assert result.get("isError") is True
    text = result["content"][0]["text"]
    assert "superuser or bypasses RLS" in text and "kiwi_registry_edge" in text


def test_the_project_superuser_url_alone_is_refused_naming_the_fix(database_url: str, tmp_path: Path) -> None:
    with edge_function({"SUPABASE_DB_URL": database_url}, tmp_path / "deno.log") as url:
        result = call_search(url)
    assert result.get("isError") is True and "KIWI_EDGE_DATABASE_URL" in result["content"][0]["text"]


def test_the_dedicated_login_can_only_become_anon(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        role = conn.execute(
            "select rolcanlogin, rolinherit, rolsuper, rolbypassrls from pg_roles where rolname = 'kiwi_registry_edge'"
        ).fetchone()
        assert role == (False, False, False, False), "no password in a migration: an admin gives it a login"
        member_of = conn.execute(
            "select r.rolname from pg_auth_members m join pg_roles r on r.oid = m.roleid"
            " join pg_roles u on u.oid = m.member where u.rolname = 'kiwi_registry_edge'"
        ).fetchall()
        assert member_of == [("anon",)]


def test_a_least_privilege_login_serves_public_tools(database_url: str, tmp_path: Path) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("alter role kiwi_registry_edge login password 'edge_test'")
        try:
            edge = runner_url(database_url).replace("kiwi_runner:kiwi_runner", "kiwi_registry_edge:edge_test")
            with edge_function({"KIWI_EDGE_DATABASE_URL": edge}, tmp_path / "deno.log") as url:
                result = call_search(url)
        finally:
            conn.execute("alter role kiwi_registry_edge nologin password null")
    assert result.get("isError") is not True, result
    assert "hello_world" in [i["tool_id"] for i in result["structuredContent"]["items"]]
