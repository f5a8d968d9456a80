"""Publishing to a Supabase project over REST with a key, as `kiwi publish` does there.

Reuses the FAKE of PostgREST's HTTP surface from test_rest.py (no PostgREST can run
here): each request is checked as PostgREST would receive it and answered by the real
function of the local database, under the role the key stands for (SERVICE_KEY ->
service_role, ANON_KEY -> anon). What these tests pin is the wire: which RPC, which
headers, which `p_*` arguments, and that what the database decided (written, or
refused with its SQLSTATE and message) is what the runner reports.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from psycopg.types.json import Jsonb

from runner import NotFound, Refused, RestRegistry, Settings, connect
from tests.registry import test_rest as rest
from tests.registry.test_rest import ANON_KEY, SERVICE_KEY, URL, FakePostgREST, body_of, user_token

# The fake and its fixtures, shared rather than copied (pytest finds fixtures by module name).
fake = rest.fake
reg = rest.reg
fresh_tool = rest.fresh_tool

YAML = "tool_id: x\nversion: 1.0.0\n"


def script(tool_id: str, version: str = "1.0.0") -> dict[str, Any]:
    return {"tool_id": tool_id, "tool_type": "script", "executor": "bash_runtime", "version": version}


FILES = [{"path": "main.sh", "content_text": "echo hi", "is_entrypoint": True}]


def signature_for(manifest: dict[str, Any], files: list[dict[str, Any]], key: Ed25519PrivateKey) -> dict[str, str]:
    """p_signature as a publisher computes it before publishing: the content_hash by the
    documented algorithm (README, "content_hash"; canonical JSON is json.dumps with sorted
    keys for these string-only manifests), signed with Ed25519."""
    body = "kiwi-content-v1\n" + json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    body += "\n" + "".join(
        f"{f['path']}\t{hashlib.sha256(f['content_text'].encode()).hexdigest()}\n"
        for f in sorted(files, key=lambda f: f["path"])
    )
    return signature_of(hashlib.sha256(body.encode()).hexdigest(), key)


def signature_of(digest: str, key: Ed25519PrivateKey) -> dict[str, str]:
    """The documented message: "kiwi-signature-v1\\n" || content_hash; raw key and signature in base64."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {
        "content_hash": digest,
        "public_key": base64.b64encode(raw).decode(),
        "signature": base64.b64encode(key.sign(b"kiwi-signature-v1\n" + digest.encode())).decode(),
    }


def stored(conn: psycopg.Connection, tool_id: str) -> list[tuple[Any, ...]]:
    """(version, content_hash, is_latest, manifest_yaml, files) of every version the database holds."""
    return conn.execute(
        """select v.version, v.content_hash, v.is_latest, v.manifest_yaml,
                  (select array_agg(f.path || ':' || f.sha256 order by f.path)
                     from tool_version_files f where f.version_id = v.id)
             from tools t join tool_versions v on v.tool_uuid = t.id
            where t.ref = %s order by v.version""",
        (tool_id,),
    ).fetchall()


def signatures(conn: psycopg.Connection, tool_id: str) -> list[tuple[str, str, str]]:
    return conn.execute(
        """select s.content_hash, s.public_key, s.signature
             from tool_version_signatures s
             join tool_versions v on v.id = s.version_id join tools t on t.id = v.tool_uuid
            where t.ref = %s order by s.signed_at""",
        (tool_id,),
    ).fetchall()


def assert_keyed(request: httpx.Request, function: str, key: str) -> None:
    assert (request.method, request.url.path) == ("POST", f"/rest/v1/rpc/{function}")
    assert request.headers["apikey"] == key
    assert request.headers["authorization"] == f"Bearer {key}"


async def test_publish_is_one_keyed_rpc_and_the_version_is_in_the_database(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    result = await reg.publish(manifest, FILES, YAML)
    assert len(fake.requests) == 1
    assert_keyed(fake.requests[0], "publish_tool_version", SERVICE_KEY)
    assert body_of(fake.requests[0]) == {"p_manifest": manifest, "p_files": FILES, "p_manifest_yaml": YAML}
    sha = hashlib.sha256(b"echo hi").hexdigest()
    assert stored(conn, fresh_tool) == [("1.0.0", result["content_hash"], True, YAML, [f"main.sh:{sha}"])]
    assert signatures(conn, fresh_tool) == []


async def test_a_signed_publish_sends_p_signature_and_stores_it_beside_the_version(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    signature = signature_for(manifest, FILES, Ed25519PrivateKey.generate())
    result = await reg.publish(manifest, FILES, YAML, signature=signature)
    assert_keyed(fake.requests[-1], "publish_tool_version", SERVICE_KEY)
    assert body_of(fake.requests[-1]) == {
        "p_manifest": manifest, "p_files": FILES, "p_manifest_yaml": YAML, "p_signature": signature,
    }  # fmt: skip
    assert result["content_hash"] == signature["content_hash"], "the client's content_hash is the database's"
    fingerprint = hashlib.sha256(base64.b64decode(signature["public_key"])).hexdigest()
    assert result["signature"]["created"] is True and result["signature"]["key_fingerprint"] == fingerprint
    rows = signatures(conn, fresh_tool)
    assert rows == [(signature["content_hash"], signature["public_key"], signature["signature"])]
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(rows[0][1]))
    public.verify(base64.b64decode(rows[0][2]), b"kiwi-signature-v1\n" + rows[0][0].encode())  # raises if not
    (state,) = await reg.signature_states([fresh_tool])
    assert body_of(fake.requests[-1]) == {"p_tool_ids": [fresh_tool]}
    assert [s["key_fingerprint"] for s in state["signatures"]] == [fingerprint]


async def test_a_signature_over_other_content_refuses_the_whole_publish(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    other = signature_for(manifest, [{"path": "main.sh", "content_text": "echo other"}], Ed25519PrivateKey.generate())
    with pytest.raises(Refused, match="the signature covers content_hash"):
        await reg.publish(manifest, FILES, YAML, signature=other)
    assert fake.responses[-1].status_code == 409 and fake.responses[-1].json()["code"] == "PT409"
    assert stored(conn, fresh_tool) == [], "publish and signature are one transaction"


async def test_sign_posts_the_five_arguments_once_per_key(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    published = await reg.publish(manifest, FILES)
    assert "p_signature" not in body_of(fake.requests[-1]), "an absent signature is not sent"
    signature = signature_for(manifest, FILES, Ed25519PrivateKey.generate())
    args = (fresh_tool, "1.0.0", published["content_hash"], signature["public_key"], signature["signature"])
    first = await reg.sign(*args)
    assert_keyed(fake.requests[-1], "sign_tool_version", SERVICE_KEY)
    assert body_of(fake.requests[-1]) == dict(
        zip(["p_tool_id", "p_version", "p_content_hash", "p_public_key", "p_signature"], args, strict=True)
    )
    again = await reg.sign(*args)
    assert (first["created"], again["created"]) == (True, False)
    assert signatures(conn, fresh_tool) == [tuple(signature.values())]


async def test_the_same_version_with_other_content_is_refused_with_the_databases_message(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    first = await reg.publish(manifest, FILES)
    changed = [{"path": "main.sh", "content_text": "echo changed"}]
    with pytest.raises(Refused) as info:
        await reg.publish(manifest, changed)
    assert fake.responses[-1].status_code == 409 and fake.responses[-1].json()["code"] == "PT409"
    with pytest.raises(psycopg.Error) as direct:
        conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(changed)))
    assert direct.value.sqlstate == "PT409"
    assert info.value.message == direct.value.diag.message_primary
    assert info.value.hint == direct.value.diag.message_hint
    assert [(v, h) for v, h, *_ in stored(conn, fresh_tool)] == [("1.0.0", first["content_hash"])]


async def test_the_anon_key_can_read_but_neither_publish_nor_sign_and_nothing_is_written(
    fake: FakePostgREST, fresh_tool: str, conn: psycopg.Connection
) -> None:
    manifest = script(fresh_tool)
    async with RestRegistry(URL, ANON_KEY, transport=httpx.MockTransport(fake)) as anon:
        with pytest.raises(Refused, match="cannot publish"):
            await anon.publish(
                manifest, FILES, YAML, signature=signature_for(manifest, FILES, Ed25519PrivateKey.generate())
            )
        assert_keyed(fake.requests[-1], "publish_tool_version", ANON_KEY)
        assert fake.responses[-1].status_code == 401 and fake.responses[-1].json()["code"] == "42501"
        assert stored(conn, fresh_tool) == []
        hello = (await anon.signature_states(["hello_world"]))[0]
        signature = signature_of(hello["content_hash"], Ed25519PrivateKey.generate())
        with pytest.raises(Refused, match="cannot sign"):
            await anon.sign(
                "hello_world", hello["version"], hello["content_hash"], signature["public_key"], signature["signature"]
            )
        assert fake.responses[-1].json()["code"] == "42501"
    assert conn.execute(
        "select count(*) from tool_version_signatures where public_key = %s", (signature["public_key"],)
    ).fetchone() == (0,)


# --- a signed-in user ------------------------------------------------------------------


@pytest.fixture
def own_namespace(conn: psycopg.Connection) -> Iterator[tuple[str, uuid.UUID]]:
    """A namespace and its owner (a Supabase Auth user id); removed afterwards."""
    ns, owner = f"rest-{uuid.uuid4().hex[:8]}", uuid.uuid4()
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, owner))
    yield ns, owner
    conn.execute("delete from tools where namespace = %s", (ns,))
    conn.execute("delete from namespaces where namespace = %s", (ns,))


async def test_a_signed_in_user_publishes_into_their_namespace_and_reads_its_private_tools(
    fake: FakePostgREST, own_namespace: tuple[str, uuid.UUID]
) -> None:
    """The anon key in `apikey`, the user's JWT in `Authorization`: PostgREST runs the request
    as that user, so RLS and the namespace rules apply to them, not to a key."""
    ns, owner = own_namespace
    ref = f"{ns}/mine_{uuid.uuid4().hex[:6]}"
    token = user_token(owner)
    transport = httpx.MockTransport(fake)
    async with RestRegistry(URL, ANON_KEY, access_token=token, transport=transport) as me:
        published = await me.publish({**script(ref), "visibility": "private"}, FILES)
        assert published["tool_id"] == ref and published["is_latest"]
        assert (await me.execution_plan(ref))["tool_id"] == ref
    sent = fake.requests[0]
    assert sent.headers["apikey"] == ANON_KEY and sent.headers["authorization"] == f"Bearer {token}"

    async with RestRegistry(URL, ANON_KEY, access_token=user_token(uuid.uuid4()), transport=transport) as stranger:
        with pytest.raises(NotFound):
            await stranger.execution_plan(ref)  # private: another user does not even see it
        with pytest.raises(Refused):
            await stranger.publish(script(f"{ns}/theirs"), FILES)
    async with RestRegistry(URL, ANON_KEY, transport=transport) as anon:
        with pytest.raises(NotFound):
            await anon.execution_plan(ref)


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda user: user_token(user, secret="not-the-projects-secret-0123456789"), id="forged"),
        pytest.param(lambda user: user_token(user, expires_in=-60), id="expired"),
    ],
)
async def test_a_token_the_project_does_not_accept_is_refused_with_a_hint(
    fake: FakePostgREST, own_namespace: tuple[str, uuid.UUID], token: Any
) -> None:
    _, owner = own_namespace
    async with RestRegistry(URL, ANON_KEY, access_token=token(owner), transport=httpx.MockTransport(fake)) as reg:
        with pytest.raises(Refused) as refused:
            await reg.execution_plan("hello_world")
    assert "KIWI_ACCESS_TOKEN" in (refused.value.hint or "")
    assert fake.responses[-1].status_code == 401


def test_kiwi_access_token_in_the_environment_reaches_the_rest_backend(tmp_path: Path) -> None:
    env = {"SUPABASE_URL": URL, "SUPABASE_ANON_KEY": ANON_KEY, "KIWI_ACCESS_TOKEN": "a.jwt.token"}
    settings = Settings.load(env, config_path=tmp_path / "none.toml")
    assert settings.backend == "rest" and settings.supabase_access_token == "a.jwt.token"
    assert "a.jwt.token" not in repr(settings), "a token is never printed with the settings"
    registry = connect(settings)
    assert isinstance(registry, RestRegistry) and registry.backend._access_token == "a.jwt.token"


async def test_a_command_write_goes_over_rest_with_an_admins_approval(
    fake: FakePostgREST, own_namespace: tuple[str, uuid.UUID], conn: psycopg.Connection
) -> None:
    """request_publish_approval posts p_manifest and p_files (p_session only when given); the
    publish that uses the approval adds p_approval_id, which a plain publish never sends."""
    ns, owner = own_namespace
    runtime = {"tool_id": f"{ns}/rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}
    transport = httpx.MockTransport(fake)
    try:
        async with RestRegistry(URL, ANON_KEY, access_token=user_token(owner), transport=transport) as me:
            with pytest.raises(Refused, match="only an admin may publish"):
                await me.publish(runtime, [])
            assert "p_approval_id" not in body_of(fake.requests[-1])
            asked = await me.request_publish_approval(runtime, [])
            assert body_of(fake.requests[-1]) == {"p_manifest": runtime, "p_files": []}
            assert (asked["status"], asked["policy"]) == ("pending", "command write")
            conn.execute("select decide_approval(%s, true)", (asked["id"],))  # an admin, at the dashboard
            done = await me.publish(runtime, [], approval_id=asked["id"])
            assert body_of(fake.requests[-1]) == {"p_manifest": runtime, "p_files": [], "p_approval_id": asked["id"]}
            assert (done["tool_id"], done["content_hash"], done["approval_id"]) == (
                runtime["tool_id"], asked["content_hash"], asked["id"],
            )  # fmt: skip
            with pytest.raises(Refused, match="already used"):
                await me.publish({**runtime, "version": "1.1.0"}, [], approval_id=asked["id"])
    finally:
        conn.execute("delete from approvals where namespace = %s", (ns,))
