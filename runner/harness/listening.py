"""A run's listener (primitives.base.RunListener) as the runner hands it on: with the run's
secrets masked in every line and message, as they are in everything else a run reports.

Lines come whole (primitives/pipes.py), so a secret is masked wherever it stands in one; a
secret that itself holds a line break can never arrive whole in one line, so each of its own
lines is masked too.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.records import scrub
from ..primitives.base import RunListener

_MIN_PART = 4  # a part of a multi-line secret shorter than this is too common to mask alone


def line_secrets(secrets: list[str]) -> list[str]:
    """The secrets, and each line of those that span lines, longest first."""
    parts = {p for s in secrets if "\n" in s or "\r" in s for p in s.splitlines() if len(p.strip()) >= _MIN_PART}
    return sorted({*secrets, *parts}, key=len, reverse=True)


def masked(listener: RunListener | None, secrets: list[str]) -> RunListener | None:
    """`listener` with every secret masked before it hears anything (None stays None)."""
    if listener is None or not secrets:
        return listener
    forms = line_secrets(secrets)
    line, progress = listener.line, listener.progress

    def on_line(text: str) -> None:
        assert line is not None
        line(scrub(text, forms) or "")

    def on_progress(message: str | None, done: float | None, total: float | None) -> None:
        assert progress is not None
        progress(scrub(message, forms), done, total)

    return RunListener(
        line=on_line if line is not None else None, progress=on_progress if progress is not None else None
    )


def reporting(progress: Callable[[str], None] | None, listener: RunListener | None) -> Callable[[str], None] | None:
    """One progress callback for the runner's steps (an environment being built): the runner's
    own reporter (a terminal) and the run's listener, whichever are there."""
    heard = listener.progress if listener is not None else None
    if heard is None:
        return progress
    if progress is None:
        return lambda message: heard(message, None, None)

    def both(message: str) -> None:
        progress(message)
        heard(message, None, None)

    return both


__all__ = ["line_secrets", "masked", "reporting"]
