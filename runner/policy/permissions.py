"""Whether a call is within an execution context's permissions.

A context (public.execution_contexts, opened by public.open_context; see
supabase/schemas/260_contexts.sql) holds effective permissions in the directive
manifest's format, every kind present:

    {fs_read: [globs], fs_write: [globs], shell: [commands], mcp: ["server.tool"], tools: [refs],
     net: ["host:port" globs]}

`check(permissions, plan)` says whether running `plan` (a resolved execution plan, as
public.resolve_execution_plan returns it) is allowed: None, or the permission it lacks,
such as `tools: hello_world is not allowed by ["*_runtime"]`.

    tools     the tool's reference (public/x is x), for every tool but mcp_tools, directives
              (running one opens a child context instead, which may only narrow) and
              knowledge (reading text, like load, needs no permission).
    mcp       `server.tool` for an mcp_tool (the imported tool's id, <server>.<name>).
    shell     for a tool whose chain ends in the subprocess primitive (mcp_tools aside, which
              talk to an already started server): the command its config names, as a
              basename after placeholders (`{env_dir}/bin/python` -> `python`).
    fs_read, fs_write
              the paths a call names, for tools that say which of their parameters are
              paths, as data in their config: `fs: {read: [param, ...], write: [param, ...]}`
              (a script that writes where it is told), or an MCP server's `tool_fs` entry
              for the upstream tool (its file tools: see fs_parameters). Each
              value (a string or a list of them) is normalised (`a/../b` is `b`) and must
              match a glob of the kind. What a tool does beyond its declared parameters is
              not observed.
    net, fs_read, fs_write
              what the sandbox of the tool's plan reaches (config.sandbox, as the registry
              computes it: 410_sandbox_narrowing.sql), for the tools `tools` checks
              and for mcp_tools (whose plan, mcp_tool -> mcp_server -> subprocess, holds the
              sandbox of the server process that runs the call; a remote server's ends in
              http_client and has none): each `network` entry ("host:port") must match a
              glob of net, each `fs.read` path one of fs_read or fs_write, each `fs.write`
              path one of fs_write, compared as written (a ${VAR} is text). Publishing a
              directive holds the tools and MCP servers it requires to the same
              (450_directive_sandbox_coverage.sql). A context without net
              permits no host.

Patterns are fnmatch-style globs, matched exactly as the database matches them
(kiwi_internal.glob_covers): `*` is any run of characters, `/` and `.` included (`**` is
the same), `?` one character; everything else, `[` included, is literal.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ..core.plan import mcp_server_of
from ..core.refs import normalize_ref

__all__ = [
    "DIRECTIVE_TYPES",
    "KINDS",
    "check",
    "covers",
    "names_paths",
    "needs",
    "refusal",
    "sandbox_needs",
    "shell_command",
    "summary",
    "view",
]

KINDS = ("fs_read", "fs_write", "shell", "mcp", "tools", "net")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_EXEMPT_TYPES = ("directive", "thread", "knowledge")
# what the sandbox of a plan reaches, by the kind that must cover it: (kind, path in config.sandbox, verb)
_SANDBOX = (
    ("net", ("network",), "reached"),
    ("fs_read", ("fs", "read"), "read"),
    ("fs_write", ("fs", "write"), "written"),
)


def glob_matches(pattern: str, value: str) -> bool:
    """Whether glob `pattern` matches all of `value`: `*` any run of characters, `?` one that is
    not `*`, the rest literal. Greedy, going back only to the last `*`: at most
    len(pattern) * len(value) steps, where a regular expression of many `*` (`.*a.*a.*b`)
    would backtrack through polynomially many ways to split the value."""
    p = v = 0
    star, resume = -1, 0  # the last `*` seen, and where in `value` its run ends for now
    while v < len(value):
        if p < len(pattern) and pattern[p] == "*":
            star, resume, p = p, v, p + 1
        elif p < len(pattern) and (pattern[p] == value[v] if pattern[p] != "?" else value[v] != "*"):
            p, v = p + 1, v + 1
        elif star >= 0:
            resume += 1
            p, v = star + 1, resume
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def covers(pattern: str, value: str) -> bool:
    """Whether glob `pattern` matches `value` (a name, or another pattern read as a string)."""
    return glob_matches(normalize_ref(pattern), normalize_ref(value))


def _allowed(patterns: Any, value: str) -> bool:
    return any(covers(str(p), value) for p in patterns or [])


def _lacks(kind: str, value: str, patterns: Any) -> str:
    return f"{kind}: {value} is not allowed by {json.dumps(list(patterns or []))}"


def shell_command(plan: Mapping[str, Any]) -> str | None:
    """The command a subprocess tool runs, as a basename (None when there is none)."""
    config = plan.get("config") or {}
    command = config.get("command") if isinstance(config, Mapping) else None
    if not isinstance(command, str) or not command.strip():
        return None
    first = command.strip().split()[0]
    resolved = _PLACEHOLDER.sub("x", first)  # {env_dir}/bin/python -> x/bin/python
    name = resolved.replace("\\", "/").rsplit("/", 1)[-1]
    return name or None


def check(
    permissions: Mapping[str, Any], plan: Mapping[str, Any], params: Mapping[str, Any] | None = None
) -> str | None:
    """None if `plan` may run under `permissions` (with these parameters), else the permission it lacks."""
    lacking = _check_tool(permissions, plan)
    if lacking is None and params is not None:
        lacking = _check_paths(permissions, plan, params)
    return lacking


def fs_parameters(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Which parameters of a call are paths it reads or writes, as its config says: `fs: {read:
    [param], write: [param]}` (a script), or, for a tool of an MCP server, the server's
    `tool_fs: {<upstream tool>: {read: [...], write: [...]}}` entry for `tool` (the merged config
    of an mcp_tool holds both). Data in the manifests: nothing here knows any server."""
    fs = config.get("fs")
    if isinstance(fs, Mapping):
        return fs
    per_tool, tool = config.get("tool_fs"), config.get("tool")
    if isinstance(per_tool, Mapping) and isinstance(tool, str) and isinstance(per_tool.get(tool), Mapping):
        return per_tool[tool]
    return None


def _check_paths(permissions: Mapping[str, Any], plan: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    fs = fs_parameters(plan.get("config") or {})
    if fs is None:
        return None
    for kind, key in (("fs_read", "read"), ("fs_write", "write")):
        for name in fs.get(key) or []:
            value = params.get(name)
            for path in value if isinstance(value, list) else [value] if value is not None else []:
                normal = posixpath.normpath(str(path))
                if not any(glob_matches(str(g), normal) for g in permissions.get(kind) or []):
                    return _lacks(kind, f"{normal} (parameter {name})", permissions.get(kind))
    return None


def _covering(permissions: Mapping[str, Any], kind: str) -> list[Any]:
    """The patterns that cover a need of `kind`: its own, and for fs_read (a path the sandbox
    mounts read-only) fs_write's too, as public.admit_call covers it."""
    own = list(permissions.get(kind) or [])
    return own + list(permissions.get("fs_write") or []) if kind == "fs_read" else own


def _check_tool(permissions: Mapping[str, Any], plan: Mapping[str, Any]) -> str | None:
    """The first of `needs(plan)` the permissions do not cover (a shell command only where they
    name shell at all: every context the registry opens does)."""
    tool = normalize_ref(str(plan.get("tool_id") or ""))
    verbs = {"shell": "run", **{kind: verb for kind, _, verb in _SANDBOX}}
    for kind, names in needs(plan).items():
        if kind == "shell" and "shell" not in permissions:
            continue
        for name in names:
            if not _allowed(_covering(permissions, kind), name):
                shown = f"{name} ({verbs[kind]} by {tool})" if kind in verbs else name
                return _lacks(kind, shown, permissions.get(kind))
    return None


def sandbox_needs(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """What the sandbox of `plan` reaches, by the permission kind that must cover it:
    {net: [host:port], fs_read: [path], fs_write: [path]}, each present only when not empty."""
    sandbox = (plan.get("config") or {}).get("sandbox")
    out: dict[str, list[str]] = {}
    if not isinstance(sandbox, Mapping):
        return out
    for kind, path, _ in _SANDBOX:
        value: Any = sandbox
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        names = [str(v) for v in value if isinstance(v, str)] if isinstance(value, list) else []
        if names:
            out[kind] = names
    return out


def _mcp_name(plan: Mapping[str, Any], tool_id: str) -> str:
    """An mcp_tool as `server.tool` (the imported tool's id, else its server and upstream name)."""
    server = mcp_server_of(plan.get("chain") or [])  # Plan.mcp_server, of the JSON view
    if server and not tool_id.startswith(normalize_ref(server) + "."):
        upstream = (plan.get("config") or {}).get("tool") or tool_id
        return f"{normalize_ref(server)}.{upstream}"
    return tool_id


def needs(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """What running `plan` needs of a context that its parameters do not decide, as
    public.admit_call checks it when the runner does not hold the context yet:
    {mcp: [server.tool]} or {tools: [ref], shell: [command]}, with {net: [host:port],
    fs_read: [path], fs_write: [path]}: what its sandbox reaches, an MCP server's included
    ({} for what needs nothing). `check` checks these same names (_check_tool), so both
    refuse the same calls."""
    tool_id = normalize_ref(str(plan.get("tool_id") or ""))
    tool_type = plan.get("tool_type")
    if tool_type in _EXEMPT_TYPES:
        return {}
    if tool_type == "mcp_tool":
        return {"mcp": [_mcp_name(plan, tool_id)], **sandbox_needs(plan)}
    command = shell_command(plan) if plan.get("primitive") == "subprocess" else None
    return {"tools": [tool_id], **({"shell": [command]} if command is not None else {}), **sandbox_needs(plan)}


def names_paths(plan: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    """Whether a call names paths its context's fs globs must allow: then the runner reads the
    context and checks them itself (a parameter value never goes to the database)."""
    fs = fs_parameters(plan.get("config") or {})
    names = [*(fs.get("read") or []), *(fs.get("write") or [])] if fs is not None else []
    return any(params.get(name) is not None for name in names)


def view(plan: Any) -> dict[str, Any]:
    """What `check` reads of a typed Plan (runner/core/plan.py), in the registry's JSON shape."""
    return {
        "tool_id": plan.tool_id,
        "tool_type": plan.tool_type,
        "primitive": plan.primitive,
        "config": plan.config,
        "chain": [{"tool_id": link.tool_id, "tool_type": link.tool_type} for link in plan.chain],
    }


# --- contexts ----------------------------------------------------------------------------

DIRECTIVE_TYPES = ("directive", "thread")


def refusal(lacking: str, tool: str, context: Mapping[str, Any]) -> tuple[str, str, str]:
    """(audit reason, message, hint) for a call `context` does not allow."""
    under = f"directive {context['directive']}" if context.get("directive") else "this context"
    message = f"{tool} was not run: {under} lacks the permission {lacking}"
    hint = (
        "stay within the directive's permissions (load the directive to read them); a tool it needs must be "
        "declared under permissions in its manifest, or run from a context that allows it"
    )
    return f"permission {lacking}", message, hint


def summary(context: Mapping[str, Any]) -> str:
    """One line per kind of a context's permissions."""
    perms = context.get("permissions") or {}
    lines = [f"context {context['id']}" + (f" (directive {context['directive']})" if context.get("directive") else "")]
    lines += [f"  {kind}: {json.dumps(perms.get(kind, []))}" for kind in KINDS]
    lines.append(
        "  (fs_read/fs_write apply to the path parameters a tool declares in config.fs: {read, write}, and with net "
        "to what a tool's sandbox reaches: config.sandbox network and fs)"
    )
    lines.append(f"next: pass context='{context['id']}' to every execute call made under it")
    return "\n".join(lines)
