"""Access tokens a long-lived process renews before they expire.

A command that acts as the session `kiwi login` keeps takes its access token once, at start
(runner/cli/main.py). Supabase Auth's access tokens last about an hour, so a process that
lives longer (`kiwi serve` over stdio for a desktop agent, `kiwi worker`) would have every
request refused from then on. The CLI names the token it took and how to get a fresh one
(`renewable`); the REST backend asks for one shortly before the token it sends expires
(`renewer_of`), and keeps acting as the same user. A session signed out meanwhile (`kiwi
logout`) cannot be renewed: the requests are then refused, saying to sign in again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["Renew", "expiry_of", "renewable", "renewer_of"]

Renew = Callable[[], tuple[str, float]]  # a fresh (access token, its expiry in Unix seconds); may block
_renewers: dict[str, Renew] = {}


def renewable(token: str, renew: Renew) -> None:
    """Say that this process took `token` from a session that `renew` refreshes."""
    _renewers[token] = renew


def renewer_of(token: str | None) -> Renew | None:
    """How to renew `token`, when this process took it from a session (else None)."""
    return _renewers.get(token) if token else None


def expiry_of(token: str) -> float:
    """The `exp` claim of a JWT, read without checking its signature (whoever receives the token
    checks that); infinity when it has none or is not a JWT."""
    import jwt  # PyJWT, as runner/principal.py verifies tokens with it

    try:
        return float(jwt.decode(token, options={"verify_signature": False})["exp"])
    except (jwt.PyJWTError, KeyError, TypeError, ValueError):
        return math.inf
