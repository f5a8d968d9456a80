-- Chain resolution: a tool, its executor, that executor's executor ... down to a
-- primitive. One walker, walk_chains, follows every chain the registry reads:
-- resolve_chains (resolve_executor_chain(s), published_chain, chain_attestations) and
-- compute_plan (execution plans, live and cached). Its work grows with what is asked,
-- never with the size of the registry:
--   1. the callers find the requested tools (resolve_chains: every one, at p_version or
--      its latest, in one indexed query), as the caller may see them;
--   2. each chain is walked link by link; an executor is looked up once per walk (by
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
  tool_uuid         uuid,
  namespace         text,
  visibility        text,
  error             text,
  error_code        text
);

-- The wording of every chain error, shared by the walker and everything that reports a
-- chain. Errors name the tools involved; p_path is the chain walked so far. Codes:
-- PT404 (not found) and PT422 (a chain that cannot run); PostgREST answers with those
-- HTTP statuses. wrong_primitive: a chain that ends in another primitive than its root's
-- type requires (tool_type_rules.terminal_primitive, p_next; p_detail the root's type).
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
    when 'wrong_primitive' then array[format('tool "%s" is a %s: its chain must end in %s, but ends in %s (chain: %s)',
                                             p_root, p_detail, p_next, p_path[cardinality(p_path)],
                                             array_to_string(p_path, ' -> ')), 'PT422']
  end
$$;
revoke execute on function kiwi_internal.chain_error(text, text, text[], text, text) from public;
grant execute on function kiwi_internal.chain_error(text, text, text[], text, text) to anon, authenticated, service_role;

-- The walker. p_roots: the requested tools' versions, found and visible (error set: one
-- that could not be, passed through). Returns, root by root, the rows of its chain
-- (depth 0 first, each carrying its root's ord and requested_tool_id), or one row with
-- the error that stopped the walk. Executors are the latest versions of tools the
-- caller sees: any tool when p_admin, else a non-private one or a private one of a
-- namespace in p_ns. A chain must end in a primitive (knowledge stands alone).
-- It trusts p_admin and p_ns, so no API role may call it: only resolve_chains and
-- compute_plan, security definer both, which take them from the session or are the
-- admin's view (rebuild_plans).
create function kiwi_internal.walk_chains(p_roots kiwi_internal.chain_row[], p_admin boolean, p_ns text[])
  returns kiwi_internal.chain_row[]
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_out      kiwi_internal.chain_row[] := '{}';
  v_batch    boolean := cardinality(p_roots) > 1;   -- several roots: remember executors ...
  v_memo     kiwi_internal.chain_row[] := '{}';     -- ... looked up so far ...
  v_memo_ref text[] := '{}';                        -- ... and their refs (tool_id null: not found)
  v_root     kiwi_internal.chain_row;
  v_link     kiwi_internal.chain_row;
  v_start    int;
  v_path     text[];
  v_next     text;
  v_at       int;
  v_error    text[];  -- {message, sqlstate}
begin
  foreach v_root in array coalesce(p_roots, '{}') loop
    if v_root.error is not null then
      v_out := v_out || row(v_root.ord, v_root.requested_tool_id, null, null, null, null, null, null, null, null,
                            null, null, null, v_root.error, v_root.error_code)::kiwi_internal.chain_row;
      continue;
    end if;
    v_start := cardinality(v_out);
    v_link := v_root;
    v_link.depth := 0;
    v_out := v_out || v_link;
    v_path := array[v_root.tool_id];
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
      v_at := case when v_batch then array_position(v_memo_ref, v_next) end;
      if v_at is not null then
        v_link := v_memo[v_at];
        v_link.ord := v_root.ord;
        v_link.requested_tool_id := v_root.requested_tool_id;
        v_link.depth := cardinality(v_path);
      else
        select v_root.ord, v_root.requested_tool_id, cardinality(v_path), t.ref, t.tool_type, v.executor_id,
               v.version, v.content_hash, v.manifest, v.id, t.id, t.namespace, t.visibility, null, null
          into v_link
          from public.tools t
          join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
         where t.ref = v_next
           and (t.visibility <> 'private' or p_admin or t.namespace = any (p_ns));
        if v_batch then
          v_memo_ref := v_memo_ref || v_next;
          v_memo := v_memo || v_link;
        end if;
      end if;
      if v_link.tool_id is null then
        v_error := kiwi_internal.chain_error('dangling', v_root.tool_id, v_path, v_next);
        exit;
      end if;
      v_out := v_out || v_link;
      v_path := v_path || v_link.tool_id;
    end loop;
    -- a chain must end in a primitive (knowledge stands alone)
    if v_error is null and v_link.tool_type <> 'primitive'
       and not (v_link.depth = 0 and v_link.tool_type = 'knowledge') then
      v_error := kiwi_internal.chain_error('no_primitive', v_root.tool_id, v_path, null, v_link.tool_type);
    end if;
    if v_error is not null then   -- the chain's rows give way to its error
      v_out := v_out[1:v_start] || row(v_root.ord, v_root.requested_tool_id, null, null, null, null, null, null, null,
                                       null, null, null, null, v_error[1], v_error[2])::kiwi_internal.chain_row;
    end if;
  end loop;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.walk_chains(kiwi_internal.chain_row[], boolean, text[])
  from public, anon, authenticated, service_role;

-- The chains of p_refs as the caller sees them: the requested tools in one indexed
-- query, then walk_chains. force_generic_plan: a custom plan for a one-element array
-- always looks cheaper than the generic one, so PostgreSQL would otherwise re-plan the
-- root query on every call.
create function kiwi_internal.resolve_chains(p_refs text[], p_version text default null)
  returns setof kiwi_internal.chain_row
  language plpgsql stable security definer
  set search_path = ''
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
  v_roots kiwi_internal.chain_row[];
  v_row   kiwi_internal.chain_row;
begin
  select array_agg(row(q.ord, q.requested, 0, coalesce(x.ref, q.ref), x.tool_type, x.executor_id,
                       x.version, x.content_hash, x.manifest, x.version_uuid, x.tool_uuid, x.namespace,
                       x.visibility, e.error[1], e.error[2]
                   )::kiwi_internal.chain_row order by q.ord)
    into v_roots
    from (select r.ord::int as ord, r.requested, kiwi_internal.normalize_ref(r.requested) as ref
            from unnest(p_refs) with ordinality as r(requested, ord)) q
    left join lateral (
      select t.ref, t.tool_type, v.executor_id, v.version, v.content_hash, v.manifest, v.id as version_uuid,
             t.id as tool_uuid, t.namespace, t.visibility
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
  foreach v_row in array kiwi_internal.walk_chains(v_roots, v_admin, v_ns) loop
    return next v_row;
  end loop;
end
$$;
revoke execute on function kiwi_internal.resolve_chains(text[], text) from public;
grant execute on function kiwi_internal.resolve_chains(text[], text) to anon, authenticated, service_role;

create function public.resolve_executor_chain(p_tool_id text, p_version text default null)
  returns table (depth int, tool_id text, tool_type text, executor_id text,
                 version text, content_hash text, manifest jsonb)
  language plpgsql stable
  set search_path = ''
as $$
declare
  r kiwi_internal.chain_row;
begin
  for r in select * from kiwi_internal.resolve_chains(array[p_tool_id], p_version) loop
    if r.error is not null then
      raise exception '%', r.error using errcode = r.error_code;
    end if;
    depth := r.depth; tool_id := r.tool_id; tool_type := r.tool_type; executor_id := r.executor_id;
    version := r.version; content_hash := r.content_hash; manifest := r.manifest;
    return next;
  end loop;
end
$$;
comment on function public.resolve_executor_chain(text, text) is
  'The chain from a tool (depth 0: p_version, default its latest) to its primitive (the executors at their latest versions). Raises, naming the tools, on an unknown tool, a missing executor, a cycle, a chain deeper than 10 or one that does not end in a primitive.';
revoke execute on function public.resolve_executor_chain(text, text) from public;
grant execute on function public.resolve_executor_chain(text, text) to anon, authenticated, service_role;

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
