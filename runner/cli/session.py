"""A signed-in user's session with a hosted project's Supabase Auth, kept for later commands.

`kiwi login` signs in at `<SUPABASE_URL>/auth/v1/token?grant_type=password` (email and
password, the project's anon key as `apikey`) and stores what Supabase Auth answers (an access
token, its expiry and a refresh token) in `session.json` under the user's config directory
($XDG_CONFIG_HOME/kiwi, else ~/.config/kiwi), readable by its owner only (0600). Every later
`kiwi` command of that project then acts as that user: `signed_in()` hands it the access token,
refreshed first (`grant_type=refresh_token`) when it has expired or is about to, as
KIWI_ACCESS_TOKEN would. A session is the project's whose SUPABASE_URL it was made with; under
another project's settings, or the local stack's, it is left alone. `kiwi logout` revokes it
and removes the file.

Refreshing rewrites the file under a lock (`session.json.lock`), so two commands started
together do not both spend the same refresh token (Supabase Auth rotates them).

The grants themselves (sign in, refresh, revoke) are runner/supabase_auth/grants.py, which the
web console's sign-in form uses too. Errors are one line each: a wrong password, an unreachable
Supabase Auth, a session whose refresh token is no longer accepted (sign in again). httpx loads
only when Supabase Auth is called: a command whose session is fresh, or that has none, pays one
stat of a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Refused, UsageError
from ..supabase_auth.grants import REFRESH_MARGIN_S, Session, revoke, sign_in
from ..supabase_auth.grants import refresh as _refresh

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "REFRESH_MARGIN_S",
    "Session",
    "forget",
    "load",
    "refresh",
    "renewal",
    "revoke",
    "session_file",
    "sign_in",
    "signed_in",
    "store",
]


def session_file(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/kiwi/session.json, else ~/.config/kiwi/session.json."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base).expanduser() / "kiwi" / "session.json"


def load(path: Path) -> Session | None:
    """The stored session, or None when there is none; a file that is not one is an error naming it."""
    try:
        raw = json.loads(path.read_text())
        return Session(**{k: raw[k] for k in Session.__dataclass_fields__ if k in raw})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as e:
        raise UsageError(f"{path} is not a kiwi session ({e}): remove it, or run `kiwi logout`") from None


def store(path: Path, session: Session) -> None:
    """Write the session readable by its owner only (0600, in a 0700 directory), atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask, or a file left by an earlier crash, said
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(session), out, indent=2)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def forget(path: Path) -> bool:
    """Remove the stored session; whether there was one."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    with contextlib.suppress(OSError):
        path.with_name(path.name + ".lock").unlink()
    return True


def refresh(session: Session, key: str) -> Session:
    """A new access token for the session; refused, it says to sign in again with `kiwi login`."""
    return _refresh(session, key, again="sign in again with `kiwi login`")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def renewal(settings: Settings, user_id: str) -> Callable[[], tuple[str, float]]:
    """How a long-lived process renews the access token it took from the stored session
    (supabase_auth/renewal.py): the session's token, refreshed and stored again when about to
    expire. Signed out meanwhile, or signed in as someone else, the process acts as nobody:
    it says to sign in again (it never turns into another user)."""

    def renew() -> tuple[str, float]:
        session = signed_in(settings)
        if session is None or session.user_id != user_id:
            why = "is gone (kiwi logout)" if session is None else "is now another user's"
            raise Refused(
                f"the kiwi login session this process acts for {why}: it cannot renew its access token",
                hint="sign in again with `kiwi login`, then start this command again",
            )
        return session.access_token, float(session.expires_at)

    return renew


def signed_in(settings: Settings, environ: Mapping[str, str] | None = None) -> Session | None:
    """The stored session of the project `settings` name, its access token fresh (refreshed and
    stored again when it had expired); None without one, or when it is another project's."""
    path = session_file(environ)
    if not path.exists():
        return None
    session = load(path)
    if session is None or not settings.supabase_url or session.url != settings.supabase_url.rstrip("/"):
        return None
    if not session.expired():
        return session
    if not settings.supabase_key:
        raise UsageError(f"cannot refresh your session of {session.url}: set SUPABASE_ANON_KEY (its anon key)")
    with _locked(path):
        current = load(path)  # another command may have refreshed it while this one waited
        if current is None:
            return None
        if current.expired():
            current = refresh(current, settings.supabase_key)
            store(path, current)
        return current
