"""kiwi keys / sign / lock: the trust commands (filled in below)."""

from __future__ import annotations

import argparse
from typing import Any


def add_trust_commands(sub: Any) -> None:
    """Register `kiwi keys`, `kiwi sign` and `kiwi lock` on the top-level subparsers."""
    del sub


__all__ = ["add_trust_commands", "argparse"]
