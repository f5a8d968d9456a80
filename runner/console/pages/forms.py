"""Reading the fields of a submitted form and of a query string, as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["text_field"]

MAX_FIELD = 2000


def text_field(form: Mapping[str, Any], name: str, default: str = "") -> str:
    """A field as stripped text (an upload or a missing field: `default`), at most MAX_FIELD characters."""
    value = form.get(name)
    return value.strip()[:MAX_FIELD] if isinstance(value, str) else default
