"""A tool call's run as an MCP tool answer (CallToolResult): what an agent sees of it.

The Runner's gate (runner/policy, the same for every entry point) decides and audits; this
turns its decision and the run into structured content plus readable text, and every refusal
or failure into a tool error (isError) that says what went wrong and what to do. Kiwi's MCP
server answers `execute run`/`dry_run` with it (runner/mcp_server/meta/run.py) and a thread's
model sees its tool calls' results through it (runner/handlers/thread.py), so both read a run
alike; it lives below both, so neither a handler nor the client side imports the server."""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from ..core.limits import Allowance
from ..errors import InvalidParameters, KiwiError, NotFound, Refused, UsageError
from ..policy import Denied
from ..primitives.base import CallTool, RunListener
from .run import RunResult

__all__ = ["default_hint", "fail", "jsonable", "ok", "rendered", "rendered_call"]


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def ok(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=jsonable(structured))


def fail(message: str, hint: str | None, *, kind: str = "error", extra: dict[str, Any] | None = None) -> CallToolResult:
    text = f"error: {message}" + (f"\nhint: {hint}" if hint else "")
    structured = {"error": {"kind": kind, "message": message, "hint": hint}, **(extra or {})}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=jsonable(structured), is_error=True
    )


def default_hint(e: KiwiError) -> str:
    if isinstance(e, NotFound):
        return "find the right id with search(query=...); ids are tool_id or namespace/tool_id"
    if isinstance(e, UsageError):
        return "see help(topic='execute') for the arguments each action takes"
    if isinstance(e, Refused):
        return "the registry refused the change; read the message, fix the cause, and try again"
    return "see help(topic='errors')"


async def rendered_call(
    call_tool: CallTool,
    *,
    session: str,
    ref: str,
    ver: str | None,
    params: dict[str, Any],
    context: str | None = None,
    approval_id: str | None = None,
    dry_run: bool = False,
    run_timeout_s: float | None = 900.0,
    listener: RunListener | None = None,
    limits: Allowance | None = None,
) -> CallToolResult:
    """One call through a runner's `call_tool` (primitives.base.CallTool), rendered: what Kiwi's
    MCP server (`execute run`) and threads (runner/handlers/thread.py) share, so a thread's
    model sees each tool's result as an agent calling `execute run` would.

    The structured content is the run's result (`output`, `status`, ...) for every tool, so
    `execute` answers alike whatever it runs; a tool that declares outputs adds `outputSchema`,
    the schema its `output` was checked against (core/outputs.py; `load` shows it too)."""
    try:
        result = await call_tool(
            ref,
            ver,
            params,
            session=session,
            context=context,
            approval_id=approval_id,
            dry_run=dry_run,
            timeout_s=run_timeout_s,
            limits=limits,
            **({"listener": listener} if listener is not None else {}),
        )
    except TimeoutError:
        return fail(
            f"{ref} did not finish within the server's limit of {run_timeout_s:g} s; it was stopped",
            "the tool's own config.timeout should end it sooner; raise it in the tool's config, "
            "or run it with the kiwi CLI",
            kind="timeout",
            extra={"result": {"tool_id": ref, "version": ver, "status": "timeout"}},
        )
    return rendered(result, ref, dry_run=dry_run)


def rendered(result: RunResult, ref: str, *, dry_run: bool = False) -> CallToolResult:
    """A run's result as the tool answer of the call that asked for `ref`: what rendered_call
    answers once the run is over, and what an MCP task's `tasks/result` answers from the result
    its worker kept (runner/fleet/answers.py), so both read alike."""
    if isinstance(result.failure, Denied):
        return fail(result.failure.message, result.failure.hint, kind=result.failure.kind, extra=result.failure.extra)
    structured: dict[str, Any] = result.as_json()
    child = result.context
    if child is not None:  # the directive's context: pass it to the calls made following it
        structured["context"] = child
    if result.warnings:  # a deprecated or pinned yanked version, an unsigned link ... (also in the text)
        structured["warnings"] = result.warnings
    if result.output_schema is not None:  # `output` was checked against the tool's declared outputs
        structured["outputSchema"] = result.output_schema
    if source := result.detail.get("source"):  # a knowledge entry's source_type / source_url (harness/run.py)
        structured["source"] = source
    if checkpoint := result.detail.get("checkpoint"):  # taken before a run that mutates state (checkpoint.py)
        structured["checkpoint"] = checkpoint
    if dry_run:
        out = result.output if isinstance(result.output, dict) else {}
        validation = out.get("validation") or {"passed": result.ok, "warnings": result.warnings}
        if not result.ok:
            validation = {"passed": False, "problem": result.error}
        structured = {**structured, "dry_run": True, "validation": validation}
    text = _run_text(result, dry_run)
    if child is not None:
        text += f"\ncontext: {child['id']}; pass context='{child['id']}' to every call made following it"
    if checkpoint:
        undo = f"execute action=rollback item_id={checkpoint['run_id']} undoes the run"
        text += f"\ncheckpoint: {checkpoint['checkpoint']} of {checkpoint['worktree']}; {undo}"
    if result.ok:
        return ok(text, structured)
    hint = _run_hint(result, ref)
    text += f"\nhint: {hint}"
    structured["hint"] = hint
    if result.failure is not None:
        structured["failure"] = {**result.failure.as_dict(), "hint": hint}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=jsonable(structured), is_error=True
    )


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _run_text(result: RunResult, dry_run: bool) -> str:
    where = f"{result.tool_id}@{result.version}" if result.version else result.tool_id
    chain = " -> ".join(result.executor_chain)
    label = ("dry run ok" if result.ok else "dry run failed") if dry_run else result.status
    via = f" via {chain}" if result.executor_chain else ""
    lines = [f"{label}: {where}{via} in {result.duration_ms:.0f} ms"]
    if source := result.detail.get("source"):
        lines.append("source: " + ", ".join(source.values()))
    if result.output is not None and not dry_run:
        lines += ["", _dump(result.output)]
    if dry_run and isinstance(result.output, dict) and "validation" in result.output:
        lines += ["", _dump({k: result.output[k] for k in ("handler", "parameters", "files", "validation")})]
    lines += [f"warning: {w}" for w in result.warnings]
    if result.failure is not None:
        lines += ["", f"error: {result.failure.message}"]
    elif result.error:
        lines += ["", f"error: {result.error}"]
    return "\n".join(lines)


def _run_hint(result: RunResult, ref: str) -> str:
    if result.failure is not None and result.failure.kind == InvalidParameters.kind:  # a kept result's too
        return f"the parameters schema is in load(item_id='{ref}'); pass them as one object in `parameters`"
    if result.failure is not None:
        return result.failure.hint or default_hint(result.failure)
    if result.status == "timeout":
        return "the tool hit its own timeout; try smaller inputs, or a version with a longer config.timeout"
    return f"the tool ran and failed (exit code {result.exit_code}); check parameters with load(item_id='{ref}')"
