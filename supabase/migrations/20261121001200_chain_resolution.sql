-- Chain resolution: a tool, its executor, that executor's executor ... down to a
-- primitive. One set-based query serves single and batch calls: the executors of all
-- requested tools are gathered once each (a recursive UNION, which also ends on
-- cycles), then every requested chain is walked over that small set.

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

-- Errors name the tools involved. Codes: PT404 (not found), PT422 (a chain that
-- cannot run); PostgREST answers with those HTTP statuses.
create function kiwi_internal.resolve_chains(p_refs text[], p_version text default null)
  returns setof kiwi_internal.chain_row
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[]  := kiwi_internal.my_namespaces();
begin
  return query
  with recursive
  req as (
    select r.ord::int as ord, r.ref as requested, kiwi_internal.normalize_ref(r.ref) as ref
      from unnest(p_refs) with ordinality as r(ref, ord)
  ),
  roots as (
    select q.ord, q.requested, coalesce(t.ref, q.ref) as ref, t.id is not null as found,
           t.tool_type, v.id as version_uuid, v.version, v.content_hash, v.manifest, v.executor_id
      from req q
      left join public.tools t
        on t.ref = q.ref
       and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns))
      left join public.tool_versions v
        on v.tool_uuid = t.id
       and ((p_version is null and v.is_latest) or v.version = p_version)
  ),
  executors (ref) as (
    select r.executor_id from roots r where r.executor_id is not null
    union
    select t.executor_id
      from executors e
      join public.tools t on t.ref = e.ref
     where t.executor_id is not null
       and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns))
  ),
  nodes as (
    select t.ref, t.tool_type, v.id as version_uuid, v.version, v.content_hash, v.manifest, v.executor_id
      from executors e
      join public.tools t
        on t.ref = e.ref
       and (t.visibility <> 'private' or v_admin or t.namespace = any (v_ns))
      join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
  ),
  walk as (
    select r.ord, 0 as depth, r.ref, r.tool_type, r.executor_id, r.version, r.content_hash,
           r.manifest, r.version_uuid, array[r.ref] as path, false as cycle
      from roots r
     where r.version_uuid is not null
    union all
    select w.ord, w.depth + 1, n.ref, n.tool_type, n.executor_id, n.version, n.content_hash,
           n.manifest, n.version_uuid, w.path || n.ref, n.ref = any (w.path)
      from walk w
      join nodes n on n.ref = w.executor_id
     where not w.cycle and w.depth <= 10
  ),
  last_link as (
    select distinct on (w.ord) w.* from walk w order by w.ord, w.depth desc
  ),
  verdict as (
    select r.ord, r.requested, e.error, e.code
      from roots r
      left join last_link l on l.ord = r.ord
      cross join lateral (
        select case
          when not r.found then format('tool "%s" not found', r.requested)
          when r.version_uuid is null and p_version is not null
            then format('version %s of tool "%s" not found', p_version, r.ref)
          when r.version_uuid is null
            then format('tool "%s" has no installable version: every version is yanked', r.ref)
          when l.cycle then format('executor cycle: %s', array_to_string(l.path, ' -> '))
          when l.depth > 10
            then format('executor chain of "%s" is deeper than 10: %s', r.ref, array_to_string(l.path, ' -> '))
          when l.executor_id is not null
            then format('executor "%s" of tool "%s" not found (chain: %s)',
                        l.executor_id, l.ref, array_to_string(l.path, ' -> '))
          when l.tool_type <> 'primitive' and not (l.depth = 0 and l.tool_type = 'knowledge')
            then format('executor chain of "%s" ends at "%s", a %s, not at a primitive (chain: %s)',
                        r.ref, l.ref, l.tool_type, array_to_string(l.path, ' -> '))
        end as error,
        case
          when not r.found or r.version_uuid is null or l.executor_id is not null and not l.cycle and l.depth <= 10
            then 'PT404'
          else 'PT422'
        end as code
      ) e
  )
  select v.ord, v.requested, w.depth, w.ref, w.tool_type, w.executor_id, w.version,
         w.content_hash, w.manifest, w.version_uuid, null::text, null::text
    from verdict v join walk w on w.ord = v.ord
   where v.error is null
  union all
  select v.ord, v.requested, null::int, null::text, null::text, null::text, null::text,
         null::text, null::jsonb, null::uuid, v.error, v.code
    from verdict v
   where v.error is not null
  order by 1, 3;
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
