"""Tool files kept in Supabase Storage instead of inline in the registry's rows.

A file larger than the inline limit (KIWI_INLINE_FILE_BYTES, 64 KiB) is published into a
Storage bucket (KIWI_STORAGE_BUCKET, `kiwi-tool-files`) under a content address,
`<bucket>/sha256/<sha256>`, and its row holds that `storage_key` with the sha256 and size
instead of `content_text`. A run fetches it before anything runs, checks its size and sha256
against the row (which the plan's content_hash covers: trust/integrity.py), and keeps it in
the cache's `blobs/` by its sha256; materialize.py then writes it like an inline file. A file
whose bytes do not match is refused and never kept.

Storage is reached over its HTTP API, `<KIWI_STORAGE_URL>/object/<bucket>/<path>` (by default
`<SUPABASE_URL>/storage/v1`), with `Authorization: Bearer <key>` and the project's key as
`apikey`: the key is KIWI_STORAGE_KEY, else the signed-in user's access token (Storage's
policies then see that user; one from a `kiwi login` session is renewed as the REST backend
renews it: supabase_auth/renewal.py), else the project's key.
Only keys in the configured bucket that end in the file's own sha256 are fetched, so a
published row cannot point a run at any other object the runner's key can read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..core.plan import Plan, PlanFile
from ..errors import IntegrityError, Refused
from ..supabase_auth.renewal import Renew, renewer_of

if TYPE_CHECKING:
    import httpx  # imported when Storage is used: a `kiwi run` of inline files never pays for it

__all__ = ["DEFAULT_BUCKET", "DEFAULT_INLINE_BYTES", "Storage", "blob_path", "fetch_stored", "move_large_files"]

DEFAULT_BUCKET = "kiwi-tool-files"
DEFAULT_INLINE_BYTES = 64 * 1024
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Storage:
    url: str  # .../storage/v1
    key: str = field(repr=False)
    bucket: str = DEFAULT_BUCKET
    inline_bytes: int = DEFAULT_INLINE_BYTES
    apikey: str | None = field(default=None, repr=False)  # the project's key, when the bearer is a user's token
    renew: Renew | None = field(default=None, repr=False, compare=False)  # `key` came from a kiwi login session

    @classmethod
    def configured(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> Storage | None:
        """Storage as the environment names it, or None when there is no Storage to use."""
        env = os.environ if environ is None else environ
        url = env.get("KIWI_STORAGE_URL") or (
            settings.supabase_url.rstrip("/") + "/storage/v1" if settings.supabase_url else None
        )
        key = env.get("KIWI_STORAGE_KEY") or settings.supabase_access_token or settings.supabase_key
        if not url or not key:
            return None
        inline = env.get("KIWI_INLINE_FILE_BYTES")
        try:
            inline_bytes = int(inline) if inline else DEFAULT_INLINE_BYTES
        except ValueError:
            raise Refused(f"KIWI_INLINE_FILE_BYTES must be a number of bytes, not {inline!r}") from None
        bucket = env.get("KIWI_STORAGE_BUCKET") or DEFAULT_BUCKET
        renew = renewer_of(key) if key == settings.supabase_access_token else None
        return cls(url.rstrip("/"), key, bucket, inline_bytes, settings.supabase_key, renew)

    def key_for(self, sha256: str) -> str:
        return f"{self.bucket}/sha256/{sha256}"

    async def _headers(self) -> dict[str, str]:
        """The key, or a session's token as fresh as the session keeps it (a file read; the refresh
        grant when it is about to expire)."""
        key = self.key if self.renew is None else (await asyncio.to_thread(self.renew))[0]
        return {"Authorization": f"Bearer {key}", "apikey": self.apikey or key}

    async def upload(self, data: bytes, sha256: str, media_type: str | None) -> str:
        """Puts the bytes at their content address (again, if they are there: the same bytes)."""
        storage_key = self.key_for(sha256)
        headers = {
            **(await self._headers()),
            "Content-Type": media_type or "application/octet-stream",
            "x-upsert": "true",
        }
        import httpx

        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            try:
                response = await client.post(f"{self.url}/object/{storage_key}", content=data, headers=headers)
            except httpx.HTTPError as exc:
                raise Refused(f"cannot reach Supabase Storage at {self.url}: {exc}") from None
        if not response.is_success:
            raise Refused(
                f"Supabase Storage refused {storage_key}: HTTP {response.status_code} {_said(response)}",
                hint=f"the key needs to write to the bucket {self.bucket} (KIWI_STORAGE_KEY, KIWI_STORAGE_BUCKET)",
            )
        return storage_key

    async def download(self, f: PlanFile) -> bytes:
        assert f.storage_key is not None
        if f.storage_key != self.key_for(f.sha256):
            raise Refused(
                f"file {f.path} is kept under {f.storage_key!r}, not at its content address {self.key_for(f.sha256)!r}",
                hint=f"only files in the bucket {self.bucket} named by their sha256 are fetched; republish the tool",
            )
        import httpx

        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            try:
                response = await client.get(f"{self.url}/object/{f.storage_key}", headers=await self._headers())
            except httpx.HTTPError as exc:
                raise Refused(f"cannot fetch file {f.path} from Supabase Storage at {self.url}: {exc}") from None
        if not response.is_success:
            raise Refused(
                f"cannot fetch file {f.path} from Supabase Storage ({f.storage_key}): "
                f"HTTP {response.status_code} {_said(response)}"
            )
        return response.content


def _said(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("message") or body.get("error") or body)[:200] if isinstance(body, dict) else str(body)[:200]


def blob_path(root: Path, sha256: str) -> Path:
    return root / "blobs" / sha256


async def fetch_stored(plan: Plan, root: Path, storage: Storage | None) -> None:
    """Every stored file of the plan in the cache's blobs, each checked against its sha256."""
    for f in plan.files:
        if f.storage_key is None or f.content_text is not None:
            continue
        target = blob_path(root, f.sha256)
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == f.sha256:
            continue
        if storage is None:
            raise Refused(
                f"file {f.path} is kept in Supabase Storage ({f.storage_key}) and no Storage is configured",
                hint="set SUPABASE_URL (or KIWI_STORAGE_URL) and a key (SUPABASE_KEY or KIWI_STORAGE_KEY)",
            )
        data = await storage.download(f)
        digest = hashlib.sha256(data).hexdigest()
        if digest != f.sha256 or (f.size_bytes is not None and len(data) != f.size_bytes):
            raise IntegrityError(
                f"file {f.path} fetched from Supabase Storage ({f.storage_key}) does not match its sha256 "
                f"(recorded {f.sha256[:12]}…, {f.size_bytes} bytes; fetched {digest[:12]}…, {len(data)} bytes)",
                hint="the stored object was changed after publishing; nothing ran. Republish the tool",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{f.sha256[:16]}-", delete=False) as out:
            out.write(data)
        os.replace(out.name, target)


async def move_large_files(files: list[dict[str, Any]], storage: Storage | None) -> list[dict[str, Any]]:
    """The publish rows, each file larger than the inline limit put in Storage and named there
    by its storage_key, sha256 and size (all files stay inline without Storage)."""
    if storage is None:
        return files
    moved = []
    for row in files:
        text = row.get("content_text")
        data = text.encode("utf-8") if isinstance(text, str) else None
        if data is None or len(data) <= storage.inline_bytes:
            moved.append(row)
            continue
        sha256 = hashlib.sha256(data).hexdigest()
        storage_key = await storage.upload(data, sha256, row.get("media_type"))
        kept = {k: v for k, v in row.items() if k != "content_text"}
        moved.append({**kept, "storage_key": storage_key, "sha256": sha256, "size_bytes": len(data)})
    return moved
