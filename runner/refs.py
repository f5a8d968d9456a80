"""Tool references as the registry reads them (kiwi_internal.normalize_ref)."""

from __future__ import annotations


def normalize_ref(ref: str) -> str:
    """`public/x` and ` x ` mean `x`: the public namespace is the default one."""
    ref = ref.strip()
    return ref[len("public/") :] if ref.startswith("public/") else ref
