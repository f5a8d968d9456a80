"""Ed25519 signing keys: generated once, kept as PKCS#8 PEM files readable only by
their owner, and named by the fingerprint the registry stores (hex SHA-256 of the raw
public key). Public keys travel as "ed25519:<base64 of the raw 32 bytes>"."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import UsageError

KEY_PREFIX = "ed25519:"
KEY_SUFFIX = ".key"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class SigningKey:
    name: str
    path: Path
    private: Ed25519PrivateKey

    @property
    def public_b64(self) -> str:
        return public_b64(self.private.public_key())

    @property
    def public_text(self) -> str:
        return KEY_PREFIX + self.public_b64

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_b64)


def public_b64(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def fingerprint(public_key_b64: str) -> str:
    """The registry's key_fingerprint: hex SHA-256 of the raw key bytes."""
    return hashlib.sha256(base64.b64decode(public_key_b64)).hexdigest()


def parse_public_key(text: str) -> str:
    """A trusted key as config.toml holds it ("ed25519:<base64>" or bare base64) -> its
    base64; anything that is not a 32-byte key is a usage error naming it."""
    body = text.strip().removeprefix(KEY_PREFIX)
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise UsageError(
            f"not an Ed25519 public key: {text[:60]!r}",
            hint='a trusted key reads "ed25519:<base64 of 32 bytes>", as `kiwi keys generate` prints it',
        )
    return base64.b64encode(raw).decode("ascii")


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise UsageError(f"bad key name {name!r}", hint="letters, digits, '.', '_' and '-', at most 64")


def key_path(keys_dir: Path, name: str) -> Path:
    _check_name(name)
    return keys_dir / f"{name}{KEY_SUFFIX}"


def generate(keys_dir: Path, name: str = "default") -> SigningKey:
    """A new key written with mode 0600 (its folder 0700); an existing key is never overwritten."""
    path = key_path(keys_dir, name)
    keys_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(
            f"a key named {name!r} exists already ({path})", hint="pick another name with --name"
        ) from None
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return SigningKey(name=name, path=path, private=private)


def load(keys_dir: Path, name_or_path: str = "default") -> SigningKey:
    """A key by name (in keys_dir) or by path to a PEM file."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == KEY_SUFFIX or os.sep in name_or_path:
        path, name = candidate, candidate.stem
    else:
        path, name = key_path(keys_dir, name_or_path), name_or_path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no signing key {name!r} at {path}", hint="create one: kiwi keys generate") from None
    except OSError as e:
        raise UsageError(f"cannot read signing key {path}: {e.strerror or e}") from e
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{path} is not an unencrypted PEM private key: {e}") from e
    if not isinstance(private, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 key")
    return SigningKey(name=name, path=path, private=private)


def list_keys(keys_dir: Path) -> list[SigningKey]:
    if not keys_dir.is_dir():
        return []
    return [load(keys_dir, p.stem) for p in sorted(keys_dir.glob(f"*{KEY_SUFFIX}"))]
