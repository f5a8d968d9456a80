"""`kiwi login` and `kiwi logout`: sign in to a hosted project's Supabase Auth, and out again.

    kiwi login --email ada@example.com                 # asks the password on the terminal
    printf '%s\\n' "$PASSWORD" | kiwi login --email ada@example.com --password-stdin
    kiwi whoami                                        # user ... (authenticated, session ...)
    kiwi logout                                        # revokes the session, removes the file

The project is the one the settings name: SUPABASE_URL (or config.toml [supabase] url) and
its anon key (SUPABASE_ANON_KEY or SUPABASE_KEY, or [supabase] key). The password is never
an argument: it is read from the terminal (getpass) or, with --password-stdin, from the
first line of stdin. The session is stored readable by its owner only (runner/cli/session.py),
and every later `kiwi` command of that project acts as its user; KIWI_ACCESS_TOKEN, when set,
still wins. The local stack has no sign-in: kiwi acts as its owner, and `kiwi token` prints
a token for anyone else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..config import Settings
from ..errors import KiwiError, Refused, UsageError
from . import session as sessions

__all__ = ["add_login_commands", "cmd_login", "cmd_logout"]


def add_login_commands(subparsers: Any) -> None:
    """Define `login` and `logout` on a parser's subparsers."""
    login = subparsers.add_parser(
        "login",
        help="sign in to the hosted project's Supabase Auth (email and password); later commands act as you",
        description=(
            "Sign in to the Supabase Auth of the project SUPABASE_URL names, with the anon key "
            "(SUPABASE_ANON_KEY), and keep the session (0600, under $XDG_CONFIG_HOME/kiwi or "
            "~/.config/kiwi): every later kiwi command of that project acts as you, its access "
            "token refreshed when it expires. The password is read from the terminal, or from stdin "
            "with --password-stdin; never from the command line."
        ),
    )
    login.add_argument("--email", metavar="EMAIL", help="the account's email (default: asked on the terminal)")
    login.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    login.add_argument("--json", action="store_true", help="print a JSON object (user_id, email, expires_at, ...)")
    login.set_defaults(handler=cmd_login)

    logout = subparsers.add_parser(
        "logout",
        help="sign out: revoke the session `kiwi login` stored, and remove it",
        description="Revoke the stored session at the project's Supabase Auth (this session only) and "
        "remove its file. Without a network, the file is removed all the same.",
    )
    logout.add_argument("--json", action="store_true", help="print a JSON object")
    logout.set_defaults(handler=cmd_logout)


def _project(settings: Settings) -> tuple[str, str]:
    """The project's URL and anon key, or a UsageError saying what to set."""
    if not settings.supabase_url:
        raise UsageError(
            "kiwi login signs in to a hosted project's Supabase Auth, and no project is configured",
            hint="set SUPABASE_URL and SUPABASE_ANON_KEY (or config.toml [supabase] url and key); on the "
            "local stack nobody signs in: kiwi acts as its owner, and `kiwi token` prints tokens",
        )
    if not settings.supabase_key:
        raise UsageError(
            f"kiwi login needs the anon key of {settings.supabase_url}",
            hint="set SUPABASE_ANON_KEY (the dashboard's Settings, API: the anon, public key)",
        )
    return settings.supabase_url.rstrip("/"), settings.supabase_key


def _ask(prompt: str) -> str:
    """A line typed at the terminal (the prompt on stderr, so --json's stdout stays JSON)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise UsageError(f"no answer to {prompt.strip()!r}: stdin is closed")
    return line.strip()


def _password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        import getpass

        password = getpass.getpass("Password: ")
    else:
        raise UsageError(
            "no terminal to ask the password at",
            hint="pipe it in with --password-stdin (never as an argument: others see argv)",
        )
    if not password:
        raise UsageError("the password is empty", hint="type it at the prompt, or pipe it with --password-stdin")
    return password


async def cmd_login(args: argparse.Namespace) -> int:
    settings = Settings.load()
    url, key = _project(settings)
    if args.email:
        email = args.email.strip()
    elif args.password_stdin or not sys.stdin.isatty():
        raise UsageError("give --email: stdin is not a terminal to ask it at")
    else:
        email = _ask("Email: ")
    if not email:
        raise UsageError("the email is empty", hint="kiwi login --email you@example.com")
    session = sessions.sign_in(url, key, email, _password(args.password_stdin))
    path = sessions.session_file()
    sessions.store(path, session)
    if args.json:
        out = {
            "url": url,
            "user_id": session.user_id,
            "email": session.email,
            "expires_at": session.expires_at,
            "session_file": str(path),
        }
        print(json.dumps(out, indent=2))
    else:
        print(f"signed in to {url} as {session.describe()}")
        print(f"kiwi: the session is in {path} (0600); `kiwi logout` signs out", file=sys.stderr)
    if os.environ.get("KIWI_ACCESS_TOKEN"):
        print("kiwi: note: KIWI_ACCESS_TOKEN is set, and wins over the session while it is", file=sys.stderr)
    return 0


async def cmd_logout(args: argparse.Namespace) -> int:
    path = sessions.session_file()
    session = sessions.load(path)
    revoked: str | None = None
    if session is not None:
        revoked = _revoke(session)
        sessions.forget(path)
    if args.json:
        out: dict[str, Any] = {"signed_out": session is not None, "session_file": str(path)}
        if session is not None:
            out.update(url=session.url, user_id=session.user_id, revoke_error=revoked)
        print(json.dumps(out, indent=2))
    elif session is None:
        print("not signed in: there was no session to remove")
    else:
        print(f"signed out of {session.url} ({session.describe()}); removed {path}")
        if revoked:
            print(f"kiwi: warning: the session could not be revoked at Supabase Auth: {revoked}", file=sys.stderr)
    return 0


def _revoke(session: sessions.Session) -> str | None:
    """Revoke the session at Supabase Auth (best effort); why not, if it was not."""
    try:
        settings = Settings.load()
    except KiwiError as e:
        return e.message
    key = settings.supabase_key if (settings.supabase_url or "").rstrip("/") == session.url else None
    if not key:
        return f"no anon key for {session.url} is configured (SUPABASE_ANON_KEY)"
    try:
        if session.expired():  # the logout endpoint wants a live access token: refresh for one
            try:
                session = sessions.refresh(session, key)
            except Refused:
                return None  # its refresh token is refused already: nothing is left to revoke
        sessions.revoke(session, key)
    except KiwiError as e:
        return e.message
    return None
