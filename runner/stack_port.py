"""The local stack's default port, written once: the runner's settings read it, and so does the
warm CLI's client (runner/cli/warm_target.py), which imports nothing heavier than this."""

from __future__ import annotations

__all__ = ["DEFAULT_DB_PORT"]

DEFAULT_DB_PORT = 5494  # "KIWI" on a phone keypad; clear of the Supabase CLI's 54320-54329
