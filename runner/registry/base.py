"""One interface to the registry, whatever carries the calls (Postgres or Supabase REST).

Each method is one SQL function of the registry, called by name with the same
arguments on both backends. Backends translate the database's errors into
KiwiErrors: PT404 -> NotFound, PT422/PT409/42501 -> Refused, 22023 -> UsageError
(a bad manifest), a connection failure -> RegistryUnavailable.
"""

from __future__ import annotations

from typing import Any, Protocol


class Registry(Protocol):
    async def execution_plan(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        """public.resolve_execution_plan(p_tool_id, p_version): the plan as a dict."""
        ...

    async def chain(self, tool_id: str) -> list[dict[str, Any]]:
        """public.resolve_executor_chain(p_tool_id): rows ordered by depth."""
        ...

    async def chains_batch(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        """public.resolve_executor_chains_batch(p_tool_ids)."""
        ...

    async def search(
        self, query: str, *, tool_type: str | None = None, category: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """public.search_tools(p_query, p_tool_type, p_category, p_limit)."""
        ...

    async def publish(
        self,
        manifest: dict[str, Any],
        files: list[dict[str, Any]],
        manifest_yaml: str | None = None,
        signature: dict[str, Any] | None = None,
        approval_id: str | None = None,
    ) -> dict[str, Any]:
        """public.publish_tool_version(p_manifest, p_files, p_manifest_yaml, p_signature,
        p_approval_id); a signature {content_hash, public_key, signature} is written in the same
        transaction. `approval_id` (sent only when given): an admin's approval of this exact
        content, for a write only an admin may otherwise make; it is used up, or Refused saying
        why (pending, denied, expired, used, other content); given for a publish that needs
        none, UsageError."""
        ...

    async def request_publish_approval(
        self, manifest: dict[str, Any], files: list[dict[str, Any]], session: str | None = None
    ) -> dict[str, Any]:
        """public.request_publish_approval(p_manifest, p_files, p_session): a pending approval
        (policy 'command write') of publishing exactly this content, which only an admin
        decides -> {id, status, tool_id, version, content_hash, expires_at, decide, why}.
        Refused for a publish that needs none (PT409) and for anon."""
        ...

    async def sign(
        self, tool_id: str, version: str, content_hash: str, public_key: str, signature: str
    ) -> dict[str, Any]:
        """public.sign_tool_version(...): attach a signature to a published version."""
        ...

    async def signature_states(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        """public.signature_states(p_tool_ids): latest version and signatures of each tool."""
        ...

    async def attestations(self, tool_id: str, version: str | None = None) -> list[dict[str, Any]]:
        """public.resolve_chain_attestations(p_tool_id, p_version): the chain with each element's
        namespace, manifest, files (path, sha256) and signatures, read from the stored rows."""
        ...

    async def preview_plan(self, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
        """public.preview_execution_plan(p_manifest, p_files): the plan an unpublished tool
        (a local space's tool.yaml) would have, its executor chain taken from the registry."""
        ...

    async def version_source(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        """public.tool_version_source(p_tool_id, p_version): what a version was published from,
        {tool_id, namespace, version, content_hash, manifest, manifest_yaml, files} (for kiwi pull)."""
        ...

    async def delete_tool(self, tool_id: str) -> dict[str, Any]:
        """public.delete_tool(p_tool_id): refused (naming them) while other tools execute on it."""
        ...

    async def yank(self, tool_id: str, version: str, reason: str | None = None) -> dict[str, Any]:
        """public.yank_tool_version(p_tool_id, p_version, p_reason): the version stays readable by
        exact version, never latest -> {tool_id, version, is_yanked, is_deprecated, latest_version}."""
        ...

    async def record_run(self, record: dict[str, Any]) -> str:
        """public.record_run(p_run jsonb) -> the run's id."""
        ...

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        """public.record_runs(p_runs jsonb) -> their ids, in order (all or nothing)."""
        ...

    async def runs(self, *, tool_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Recent runs the caller may read (public.tool_runs, newest first)."""
        ...

    async def record_audit(self, entry: dict[str, Any]) -> str:
        """public.record_audit(p_entry jsonb) -> the audit row's id (one call, allowed or refused)."""
        ...

    async def whoami(self) -> dict[str, Any]:
        """public.whoami(): the caller as the database sees it {role, user_id, is_admin, identity, namespaces}."""
        ...

    async def record_audits(self, entries: list[dict[str, Any]]) -> list[str]:
        """public.record_audits(p_entries jsonb) -> their ids, in order (all or nothing)."""
        ...

    async def check_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """public.check_call(p jsonb): the gate's one round trip for a call {tool_id, server,
        session_id, version, content_hash, params_sha256, params_size, approval_id, dry_run}:
        rate limits taken (all or none) and, unless a dry run, the approval used or requested
        -> {allowed, kind, reason, hint, retry_after_s, limit, approval, policy}."""
        ...

    async def take_rate_limit(self, tool_id: str, server: str | None, session: str | None) -> dict[str, Any]:
        """public.take_rate_limit(p_tool_id, p_server, p_session): take one call from every limit
        that applies, or none -> {allowed, retry_after_s, limit, reason, limits}."""
        ...

    async def decide_approval(
        self, approval_id: str, approve: bool, reason: str | None = None, decider_session: str | None = None
    ) -> dict[str, Any]:
        """public.decide_approval(p_id, p_approve, p_reason, p_decider_session) -> the approval."""
        ...

    async def approvals(self) -> list[dict[str, Any]]:
        """Pending approvals the caller may read (public.pending_approvals, oldest first)."""
        ...

    async def open_context(
        self,
        session: str,
        directive: str | None = None,
        parent: str | None = None,
        permissions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """public.open_context(p_session, p_directive, p_parent, p_permissions): an execution
        context -> {id, parent_id, session_id, directive, permissions, ...}; widening is Refused."""
        ...

    async def get_context(self, context_id: str) -> dict[str, Any]:
        """public.get_context(p_id): one of the caller's contexts (NotFound; Refused if expired)."""
        ...

    async def aclose(self) -> None: ...
