"""MCP OAuth token storage (runner/mcp_client/oauth/storage.py, crypto.py) on the real database:
per user under RLS, sealed with KIWI_TOKEN_KEY before it leaves the runner."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from runner import ConfigError, PostgresRegistry, Refused, admin, from_claims
from runner.mcp_client.oauth.crypto import TokenCipher, TokenUnreadable, cipher_from
from runner.mcp_client.oauth.storage import DatabaseTokenStorage

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
RESOURCE = "https://mcp.example.test/mcp"


@pytest.fixture
async def two_users(database_url: str) -> AsyncIterator[tuple[str, PostgresRegistry, str, PostgresRegistry]]:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    ra = PostgresRegistry(database_url, principal=from_claims({"sub": a, "role": "authenticated"}))
    rb = PostgresRegistry(database_url, principal=from_claims({"sub": b, "role": "authenticated"}))
    yield a, ra, b, rb
    await ra.aclose()
    await rb.aclose()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("delete from kiwi_internal.mcp_oauth_tokens where user_id in (%s, %s)", (a, b))


def token(access: str, refresh: str | None = "rt-secret-refresh", expires_in: int | None = 3600) -> OAuthToken:
    return OAuthToken(access_token=access, refresh_token=refresh, expires_in=expires_in, scope="tools")


async def test_user_a_cannot_read_user_bs_tokens(
    two_users: tuple[str, PostgresRegistry, str, PostgresRegistry],
) -> None:
    a, ra, b, rb = two_users
    cipher = cipher_from({"KIWI_TOKEN_KEY": KEY})
    await DatabaseTokenStorage(ra, RESOURCE, cipher).set_tokens(token("at-alice-0123456789"))
    await DatabaseTokenStorage(rb, RESOURCE, cipher).set_tokens(token("at-bob-0123456789"))
    assert (await DatabaseTokenStorage(ra, RESOURCE, cipher).get_tokens()).access_token == "at-alice-0123456789"  # type: ignore[union-attr]
    assert (await DatabaseTokenStorage(rb, RESOURCE, cipher).get_tokens()).access_token == "at-bob-0123456789"  # type: ignore[union-attr]
    # A's own session, straight at the table: RLS shows only A's row, and no write reaches B's.
    rows = await ra.backend.call(
        "mcp_oauth_token", {"p_resource": RESOURCE}, read=True
    )  # through the public function first
    assert rows["user_id"] == a
    async with await psycopg.AsyncConnection.connect(ra.backend._url, autocommit=False) as conn:  # type: ignore[attr-defined]
        await conn.execute("set local role authenticated")
        await conn.execute(
            "select set_config('request.jwt.claims', %s, true)", (f'{{"sub":"{a}","role":"authenticated"}}',)
        )
        seen = await (await conn.execute("select user_id::text from kiwi_internal.mcp_oauth_tokens")).fetchall()
        assert seen == [(a,)]
        changed = await conn.execute("update kiwi_internal.mcp_oauth_tokens set tokens = null where user_id = %s", (b,))
        assert changed.rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(
                "insert into kiwi_internal.mcp_oauth_tokens (user_id, resource) values (%s, %s)", (b, RESOURCE + "2")
            )
    assert (await DatabaseTokenStorage(rb, RESOURCE, cipher).get_tokens()).access_token == "at-bob-0123456789"  # type: ignore[union-attr]


async def test_a_copied_row_does_not_open_for_another_user(
    database_url: str, two_users: tuple[str, PostgresRegistry, str, PostgresRegistry]
) -> None:
    """The sealing binds the user: an admin who copies A's ciphertext into B's row lends B nothing."""
    a, ra, b, rb = two_users
    cipher = cipher_from({"KIWI_TOKEN_KEY": KEY})
    await DatabaseTokenStorage(ra, RESOURCE, cipher).set_tokens(token("at-alice-0123456789"))
    await DatabaseTokenStorage(rb, RESOURCE, cipher).set_tokens(token("at-bob-0123456789"))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "update kiwi_internal.mcp_oauth_tokens set tokens = (select tokens from kiwi_internal.mcp_oauth_tokens"
            " where user_id = %s) where user_id = %s",
            (a, b),
        )
    with pytest.raises(TokenUnreadable):
        await DatabaseTokenStorage(rb, RESOURCE, cipher).get_tokens()


async def test_the_row_holds_ciphertext_not_the_tokens(
    database_url: str, two_users: tuple[str, PostgresRegistry, str, PostgresRegistry]
) -> None:
    a, ra, _, _ = two_users
    storage = DatabaseTokenStorage(ra, RESOURCE, cipher_from({"KIWI_TOKEN_KEY": KEY}))
    access, refresh, secret = "at-plaintext-canary-4f1d", "rt-plaintext-canary-9c2e", "cs-plaintext-canary-77aa"
    await storage.set_tokens(token(access, refresh))
    await storage.set_client_info(
        OAuthClientInformationFull(
            client_id="kiwi-client", client_secret=secret, redirect_uris=["http://127.0.0.1:1/cb"]
        )
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "select tokens, client_info, t::text from kiwi_internal.mcp_oauth_tokens t where user_id = %s", (a,)
        ).fetchone()
    assert row is not None
    stored = bytes(row[0]) + bytes(row[1]) + row[2].encode()
    for canary in (access, refresh, secret, "kiwi-client"):
        assert canary.encode() not in stored
        assert base64.b64encode(canary.encode()) not in stored
    back = await storage.get_tokens()
    assert back is not None and (back.access_token, back.refresh_token) == (access, refresh)
    info = await storage.get_client_info()
    assert info is not None and info.client_secret == secret


async def test_expiry_survives_storage_counted_from_the_time_it_was_stored(
    two_users: tuple[str, PostgresRegistry, str, PostgresRegistry],
) -> None:
    _, ra, _, _ = two_users
    storage = DatabaseTokenStorage(ra, RESOURCE, cipher_from({"KIWI_TOKEN_KEY": KEY}))
    await storage.set_tokens(token("at-expired-0123", expires_in=-30))
    back = await storage.get_tokens()
    assert back is not None and back.expires_in is not None and back.expires_in <= -30


async def test_another_key_cannot_open_the_tokens(
    two_users: tuple[str, PostgresRegistry, str, PostgresRegistry],
) -> None:
    _, ra, _, _ = two_users
    await DatabaseTokenStorage(ra, RESOURCE, cipher_from({"KIWI_TOKEN_KEY": KEY})).set_tokens(token("at-0123456789"))
    other = TokenCipher(os.urandom(32))
    with pytest.raises(TokenUnreadable, match="do not open with this KIWI_TOKEN_KEY"):
        await DatabaseTokenStorage(ra, RESOURCE, other).get_tokens()


def test_a_missing_or_malformed_key_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="KIWI_TOKEN_KEY is not set") as missing:
        cipher_from({})
    assert missing.value.hint and "urandom(32)" in missing.value.hint
    with pytest.raises(ConfigError, match="32 bytes"):
        cipher_from({"KIWI_TOKEN_KEY": base64.b64encode(b"short").decode()})
    with pytest.raises(ConfigError, match="neither base64 nor hex"):
        cipher_from({"KIWI_TOKEN_KEY": "not a key!"})
    assert cipher_from({"KIWI_TOKEN_KEY": os.urandom(32).hex()}) is not None


async def test_callers_without_a_user_have_no_tokens(database_url: str) -> None:
    registry = PostgresRegistry(database_url, principal=admin())
    try:
        storage = DatabaseTokenStorage(registry, RESOURCE, cipher_from({"KIWI_TOKEN_KEY": KEY}))
        with pytest.raises(Refused, match="per signed-in user"):
            await storage.get_tokens()
    finally:
        await registry.aclose()
