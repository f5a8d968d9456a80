"""The meta-tools' vocabulary (item types, execute's actions, a publish's file) and the
checks of their arguments, in one place because several tools share them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ...core.refs import MCP_WORDS, ToolRef, tool_name
from ...errors import UsageError

__all__ = [
    "ACTIONS",
    "ITEM_TYPES",
    "ExecuteRequest",
    "FileInput",
    "check_context_id",
    "check_item_type",
    "item_type_of",
    "same_tool",
    "split_ref",
]

ITEM_TYPES = ("directive", "tool", "knowledge", "mcp")  # mcp: an MCP server and its tools (mcp_items.py)
ACTIONS = (
    "run",
    "dry_run",
    "create",
    "update",
    "publish",
    "yank",
    "deprecate",
    "delete",
    "import",
    "approve",
    "deny",
    "open_context",
    "rollback",
    "call",
)


def item_type_of(tool_type: str | None) -> str:
    """The MCP item type of a registry tool type."""
    return tool_type if tool_type in ("directive", "knowledge") else "tool"


class FileInput(BaseModel):
    """One file of a tool being published."""

    model_config = ConfigDict(extra="forbid")

    path: Annotated[str, Field(description="Relative path inside the tool, e.g. 'main.py' (no '..', no leading '/').")]
    content_text: Annotated[str, Field(description="The file's full text (UTF-8).")]
    is_entrypoint: Annotated[
        bool, Field(description="True for the file the runtime invokes (one per tool); match manifest 'entrypoint'.")
    ] = False
    media_type: Annotated[str | None, Field(description="Optional media type, e.g. 'text/x-python'.")] = None


@dataclass(frozen=True)
class ExecuteRequest:
    """One `execute` call's arguments and the session it is made in, handed to each action."""

    action: str
    session: str
    item_id: str | None = None
    parameters: dict[str, Any] | None = None
    version: str | None = None
    manifest: dict[str, Any] | str | None = None
    files: list[FileInput] | None = None
    confirm: bool = False
    approval_id: str | None = None
    context: str | None = None
    permissions: dict[str, Any] | None = None


def check_item_type(item_type: str | None) -> str | None:
    if item_type is None or item_type == "":
        return None
    if item_type not in ITEM_TYPES:
        raise UsageError(
            f"unknown item_type {item_type!r}",
            hint="item_type is one of directive, tool, knowledge, mcp (or leave it out for all)",
        )
    return item_type


def check_context_id(context: str | None) -> str | None:
    """`context`, an execution context's id (a UUID), checked here so that the registry is never
    handed text it cannot read as one (it would answer with a raw type error)."""
    if context is None:
        return None
    try:
        return str(uuid.UUID(context))
    except (ValueError, TypeError, AttributeError):
        raise UsageError(
            "context: must be an execution context's id (a UUID)",
            hint="pass the id a directive's run or action=open_context answered with, or leave context out",
        ) from None


def split_ref(item_id: str | None, version: str | None) -> tuple[str, str | None]:
    """`tool@1.2.0` is the same as item_id=tool, version=1.2.0 (ToolRef.parse with MCP's words)."""
    named = ToolRef.parse(item_id or "", version, MCP_WORDS)
    return named.ref, named.version


def same_tool(ref: str, manifest_id: str) -> bool:
    """Whether an item_id names the manifest's tool (namespaces aside: the manifest may give its own)."""
    return ref == manifest_id or tool_name(ref) == tool_name(manifest_id)
