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

Errors are one line each: a wrong password, an unreachable Supabase Auth, a session whose
refresh token is no longer accepted (sign in again). httpx loads only when Supabase Auth is
called: a command whose session is fresh, or that has none, pays one stat of a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KiwiError, Refused, RegistryUnavailable, UsageError

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "REFRESH_MARGIN_S",
    "Session",
    "forget",
    "load",
    "refresh",
    "revoke",
    "session_file",
    "sign_in",
    "signed_in",
    "store",
]

# a token this close to its expiry is refreshed before it is used: a command may take this long
REFRESH_MARGIN_S = 60
TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Session:
    """What Supabase Auth answered a sign-in (or a refresh) with, and whose project it is."""

    url: str  # the project's SUPABASE_URL, without a trailing slash
    access_token: str
    refresh_token: str
    expires_at: int  # Unix seconds
    user_id: str
    email: str | None = None

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires_at - REFRESH_MARGIN_S

    def describe(self) -> str:
        return f"{self.email or 'user'} ({self.user_id})"


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


def _auth_url(url: str) -> str:
    return url.rstrip("/") + "/auth/v1"


def _call(url: str, key: str, path: str, body: dict[str, Any] | None, token: str | None = None) -> Any:
    """POST to the project's Supabase Auth; the answer's JSON, or a one-line KiwiError."""
    import httpx  # only when Supabase Auth is called

    headers = {"apikey": key, "Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    where = _auth_url(url)
    try:
        response = httpx.post(where + path, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as e:
        reason = str(e) or type(e).__name__
        raise RegistryUnavailable(f"cannot reach Supabase Auth at {where} ({reason}): check SUPABASE_URL") from None
    if response.status_code >= 400:
        raise _refusal(response, where)
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise RegistryUnavailable(
            f"{where} answered {response.status_code} with no JSON: is SUPABASE_URL the project's URL?"
        ) from None


class _Rejected(Refused):
    """Supabase Auth said no: `reason` is its message, `code` its error code."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(f"Supabase Auth refused: {reason}")
        self.reason = reason
        self.code = code


def _refusal(response: Any, where: str) -> KiwiError:
    """Supabase Auth's error ({"error_code", "msg"}, or OAuth's {"error", "error_description"})."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    code = str(body.get("error_code") or body.get("error") or "")
    reason = str(body.get("msg") or body.get("error_description") or body.get("message") or response.reason_phrase)
    if response.status_code >= 500 or response.status_code == 404:
        return RegistryUnavailable(f"Supabase Auth at {where} answered {response.status_code}: {reason}")
    return _Rejected(reason, code)


def _session(url: str, answer: Any, previous: Session | None = None) -> Session:
    """The Session of a token answer (a refresh may leave the user out)."""
    if not isinstance(answer, dict) or not answer.get("access_token") or not answer.get("refresh_token"):
        raise RegistryUnavailable("Supabase Auth answered without an access and a refresh token")
    found = answer.get("user")
    user: dict[str, Any] = found if isinstance(found, dict) else {}
    expires_at = answer.get("expires_at")
    if not isinstance(expires_at, int | float):
        expires_at = time.time() + float(answer.get("expires_in") or 3600)
    user_id = str(user.get("id") or (previous.user_id if previous else "") or _claim(answer["access_token"], "sub"))
    email = user.get("email") or (previous.email if previous else None)
    return Session(
        url=url.rstrip("/"),
        access_token=str(answer["access_token"]),
        refresh_token=str(answer["refresh_token"]),
        expires_at=int(expires_at),
        user_id=user_id,
        email=str(email) if email else None,
    )


def _claim(token: str, name: str) -> str:
    """A claim of a token read without verifying it (only to name the user; the server verifies)."""
    import base64

    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims.get(name) or "")
    except (IndexError, ValueError):
        return ""


def sign_in(url: str, key: str, email: str, password: str) -> Session:
    """Email and password for a session (Supabase Auth's password grant)."""
    try:
        answer = _call(url, key, "/token?grant_type=password", {"email": email, "password": password})
    except _Rejected as e:
        raise Refused(f"sign-in refused for {email}: {e.reason}") from None
    return _session(url, answer)


def refresh(session: Session, key: str) -> Session:
    """A new access token for the session (Supabase Auth's refresh grant; the refresh token rotates)."""
    try:
        answer = _call(session.url, key, "/token?grant_type=refresh_token", {"refresh_token": session.refresh_token})
    except _Rejected as e:
        raise Refused(f"your session has expired ({e.reason}): sign in again with `kiwi login`") from None
    return _session(session.url, answer, session)


def revoke(session: Session, key: str) -> None:
    """Sign this session out at Supabase Auth (scope local: the user's other sessions stay)."""
    _call(session.url, key, "/logout?scope=local", None, token=session.access_token)


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
