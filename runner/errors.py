"""Errors a person or an agent can act on: each says what went wrong, and a hint says what to do.

Every error the runner raises on purpose is a KiwiError. Its `exit_code` is what
`kiwi` exits with, so scripts can tell a bad input from a missing tool from a tool that
ran and failed.
"""

from __future__ import annotations


class KiwiError(Exception):
    """Base of every deliberate runner error."""

    exit_code = 1
    kind = "error"
    sqlstate: str | None = None  # the database's SQLSTATE (or PostgREST code), when it raised this

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\nhint: {self.hint}"

    def as_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "message": self.message, "hint": self.hint}


class UsageError(KiwiError):
    """The request itself is wrong: a bad option, bad JSON, bad parameters."""

    exit_code = 2
    kind = "usage"


class InvalidParameters(UsageError):
    """Parameters that do not satisfy the tool's JSON Schema; `problems` lists each bad field."""

    kind = "invalid_parameters"

    def __init__(self, tool_id: str, problems: list[str]) -> None:
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"invalid parameters for {tool_id}:\n{lines}",
            hint=f"see the parameters with: kiwi show {tool_id}",
        )
        self.problems = problems


class NotFound(KiwiError):
    """A tool, version or run that does not exist (or that the caller may not see)."""

    exit_code = 3
    kind = "not_found"


class Refused(KiwiError):
    """The registry or the runner refuses to go on: a broken chain, an altered file, a blocked pattern."""

    exit_code = 4
    kind = "refused"


class IntegrityError(Refused):
    """A materialised file does not match the sha256 the registry recorded."""

    kind = "integrity"


class ConfigError(KiwiError):
    """The tool's configuration cannot be used as it is (a missing ${VAR}, an unknown placeholder)."""

    exit_code = 4
    kind = "config"


class RegistryUnavailable(KiwiError):
    """The registry cannot be reached."""

    exit_code = 5
    kind = "registry_unavailable"


class PrimitiveError(KiwiError):
    """A primitive could not even start the work: command not found, permission denied."""

    exit_code = 1
    kind = "primitive"
