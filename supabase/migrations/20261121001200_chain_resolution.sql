-- Chain resolution: a tool, its executor, that executor's executor ... down to a
-- primitive. One code path serves single and batch calls, and its work grows with
-- what is asked, never with the size of the registry:
--   1. every requested tool, at p_version or its latest, in one indexed query;
--   2. each chain walked link by link; an executor is looked up once per call (by
--      index) and remembered, so a batch of 100 scripts on 3 runtimes looks up 3;
--   3. cycles, depth and dangling executors are detected on the walk.
-- Visibility is the caller's: a private tool of another namespace is "not found".
-- (Measured: plain `select into` lookups beat set-based level queries here, whose
-- cursors and array subqueries cost more than the index probes themselves.)

create type kiwi_internal.chain_row as (
  ord               int,      -- position of the request in the input array (1-based)
  requested_tool_id text,
  depth             int,
  tool_id           text,     -- the tool's ref
  tool_type         text,
  executor_id       text,
  version           text,
  content_hash      text,
  manifest          jsonb,
  version_uuid      uuid,
  error             text,
  error_code        text
);

-- The wording of every chain error, shared by resolve_chains and execution_plan.
-- Errors name the tools involved; p_path is the chain walked so far. Codes: PT404
-- (not found) and PT422 (a chain that cannot run); PostgREST answers with those
-- HTTP statuses.
create function kiwi_internal.chain_error(p_kind text, p_root text, p_path text[], p_next text default null,
                                          p_detail text default null)
  returns text[]  -- {message, sqlstate}
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case p_kind
    when 'not_found' then array[format('tool "%s" not found', p_root), 'PT404']
    when 'no_version' then array[format('version %s of tool "%s" not found', p_detail, p_root), 'PT404']
    when 'all_yanked' then array[format('tool "%s" has no installable version: every version is yanked', p_root), 'PT404']
    when 'cycle' then array[format('executor cycle: %s', array_to_string(p_path || p_next, ' -> ')), 'PT422']
    when 'too_deep' then array[format('executor chain of "%s" is deeper than 10: %s', p_root,
                                      array_to_string(p_path || p_next, ' -> ')), 'PT422']
    when 'dangling' then array[format('executor "%s" of tool "%s" not found (chain: %s)', p_next,
                                      p_path[cardinality(p_path)], array_to_string(p_path, ' -> ')), 'PT404']
    when 'no_primitive' then array[format('executor chain of "%s" ends at "%s", a %s, not at a primitive (chain: %s)',
                                          p_root, p_path[cardinality(p_path)], p_detail,
                                          array_to_string(p_path, ' -> ')), 'PT422']
  end
$$;
revoke execute on function kiwi_internal.chain_error(text, text, text[], text, text) from public;
grant execute on function kiwi_internal.chain_error(text, text, text[], text, text) to anon, authenticated, service_role;

-- force_generic_plan: a custom plan for a one-element array always looks cheaper than
-- the generic one, so PostgreSQL would otherwise re-plan the root query on every call.
create function kiwi_internal.resolve_chains(p_refs text[], p_version text default null)
  returns setof kiwi_internal.chain_row
  language plpgsql stable security definer
  set search_path = ''
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_admin    boolean := kiwi_internal.caller_is_admin();
  v_ns       text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
  v_roots    kiwi_internal.chain_row[];
  v_memo     kiwi_internal.chain_row[] := '{}';   -- executors looked up so far ...
  v_memo_ref text[] := '{}';                      -- ... and their refs (tool_id null: not found)
  v_root     kiwi_internal.chain_row;
  v_link     kiwi_internal.chain_row;
  v_node     kiwi_internal.chain_row;
  v_chain    kiwi_internal.chain_row[];
  v_path     text[];
  v_next     text;
  v_at       int;
  v_error    text[];  -- {message, sqlstate}
begin
  -- 1. the requested tools
  select array_agg(row(q.ord, q.requested, 0, coalesce(x.ref, q.ref), x.tool_type, x.executor_id,
                       x.version, x.content_hash, x.manifest, x.version_uuid,
                       e.error[1], e.error[2]
                   )::kiwi_internal.chain_row order by q.ord)
    into v_roots
    from (select r.ord::int as ord, r.requested, kiwi_internal.normalize_ref(r.requested) as ref
            from unnest(p_refs) with ordinality as r(requested, ord)) q
    left join lateral (
      select t.ref, t.tool_type, v.executor_id, v.version, v.content_hash, v.manifest, v.id as version_uuid
        from public.tools t
        left join public.tool_versions v
          on v.tool_uuid = t.id
         and (case when p_version is null then v.is_latest else v.version = p_version end)
       where t.ref = q.ref
         and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns))
    ) x on true
    cross join lateral (
      select case when x.ref is null then kiwi_internal.chain_error('not_found', q.requested, null)
                  when x.version_uuid is null and p_version is not null
                    then kiwi_internal.chain_error('no_version', x.ref, null, null, p_version)
                  when x.version_uuid is null then kiwi_internal.chain_error('all_yanked', x.ref, null)
             end as error
    ) e;

  foreach v_root in array coalesce(v_roots, '{}') loop
    if v_root.error is not null then
      return next row(v_root.ord, v_root.requested_tool_id, null, null, null, null, null, null, null, null,
                      v_root.error, v_root.error_code)::kiwi_internal.chain_row;
      continue;
    end if;
    -- 2. walk
    v_chain := array[v_root];
    v_path := array[v_root.tool_id];
    v_link := v_root;
    v_error := null;
    while v_link.executor_id is not null loop
      v_next := v_link.executor_id;
      if v_next = any (v_path) then
        v_error := kiwi_internal.chain_error('cycle', v_root.tool_id, v_path, v_next);
        exit;
      end if;
      if cardinality(v_path) > 10 then
        v_error := kiwi_internal.chain_error('too_deep', v_root.tool_id, v_path, v_next);
        exit;
      end if;
      v_at := array_position(v_memo_ref, v_next);
      if v_at is null then
        v_node := null;
        select 0, null, 0, t.ref, t.tool_type, v.executor_id, v.version, v.content_hash, v.manifest, v.id, null, null
          into v_node
          from public.tools t
          join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
         where t.ref = v_next
           and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns));
        v_memo_ref := v_memo_ref || v_next;
        v_memo := v_memo || v_node;
        v_at := cardinality(v_memo_ref);
      end if;
      v_node := v_memo[v_at];
      if v_node.tool_id is null then
        v_error := kiwi_internal.chain_error('dangling', v_root.tool_id, v_path, v_next);
        exit;
      end if;
      v_link := v_node;
      v_link.ord := v_root.ord;
      v_link.requested_tool_id := v_root.requested_tool_id;
      v_link.depth := cardinality(v_path);
      v_chain := v_chain || v_link;
      v_path := v_path || v_link.tool_id;
    end loop;
    -- 3. a chain must end in a primitive (knowledge stands alone)
    if v_error is null and v_link.tool_type <> 'primitive'
       and not (v_link.depth = 0 and v_link.tool_type = 'knowledge') then
      v_error := kiwi_internal.chain_error('no_primitive', v_root.tool_id, v_path, null, v_link.tool_type);
    end if;
    if v_error is not null then
      return next row(v_root.ord, v_root.requested_tool_id, null, null, null, null, null, null, null, null,
                      v_error[1], v_error[2])::kiwi_internal.chain_row;
    else
      foreach v_link in array v_chain loop
        return next v_link;
      end loop;
    end if;
  end loop;
end
$$;
revoke execute on function kiwi_internal.resolve_chains(text[], text) from public;
grant execute on function kiwi_internal.resolve_chains(text[], text) to anon, authenticated, service_role;

create function public.resolve_executor_chain(p_tool_id text)
  returns table (depth int, tool_id text, tool_type text, executor_id text,
                 version text, content_hash text, manifest jsonb)
  language plpgsql stable
  set search_path = ''
as $$
declare
  r kiwi_internal.chain_row;
begin
  for r in select * from kiwi_internal.resolve_chains(array[p_tool_id]) loop
    if r.error is not null then
      raise exception '%', r.error using errcode = r.error_code;
    end if;
    depth := r.depth; tool_id := r.tool_id; tool_type := r.tool_type; executor_id := r.executor_id;
    version := r.version; content_hash := r.content_hash; manifest := r.manifest;
    return next;
  end loop;
end
$$;
comment on function public.resolve_executor_chain(text) is
  'The chain from a tool (depth 0) to its primitive, latest versions. Raises, naming the tools, on an unknown tool, a missing executor, a cycle, a chain deeper than 10 or one that does not end in a primitive.';
revoke execute on function public.resolve_executor_chain(text) from public;
grant execute on function public.resolve_executor_chain(text) to anon, authenticated, service_role;

create function public.resolve_executor_chains_batch(p_tool_ids text[])
  returns table (requested_tool_id text, depth int, tool_id text, tool_type text, executor_id text,
                 version text, content_hash text, manifest jsonb, error text)
  language plpgsql stable
  set search_path = ''
as $$
begin
  return query
  select c.requested_tool_id, c.depth, c.tool_id, c.tool_type, c.executor_id,
         c.version, c.content_hash, c.manifest, c.error
    from kiwi_internal.resolve_chains(p_tool_ids) c;
end
$$;
comment on function public.resolve_executor_chains_batch(text[]) is
  'resolve_executor_chain for many tools in one query. An id that cannot be resolved gives one row with its error (depth null) and does not fail the others.';
revoke execute on function public.resolve_executor_chains_batch(text[]) from public;
grant execute on function public.resolve_executor_chains_batch(text[]) to anon, authenticated, service_role;
