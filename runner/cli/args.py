"""Argument types shared by the `kiwi` commands' parsers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import UsageError


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


def positive_int(text: str) -> int:
    """A whole number from 1 to 10,000 (workers' concurrency, runs to take)."""
    return whole_number(text, 10_000)


def positive_float(text: str) -> float:
    """A number of seconds above 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 86400 seconds, got {text}")
    return value


def parse_params(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    params: dict[str, Any] = {}
    if args.params:
        from ..core.params import MAX_PARAM_DEPTH, json_depth_exceeds

        if json_depth_exceeds(args.params):
            raise UsageError(
                f"--params nests deeper than {MAX_PARAM_DEPTH} levels, the most parameters may nest",
                hint="flatten the parameters, or pass large structured data as a file the tool reads",
            )
        try:
            params = json.loads(args.params)
        except ValueError as e:
            raise UsageError(f"--params is not valid JSON: {e}", hint="""example: --params '{"name": "Ada"}'""") from e
        if not isinstance(params, dict):
            raise UsageError("--params must be a JSON object", hint="""example: --params '{"name": "Ada"}'""")
    raw: dict[str, str] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"-p expects KEY=VALUE, got {item!r}")
        raw[key] = value
    return params, raw
