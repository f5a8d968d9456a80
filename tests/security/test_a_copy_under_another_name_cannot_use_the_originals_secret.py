"""Rate limits and approvals name tools: a copy under another name gains nothing by running ungated.

Found by an attacker's trial: the same content published under another name ran without the
original's rate limit and approval. That is by design, and this is what makes it hold: a copy
in another namespace gets none of what the original was granted. Here the original reads a
secret an admin granted its namespace (grant_secret); the copier's publish that reads it is
refused naming it, and the copy it may publish, run by the real Runner with the secret in the
server's environment, reads nothing of it. Real parts: the real database, two tenants with
their own tokens, the Runner running the tools in its sandbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import LOCAL_JWT_SECRET, KiwiError, PostgresRegistry, Runner, from_token
from runner.testing.http_serving import two_tenants
from tests.conftest import local_settings

KEY = f"KIWI_TEST_DEPLOY_KEY_{uuid.uuid4().hex[:8].upper()}"
VALUE = "deploy-key-" + uuid.uuid4().hex
FILES = [{"path": "run.sh", "content_text": 'echo "key=${KEY:-none}"\n', "is_entrypoint": True}]


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    """Tenant a, whose namespace an admin granted KEY, and tenant b, who copies a's tool."""
    with two_tenants(conn, "copy") as made:
        conn.execute("select grant_secret(%s, %s)", (made["a"]["ns"], KEY))
        yield made
        conn.execute("delete from namespace_secret_grants where namespace = %s", (made["a"]["ns"],))


def runner_for(database_url: str, tenant: dict[str, str], cache: Path) -> Runner:
    settings = local_settings(database_url, cache)
    principal = from_token(tenant["token"], secret=LOCAL_JWT_SECRET)
    environ = {"PATH": "/usr/bin:/bin", KEY: VALUE}  # the server's environment holds the secret
    return Runner(PostgresRegistry(database_url, principal=principal), settings, environ=environ)


def deploy(ref: str, *, reads_key: bool) -> dict[str, Any]:
    config = {"env": {"KEY": "${" + KEY + "}"}} if reads_key else {}
    manifest = {"tool_id": ref, "version": "1.0.0", "tool_type": "script", "executor": "bash_runtime"}
    return {**manifest, "entrypoint": "run.sh", "visibility": "public", "config": config}


async def test_a_copy_in_another_namespace_cannot_read_the_originals_granted_secret(
    database_url: str, conn: psycopg.Connection, tenants: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    a, b = tenants["a"], tenants["b"]
    original = f"{a['ns']}/deploy"
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 600)", (original,))
    owner = runner_for(database_url, a, tmp_path / "a")
    copier = runner_for(database_url, b, tmp_path / "b")
    try:
        await owner.registry.publish(deploy(original, reads_key=True), FILES)
        held = await owner.run(original)
        assert held.status == "error" and "approval" in str(held.error), "the original is gated"

        copy = f"{b['ns']}/deploy"
        with pytest.raises(KiwiError) as refused:
            await copier.registry.publish(deploy(copy, reads_key=True), FILES)
        assert KEY in str(refused.value) and VALUE not in str(refused.value)

        await copier.registry.publish(deploy(copy, reads_key=False), FILES)
        ran = await copier.run(copy)
        assert ran.status == "success", ran.error
        assert "key=none" in str(ran.output) and VALUE not in str(ran.output), "the copy reads nothing of the key"
    finally:
        await owner.aclose()
        await copier.aclose()
