-- Helpers for the compact chain batch's tests, included after ../_setup.sql (inside the
-- test's transaction, so they are rolled back with it).

-- The compact batch as the walker builds it: resolve_executor_chains_compact as it was
-- before the plan cache served it (380_chain_batch.sql), over
-- kiwi_internal.resolve_chains. Whatever the cache holds, every answer must equal this.
create function tests.walked_compact(p_tool_ids text[]) returns jsonb
  language sql stable as $$
  with c as (
    select c.*, c.tool_id || '@' || coalesce(c.version, '') as key
      from kiwi_internal.resolve_chains(coalesce(p_tool_ids, '{}')) c
  ),
  requested as (
    select c.ord,
           case when bool_or(c.error is not null)
                then jsonb_build_object('requested', c.requested_tool_id,
                                        'error', max(c.error), 'error_code', max(c.error_code))
                else jsonb_build_object('requested', c.requested_tool_id,
                                        'chain', jsonb_agg(c.key order by c.depth))
           end as entry
      from c group by c.ord, c.requested_tool_id
  ),
  elements as (
    select distinct on (c.key) c.key,
           jsonb_build_object('tool_id', c.tool_id, 'tool_type', c.tool_type, 'executor_id', c.executor_id,
                              'version', c.version, 'content_hash', c.content_hash, 'manifest', c.manifest) as element
      from c where c.error is null
  )
  select jsonb_build_object(
           'tools', coalesce((select jsonb_agg(r.entry order by r.ord) from requested r), '[]'::jsonb),
           'elements', coalesce((select jsonb_object_agg(e.key, e.element) from elements e), '{}'::jsonb))
$$;
grant execute on function tests.walked_compact(text[]) to anon, authenticated, service_role;
