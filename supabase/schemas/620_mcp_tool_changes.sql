-- Held changes of MCP tools (rug-pull protection). When Kiwi re-reads an MCP server's tool
-- list (`kiwi mcp import`, a scheduled run of the server, a session that reconnects) and an
-- imported tool's description, input or output schema or annotations differ from its latest
-- version, the new manifest is not published: it is held here, pending, beside what changed
-- (diff: each field's old and new value). Callers keep the latest approved version, which
-- is what agents load and run. Someone who may publish the tool decides: approving
-- publishes the held manifest as a new version (as the approver, through
-- publish_tool_version, so every publish rule applies), rejecting keeps the old one.
--
-- One pending change per tool: a newer change supersedes an older pending one. A change
-- whose tool moved on meanwhile (another version became latest) cannot be approved: it is
-- stale, and the next re-read holds a fresh one. Only the fields an upstream server decides
-- may differ; a held manifest that would change the tool's executor or config otherwise is
-- refused (publish that as any other version).

create table public.mcp_tool_changes (
  id            uuid primary key default gen_random_uuid(),
  tool_id       text not null constraint mcp_tool_changes_tool_id_length check (char_length(tool_id) between 1 and 300),
  namespace     text not null,
  server        text not null,
  from_version  text not null,
  version       text not null constraint mcp_tool_changes_version_length check (char_length(version) <= 128),
  changed       text[] not null
                constraint mcp_tool_changes_changed_fields
                check (cardinality(changed) > 0
                       and changed <@ array['description', 'inputSchema', 'outputSchema', 'annotations']),
  diff          jsonb not null constraint mcp_tool_changes_diff_object check (jsonb_typeof(diff) = 'object'),
  manifest      jsonb not null constraint mcp_tool_changes_manifest_object check (jsonb_typeof(manifest) = 'object'),
  status        text not null default 'pending'
                constraint mcp_tool_changes_status_values
                check (status in ('pending', 'approved', 'rejected', 'superseded')),
  detected_by   text not null,
  detected_at   timestamptz not null default clock_timestamp(),
  decided_by    text,
  decided_at    timestamptz,
  reason        text constraint mcp_tool_changes_reason_length check (char_length(reason) <= 2000),
  constraint mcp_tool_changes_decided_have_a_decider
    check (status in ('pending', 'superseded') or (decided_by is not null and decided_at is not null))
);
comment on table public.mcp_tool_changes is
  'Changes of imported MCP tools seen upstream and held until someone approves them (rug-pull protection): the tool, the version it changes and the one it would publish, which fields changed and their old and new values (diff), and the decision. Written through hold_mcp_tool_change and decide_mcp_tool_change; read by admins, the members of the tool''s namespace and whoever saw the change.';
comment on column public.mcp_tool_changes.diff is
  '{field: {old, new}} for each changed field, named as MCP names them (description, inputSchema, outputSchema, annotations).';
comment on column public.mcp_tool_changes.manifest is 'The manifest approving publishes (its version is `version`).';
alter table public.mcp_tool_changes enable row level security;
revoke all on table public.mcp_tool_changes from public, anon, authenticated, service_role;
grant select on table public.mcp_tool_changes to authenticated, service_role;
create unique index mcp_tool_changes_one_pending_idx on public.mcp_tool_changes (tool_id) where status = 'pending';
create index mcp_tool_changes_server_idx on public.mcp_tool_changes (server, detected_at desc);
create policy "admins, the namespace's members and the detector read held changes"
  on public.mcp_tool_changes for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin())
         or namespace = any ((select kiwi_internal.my_namespaces())::text[])
         or detected_by = (select kiwi_internal.caller_identity()));

-- The fields of an mcp_tool manifest an upstream server decides, by MCP's names.
create function kiwi_internal.mcp_tool_fields(p_manifest jsonb) returns jsonb
  language sql immutable
  set search_path = ''
as $$
  select jsonb_build_object(
    'description', p_manifest -> 'description',
    'inputSchema', p_manifest -> 'parameters',
    'outputSchema', p_manifest -> 'outputs',
    'annotations', p_manifest #> '{config,annotations}')
$$;
revoke execute on function kiwi_internal.mcp_tool_fields(jsonb) from public, anon, authenticated, service_role;

-- {field: {old, new}} for each field of mcp_tool_fields that differs (JSON equality).
create function kiwi_internal.mcp_tool_diff(p_old jsonb, p_new jsonb) returns jsonb
  language sql immutable
  set search_path = ''
as $$
  select coalesce(jsonb_object_agg(o.key, jsonb_build_object('old', o.value, 'new', n.value) order by o.key), '{}')
    from jsonb_each(kiwi_internal.mcp_tool_fields(p_old)) o
    join jsonb_each(kiwi_internal.mcp_tool_fields(p_new)) n using (key)
   where o.value is distinct from n.value
$$;
revoke execute on function kiwi_internal.mcp_tool_diff(jsonb, jsonb) from public, anon, authenticated, service_role;

create function kiwi_internal.hold_mcp_tool_change(p_manifest jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_tool    public.tools;
  v_latest  public.tool_versions;
  v_diff    jsonb;
  v_row     public.mcp_tool_changes;
  v_pending public.mcp_tool_changes;
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot hold MCP tool changes' using errcode = '42501', hint = 'sign in';
  end if;
  if jsonb_typeof(p_manifest) is distinct from 'object' or jsonb_typeof(p_manifest -> 'tool_id') is distinct from 'string'
     or not coalesce(kiwi_internal.is_semver(p_manifest ->> 'version'), false) then
    raise exception 'hold_mcp_tool_change: the manifest needs a tool_id and a semver version' using errcode = '22023';
  end if;
  v_tool := kiwi_internal.readable_tool(p_manifest ->> 'tool_id');
  if v_tool.id is null or v_tool.tool_type <> 'mcp_tool' then
    raise exception 'MCP tool "%" not found', p_manifest ->> 'tool_id' using errcode = 'PT404',
      hint = 'only imported MCP tools have held changes: kiwi mcp import SERVER imports them';
  end if;
  if not kiwi_internal.can_publish_to(v_tool.namespace) then
    raise exception 'you may not publish into namespace "%", so you cannot hold a change of %', v_tool.namespace, v_tool.ref
      using errcode = '42501', hint = 'a member of the namespace, or an admin, re-reads the server';
  end if;
  select * into v_latest from public.tool_versions v where v.tool_uuid = v_tool.id and v.is_latest;
  if (v_latest.manifest ->> 'tool_type') is distinct from (p_manifest ->> 'tool_type')
     or kiwi_internal.normalize_ref(v_latest.manifest ->> 'executor') is distinct from kiwi_internal.normalize_ref(p_manifest ->> 'executor')
     or ((v_latest.manifest -> 'config') - 'annotations') is distinct from ((p_manifest -> 'config') - 'annotations') then
    raise exception 'the change of % is not one an MCP server makes: its tool_type, executor and config but annotations must stay those of %@%',
      v_tool.ref, v_tool.ref, v_latest.version
      using errcode = '22023', hint = 'publish other changes as a new version (kiwi publish)';
  end if;
  v_diff := kiwi_internal.mcp_tool_diff(v_latest.manifest, p_manifest);
  select * into v_pending from public.mcp_tool_changes c
   where c.tool_id = v_tool.ref and c.status = 'pending' for update;
  if v_diff = '{}' then  -- upstream is back to the approved tool: nothing waits any more
    update public.mcp_tool_changes c set status = 'superseded' where c.id = v_pending.id;
    return jsonb_build_object('held', false, 'tool_id', v_tool.ref, 'version', v_latest.version);
  end if;
  if v_pending.id is not null and v_pending.from_version = v_latest.version
     and kiwi_internal.mcp_tool_fields(v_pending.manifest) = kiwi_internal.mcp_tool_fields(p_manifest) then
    return to_jsonb(v_pending) || jsonb_build_object('held', true, 'new', false);  -- seen before, still waiting
  end if;
  update public.mcp_tool_changes c set status = 'superseded' where c.id = v_pending.id;
  insert into public.mcp_tool_changes (tool_id, namespace, server, from_version, version, changed, diff, manifest,
                                       detected_by)
  values (v_tool.ref, v_tool.namespace, v_tool.executor_id, v_latest.version, p_manifest ->> 'version',
          array(select jsonb_object_keys(v_diff)), v_diff, p_manifest, kiwi_internal.caller_identity())
  returning * into v_row;
  return to_jsonb(v_row) || jsonb_build_object('held', true, 'new', true);
end
$$;
revoke execute on function kiwi_internal.hold_mcp_tool_change(jsonb) from public;
grant execute on function kiwi_internal.hold_mcp_tool_change(jsonb) to authenticated, service_role;

create function public.hold_mcp_tool_change(p_manifest jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.hold_mcp_tool_change(p_manifest);
end
$$;
comment on function public.hold_mcp_tool_change(jsonb) is
  'Hold an upstream change of an imported MCP tool instead of publishing it: p_manifest is the tool''s manifest as the server now describes it, with the version it would publish as. Returns the pending change {id, tool_id, from_version, version, changed, diff, held: true, new} (the same row while the change is the same), or {held: false} when it no longer differs from the latest version (a pending change is then superseded). Only for those who may publish the tool.';
revoke execute on function public.hold_mcp_tool_change(jsonb) from public;
grant execute on function public.hold_mcp_tool_change(jsonb) to authenticated, service_role;

-- Decide a held change: approving publishes its manifest as the caller (every publish rule
-- applies: an MCP tool in `public` is an admin's), rejecting records the decision.
create function kiwi_internal.decide_mcp_tool_change(p_id uuid, p_approve boolean, p_reason text) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row    public.mcp_tool_changes;
  v_latest text;
  v_out    jsonb := '{}';
begin
  if p_id is null or p_approve is null then
    raise exception 'decide_mcp_tool_change: p_id and p_approve are required' using errcode = '22023';
  end if;
  select * into v_row from public.mcp_tool_changes c where c.id = p_id for update;
  if not found or not (kiwi_internal.caller_is_admin() or v_row.namespace = any (kiwi_internal.my_namespaces())
                       or v_row.detected_by = kiwi_internal.caller_identity()) then
    raise exception 'held MCP tool change % not found', p_id using errcode = 'PT404',
      hint = 'list them with `kiwi mcp changes` (select * from mcp_tool_changes where status = ''pending'')';
  end if;
  if not kiwi_internal.can_publish_to(v_row.namespace) then
    raise exception 'you cannot decide the change of %: only those who may publish into % do', v_row.tool_id, v_row.namespace
      using errcode = '42501', hint = 'a member of the namespace, or an admin, decides';
  end if;
  if v_row.status <> 'pending' then
    raise exception 'the change % of % is %, not pending', p_id, v_row.tool_id, v_row.status using errcode = 'PT409',
      hint = 'list what waits with `kiwi mcp changes`';
  end if;
  select t.latest_version into v_latest from public.tools t where t.ref = v_row.tool_id;
  if p_approve and v_latest is distinct from v_row.from_version then
    raise exception 'the change % of % was seen against %, and the latest version is now %', p_id, v_row.tool_id,
      v_row.from_version, v_latest
      using errcode = 'PT409', hint = 'import the server again (kiwi mcp import SERVER): it holds the change anew';
  end if;
  if p_approve then
    v_out := public.publish_tool_version(v_row.manifest, '[]'::jsonb);
  end if;
  update public.mcp_tool_changes c
     set status = case when p_approve then 'approved' else 'rejected' end,
         decided_by = kiwi_internal.caller_identity(), decided_at = clock_timestamp(),
         reason = nullif(btrim(p_reason), '')
   where c.id = p_id
  returning * into v_row;
  return to_jsonb(v_row) || jsonb_build_object('published', nullif(v_out, '{}'::jsonb));
end
$$;
revoke execute on function kiwi_internal.decide_mcp_tool_change(uuid, boolean, text) from public;
grant execute on function kiwi_internal.decide_mcp_tool_change(uuid, boolean, text) to authenticated, service_role;

create function public.decide_mcp_tool_change(p_id uuid, p_approve boolean, p_reason text default null) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.decide_mcp_tool_change(p_id, p_approve, p_reason);
end
$$;
comment on function public.decide_mcp_tool_change(uuid, boolean, text) is
  'Approve (publish the held manifest as its version, as you) or reject a held MCP tool change, with an optional reason. For those who may publish into the tool''s namespace; a change seen against a version that is no longer the latest is refused (PT409). Returns the change, and what was published.';
revoke execute on function public.decide_mcp_tool_change(uuid, boolean, text) from public;
grant execute on function public.decide_mcp_tool_change(uuid, boolean, text) to authenticated, service_role;

