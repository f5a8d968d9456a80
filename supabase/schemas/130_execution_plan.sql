-- The one RPC the runner needs: chain, merged config, parameter schema and files.
--
-- Plans are computed by compute_plan, whose chain is walked by walk_chains (the walker
-- of resolve_chains too), and, for every latest version, kept precomputed in
-- kiwi_internal.plan_cache, so the runner's hot path is one indexed read. The cache is
-- the admin's view of a plan; visibility is still checked per caller on every read
-- (the root by RLS-equivalent rules, the rest through the namespaces of the private
-- tools the chain passes through). Anything the cache cannot answer (a pinned older
-- version, a caller who cannot see a link, a broken chain) is computed live, raising
-- the errors resolve_chains raises.
--
-- Freshness: any change to a tool's latest version, executor or visibility deletes at
-- once every cached plan whose chain passes through that tool (reads in the same
-- transaction compute live), and rebuilds them at commit, when the version's files
-- are in place. A hit is also served only while every version it was built from is
-- still latest (checked in the same lookup), so two transactions committing at once,
-- each rebuilding without seeing the other, can cost a live computation but never
-- serve a stale plan. A plan also carries its version's lifecycle (deprecated, yanked);
-- deprecating a version rebuilds its cached plan (set_version_status,
-- 200_tool_lifecycle.sql).

create type kiwi_internal.plan_build as (
  plan          jsonb,
  chain_tools    uuid[],  -- every tool of the chain, root first
  chain_versions uuid[],  -- the version of each, as built
  restricted_ns  text[],  -- namespaces of the private tools below the root
  error         text[]    -- {message, sqlstate} when the chain cannot run
);

-- compute_plan as 130_execution_plan.sql defines it, with the chain's trust
-- folded in: config.sandbox and config.environment.sandbox are plan_trust's, and the plan
-- carries allowed_variables.
create or replace function kiwi_internal.compute_plan(p_version_uuid uuid, p_admin boolean, p_ns text[])
  returns kiwi_internal.plan_build
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_root       kiwi_internal.chain_row;
  v_params     jsonb;
  v_chain      kiwi_internal.chain_row[];
  v_link       kiwi_internal.chain_row;
  v_links      jsonb;
  v_configs    jsonb[] := '{}';
  v_schemas    jsonb[] := '{}';   -- each element's config_schema, for its append marks
  v_trusted    boolean[] := '{}'; -- each element admin-published, primitive first
  v_tools      uuid[] := '{}';
  v_versions   uuid[] := '{}';
  v_restricted text[] := '{}';
  v_files      jsonb;
  v_trust      jsonb;
  v_status     public.tool_versions;   -- the version's lifecycle: deprecated, yanked
  v_out        kiwi_internal.plan_build;
begin
  select 1, t.ref, 0, t.ref, t.tool_type, v.executor_id, v.version, v.content_hash, v.manifest, v.id,
         t.id, t.namespace, t.visibility, null, null
    into v_root
    from public.tool_versions v join public.tools t on t.id = v.tool_uuid
   where v.id = p_version_uuid;

  v_chain := kiwi_internal.walk_chains(array[v_root], p_admin, p_ns);
  if v_chain[1].error is not null then
    v_out.error := array[v_chain[1].error, v_chain[1].error_code];
    return v_out;
  end if;
  v_links := '[]';
  foreach v_link in array v_chain loop
    v_links := v_links || jsonb_build_object('tool_id', v_link.tool_id, 'tool_type', v_link.tool_type,
                                             'version', v_link.version, 'content_hash', v_link.content_hash);
    v_configs := array_prepend(v_link.manifest -> 'config', v_configs);   -- primitive first
    v_schemas := array_prepend(v_link.manifest -> 'config_schema', v_schemas);
    v_trusted := array_prepend(coalesce((select v.admin_published from public.tool_versions v
                                          where v.id = v_link.version_uuid), false), v_trusted);
    v_tools := v_tools || v_link.tool_uuid;
    v_versions := v_versions || v_link.version_uuid;
    if v_link.depth > 0 and v_link.visibility = 'private' then
      v_restricted := v_restricted || v_link.namespace;
    end if;
  end loop;
  -- the grants of the tool's namespace, read here (definer) and kept only as far as its
  -- own config names them (plan_trust)
  v_trust := kiwi_internal.plan_trust(null, v_configs, v_trusted,
               case when not v_trusted[cardinality(v_trusted)] then
                 array(select g.variable from public.namespace_secret_grants g where g.namespace = v_root.namespace)
               end);

  select v.parameters_schema, v.is_deprecated, v.deprecation_message, v.is_yanked, v.yanked_reason,
         (select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256, 'size_bytes', f.size_bytes,
                                              'is_entrypoint', f.is_entrypoint, 'media_type', f.media_type,
                                              'content_text', f.content_text, 'storage_key', f.storage_key)
                           order by f.path)
            from public.tool_version_files f
           where f.version_id = v.id)
    into v_params, v_status.is_deprecated, v_status.deprecation_message, v_status.is_yanked,
         v_status.yanked_reason, v_files
    from public.tool_versions v
   where v.id = p_version_uuid;

  v_out.plan := jsonb_build_object(
    'tool_id',      v_root.tool_id,
    'version',      v_root.version,
    'tool_type',    v_root.tool_type,
    'content_hash', v_root.content_hash,
    'executor_id',  v_root.executor_id,
    'primitive',    case when v_link.tool_type = 'primitive' then v_link.tool_id end,   -- the last link
    'chain',        v_links,
    'config',       kiwi_internal.sandboxed_config(
                      coalesce(kiwi_internal.jsonb_deep_merge_all(v_configs, v_schemas), '{}'::jsonb), v_trust),
    'allowed_variables', v_trust -> 'allowed_variables',
    'parameters',   v_params,
    'outputs',      v_root.manifest -> 'outputs',
    'manifest',     v_root.manifest,   -- the version's own manifest (what it declares: requires, ...)
    'files',        coalesce(v_files, '[]'::jsonb),
    -- the version's lifecycle (200_tool_lifecycle.sql), for the runner's warnings: a
    -- deprecated version runs with its message; a yanked one is never latest, so it is here
    -- only when asked for by its exact version
    'deprecated',          v_status.is_deprecated,
    'deprecation_message', v_status.deprecation_message,
    'yanked',              v_status.is_yanked,
    'yanked_reason',       v_status.yanked_reason);
  v_out.chain_tools := v_tools;
  v_out.chain_versions := v_versions;
  v_out.restricted_ns := v_restricted;
  return v_out;
end
$$;
-- It trusts p_admin and p_ns, so no API role may call it: only execution_plan (which reads
-- them from the session) and rebuild_plans (the admin view), both security definer.
revoke execute on function kiwi_internal.compute_plan(uuid, boolean, text[]) from public, anon, authenticated, service_role;
revoke execute on function kiwi_internal.compute_plan(uuid, boolean, text[]) from public, anon, authenticated, service_role;

create table kiwi_internal.plan_cache (
  tool_uuid     uuid primary key references public.tools (id) on delete cascade,
  tool_ref      text not null unique,
  version_uuid  uuid not null unique references public.tool_versions (id) on delete cascade,
  version       text not null,
  visibility    text not null,    -- the root's, so that a hit needs no other table
  namespace     text not null,
  chain_tools    uuid[] not null,
  chain_versions uuid[] not null,
  restricted_ns  text[] not null,
  plan           jsonb not null,
  built_at      timestamptz not null default now(),
  chain_keys    text[],           -- set from plan on every write (chain_batch.sql)
  element       json,
  entry         json
);
comment on table kiwi_internal.plan_cache is
  'Precomputed execution plans of latest versions (admin view). Maintained by triggers on tools; never exposed.';
-- Kept inline and uncompressed: reading a plan is the runner's hot path, and a
-- compressed or out-of-line value costs more to read than the lookup itself.
alter table kiwi_internal.plan_cache alter column plan set storage external;
alter table kiwi_internal.plan_cache set (toast_tuple_target = 8160);
revoke all on table kiwi_internal.plan_cache from public, anon, authenticated, service_role;
comment on column kiwi_internal.plan_cache.chain_keys is
  'The chain as element keys ref@version, root first (from plan.chain), for the compact chain batch; set from plan on every write.';
comment on column kiwi_internal.plan_cache.element is
  'The version itself as a chain element, JSON text ready to send (from plan), for the compact chain batch; set from plan on every write.';
comment on column kiwi_internal.plan_cache.entry is
  'The compact chain batch''s entry for a request of tool_ref as written, {"requested", "chain"}, JSON text ready to send; set from tool_ref and chain_keys on every write.';
create index plan_cache_chain_tools_idx on kiwi_internal.plan_cache using gin (chain_tools);

-- (Re)build the cached plans of the given tools' latest versions, and of every tool
-- whose chain passes through them. No argument: every tool (after a bulk load).
create function kiwi_internal.rebuild_plans(p_tool_uuids uuid[] default null) returns int
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_affected uuid[];
  v_count    int;
begin
  if p_tool_uuids is null then
    select array_agg(t.id) into v_affected from public.tools t;
  else
    with recursive affected (id, ref, depth) as (
      select t.id, t.ref, 0 from public.tools t where t.id = any (p_tool_uuids)
      union
      select t.id, t.ref, a.depth + 1
        from affected a join public.tools t on t.executor_id = a.ref
       where a.depth < 11
    )
    select array_agg(distinct a.id) into v_affected from affected a;
  end if;
  delete from kiwi_internal.plan_cache pc where pc.tool_uuid = any (v_affected);
  insert into kiwi_internal.plan_cache (tool_uuid, tool_ref, version_uuid, version, visibility, namespace,
                                        chain_tools, chain_versions, restricted_ns, plan)
  select t.id, t.ref, v.id, v.version, t.visibility, t.namespace, b.chain_tools, b.chain_versions,
         b.restricted_ns, b.plan
    from public.tools t
    join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
    cross join lateral kiwi_internal.compute_plan(v.id, true, '{}') b
   where t.id = any (v_affected) and b.error is null
  on conflict (tool_uuid) do update
    set tool_ref = excluded.tool_ref, version_uuid = excluded.version_uuid, version = excluded.version,
        visibility = excluded.visibility, namespace = excluded.namespace, chain_tools = excluded.chain_tools,
        chain_versions = excluded.chain_versions, restricted_ns = excluded.restricted_ns, plan = excluded.plan,
        built_at = now();
  get diagnostics v_count = row_count;
  return v_count;
end
$$;
revoke execute on function kiwi_internal.rebuild_plans(uuid[]) from public;
grant execute on function kiwi_internal.rebuild_plans(uuid[]) to service_role;

create function kiwi_internal.tools_invalidate_plans() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  delete from kiwi_internal.plan_cache pc where pc.chain_tools @> array[new.id];
  return null;
end
$$;
revoke execute on function kiwi_internal.tools_invalidate_plans() from public;
create trigger tools_invalidate_plans
  after update on public.tools
  for each row
  when (old.latest_version is distinct from new.latest_version
        or old.executor_id is distinct from new.executor_id
        or old.visibility is distinct from new.visibility)
  execute function kiwi_internal.tools_invalidate_plans();

create function kiwi_internal.tools_rebuild_plans() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.rebuild_plans(array[new.id]);
  return null;
end
$$;
revoke execute on function kiwi_internal.tools_rebuild_plans() from public;
create constraint trigger tools_rebuild_plans
  after update on public.tools
  deferrable initially deferred
  for each row
  when (old.latest_version is distinct from new.latest_version
        or old.executor_id is distinct from new.executor_id
        or old.visibility is distinct from new.visibility)
  execute function kiwi_internal.tools_rebuild_plans();

create function kiwi_internal.execution_plan(p_tool_id text, p_version text default null)
  returns jsonb
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean;
  v_ns    text[];
  v_ref   text := kiwi_internal.normalize_ref(p_tool_id);
  v_hit   record;
  v_usable boolean;
  v_root  record;
  v_built kiwi_internal.plan_build;
begin
  -- the hot path: one probe of the cache, visibility checked on the row
  select pc.plan, pc.version, pc.visibility, pc.namespace, pc.restricted_ns,
         (select count(*) from public.tool_versions v
           where v.id = any (pc.chain_versions) and v.is_latest) = cardinality(pc.chain_versions) as fresh
    into v_hit
    from kiwi_internal.plan_cache pc
   where pc.tool_ref = v_ref;
  v_usable := found and v_hit.fresh and (p_version is null or p_version = v_hit.version);
  -- a public chain with no private link is everyone's: the caller's identity is not read
  if v_usable and v_hit.visibility <> 'private' and cardinality(v_hit.restricted_ns) = 0 then
    return v_hit.plan;
  end if;
  v_admin := kiwi_internal.caller_is_admin();
  v_ns := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
  if v_usable and (v_hit.visibility <> 'private' or v_admin or v_hit.namespace = any (v_ns))
     and (v_admin or v_hit.restricted_ns <@ v_ns) then
    return v_hit.plan;
  end if;

  select t.ref, v.id
    into v_root
    from public.tools t
    left join public.tool_versions v
      on v.tool_uuid = t.id
     and (case when p_version is null then v.is_latest else v.version = p_version end)
   where t.ref = v_ref
     and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns));
  if not found then
    v_built.error := kiwi_internal.chain_error('not_found', p_tool_id, null);
  elsif v_root.id is null and p_version is not null then
    v_built.error := kiwi_internal.chain_error('no_version', v_root.ref, null, null, p_version);
  elsif v_root.id is null then
    v_built.error := kiwi_internal.chain_error('all_yanked', v_root.ref, null);
  else
    v_built := kiwi_internal.compute_plan(v_root.id, v_admin, v_ns);
  end if;
  if v_built.error is not null then
    raise exception '%', v_built.error[1] using errcode = v_built.error[2];
  end if;
  return v_built.plan;
end
$$;
revoke execute on function kiwi_internal.execution_plan(text, text) from public;
grant execute on function kiwi_internal.execution_plan(text, text) to anon, authenticated, service_role;

create function public.resolve_execution_plan(p_tool_id text, p_version text default null)
  returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  return kiwi_internal.execution_plan(p_tool_id, p_version);
end
$$;
comment on function public.resolve_execution_plan(text, text) is
  'Everything needed to run a tool: its chain, the configs deep-merged from the primitive up (child wins, objects merge, arrays and scalars replaced, but a list an element''s config_schema marks "x-merge": "append" is appended to by the elements above it), its parameters as JSON Schema, and its files.';
revoke execute on function public.resolve_execution_plan(text, text) from public;
grant execute on function public.resolve_execution_plan(text, text) to anon, authenticated, service_role;
