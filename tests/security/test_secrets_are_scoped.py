"""A tenant's `${VAR}` reads only what an admin granted its namespace.

Found: `env: {LEAK: "${KIWI_TOKEN_KEY}"}` in a tenant's own tool expanded any variable of the
server, and an api tool's URL `...?q=${SECRET}` sent the value to a host the tenant chose.
Now a member's publish naming a variable its namespace was not granted is refused, naming it;
once an admin grants it, the tool publishes and its run gets the value; and once the grant
is revoked, the runner reads nothing of its environment for that tool any more.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from runner import LOCAL_JWT_SECRET, KiwiError, Runner, from_token
from runner.testing.http_serving import two_tenants

GRANTED = f"KIWI_TEST_GRANTED_{uuid.uuid4().hex[:8].upper()}"
SECRET = "server-secret-" + uuid.uuid4().hex


@pytest.fixture
def tenant(conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    with two_tenants(conn, "secrets") as made:
        yield made["a"]
        conn.execute("delete from namespace_secret_grants where namespace = %s", (made["a"]["ns"],))


@pytest.fixture
async def member(tenant: dict[str, str], make_runner: Callable[..., Runner]) -> Runner:
    environ = {"PATH": "/usr/bin:/bin", "KIWI_TOKEN_KEY": SECRET, GRANTED: "granted-value"}
    principal = from_token(tenant["token"], secret=LOCAL_JWT_SECRET)
    return make_runner(principal=principal, environ=environ)


def leaking_tool(ns: str, variable: str) -> dict[str, Any]:
    return {
        "tool_id": f"{ns}/leak_{uuid.uuid4().hex[:6]}",
        "version": "1.0.0",
        "tool_type": "script",
        "executor": "bash_runtime",
        "entrypoint": "run.sh",
        "config": {"env": {"LEAK": "${" + variable + "}"}},
    }


FILES = [{"path": "run.sh", "content_text": 'echo "leak=$LEAK"\n', "is_entrypoint": True}]


async def test_an_ungranted_variable_is_refused_at_publish_naming_it(member: Runner, tenant: dict[str, str]) -> None:
    with pytest.raises(KiwiError) as refused:
        await member.registry.publish(leaking_tool(tenant["ns"], "KIWI_TOKEN_KEY"), FILES)
    assert "KIWI_TOKEN_KEY" in str(refused.value)
    assert SECRET not in str(refused.value)


async def test_an_ungranted_passthrough_is_refused_at_publish(member: Runner, tenant: dict[str, str]) -> None:
    manifest = {**leaking_tool(tenant["ns"], "HOME"), "config": {"env_passthrough": ["KIWI_*"]}}
    with pytest.raises(KiwiError) as refused:
        await member.registry.publish(manifest, FILES)
    assert "KIWI_*" in str(refused.value)


async def test_a_granted_variable_publishes_and_its_run_gets_the_value(
    member: Runner, tenant: dict[str, str], conn: psycopg.Connection
) -> None:
    conn.execute("select grant_secret(%s, %s)", (tenant["ns"], GRANTED))
    manifest = leaking_tool(tenant["ns"], GRANTED)
    await member.registry.publish(manifest, FILES)
    result = await member.run(manifest["tool_id"])
    assert result.status == "success", result.error
    assert result.output == "leak=***", "the value reached the tool, and is masked in what it printed"


async def test_a_revoked_grant_leaves_the_tool_reading_nothing(
    member: Runner, tenant: dict[str, str], conn: psycopg.Connection
) -> None:
    # The published version still names the variable; the registry no longer allows it, so the
    # runner does not read it: the run fails as for an unset variable, and says no more.
    conn.execute("select grant_secret(%s, %s)", (tenant["ns"], GRANTED))
    manifest = leaking_tool(tenant["ns"], GRANTED)
    await member.registry.publish(manifest, FILES)
    conn.execute("select revoke_secret(%s, %s)", (tenant["ns"], GRANTED))
    result = await member.run(manifest["tool_id"])
    assert result.status == "error"
    assert f"environment variable {GRANTED} is not set" in str(result.error)
    assert "granted-value" not in str(result.error) and result.output is None
