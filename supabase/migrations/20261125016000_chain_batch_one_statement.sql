-- The compact chain batch in one statement when the plan cache answers every id.
--
-- kiwi_internal.chains_compact (20261125012000_chain_batch_precomputed.sql) served 100 ids
-- from the plan cache in about 1.0 ms (1.5-2 ms a round trip, 10x against 100 single calls,
-- target 20x): two plpgsql layers and a general plan that also carries the walker's path
-- (miss, walked, entries, element table built from three sources and deduplicated) for
-- every call, and each request's chain tail unnested link by link. The usual batch is all
-- hits with every link current, so that case gets a statement of its own:
--   1. each requested id is one probe of plan_cache by ref joined to its tool by primary
--      key (still its latest version, still that ref, visible to the caller: live on
--      public.tools, as before);
--   2. the links below the roots are checked once per distinct tail: the tails (a few
--      arrays of element keys, shared by most tools) are deduplicated whole, then each
--      distinct key is one cached plan whose root is that key, checked live on the same
--      terms;
--   3. if every id was served (and none repeats) and every link passed, the answer is built
--      from the stored text: tools in request order, elements as the roots plus the tail
--      links that are not roots.
-- Anything else (a miss, a stale or hidden link, a repeated id, a null, an empty or null
-- array) is answered by the previous function, unchanged and now named
-- kiwi_internal.chains_compact_general, so every answer is still the walker's
-- (supabase/tests/chains/a_precomputed_compact_batch_answers_as_the_walker_does.test.sql).
-- The public function is a language sql invoker over it (one plpgsql layer less).
-- Measured for 100 ids at 100k tools, old and new interleaved in one run: 0.55-0.70 ms in a
-- plpgsql loop (was 0.85-0.95), 0.73-0.89 ms as a top-level call (was 1.0-1.18), 0.86-1.01 ms a
-- round trip on a quiet machine (was 1.18-1.28). Two index probes a requested id (plan cache by
-- ref, tools by id) are about half of what is left.

-- The previous function is the general path: only chains_compact calls it (as its owner).
alter function kiwi_internal.chains_compact(text[]) rename to chains_compact_general;
alter function kiwi_internal.chains_compact_general(text[]) security invoker;
revoke execute on function kiwi_internal.chains_compact_general(text[]) from public, anon, authenticated, service_role;
comment on function kiwi_internal.chains_compact_general(text[]) is
  'The compact chain batch for any ids: each id served from the plan cache when every link is current and visible, otherwise walked. Called by kiwi_internal.chains_compact when its single-statement path cannot answer; identity from the session.';

-- The chains of p_tool_ids as the caller sees them, each element once (the shape of
-- resolve_executor_chains_compact). Identity comes from the session (caller_is_admin,
-- my_namespaces, asked only for a private tool), as in resolve_chains.
create function kiwi_internal.chains_compact(p_tool_ids text[]) returns json
  language sql stable security definer
  set search_path = ''
as $$
  with hit as materialized (    -- each request whose cached chain is its tool's current one, seen
    select r.ord, r.requested, pc.version_uuid, pc.chain_keys, pc.element
      from unnest(p_tool_ids) with ordinality r(requested, ord)
      join kiwi_internal.plan_cache pc on pc.tool_ref = r.requested   -- as written; other spellings
      join public.tools t on t.id = pc.tool_uuid                       -- miss and go to the walker
     where t.latest_version = pc.version and t.ref = pc.tool_ref
       and pc.chain_keys is not null and pc.element is not null
       and (t.visibility <> 'private' or kiwi_internal.caller_is_admin()
            or t.namespace = any (kiwi_internal.my_namespaces()))
  ),
  link as materialized (        -- the distinct links below the roots (tails deduplicated whole first)
    select distinct unnest(d.tail) as key from (select distinct h.chain_keys[2:] as tail from hit h) d
  ),
  tail as materialized (        -- those that are their tool's cached, current, visible version
    select e.version_uuid, l.key, e.element
      from link l
      join kiwi_internal.plan_cache e on e.tool_ref = split_part(l.key, '@', 1)
      join public.tools t on t.id = e.tool_uuid
     where e.chain_keys[1] = l.key and e.element is not null
       and t.latest_version = e.version and t.ref = e.tool_ref
       and (t.visibility <> 'private' or kiwi_internal.caller_is_admin()
            or t.namespace = any (kiwi_internal.my_namespaces()))
  )
  select coalesce(
    case when (select count(distinct h.version_uuid) from hit h) = cardinality(p_tool_ids)
              and (select count(*) from tail) = (select count(*) from link)
         then json_build_object(
                'tools', coalesce((select json_agg(json_build_object('requested', h.requested, 'chain', h.chain_keys)
                                                   order by h.ord) from hit h), '[]'::json),
                'elements', coalesce((select json_object_agg(e.key, e.element)
                                        from (select h.chain_keys[1] as key, h.element from hit h
                                              union all
                                              select tl.key, tl.element from tail tl
                                               where tl.version_uuid <> all (array(select h.version_uuid from hit h))) e),
                                     '{}'::json))
    end,
    kiwi_internal.chains_compact_general(p_tool_ids))
$$;
revoke execute on function kiwi_internal.chains_compact(text[]) from public;
grant execute on function kiwi_internal.chains_compact(text[]) to anon, authenticated, service_role;

create or replace function public.resolve_executor_chains_compact(p_tool_ids text[])
  returns json
  language sql stable
  set search_path = ''
as $$
  select kiwi_internal.chains_compact(p_tool_ids)
$$;
