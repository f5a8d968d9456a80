"""Argument types shared by the `kiwi` commands' parsers."""

from __future__ import annotations

import argparse


def whole_number(text: str, most: int) -> int:
    """A whole number from 1 to `most` (what reaches SQL as a limit or a batch size is never
    negative, zero or past an int), else argparse's usage error naming the bound."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= n <= most:
        raise argparse.ArgumentTypeError(f"must be from 1 to {most}, got {n}")
    return n
