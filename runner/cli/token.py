"""`kiwi token`: a bearer token (a Supabase Auth style JWT) to sign an MCP client in locally.

    kiwi token                        # the local stack's owner, valid for a day
    kiwi token --user UUID            # another user of the project
    kiwi token --role anon            # nobody signed in: what the public may read
    kiwi token --expires 600 --json   # {"access_token", "token_type", "expires_in", ...}
    kiwi login && kiwi token          # signed in to a hosted project: your session's access token

The token is signed (HS256) with the project's JWT secret (KIWI_JWT_SECRET or
SUPABASE_JWT_SECRET; the local stack's well-known one when the database is on this
machine), so only someone who could mint tokens anyway can run it. A user's token carries
the audience the server expects (KIWI_JWT_AUDIENCE, default `authenticated`) and lives no
longer than the server accepts (KIWI_JWT_MAX_LIFETIME, default a day). Its issuer (`iss`)
is the project's authorization server when one is configured (Settings.auth_issuer), else
`kiwi-local`. A hosted project's users sign in through its Supabase Auth instead;
`kiwi serve --transport http` tells MCP clients where (its protected resource metadata
names the authorization server), and `kiwi login` keeps one user's session: signed in, plain
`kiwi token` prints that session's access token (refreshed when it expired), and only
--user, --role or --expires sign a new one.

Wire it into the kiwi CLI with `add_token_command(sub)` on its subparsers; standalone:
`python -m runner.cli.token`. PyJWT loads only when a token is signed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import KiwiError, UsageError
from ..principal import DEFAULT_AUDIENCE, LOCAL_ISSUER, LOCAL_OWNER_ID, sign

if TYPE_CHECKING:
    from .session import Session

__all__ = ["add_token_command", "cmd_token", "main", "token_claims"]

DEFAULT_EXPIRES_S = 24 * 3600
MAX_EXPIRES_S = 366 * 24 * 3600


def token_claims(*, role: str, user: str | None, issuer: str, audience: str = DEFAULT_AUDIENCE) -> dict[str, Any]:
    """The claims of a token for `user` (role authenticated, for `audience`) or for nobody (role anon)."""
    if role == "anon":
        if user is not None:
            raise UsageError("an anon token names no user", hint="drop --user, or use --role authenticated")
        return {"role": "anon", "iss": issuer}
    if role != "authenticated":
        raise UsageError(f"kiwi token signs only authenticated or anon tokens, not {role!r}")
    return {"sub": user or LOCAL_OWNER_ID, "role": "authenticated", "aud": audience, "iss": issuer}


def _user_id(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a user id (a uuid): {text!r}") from None


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    if not 1 <= value <= MAX_EXPIRES_S:
        raise argparse.ArgumentTypeError(f"between 1 and {MAX_EXPIRES_S} seconds (a year), not {value}")
    return value


def add_token_command(subparsers: Any) -> argparse.ArgumentParser:
    """Define `token` on a parser's subparsers (the object `add_subparsers()` returns)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "token",
        help="print a bearer token (JWT) for an MCP client of `kiwi serve --transport http`",
        description=(
            "Print an access token signed with the project's JWT secret: by default for the local "
            "stack's owner, so that a local MCP client can send `Authorization: Bearer <token>`. "
            "Signed in with `kiwi login`, it prints your session's access token instead (unless "
            "--user, --role or --expires ask for a new one)."
        ),
    )
    parser.add_argument(
        "--user", type=_user_id, default=None, metavar="UUID", help="the user (default: the local stack's owner)"
    )
    parser.add_argument("--role", choices=("authenticated", "anon"), default=None, help="default: authenticated")
    parser.add_argument(
        "--expires",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=f"how long the token is valid (default {DEFAULT_EXPIRES_S}, a day; a user's token at most "
        "KIWI_JWT_MAX_LIFETIME, which servers hold tokens to)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object (access_token, expires_at, ...)")
    parser.set_defaults(handler=cmd_token)
    return parser


async def cmd_token(args: argparse.Namespace) -> int:
    settings = Settings.load()
    if args.user is None and args.role is None and args.expires is None:
        from .session import signed_in

        session = signed_in(settings)
        if session is not None:
            return _print_session_token(session, args.json)
    args.role = args.role or "authenticated"
    args.expires = args.expires or DEFAULT_EXPIRES_S
    if not settings.jwt_secret:
        raise UsageError(
            "no JWT secret is known, so kiwi cannot sign a token",
            hint="set KIWI_JWT_SECRET to the project's JWT secret; a hosted project's users sign in "
            "through its Supabase Auth instead: `kiwi login`, then `kiwi token` prints their token "
            "(MCP clients discover it from the server's metadata)",
        )
    if args.role == "authenticated" and args.expires > settings.jwt_max_lifetime_s:
        raise UsageError(
            f"--expires {args.expires} is longer than the {settings.jwt_max_lifetime_s:g} s a server accepts "
            "for a user's token (KIWI_JWT_MAX_LIFETIME)",
            hint=f"give --expires {settings.jwt_max_lifetime_s:g} or less (a server's KIWI_JWT_MAX_LIFETIME, "
            "config.toml [auth] max_lifetime, sets the maximum)",
        )
    issuer = settings.auth_issuer() or LOCAL_ISSUER
    claims = token_claims(role=args.role, user=args.user, issuer=issuer, audience=settings.jwt_audience)
    token = sign(claims, settings.jwt_secret, expires_in_s=args.expires)
    expires_at = int(time.time()) + args.expires
    if args.json:
        out = {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": args.expires,
            "expires_at": expires_at,
            "role": claims["role"],
            "user_id": claims.get("sub"),
        }
        print(json.dumps(out, indent=2))
    else:
        print(token)
        who = f"user {claims['sub']}" if claims.get("sub") else "anon"
        until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(expires_at))
        print(f"kiwi: a token for {who} ({claims['role']}), valid until {until};", file=sys.stderr)
        print("kiwi: send it as the header `Authorization: Bearer <token>`", file=sys.stderr)
    return 0


def _print_session_token(session: Session, as_json: bool) -> int:
    """The access token of the session `kiwi login` keeps (already fresh: signed_in refreshed it)."""
    if as_json:
        out = {
            "access_token": session.access_token,
            "token_type": "bearer",
            "expires_in": max(0, session.expires_at - int(time.time())),
            "expires_at": session.expires_at,
            "role": "authenticated",
            "user_id": session.user_id,
            "email": session.email,
        }
        print(json.dumps(out, indent=2))
        return 0
    print(session.access_token)
    until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(session.expires_at))
    print(f"kiwi: your session's access token ({session.describe()}), valid until {until};", file=sys.stderr)
    print("kiwi: send it as the header `Authorization: Bearer <token>`", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kiwi")
    add_token_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["token", *(sys.argv[1:] if argv is None else argv)])
    try:
        return asyncio.run(args.handler(args))
    except KiwiError as e:
        if args.json:
            print(json.dumps({"error": e.as_dict()}))
        print(f"kiwi: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
