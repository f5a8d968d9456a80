"""The execution plan: what resolve_execution_plan returns, as typed Python.

The plan is the only thing the runner knows about a tool. Its `config` is already the
deep merge of every config in the chain (primitive first, the tool last), done in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .identity import ByIdentity


@dataclass(frozen=True)
class ChainLink:
    tool_id: str
    tool_type: str
    version: str
    content_hash: str


@dataclass(frozen=True)
class PlanFile:
    path: str
    sha256: str
    size_bytes: int
    is_entrypoint: bool
    content_text: str | None
    media_type: str | None = None
    storage_key: str | None = None


@dataclass(frozen=True)
class Plan:
    tool_id: str
    version: str
    tool_type: str
    content_hash: str
    primitive: str | None
    executor_id: str | None
    chain: list[ChainLink]
    config: dict[str, Any]
    parameters: dict[str, Any] | None
    outputs: Any = None
    files: list[PlanFile] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)  # the version's own, as published
    source: str = "registry"  # or "project" / "user": a local space's tool.yaml (spaces.py)
    origin: str | None = None  # a local tool's directory
    shadows: str | None = None  # a local tool: the latest version of the registry's tool it shadows
    deprecated: bool = False  # the version's lifecycle (tool_lifecycle.sql): runs, warning with the message
    deprecation_message: str | None = None
    yanked: bool = False  # resolved only by its exact version (a pin): runs, warning
    yanked_reason: str | None = None
    # the runner's variables its config may read (${VAR}, env_passthrough): names and PREFIX_*
    # patterns the registry allows (runner/harness/environ.py); None: the registry did not say
    allowed_variables: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(
            tool_id=data["tool_id"],
            version=data["version"],
            tool_type=data["tool_type"],
            content_hash=data["content_hash"],
            primitive=data.get("primitive"),
            executor_id=data.get("executor_id"),
            chain=[
                ChainLink(**{k: link[k] for k in ("tool_id", "tool_type", "version", "content_hash")})
                for link in data.get("chain") or []
            ],
            config=data.get("config") or {},
            parameters=data.get("parameters"),
            outputs=data.get("outputs"),
            files=[PlanFile(**{k: f.get(k) for k in PlanFile.__dataclass_fields__}) for f in data.get("files") or []],
            manifest=data.get("manifest") or {},
            source=data.get("source") or "registry",
            origin=data.get("origin"),
            shadows=data.get("shadows"),
            deprecated=bool(data.get("deprecated")),
            deprecation_message=data.get("deprecation_message"),
            yanked=bool(data.get("yanked")),
            yanked_reason=data.get("yanked_reason"),
            allowed_variables=_names(data.get("allowed_variables")),
        )

    @classmethod
    def of(cls, data: dict[str, Any]) -> Plan:
        """from_json, remembered for the very dict a plan cache hands back on every run."""
        return _parsed(data)

    @property
    def entrypoint(self) -> PlanFile | None:
        return next((f for f in self.files if f.is_entrypoint), None)

    @property
    def chain_ids(self) -> list[str]:
        return [link.tool_id for link in self.chain]

    @property
    def mcp_server_link(self) -> ChainLink | None:
        """The link of the mcp_server the tool runs on: the first one in its chain."""
        return next((link for link in self.chain if link.tool_type == "mcp_server"), None)

    @property
    def mcp_server(self) -> str | None:
        """The tool id of the mcp_server the tool runs on (as rate limits and permissions name it)."""
        return mcp_server_of(self.chain)


def mcp_server_of(chain: Iterable[ChainLink | Mapping[str, Any]]) -> str | None:
    """The first mcp_server of a chain, typed or as JSON (a plan's `chain` key): Plan.mcp_server."""
    for link in chain:
        if isinstance(link, ChainLink):
            if link.tool_type == "mcp_server":
                return link.tool_id
        elif isinstance(link, Mapping) and link.get("tool_type") == "mcp_server":
            return str(link.get("tool_id"))
    return None


def _names(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(str(v) for v in value)


_parsed: ByIdentity[Plan] = ByIdentity(Plan.from_json)
