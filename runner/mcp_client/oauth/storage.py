"""Where the SDK's OAuth provider keeps tokens and client registrations (its TokenStorage).

`DatabaseTokenStorage` keeps them in Postgres per user and resource, under RLS
(supabase/migrations/20261125000200_mcp_oauth_tokens.sql), sealed by crypto.py first: the
database sees ciphertext only, and it says who the user is (auth.uid()), which the sealing
binds to. Each call acts as the principal that made the storage, whichever task the SDK's
auth flow runs in. `MemoryTokenStorage` keeps them for the life of the process (the
conformance client, and client credentials when no user is signed in: they can be fetched
again at any time).
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ...principal import Principal, acting_as, requested
from .crypto import TokenCipher

if TYPE_CHECKING:
    from ...registry.base import Registry

__all__ = ["DatabaseTokenStorage", "MemoryTokenStorage"]


class MemoryTokenStorage:
    """Tokens and client registration in this process only."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self._tokens: OAuthToken | None = None
        self._client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info


class DatabaseTokenStorage:
    """The caller's row for one resource (the MCP server's URL), sealed with `cipher`."""

    def __init__(
        self, registry: Registry, resource: str, cipher: TokenCipher, principal: Principal | None = None
    ) -> None:
        self.registry = registry
        self.resource = resource
        self._cipher = cipher
        self._principal = principal if principal is not None else requested()
        self._row: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"DatabaseTokenStorage({self.resource!r})"

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, `expires_in` counted from now (negative once expired: the
        provider then refreshes before the first request instead of sending a dead token)."""
        sealed = (await self._load()).get("tokens")
        if not sealed:
            return None
        stored = json.loads(self._open(sealed, "tokens"))
        token = OAuthToken.model_validate(stored["token"])
        if stored.get("expires_at") is not None:
            token.expires_in = int(stored["expires_at"] - time.time())
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        if self._row is None:
            await self._load()
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        stored = {"token": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at}
        await self._save(tokens=self._seal(json.dumps(stored), "tokens"))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        sealed = (await self._load()).get("client_info")
        if not sealed:
            return None
        return OAuthClientInformationFull.model_validate_json(self._open(sealed, "client_info"))

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._row is None:
            await self._load()
        await self._save(client_info=self._seal(client_info.model_dump_json(exclude_none=True), "client_info"))

    async def forget(self) -> bool:
        """Delete the caller's row (a logout); True when there was one."""
        self._row = None
        with self._acting():
            return bool(await self.registry.backend.call("forget_mcp_oauth_token", {"p_resource": self.resource}))

    # -- plumbing ---------------------------------------------------------------------

    async def _load(self) -> dict[str, Any]:
        """The row as the database gives it (read afresh each time: another process may have
        refreshed the tokens since)."""
        with self._acting():
            row = await self.registry.backend.call("mcp_oauth_token", {"p_resource": self.resource}, read=True)
        self._row = row if isinstance(row, dict) else {}
        return self._row

    async def _save(self, *, tokens: str | None = None, client_info: str | None = None) -> None:
        args = {"p_resource": self.resource, "p_tokens": tokens, "p_client_info": client_info}
        with self._acting():
            await self.registry.backend.call("save_mcp_oauth_token", {k: v for k, v in args.items() if v is not None})

    def _acting(self) -> contextlib.AbstractContextManager[Any]:
        return acting_as(self._principal) if self._principal is not None else contextlib.nullcontext()

    def _context(self, field: str) -> str:
        user = (self._row or {}).get("user_id")
        return f"kiwi-mcp-oauth:v1\x00{user}\x00{self.resource}\x00{field}"

    def _seal(self, text: str, field: str) -> str:
        if self._row is None or not self._row.get("user_id"):
            raise RuntimeError("DatabaseTokenStorage: the database named no user")
        return base64.b64encode(self._cipher.seal(text.encode(), self._context(field))).decode()

    def _open(self, sealed: str, field: str) -> bytes:
        return self._cipher.open(base64.b64decode(sealed), self._context(field))
