-- The compact chain batch served from the plan cache: a set lookup, no walking.
--
-- resolve_executor_chains_compact (380_chain_batch.sql) walked every
-- chain and built its answer as jsonb: for 100 ids about 1.4 ms walking and 4.7 ms
-- building jsonb (rebuilding each manifest, then aggregating), and jsonb must be
-- printed as text again to be sent. Here:
--   1. kiwi_internal.plan_cache (130_execution_plan.sql) already holds, for
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

-- A request's entry in resolve_executor_chains_compact's "tools" when it names the tool as
-- p_ref is written, as JSON text ready to send (the fields and order of the walked entries).
create function kiwi_internal.plan_entry(p_ref text, p_chain_keys text[]) returns json
  language sql immutable parallel safe
  set search_path = ''
as $$
  select json_build_object('requested', p_ref, 'chain', p_chain_keys)
$$;
revoke execute on function kiwi_internal.plan_entry(text, text[]) from public, anon, authenticated, service_role;

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
  new.entry := kiwi_internal.plan_entry(new.tool_ref, new.chain_keys);
  return new;
end
$$;
revoke execute on function kiwi_internal.plan_cache_batch_columns() from public;
create trigger plan_cache_batch_columns
  before insert or update on kiwi_internal.plan_cache
  for each row execute function kiwi_internal.plan_cache_batch_columns();
alter table kiwi_internal.plan_cache enable always trigger plan_cache_batch_columns;

-- The general path, for any ids: the chains of p_tool_ids as the caller sees them, each
-- element once: {"tools": [{"requested", "chain": [keys]} | {"requested", "error",
-- "error_code"}], "elements": {key: {...}}}. Security invoker: identity comes from the
-- session (caller_is_admin, my_namespaces), as in resolve_chains.
create function kiwi_internal.chains_compact_general(p_tool_ids text[]) returns json
  language plpgsql stable
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
-- The general path: only chains_compact calls it (as its owner).
revoke execute on function kiwi_internal.chains_compact_general(text[]) from public, anon, authenticated, service_role;
comment on function kiwi_internal.chains_compact_general(text[]) is
  'The compact chain batch for any ids: each id served from the plan cache when every link is current and visible, otherwise walked. Called by kiwi_internal.chains_compact when its single-statement path cannot answer; identity from the session.';

-- The compact chain batch in one statement when the plan cache answers every id.
--
-- kiwi_internal.chains_compact_general (above) served 100 ids
-- from the plan cache in about 1.0 ms (1.5-2 ms a round trip, 10x against 100 single calls,
-- target 20x): two plpgsql layers and a general plan that also carries the walker's path
-- (miss, walked, entries, element table built from three sources and deduplicated) for
-- every call, and each request's chain tail unnested link by link. The usual batch is all
-- hits with every link current, so that case gets a statement of its own:
--   1. each requested id is one probe of plan_cache by ref joined to its tool by primary
--      key (still its latest version, still that ref, visible to the caller: live on
--      public.tools, as before);
--   2. the links below the roots are checked once each: every distinct version below a
--      root (a few, shared by most tools) is one cached plan whose root is that version,
--      checked live on the same terms;
--   3. if every id was served (and none repeats) and every link passed, the answer is built
--      from the stored text: tools in request order, elements as the roots plus the tail
--      links that are not roots.
-- Anything else (a miss, a stale or hidden link, a repeated id, a null, a null array) is
-- answered by kiwi_internal.chains_compact_general, so every answer is still the walker's
-- (supabase/tests/chains/a_precomputed_compact_batch_answers_as_the_walker_does.test.sql).
-- The public function is a language sql invoker over it (one plpgsql layer less).
-- Measured for 100 ids at 100k tools, old and new interleaved in one run: 0.55-0.70 ms in a
-- plpgsql loop (was 0.85-0.95), 0.73-0.89 ms as a top-level call (was 1.0-1.18), 0.86-1.01 ms a
-- round trip on a quiet machine (was 1.18-1.28). Two index probes a requested id (plan cache by
-- ref, tools by id) are about half of what is left.

-- Measured again with the backend's CPU profiled (perf): the two index probes a requested id
-- were half the statement, each a descent of three B-tree levels (the ref's through the
-- collation's comparisons) and a heap fetch; each request's entry was built anew
-- (json_build_object over the ref and its key array). Now:
--   * the probes go through hash indexes (one bucket page each, no comparisons on the way;
--     below): plan_cache by tool_ref, tools by id;
--   * the entry {"requested", "chain"} is a column of the cache (set from tool_ref and
--     chain_keys with the others), and a served request is the ref as written, so "tools"
--     aggregates stored text;
--   * the links below the roots are the distinct versions of the roots' chains (uuids, no
--     key parsing), each looked up by its unique version and checked live as before; its
--     key is its own row's, the key the roots name (a version is one tool's, and a tool
--     cannot be renamed: tools_before_write).
-- The check itself is unchanged: each link still its tool's latest version, that ref, visible
-- to the caller, on public.tools in the same statement.
-- Measured for 100 ids at 100k tools on the same loaded machine, CPU time of the server
-- process per call: about 1.8-2.2 ms (was 2.2-2.5).

-- The chains of p_tool_ids as the caller sees them, each element once (the shape of
-- resolve_executor_chains_compact). Identity comes from the session (caller_is_admin,
-- my_namespaces, asked only for a private tool), as in resolve_chains.
create function kiwi_internal.chains_compact(p_tool_ids text[]) returns json
  language sql stable security definer
  set search_path = ''
as $$
  with hit as materialized (    -- each request whose cached chain is its tool's current one, seen
    select r.ord, pc.version_uuid, pc.chain_versions, pc.chain_keys[1] as key, pc.entry, pc.element
      from unnest(p_tool_ids) with ordinality r(requested, ord)
      join kiwi_internal.plan_cache pc on pc.tool_ref = r.requested   -- as written; other spellings
      join public.tools t on t.id = pc.tool_uuid                       -- miss and go to the walker
     where t.latest_version = pc.version and t.ref = pc.tool_ref
       and pc.entry is not null and pc.element is not null
       and (t.visibility <> 'private' or kiwi_internal.caller_is_admin()
            or t.namespace = any (kiwi_internal.my_namespaces()))
  ),
  link as materialized (        -- the distinct versions below the roots
    select array(select distinct unnest(h.chain_versions[2:]) from hit h) as versions
  ),
  tail as materialized (        -- those that are their tool's cached, current, visible version
    select e.version_uuid, e.chain_keys[1] as key, e.element
      from link l
      join kiwi_internal.plan_cache e on e.version_uuid = any (l.versions)
      join public.tools t on t.id = e.tool_uuid
     where e.chain_keys is not null and e.element is not null
       and t.latest_version = e.version and t.ref = e.tool_ref
       and (t.visibility <> 'private' or kiwi_internal.caller_is_admin()
            or t.namespace = any (kiwi_internal.my_namespaces()))
  )
  select coalesce(
    case when (select count(distinct h.version_uuid) from hit h) = cardinality(p_tool_ids)
              and (select count(*) from tail) = (select cardinality(l.versions) from link l)
         then json_build_object(
                'tools', coalesce((select json_agg(h.entry order by h.ord) from hit h), '[]'::json),
                'elements', coalesce((select json_object_agg(e.key, e.element)
                                        from (select h.key, h.element from hit h
                                              union all
                                              select tl.key, tl.element from tail tl
                                               where tl.version_uuid <> all (array(select h.version_uuid from hit h))) e),
                                     '{}'::json))
    end,
    kiwi_internal.chains_compact_general(p_tool_ids))
$$;
revoke execute on function kiwi_internal.chains_compact(text[]) from public;
grant execute on function kiwi_internal.chains_compact(text[]) to anon, authenticated, service_role;

-- The probes of the batch (and of resolve_execution_plan's hot path): equality only, so a
-- hash index answers each from one bucket page where the unique B-trees descend three levels.
create index plan_cache_tool_ref_hash on kiwi_internal.plan_cache using hash (tool_ref);
create index tools_id_hash on public.tools using hash (id);

-- The contract: a language sql invoker over kiwi_internal.chains_compact.
create function public.resolve_executor_chains_compact(p_tool_ids text[])
  returns json
  language sql stable
  set search_path = ''
as $$
  select kiwi_internal.chains_compact(p_tool_ids)
$$;
comment on function public.resolve_executor_chains_compact(text[]) is
  'resolve_executor_chains_batch in one json that names each chain element once: {"tools": [{"requested", "chain": [element keys, depth 0 first]} or {"requested", "error", "error_code"}], "elements": {key: {tool_id, tool_type, executor_id, version, content_hash, manifest}}}. Keys are ref@version (a version is immutable, so one key has one content). An id that cannot be resolved carries its error and does not fail the others; requests keep their order (a repeated id appears again). Served from the plan cache when every link is current and visible to the caller, otherwise walked; the answer is the same either way.';
revoke execute on function public.resolve_executor_chains_compact(text[]) from public;
grant execute on function public.resolve_executor_chains_compact(text[]) to anon, authenticated, service_role;
