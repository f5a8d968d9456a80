"""From a tool reference to a result: one RPC, files, checks, one primitive.

    plan      = registry.plan(tool)                  # the one RPC, a frozen Plan
    params    = validated against plan.parameters
    workdir   = plan files, materialised and verified
    env_dir   = the runtime's declared environment, prepared once and cached
    warnings  = the runtime's declared validation
    outcome   = the first handler that accepts the plan (an MCP tool, directive or thread, else a primitive)

Every run, failed or not, leaves a run record (unless disabled), written behind the
run in batches (recorder.py); nothing here knows about any particular runtime, server
or API.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from .. import telemetry
from ..config import Settings
from ..core.clock import utc_now_iso
from ..core.expand import variables_in
from ..core.identity import ByIdentity
from ..core.limits import Allowance
from ..core.materialize import entrypoint_file, materialise
from ..core.outputs import output_contract
from ..core.params import coerce_strings, validate_params
from ..core.plan import Plan
from ..core.records import scrub, scrub_deep, scrub_error, secret_values
from ..errors import KiwiError, NotFound
from ..policy import Admission, Call, Denied, Gate
from ..primitives.base import Invocation, Outcome, RunListener
from ..registry.base import Registry
from ..registry.spaces import find as find_local
from ..registry.spaces import spaces as local_spaces_of
from ..registry.storage import Storage, fetch_stored
from ..registry.suggest import suggest_for
from ..sandbox import Profile, Sandbox, profile_from
from ..sandbox.site import ToolSite
from ..trust.integrity import check_content
from ..trust.lockfile import Lockfile
from .checkpoint import checkpoint_before
from .dispatch import Dispatcher
from .environ import allowed_environ
from .environment import prepare_environment
from .journal import journal_for
from .kept_outputs import keep_large_output
from .listening import masked, reporting
from .plan_notes import knowledge_source, knowledge_text, lifecycle_warnings, shadowing
from .recorder import RecordSink, RunRecorder
from .result import RunResult
from .run_record import record_maker
from .validation import validate

logger = logging.getLogger("kiwi.runner")

CANCELLED = "cancelled before it finished (by its caller, or a time limit of the server it ran for)"


def runner_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment ${VAR}s resolve from, with the runner's own bin directory last on PATH,
    so tools bundled with the runner (uv) are found without being on the user's PATH."""
    env = dict(os.environ if base is None else base)
    own_bin = str(Path(sys.executable).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if own_bin not in parts:
        env["PATH"] = os.pathsep.join([*parts, own_bin])
    return env


class Runner:
    def __init__(
        self,
        registry: Registry,
        settings: Settings,
        *,
        dispatcher: Dispatcher | None = None,
        environ: Mapping[str, str] | None = None,
        on_progress: Callable[[str], None] | None = None,
        session: str | None = None,
    ) -> None:
        self.registry = registry
        self.session = session or f"run-{uuid.uuid4()}"  # audited, and counted by per-session limits
        self.settings = settings
        self.dispatcher = dispatcher or Dispatcher()
        self.environ = runner_environ(environ)
        self.sandbox = Sandbox(enabled=settings.sandbox)
        self._environs: dict[tuple[str, ...] | None, dict[str, str]] = {}
        self.on_progress = on_progress
        journal = journal_for(settings.cache_dir, registry.backend)  # records survive a crash (journal.py)
        self.recorder = RunRecorder(registry, on_error=self._warn, journal=journal)
        self.gate = Gate(registry, self.recorder.submit_audit)
        # per plan (a cached plan is the same object each run): the ${VAR} names its config uses;
        # per list of names: their values when last seen, and those values' forms
        self._secret_names: ByIdentity[tuple[str, ...]] = ByIdentity(_variables_of, 4096)
        self._secret_forms: dict[tuple[str, ...], tuple[tuple[str | None, ...], list[str]]] = {}
        self.lockfile = Lockfile(settings.lockfile)
        self._spaces = local_spaces_of(settings)  # the local spaces' roots, resolved once
        self.local_spaces = True  # False: every plan comes from the registry (`kiwi run --registry`)
        self._verified: dict[str, list[Any]] = {}  # plan_key -> verdicts (trust/verify.py)

    def _secrets(self, plan: Plan) -> list[str]:
        """Values of the ${VAR}s the plan's config names (every chain element's, merged), to scrub
        from what a run reports and stores; parameters are never expanded, so these are all.
        The names are found once per plan, and their forms again only when a value changed."""
        names = self._secret_names(plan)
        if not names:
            return []
        values = tuple(self.environ.get(name) for name in names)
        kept = self._secret_forms.get(names)
        if kept is None or kept[0] != values:  # their forms are worked out again only when a value changed
            if len(self._secret_forms) >= 4096:
                self._secret_forms.clear()
            kept = self._secret_forms[names] = (values, secret_values(names, self.environ))
        return list(kept[1])

    def _warn(self, message: str) -> None:
        logger.warning("%s", message)
        if self.on_progress:
            self.on_progress(f"warning: {message}")

    async def flush_records(self) -> None:
        """Wait until the records of every run so far are written."""
        await self.recorder.flush()

    async def aclose(self) -> None:
        try:
            await self.recorder.flush()
        finally:
            self.recorder.close()
            await self.dispatcher.aclose()
            await self.sandbox.aclose()
            await self.registry.aclose()

    async def plan(self, tool_id: str, version: str | None = None) -> Plan:
        """The plan of a local space's tool (project, then user; see spaces.py), previewed by
        the registry with its executor chain, else the registry's. A version asked for by
        name is a published one, so it always comes from the registry."""
        if version is None and self.local_spaces:
            local = find_local(tool_id, self._spaces)
            if local is not None:
                tool = local.load()
                preview = await self.registry.preview_plan(tool.manifest, tool.files)
                return Plan.from_json({**preview, "source": local.space, "origin": str(local.path)})
        try:
            return await self.registry.plan(tool_id, version)
        except NotFound as e:  # `shout` for `local/shout`: say so
            await suggest_for(self.registry, tool_id, e)
            raise

    async def run(
        self,
        tool_id: str,
        params: dict[str, Any] | None = None,
        *,
        version: str | None = None,
        raw_params: Mapping[str, str] | None = None,
        dry_run: bool = False,
        plan: Plan | None = None,
        call: Call | None = None,
        listener: RunListener | None = None,
        record_to: RecordSink | None = None,
    ) -> RunResult:
        """Run a tool, once the gate (runner/policy) admits the call: `call` names the session,
        execution context and approval (default: this runner's session, no context). Deliberate
        failures (bad parameters, a broken chain, an altered file, a refusal of the gate) come
        back as a result with status "error" and `failure` set; runs are recorded, and every
        call, allowed or refused, is audited.

        plan: the plan already fetched for this tool and version (a caller that looked at it
        first), so the run is the one that was looked at. listener: who follows the run as it
        runs (its stderr lines, its environment being built), its secrets masked. record_to: who
        writes the run's record and its audit row instead of the recorder (a queued run's worker
        writes them with the run's result, in one transaction: runner/fleet/worker.py).

        Cancelled from outside (its caller cancelled it, or a server's time limit), the run's
        processes end with it (primitives/subprocess.py) and its record says it was cancelled."""
        with telemetry.span("kiwi.run", {"kiwi.tool.requested": tool_id}) as span:
            result, plan = await self._run(
                tool_id, params, version, raw_params, dry_run, plan, call, listener, record_to
            )
            telemetry.describe(span, plan, result.status)
        if self.local_spaces and not dry_run:  # a large output goes to the project's .ai/outputs/
            result = keep_large_output(result, self.settings)
        if not isinstance(result.failure, Denied):
            telemetry.count_run(plan.tool_id if plan else tool_id, result.status, result.duration_ms / 1000)
        return result

    async def _run(
        self,
        tool_id: str,
        params: dict[str, Any] | None,
        version: str | None,
        raw_params: Mapping[str, str] | None,
        dry_run: bool,
        plan: Plan | None,
        call: Call | None,
        listener: RunListener | None,
        record_to: RecordSink | None,
    ) -> tuple[RunResult, Plan | None]:
        """run()'s work, inside its span: the result, and the plan it ran (None: none was found)."""
        started = time.perf_counter()
        started_at = utc_now_iso()  # the run record's start and the audit row's time
        given: Any = {} if params is None else params
        call = call or Call(self.session)
        admission = None
        secrets: list[str] | None = None  # the plan's, found once a run
        try:
            with telemetry.span("kiwi.plan"):
                plan = plan or await self.plan(tool_id, version)
                plan, trust_warnings = await self._hold_to_trust(plan, tool_id, version)
            if raw_params and isinstance(given, dict):
                given = {**given, **coerce_strings(plan.parameters, raw_params, plan.tool_id)}
            secrets = self._secrets(plan)
            values = validate_params(plan.tool_id, plan.parameters, given)
            with telemetry.span("kiwi.gate"):
                admission = await self.gate.admit(plan, values, call, dry_run, started_at)
            checkpoint = await checkpoint_before(self, plan, call, admission.audit, dry_run)  # mutates_state
            result = await self._execute(plan, values, dry_run, listener, call, secrets)
            if checkpoint is not None:  # recorded against the id the run's record is written under
                result.detail["checkpoint"], result.run_id = checkpoint, checkpoint["run_id"]
            result.warnings[:0] = [*shadowing(plan), *lifecycle_warnings(plan), *trust_warnings]
            result.context = admission.child_context
        except asyncio.CancelledError:  # stopped from outside: its caller, or an MCP server's time limit
            if admission is not None and plan is not None:
                self._cancelled(admission, plan, given, dry_run, started, started_at, record_to, secrets or [])
            raise
        except KiwiError as e:
            if secrets is None:
                secrets = self._secrets(plan) if plan else []
            scrub_error(e, secrets)  # before it is audited, stored or shown
            if admission is None and not isinstance(e, Denied):
                # refused before the gate: an unknown tool, bad parameters, or no registry to ask (its
                # row is journaled and written once the registry answers again, recorder.py)
                self.gate.refused(call, plan, tool_id, given, dry_run, e)
            elif isinstance(e, Denied):
                telemetry.count_refusal(plan.tool_id if plan else tool_id, e.kind)
            result = RunResult(
                tool_id=plan.tool_id if plan else tool_id,
                version=plan.version if plan else version,
                status="error",
                error=str(e),
                executor_chain=plan.chain_ids if plan else [],
                warnings=[*shadowing(plan), *lifecycle_warnings(plan)] if plan else [],
                failure=e,
            )
        result.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        make = None
        if not dry_run and self.settings.record_runs and not isinstance(result.failure, Denied):
            with telemetry.span("kiwi.record"):
                digest = admission.digest_for(given) if admission is not None else None  # the gate's, when equal
                keep = self.settings.run_payloads
                make = record_maker(self.registry, keep, result, plan, given, started_at, secrets or [], digest)
        self._submit(result, make, admission, record_to)
        return result, plan

    def _submit(
        self,
        result: RunResult,
        make: Callable[[], dict[str, Any]] | None,
        admission: Admission | None,
        record_to: RecordSink | None,
    ) -> None:
        """The run's record (`make`, None: none is kept) and its audit row (an admitted call's):
        handed to record_to, else queued together, in one journal line; result.run_id is the
        id the record is stored under."""
        if record_to is not None:
            if make is not None:
                record_to.run(make())
            if admission is not None:
                self.gate.finished(
                    admission, status=result.status, run_id=result.run_id, version=result.version, write=record_to.audit
                )
            return
        if admission is None:
            if make is not None:
                result.run_id = self.recorder.submit(make, run_id=result.run_id)
            return
        if make is not None:
            result.run_id = result.run_id or self.recorder.new_id()
        audit = self.gate.ended(admission, status=result.status, run_id=result.run_id, version=result.version)
        if make is None:
            self.recorder.submit_audit(audit)
        else:
            self.recorder.submit(make, run_id=result.run_id, audit=audit)

    def _cancelled(
        self,
        admission: Admission,
        plan: Plan,
        given: Any,
        dry_run: bool,
        started: float,
        started_at: str,
        record_to: RecordSink | None,
        secrets: list[str],
    ) -> None:
        """Record and audit an admitted run that was cancelled before it finished."""
        result = RunResult(
            tool_id=plan.tool_id,
            version=plan.version,
            status="error",
            error=CANCELLED,
            executor_chain=plan.chain_ids,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        recording = not dry_run and self.settings.record_runs
        keep = self.settings.run_payloads
        make = record_maker(self.registry, keep, result, plan, given, started_at, secrets) if recording else None
        self._submit(result, make, admission, record_to)

    async def _hold_to_trust(self, plan: Plan, requested: str, version: str | None) -> tuple[Plan, list[str]]:
        """The project's lockfile and the trust policy, before anything runs: a locked tool
        runs its locked version and is refused on any drift; under every policy the plan's
        content must hash to its content_hash (integrity.py); with policy "require" every
        element of the chain must be signed by a trusted key ("warn": say so and go on), a
        local space's tool too (it is trusted only as a published version it equals)."""
        if plan.source == "registry" and (locked := self.lockfile.get(requested)) is not None:
            if version is None and plan.version != locked.version:
                plan = await self.plan(requested, locked.version)
            self.lockfile.check(plan, locked)
        check_content(plan)
        if self.settings.trust.policy == "off":
            return plan, []
        from ..trust.verify import refusal  # cryptography loads only when a policy asks for it

        failing = [v for v in await self.verify(plan) if not v.ok]
        if failing and self.settings.trust.policy == "require":
            raise refusal(plan, failing)
        return plan, [v.describe() for v in failing]

    def locked_version(self, tool_id: str) -> str | None:
        """The version the project's kiwi.lock pins for this tool, if any."""
        locked = self.lockfile.get(tool_id)
        return locked.version if locked else None

    async def call_tool(
        self,
        ref: str,
        version: str | None,
        params: dict[str, Any],
        *,
        session: str,
        context: str | None = None,
        approval_id: str | None = None,
        dry_run: bool = False,
        timeout_s: float | None = None,
        listener: RunListener | None = None,
        limits: Allowance | None = None,
    ) -> RunResult:
        """One tool call as MCP `execute run`/`dry_run` and threads make it (primitives.base.CallTool):
        the version asked for, else the lockfile's; through the gate as `session`'s call; cancelled,
        raising TimeoutError, when it does not finish within `timeout_s`."""
        call = Call(session, context=context, approval_id=approval_id, limits=limits)
        # the lockfile's version, if it pins one; an explicit version always wins
        version = version or self.locked_version(ref)
        # asyncio.timeout, not wait_for: the run stays in the caller's task (no task of its own a call)
        async with asyncio.timeout(timeout_s):
            return await self.run(ref, params, version=version, dry_run=dry_run, call=call, listener=listener)

    async def verify(self, plan: Plan) -> list[Any]:
        """Each registry element of the plan's chain judged under the trusted keys (see
        trust/verify.py), from the stored rows; remembered per chain, files and config."""
        from ..trust.verify import judge, plan_key

        key = plan_key(plan)
        verdicts = self._verified.get(key)
        if verdicts is None:
            if plan.source == "registry":
                rows = await self.registry.attestations(plan.tool_id, plan.version)
            else:
                rows = await self._local_attestations(plan)
            verdicts = judge(plan, rows, self.settings.trust)
            if len(self._verified) >= 4096:
                self._verified.clear()
            self._verified[key] = verdicts
        return verdicts

    async def _local_attestations(self, plan: Plan) -> list[dict[str, Any]]:
        """A local space's tool: the stored chain of the published version it equals (same
        content_hash), so it is judged as that version; else its executors' chain only, and
        judge() finds the tool itself unsigned."""
        if plan.shadows is not None:
            try:
                rows = await self.registry.attestations(plan.tool_id, plan.version)
            except NotFound:
                rows = []
            if rows and rows[0].get("content_hash") == plan.content_hash:
                return rows
        return await self.registry.attestations(plan.executor_id) if plan.executor_id else []

    async def _execute(
        self,
        plan: Plan,
        params: dict[str, Any],
        dry_run: bool,
        listener: RunListener | None,
        call: Call,
        secrets: list[str],
    ) -> RunResult:
        """The validated, admitted call run by its handler; `secrets`: the plan's (_secrets),
        masked in everything it reports."""
        root = self.settings.cache_dir
        with telemetry.span("kiwi.materialise"):
            if any(f.storage_key for f in plan.files):  # fetched and checked before anything runs
                await fetch_stored(plan, root, Storage.configured(self.settings, self.environ))
            workdir = materialise(plan, root) if plan.files else None
        entry = entrypoint_file(plan)  # config.entrypoint, else the file marked is_entrypoint
        handler = self.dispatcher.find(plan) if plan.primitive or plan.tool_type != "knowledge" else None
        if handler is None:  # knowledge: its content is the result, and where it came from its detail
            source = knowledge_source(plan)
            detail = {"source": source} if source else {}
            return self._result(plan, Outcome(status="success", output=knowledge_text(plan), detail=detail), secrets)
        environ = self.environ_for(plan)
        site = self.site(plan, workdir, environ)
        placeholders: dict[str, str] = {}
        if workdir is not None:
            placeholders["workdir"] = site.tool_path() or str(workdir)
            if entry is not None:
                placeholders["entrypoint"] = f"{placeholders['workdir']}/{entry.path}"
        listener = masked(listener, secrets)
        progress = reporting(self._progress(secrets), listener)
        with telemetry.span("kiwi.environment"):
            env_dir = await prepare_environment(plan.config, root, environ, progress, site=site)
            if env_dir is not None:
                site.env_dir = env_dir
                placeholders["env_dir"] = site.env_path(env_dir)
            values = {**params, **placeholders}
            warnings = await validate(plan, workdir, values, environ, root, site=site)
        contract = output_contract(plan)  # before the run: unusable outputs stop it here (core/outputs.py)
        if dry_run:
            output = {
                "executor_chain": plan.chain_ids,
                "handler": handler.name,
                "parameters": params,
                "files": [f.path for f in plan.files],
                "validation": {"passed": True, "warnings": warnings},
            }
            result = self._result(plan, Outcome(status="success", output=output), secrets)
        else:
            invocation = Invocation(
                plan=plan,
                params=params,
                workdir=workdir,
                placeholders=placeholders,
                environ=environ,
                site=site,
                runner_environ=self.environ,
                on_progress=progress,
                registry=self.registry,
                call_tool=self.call_tool,
                listener=listener,
                session=call.session,
                context=call.context,
                limits=call.limits,
            )
            with telemetry.span(telemetry.HANDLER_SPANS.get(handler.name, f"kiwi.{handler.name}")):
                outcome = await handler.run(invocation)
            result = self._result(plan, outcome, secrets)
            if plan.primitive == "subprocess" and handler.name in ("subprocess", "kernel"):
                result.detail["sandbox"] = self.sandbox_shown(site)
            if contract is not None and outcome.status == "success":  # held to its outputs; the output is kept
                result.output_schema = contract.schema
                if (mismatch := contract.mismatch(outcome.output)) is not None:
                    scrub_error(mismatch, secrets)
                    result.status, result.error, result.failure = "error", str(mismatch), mismatch
        said = result.detail.get("warnings") if isinstance(result.detail, dict) else None
        # what the primitive warned of (a parameter not in the environment, a cut output) is the run's too
        result.warnings = [*warnings, *(w for w in said or [] if isinstance(w, str))]
        return result

    def environ_for(self, plan: Plan) -> Mapping[str, str]:
        """The part of the runner's environment this plan may read (its `${VAR}`s and
        env_passthrough): the variables the registry's allowed_variables names (those its
        admin-published elements use, and the grants of its namespace). A plan without the
        key (a registry from before it) reads nothing but the basic settings."""
        key = plan.allowed_variables
        found = self._environs.get(key)
        if found is None:  # one dict per allow-list: its identity keys the MCP handler's specs
            if len(self._environs) >= 1024:
                self._environs.clear()
            found = self._environs[key] = allowed_environ(self.environ, key)
        return found

    def site(self, plan: Plan, workdir: Path | None, environ: Mapping[str, str]) -> ToolSite:
        """Where the plan's processes run: its sandbox profile (config.sandbox, already narrowed
        up the chain by the registry) and its host directories."""
        if not self.sandbox.enabled:
            return ToolSite(self.sandbox, Profile(), tool_dir=workdir, environ=environ)
        # made when a process is confined or the profile shown (ToolSite.profile), raising then
        return ToolSite(
            self.sandbox,
            partial(profile_from, plan.config.get("sandbox"), plan.tool_id, environ),
            tool_dir=workdir,
            environ=environ,
        )

    def sandbox_profile(self, plan: Plan) -> dict[str, Any] | None:
        """The sandbox a plan's processes would run in, as `kiwi show` and MCP `load` print it
        (None for a plan that starts no process: an http_client tool, knowledge, a directive)."""
        if plan.primitive != "subprocess" or plan.tool_type in ("directive", "thread"):
            return None
        try:
            shown = self.sandbox_shown(self.site(plan, None, self.environ_for(plan)))
        except KiwiError as e:
            return {"enabled": self.sandbox.enabled, "error": e.message}
        if shown["enabled"]:
            shown["limits_apply"] = self.sandbox.limits_enforced()  # how each limit holds on this machine
        return shown

    def sandbox_shown(self, site: ToolSite) -> dict[str, Any]:
        """The profile a run had, as the run's detail and record keep it."""
        if not site.confined:
            return {"enabled": False, "why": "the runner's sandbox is off (KIWI_SANDBOX=off)"}
        return {"enabled": True, **site.profile.describe()}

    def _progress(self, secrets: list[str]) -> Callable[[str], None] | None:
        """on_progress with the plan's secrets masked (an environment step's argv, a retry's URL)."""
        report = self.on_progress
        if report is None or not secrets:
            return report
        return lambda line: report(scrub(line, secrets) or "")

    def _result(self, plan: Plan, outcome: Outcome, secrets: list[str]) -> RunResult:
        """The outcome as the caller sees it: every resolved secret masked, whatever the tool printed."""
        return RunResult(
            tool_id=plan.tool_id,
            version=plan.version,
            status=outcome.status,
            output=scrub_deep(outcome.output, secrets),
            error=scrub(outcome.error, secrets),
            exit_code=outcome.exit_code,
            executor_chain=plan.chain_ids,
            detail=scrub_deep(outcome.detail, secrets),
        )


def _variables_of(plan: Plan) -> tuple[str, ...]:
    """The ${VAR} names a plan's merged config uses, sorted."""
    return tuple(sorted(variables_in(plan.config)))
