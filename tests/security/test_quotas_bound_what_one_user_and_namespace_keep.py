"""Quotas per user and per namespace, kept in the registry (public.registry_quotas).

One user made 100 namespaces and 45 MB of versions in 4 seconds. Now creating a namespace
and publishing are held to quotas (namespaces per user, tools per namespace, versions per
tool, bytes per namespace and per user), each refusal (PT422) naming the quota, its value and
the row that sets it. Admins are exempt; the quotas are rows service_role changes, read by
everyone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from runner import Refused
from runner.registry.errors import from_sqlstate
from tests.security.publishing import Publisher, publishing, script


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


def _set(p: Publisher, name: str, value: int) -> None:
    p.admin()
    p.conn.execute("update registry_quotas set value = %s where name = %s", (value, name))
    p.act()


def _new_namespace(p: Publisher) -> None:
    p.conn.execute(
        "insert into namespaces (namespace, owner_id) values (%s, %s)", (f"q_{uuid.uuid4().hex[:10]}", p.user)
    )


def _quota_refusal(p: Publisher, sql: str, *args: object) -> str:
    with pytest.raises(psycopg.Error) as raised, p.conn.transaction():
        p.conn.execute(sql, args)
    assert raised.value.sqlstate == "PT422", f"{raised.value.sqlstate}: {raised.value}"
    assert isinstance(from_sqlstate("PT422", str(raised.value)), Refused)
    return str(raised.value.diag.message_primary)


def test_the_21st_namespace_of_a_user_is_refused_naming_the_quota(publisher: Publisher) -> None:
    for _ in range(19):  # the publisher owns one already
        _new_namespace(publisher)
    message = _quota_refusal(
        publisher, "insert into namespaces (namespace, owner_id) values (%s, %s)", "q_one_too_many", publisher.user
    )
    assert message == (
        "quota 'namespaces per user' (20) reached: you own 20 namespaces (registry_quotas.namespaces_per_user)"
    )


def test_tools_per_namespace(publisher: Publisher) -> None:
    _set(publisher, "tools_per_namespace", 2)
    first = publisher.publish(publisher.manifest())["tool_id"]
    publisher.publish(publisher.manifest())
    message = publisher.refusal(publisher.manifest(), sqlstate="PT422")
    assert message == (
        f"quota 'tools per namespace' (2) reached: namespace \"{publisher.ns}\" holds 2 tools"
        " (registry_quotas.tools_per_namespace)"
    )
    assert publisher.publish(publisher.manifest(tool_id=first, version="1.1.0"))["created"] is True


def test_versions_per_tool(publisher: Publisher) -> None:
    _set(publisher, "versions_per_tool", 2)
    manifest = publisher.manifest()
    publisher.publish(manifest)
    publisher.publish({**manifest, "version": "1.1.0"})
    message = publisher.refusal({**manifest, "version": "1.2.0"}, sqlstate="PT422")
    assert f"quota 'versions per tool' (2) reached: tool \"{manifest['tool_id']}\" has 2 versions" in message
    assert publisher.publish(manifest)["unchanged"] is True, "publishing a version again takes nothing"


def test_bytes_per_namespace(publisher: Publisher) -> None:
    _set(publisher, "namespace_bytes", 20_000)
    publisher.publish(publisher.manifest(), [script(text="x" * 12_000)])
    message = publisher.refusal(publisher.manifest(), [script(text="y" * 12_000)], sqlstate="PT422")
    assert message.startswith(f"quota 'bytes per namespace' (20000) reached: namespace \"{publisher.ns}\" holds ")
    assert "(registry_quotas.namespace_bytes)" in message


def test_bytes_per_user_across_namespaces(publisher: Publisher) -> None:
    _set(publisher, "user_bytes", 20_000)
    other = f"q_{uuid.uuid4().hex[:10]}"
    publisher.conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (other, publisher.user))
    publisher.publish(publisher.manifest(), [script(text="x" * 12_000)])
    manifest = publisher.manifest(tool_id=f"{other}/t")
    message = publisher.refusal(manifest, [script(text="y" * 12_000)], sqlstate="PT422")
    assert message.startswith("quota 'bytes per user' (20000) reached: you published ")


def test_admins_are_exempt(publisher: Publisher) -> None:
    _set(publisher, "versions_per_tool", 1)
    manifest = publisher.manifest()
    publisher.admin()
    publisher.publish(manifest)
    assert publisher.publish({**manifest, "version": "2.0.0"})["created"] is True
    _new_namespace(publisher)  # and namespaces: the superuser is an admin


def test_a_deleted_quota_is_lifted(publisher: Publisher) -> None:
    _set(publisher, "versions_per_tool", 1)
    publisher.admin()
    publisher.conn.execute("delete from registry_quotas where name = 'versions_per_tool'")
    publisher.act()
    manifest = publisher.manifest()
    publisher.publish(manifest)
    assert publisher.publish({**manifest, "version": "2.0.0"})["created"] is True


@pytest.mark.parametrize("role", ["anon", "authenticated"])
def test_api_roles_read_the_quotas_but_cannot_change_them(publisher: Publisher, role: str) -> None:
    publisher.act(role)
    names = {r[0] for r in publisher.conn.execute("select name from registry_quotas").fetchall()}
    assert {"namespaces_per_user", "tools_per_namespace", "versions_per_tool", "namespace_bytes", "user_bytes"} <= names
    with pytest.raises(psycopg.errors.InsufficientPrivilege), publisher.conn.transaction():
        publisher.conn.execute("update registry_quotas set value = 1000000 where name = 'namespaces_per_user'")


def test_service_role_changes_a_quota_but_not_into_nonsense(publisher: Publisher) -> None:
    publisher.act("service_role")
    publisher.conn.execute("update registry_quotas set value = 50 where name = 'namespaces_per_user'")
    with pytest.raises(psycopg.errors.CheckViolation), publisher.conn.transaction():
        publisher.conn.execute("update registry_quotas set value = -1 where name = 'namespaces_per_user'")
