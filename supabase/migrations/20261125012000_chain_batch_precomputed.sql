-- The compact chain batch served from the plan cache: a set lookup, no walking.
--
-- resolve_executor_chains_compact (20261125000300_chain_batch_compact.sql) walked every
-- chain and built its answer as jsonb: for 100 ids about 1.4 ms walking and 4.7 ms
-- building jsonb (rebuilding each manifest, then aggregating), and jsonb must be
-- printed as text again to be sent. Here:
--   1. kiwi_internal.plan_cache (20261121001300_execution_plan.sql) already holds, for
--      every tool's latest version, the chain it walks to (chain_tools, chain_versions)
--      and the version's own element (plan: tool_id, tool_type, executor_id, version,
--      content_hash, manifest). Two columns, set from the plan by a trigger on every
--      write (rebuild_plans, the lifecycle RPCs, a bulk load), keep what the batch sends
--      ready: chain_keys (ref@version per link, root first) and element (the element as
--      JSON text).
--   2. kiwi_internal.chains_compact looks every requested tool up in the cache, and checks
--      each link of its chain (the root with the lookup, each executor once): still its
--      tool's latest version, a tool the caller may see (both live on public.tools, as
--      the walker checks them; nothing about visibility is trusted from the cache), and
--      its element cached (an element depends on its version only). A chain with a link
--      that fails, and an id without a cached chain, is walked by kiwi_internal.resolve_chains,
--      so the answer is the walker's in every case
--      (supabase/tests/chains/a_precomputed_compact_batch_answers_as_the_walker_does.test.sql).
--   3. The answer is json built from the stored text: nothing is parsed or printed again.
-- Measured for 100 ids at 100k tools: about 1.0 ms in the server (was 6.1), 1.5-2 ms a round
-- trip; two index probes a requested id (plan cache, tools) and the JSON are most of it.
--
-- resolve_executor_chains_compact now returns json (the same keys and values; jsonb cost a
-- parse and a print); resolve_executor_chains_batch is unchanged.

-- The chain's element keys (ref@version, root first) of a cached plan.
create function kiwi_internal.plan_chain_keys(p_plan jsonb) returns text[]
  language sql immutable parallel safe
  set search_path = ''
as $$
  select array(select (l ->> 'tool_id') || '@' || (l ->> 'version')
                 from jsonb_array_elements(p_plan -> 'chain') with ordinality x(l, n)
                order by x.n)
$$;
revoke execute on function kiwi_internal.plan_chain_keys(jsonb) from public, anon, authenticated, service_role;

-- The plan's own version as a chain element, as JSON text (the fields and order of
-- resolve_executor_chains_compact's elements). Immutable: a jsonb prints the same always.
create function kiwi_internal.plan_element(p_plan jsonb) returns json
  language sql immutable parallel safe
  set search_path = ''
as $$
  select json_build_object('tool_id', p_plan -> 'tool_id', 'tool_type', p_plan -> 'tool_type',
                           'executor_id', p_plan -> 'executor_id', 'version', p_plan -> 'version',
                           'content_hash', p_plan -> 'content_hash', 'manifest', p_plan -> 'manifest')
$$;
revoke execute on function kiwi_internal.plan_element(jsonb) from public, anon, authenticated, service_role;

alter table kiwi_internal.plan_cache add column chain_keys text[], add column element json;
comment on column kiwi_internal.plan_cache.chain_keys is
  'The chain as element keys ref@version, root first (from plan.chain), for the compact chain batch; set from plan on every write.';
comment on column kiwi_internal.plan_cache.element is
  'The version itself as a chain element, JSON text ready to send (from plan), for the compact chain batch; set from plan on every write.';

-- Set from the plan on every write, whoever writes it. ENABLE ALWAYS: also when triggers
-- are off for a bulk load (session_replication_role = replica, bench/synthetic_load.py).
-- (Not generated columns: those refuse `insert ... select *` of a saved row.)
create function kiwi_internal.plan_cache_batch_columns() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  new.chain_keys := kiwi_internal.plan_chain_keys(new.plan);
  new.element := kiwi_internal.plan_element(new.plan);
  return new;
end
$$;
revoke execute on function kiwi_internal.plan_cache_batch_columns() from public;
create trigger plan_cache_batch_columns
  before insert or update on kiwi_internal.plan_cache
  for each row execute function kiwi_internal.plan_cache_batch_columns();
alter table kiwi_internal.plan_cache enable always trigger plan_cache_batch_columns;
update kiwi_internal.plan_cache set plan = plan;

-- The chains of p_tool_ids as the caller sees them, each element once:
-- {"tools": [{"requested", "chain": [keys]} | {"requested", "error", "error_code"}], "elements": {key: {...}}}.
-- Identity comes from the session (caller_is_admin, my_namespaces), as in resolve_chains.
create function kiwi_internal.chains_compact(p_tool_ids text[]) returns json
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
  v_out   json;
begin
  with hit as materialized (    -- each request, with the cached chain of its tool's latest version,
                                -- served only if that is still the latest and the caller may see the tool
    select r.ord::int as ord, r.requested, pc.chain_versions, pc.chain_keys, pc.element,
           pc.chain_tools[2:] as tail_tools, pc.chain_versions[2:] as tail_versions, pc.chain_keys[2:] as tail_keys
      from unnest(coalesce(p_tool_ids, '{}')) with ordinality r(requested, ord)
      left join (kiwi_internal.plan_cache pc
                 join public.tools t
                   on t.id = pc.tool_uuid
                  and t.latest_version = pc.version
                  and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns)))
        on pc.tool_ref = r.requested   -- as written: no ref has blanks or a public/ prefix, so
                                       -- any other spelling misses and the walker normalizes it
  ),
  tail as materialized (        -- the executors below them (a few, each once), on the same terms, with
                                -- their elements
    select x.version_uuid, x.key,
           case when exists (select 1 from public.tools t
                              where t.id = x.tool_uuid
                                and t.ref || '@' || t.latest_version = x.key
                                and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns)))
                then (select e.element from kiwi_internal.plan_cache e where e.version_uuid = x.version_uuid)
           end as element
      from (select distinct h.tail_tools, h.tail_versions, h.tail_keys from hit h where h.element is not null) d
     cross join lateral unnest(d.tail_tools, d.tail_versions, d.tail_keys) x(tool_uuid, version_uuid, key)
  ),
  bad as (
    select coalesce(array_agg(tl.version_uuid), '{}') as versions from tail tl where tl.element is null
  ),
  served as materialized (
    select h.ord, h.requested, h.chain_versions, h.chain_keys, h.element, h.tail_versions
      from hit h cross join bad
     where h.element is not null and not (h.tail_versions && bad.versions)
  ),
  miss as materialized (
    select h.ord, h.requested, row_number() over (order by h.ord)::int as sub
      from hit h
     where not exists (select 1 from served s where s.ord = h.ord)
  ),
  walked as materialized (      -- the rest, walked as resolve_executor_chains_batch walks it
    select m.ord, c.requested_tool_id, c.depth, c.tool_id, c.tool_type, c.executor_id, c.version,
           c.content_hash, c.manifest, c.error, c.error_code, c.tool_id || '@' || coalesce(c.version, '') as key
      from kiwi_internal.resolve_chains(array(select m.requested from miss m order by m.ord)) c
      join miss m on m.sub = c.ord
  ),
  entries as (
    select s.ord, json_build_object('requested', s.requested, 'chain', s.chain_keys) as entry
      from served s
    union all
    select w.ord,
           case when bool_or(w.error is not null)
                then json_build_object('requested', w.requested_tool_id, 'error', max(w.error),
                                       'error_code', max(w.error_code))
                else json_build_object('requested', w.requested_tool_id, 'chain', array_agg(w.key order by w.depth))
           end
      from walked w
     group by w.ord, w.requested_tool_id
  ),
  elements as (
    select distinct on (e.key) e.key, e.element
      from (select s.chain_keys[1] as key, s.element from served s
            union all
            select tl.key, tl.element from tail tl
             where tl.version_uuid in (select unnest(s.tail_versions) from served s)
            union all
            select w.key, json_build_object('tool_id', w.tool_id, 'tool_type', w.tool_type,
                                            'executor_id', w.executor_id, 'version', w.version,
                                            'content_hash', w.content_hash, 'manifest', w.manifest)
              from walked w
             where w.error is null) e
  )
  select json_build_object(
           'tools', coalesce((select json_agg(en.entry order by en.ord) from entries en), '[]'::json),
           'elements', coalesce((select json_object_agg(el.key, el.element) from elements el), '{}'::json))
    into v_out;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.chains_compact(text[]) from public;
grant execute on function kiwi_internal.chains_compact(text[]) to anon, authenticated, service_role;

-- The compact batch's public shape, now json built from the stored text (was jsonb, built
-- element by element and printed again to be sent); the same keys and values.
drop function public.resolve_executor_chains_compact(text[]);
create function public.resolve_executor_chains_compact(p_tool_ids text[])
  returns json
  language plpgsql stable
  set search_path = ''
as $$
begin
  return kiwi_internal.chains_compact(p_tool_ids);
end
$$;
comment on function public.resolve_executor_chains_compact(text[]) is
  'resolve_executor_chains_batch in one json that names each chain element once: {"tools": [{"requested", "chain": [element keys, depth 0 first]} or {"requested", "error", "error_code"}], "elements": {key: {tool_id, tool_type, executor_id, version, content_hash, manifest}}}. Keys are ref@version (a version is immutable, so one key has one content). An id that cannot be resolved carries its error and does not fail the others; requests keep their order (a repeated id appears again). Served from the plan cache when every link is current and visible to the caller, otherwise walked; the answer is the same either way.';
revoke execute on function public.resolve_executor_chains_compact(text[]) from public;
grant execute on function public.resolve_executor_chains_compact(text[]) to anon, authenticated, service_role;
