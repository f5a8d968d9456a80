"""The database's errors as KiwiErrors, shared by both backends.

PostgreSQL raises them with a SQLSTATE; PostgREST forwards the same SQLSTATE as
`code` (with its own `PGRST...` codes for what happens before the database), so one
table serves both:

  PT404                         -> NotFound
  PT422, PT409, 42501           -> Refused
  22023                         -> UsageError; `detail` holds a JSON list of problems
  22*                           -> UsageError (other data exceptions: NUL, NaN ...)
  23*                           -> Refused (integrity: e.g. deleting a tool others run on)
  08*, 53*, 57P0*, PGRST000-003 -> RegistryUnavailable (cannot talk to the database)
  42883, 42P01, PGRST202/205    -> RegistryUnavailable (a function or table is missing:
                                   the database is not migrated)
  PGRST301-303                  -> Refused (the key or token was not accepted)
  anything else                 -> KiwiError, with its code in the message
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import KiwiError, NotFound, Refused, RegistryUnavailable, UsageError

_REFUSED = {"PT422", "PT409", "42501"}
_MISSING_OBJECT = {"42883", "42P01", "PGRST202", "PGRST205"}
_UNREACHABLE_PGRST = {"PGRST000", "PGRST001", "PGRST002", "PGRST003"}
_BAD_TOKEN = {"PGRST300", "PGRST301", "PGRST302", "PGRST303"}


def problems_of(detail: Any) -> list[str] | None:
    """The list of problems a 22023 carries in its detail (a JSON list of strings), if it does."""
    if isinstance(detail, list):
        value: Any = detail
    elif isinstance(detail, str):
        try:
            value = json.loads(detail)
        except ValueError:
            return None
    else:
        return None
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return value
    return None


def from_sqlstate(code: str | None, message: str | None, *, detail: Any = None, hint: str | None = None) -> KiwiError:
    """The KiwiError for an error the registry raised with this SQLSTATE (or PostgREST code),
    which it keeps as `sqlstate` (the run recorder tells a duplicate id, 23505, by it)."""
    err = _from_sqlstate(code or "", message, detail=detail, hint=hint)
    err.sqlstate = code or None
    return err


def _from_sqlstate(code: str, message: str | None, *, detail: Any, hint: str | None) -> KiwiError:
    message = message or f"registry error {code}".strip()
    if code == "PT404":
        return NotFound(message, hint=hint)
    if code in _REFUSED:
        return Refused(message, hint=hint)
    if code == "22023":
        problems = problems_of(detail)
        if problems:
            head = message.split(": ", 1)[0] if ": " in message else message
            message = head + ":\n" + "\n".join(f"  - {p}" for p in problems)
        err = UsageError(message, hint=hint)
        err.problems = problems or []  # type: ignore[attr-defined]
        return err
    if code.startswith("23"):  # integrity: a tool others execute on, a duplicate, a broken rule
        return Refused(message, hint=hint)
    if code.startswith("22"):  # any other data exception: the input cannot be stored as given
        return UsageError(message, hint=hint or "a value the database cannot store (a NUL character, NaN, infinity)")
    if code.startswith(("08", "53", "57P0")) or code in _UNREACHABLE_PGRST:
        return RegistryUnavailable(message, hint=hint or "check that the database is up")
    if code in _MISSING_OBJECT:
        return RegistryUnavailable(
            f"the registry database is missing something the runner calls: {message}",
            hint="apply the migrations (`make db` locally, `supabase db push --remote` for a project)",
        )
    if code in _BAD_TOKEN:
        return Refused(
            message, hint=hint or "check the Supabase key (SUPABASE_KEY), and KIWI_ACCESS_TOKEN if set (tokens expire)"
        )
    return KiwiError(f"registry error {code}: {message}" if code else message, hint=hint)


_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(url: str) -> str:
    """A database URL (or key=value conninfo) with its password replaced by ***."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.password is not None:
            userinfo = f"{parts.username or ''}:***"
            host = parts.netloc.rsplit("@", 1)[1]
            url = urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))
        return re.sub(r"([?&]password=)[^&]*", r"\1***", url)
    return _KV_PASSWORD.sub(r"\1***", url)


def password_of(url: str) -> str | None:
    if "://" in url:
        password = urlsplit(url).password
        m = re.search(r"[?&]password=([^&]*)", url)
        return password or (m.group(1) if m else None)
    m = _KV_PASSWORD.search(url)
    return m.group(2).strip("'") if m else None


def scrub(text: str, url: str) -> str:
    """`text` with every spelling of the URL's password removed (the URL itself redacted)."""
    text = text.replace(url, redact(url))
    password = password_of(url)
    if password:
        for spelling in {password, unquote(password)}:
            text = text.replace(spelling, "***")
    return text
