"""Sign and verify a content_hash. The message is documented in
supabase/migrations/*_signatures.sql: the UTF-8 bytes of "kiwi-signature-v1\\n" ||
content_hash, so that a Kiwi key's signature cannot be replayed as anything else."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .content_hash import content_hash, sha256_hex
from .keys import SigningKey

MESSAGE_PREFIX = b"kiwi-signature-v1\n"


def message(content_hash: str) -> bytes:
    return MESSAGE_PREFIX + content_hash.encode("ascii")


def sign(key: SigningKey, content_hash: str) -> dict[str, str]:
    """The signature as publish_tool_version's p_signature takes it."""
    signature = key.private.sign(message(content_hash))
    return {
        "content_hash": content_hash,
        "public_key": key.public_b64,
        "signature": base64.b64encode(signature).decode("ascii"),
    }


def sign_publication(key: SigningKey, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, str]:
    """A signature for a version about to be published: its content_hash computed here, as
    the registry will compute it, so that publish and sign are one transaction (the
    registry refuses the whole publish if the hashes disagree)."""
    hashes = [(str(f["path"]), sha256_hex(str(f["content_text"]))) for f in files]
    return sign(key, content_hash(manifest, hashes))


def verifies(public_key_b64: str, content_hash: str, signature_b64: str) -> bool:
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64, validate=True))
        key.verify(base64.b64decode(signature_b64, validate=True), message(content_hash))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
