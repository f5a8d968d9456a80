"""An approval policy naming a namespace's private tools is read only by its members and admins.

Found by an attacker's trial: every signed-in user read every row of approval_policies, so a
pattern such as `acme/launch_codes_*` told strangers what acme keeps private. Now a policy is
read by admins, by the members of the namespace its pattern names, and by everyone only when
it names no namespace. It still holds every caller's call. Real parts: the real database, two
tenants each owning a namespace, statements run with PostgREST's role and claims.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner.testing.http_serving import two_tenants


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    """Tenant a's namespace holds a private tool and a public one, each named by a policy."""
    with two_tenants(conn, "pol") as made:
        secret, shared = f"{made['a']['ns']}/launch_codes", f"{made['a']['ns']}/brochure"
        for ref, visibility in ((secret, "private"), (shared, "public")):
            manifest = {"tool_id": ref, "version": "1.0.0", "tool_type": "script", "executor": "bash_runtime"}
            conn.execute(
                "select publish_tool_version(%s, %s)",
                (Jsonb({**manifest, "visibility": visibility}), Jsonb([{"path": "x.sh", "content_text": "echo\n"}])),
            )
        public = f"pol_public_{uuid.uuid4().hex[:8]}.*"
        conn.execute(
            "insert into approval_policies (pattern, ttl_seconds) values (%s, 600), (%s, 600), (%s, 600)",
            (f"{secret}*", f"{shared}*", public),
        )
        yield {**made, "refs": {"secret": secret, "shared": shared, "public": public}}
        conn.execute("delete from approval_policies where pattern = %s", (public,))


def as_user(database_url: str, user: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(database_url) as c:
        claims = {"sub": user, "role": "authenticated", "aud": "authenticated"}
        c.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)",
            (json.dumps(claims),),
        )
        return [r[0] for r in c.execute(sql, args).fetchall()]


def test_a_stranger_reads_no_policy_of_another_namespace(database_url: str, tenants: dict[str, Any]) -> None:
    refs, ns = tenants["refs"], tenants["a"]["ns"]
    seen = as_user(database_url, tenants["b"]["id"], "select pattern from approval_policies")
    assert not [p for p in seen if p.startswith(ns + "/")], "a stranger read a policy naming another's tools"
    assert refs["public"] in seen, "a policy that names no namespace is read by everyone"
    told = as_user(database_url, tenants["b"]["id"], "select approval_required(%s)", (refs["secret"],))
    assert told == [{"required": False, "tool_id": refs["secret"]}]


def test_the_namespace_members_read_its_policies(database_url: str, tenants: dict[str, Any]) -> None:
    refs = tenants["refs"]
    seen = as_user(database_url, tenants["a"]["id"], "select pattern from approval_policies")
    assert {f"{refs['secret']}*", f"{refs['shared']}*", refs["public"]} <= set(seen)
    told = as_user(database_url, tenants["a"]["id"], "select approval_required(%s) ->> 'policy'", (refs["secret"],))
    assert told == [f"{refs['secret']}*"]


def test_the_policy_still_holds_a_strangers_call_of_a_tool_it_may_read(
    database_url: str, tenants: dict[str, Any]
) -> None:
    refs = tenants["refs"]
    call = Jsonb({"tool_id": refs["shared"], "params_sha256": "a" * 64})
    (held,) = as_user(database_url, tenants["b"]["id"], "select public.check_call(%s)", (call,))
    assert held["kind"] == "approval_pending" and held["policy"] == f"{refs['shared']}*", held
    told = as_user(database_url, tenants["b"]["id"], "select approval_required(%s) ->> 'policy'", (refs["shared"],))
    assert told == [f"{refs['shared']}*"], "approval_required answers as the gate decides"
