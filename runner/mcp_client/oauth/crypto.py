"""Tokens encrypted before they leave the runner: AES-256-GCM under KIWI_TOKEN_KEY.

The database stores only what `seal` makes: a version byte, a random 96-bit nonce and the
ciphertext with its tag. The associated data binds each value to its user, its resource and
its field, so a row copied to another user, another server or the other column fails to
open instead of lending someone else's tokens. The key never reaches the database: a stolen
dump holds nothing usable without the runner's environment.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...errors import ConfigError

__all__ = ["KEY_VARIABLE", "TokenCipher", "TokenUnreadable", "cipher_from"]

KEY_VARIABLE = "KIWI_TOKEN_KEY"
_VERSION = b"\x01"
_NONCE_BYTES = 12
_KEY_HINT = (
    f"set {KEY_VARIABLE} to 32 random bytes in base64, e.g. "
    "`export KIWI_TOKEN_KEY=$(python3 -c "
    "'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')`; "
    "keep it: tokens stored under one key do not open under another"
)


class TokenUnreadable(ConfigError):
    """A stored value does not open under this key (another key, or another user's row)."""

    kind = "token_unreadable"


class TokenCipher:
    """AES-GCM with one 256-bit key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ConfigError(f"{KEY_VARIABLE} must be 32 bytes, not {len(key)}", hint=_KEY_HINT)
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "TokenCipher(***)"

    def seal(self, plaintext: bytes, context: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _VERSION + nonce + self._aead.encrypt(nonce, plaintext, context.encode())

    def open(self, sealed: bytes, context: str) -> bytes:
        if len(sealed) <= 1 + _NONCE_BYTES or sealed[:1] != _VERSION:
            raise TokenUnreadable("a stored MCP OAuth value is not in Kiwi's format")
        nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, body, context.encode())
        except InvalidTag:
            raise TokenUnreadable(
                f"stored MCP OAuth tokens do not open with this {KEY_VARIABLE} (a different key, or not this user's)",
                hint="sign in again with `kiwi mcp login SERVER`, which replaces them",
            ) from None


def cipher_from(environ: Mapping[str, str]) -> TokenCipher:
    """The cipher of KIWI_TOKEN_KEY (urlsafe or standard base64 of 32 bytes, or 64 hex digits);
    a clear error when it is missing or malformed."""
    raw = (environ.get(KEY_VARIABLE) or "").strip()
    if not raw:
        raise ConfigError(f"{KEY_VARIABLE} is not set: MCP OAuth tokens are stored encrypted with it", hint=_KEY_HINT)
    return TokenCipher(_decode_key(raw))


def _decode_key(raw: str) -> bytes:
    if len(raw) == 64:
        try:
            return bytes.fromhex(raw)
        except ValueError:
            pass
    try:
        key = base64.b64decode(raw.replace("-", "+").replace("_", "/") + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{KEY_VARIABLE} is neither base64 nor hex", hint=_KEY_HINT) from None
    if len(key) != 32:
        raise ConfigError(f"{KEY_VARIABLE} must decode to 32 bytes, not {len(key)}", hint=_KEY_HINT)
    return key
