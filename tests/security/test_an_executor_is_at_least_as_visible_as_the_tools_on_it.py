"""A tool is never more visible than its executor (public > unlisted > private).

A public tool could run on a private runtime, and the tool's row, plan and chain showed the
runtime's name to everyone. Publishing such a tool, and narrowing an executor below a tool on
it, are now refused (22023) naming both tools; nothing is written. An admin may still write
such a row for one transaction (a restore), by saying so; nobody else can.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.security.publishing import Publisher, publishing


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


def _runtime(p: Publisher, visibility: str, version: str = "1.0.0") -> str:
    """A runtime of p's namespace, published by an admin (runtimes choose a command)."""
    p.admin()
    ref = f"{p.ns}/rt"
    manifest = {"tool_id": ref, "tool_type": "runtime", "executor": "subprocess", "version": version}
    p.publish({**manifest, "visibility": visibility}, [])
    p.act()
    return ref


@pytest.mark.parametrize(("tool", "executor"), [("public", "private"), ("unlisted", "private"), ("public", "unlisted")])
def test_a_tool_more_visible_than_its_executor_is_refused(publisher: Publisher, tool: str, executor: str) -> None:
    runtime = _runtime(publisher, executor)
    manifest = publisher.manifest(executor=runtime, visibility=tool)
    message = publisher.refusal(manifest)
    assert (
        f'visibility: a {tool} tool ("{manifest["tool_id"]}") cannot run on a {executor} executor ("{runtime}")'
        in message
    )
    assert publisher.one("select count(*) from tools where ref = %s", manifest["tool_id"]) == 0


def test_the_default_visibility_in_a_namespace_is_private_so_it_fits_a_private_executor(publisher: Publisher) -> None:
    runtime = _runtime(publisher, "private")
    tool = publisher.publish(publisher.manifest(executor=runtime))["tool_id"]
    assert publisher.one("select visibility from tools where ref = %s", tool) == "private"
    assert "cannot run on a private executor" in publisher.refusal(
        publisher.manifest(executor=runtime, visibility="public")
    )


@pytest.mark.parametrize(
    ("tool", "executor"), [("private", "private"), ("unlisted", "unlisted"), ("private", "public")]
)
def test_a_tool_no_more_visible_than_its_executor_is_published(publisher: Publisher, tool: str, executor: str) -> None:
    runtime = _runtime(publisher, executor)
    assert publisher.publish(publisher.manifest(executor=runtime, visibility=tool))["created"] is True


def test_an_executor_cannot_be_narrowed_below_a_tool_on_it(publisher: Publisher) -> None:
    runtime = _runtime(publisher, "public")
    tool = publisher.publish(publisher.manifest(executor=runtime, visibility="public"))["tool_id"]
    publisher.admin()
    with pytest.raises(psycopg.Error) as raised, publisher.conn.transaction():
        publisher.publish(
            {
                "tool_id": runtime,
                "tool_type": "runtime",
                "executor": "subprocess",
                "version": "2.0.0",
                "visibility": "private",
            },
            [],
        )
    assert raised.value.sqlstate == "22023"
    assert f'"{runtime}" cannot become private: the public tool "{tool}" runs on it' in str(raised.value)


def test_only_an_admin_may_write_such_a_row(publisher: Publisher) -> None:
    runtime = _runtime(publisher, "private")
    publisher.conn.execute("set local kiwi.allow_less_visible_executor = on")
    public = publisher.manifest(executor=runtime, visibility="public")
    assert "cannot run on a private executor" in publisher.refusal(public)
    publisher.admin()
    assert publisher.publish(public)["created"] is True
