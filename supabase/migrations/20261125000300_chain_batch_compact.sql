-- Many tools' executor chains in one answer that names each chain element once.
--
-- resolve_executor_chains_batch returns a row per (requested tool, depth): a hundred
-- script tools on the same two runtimes repeat those runtimes' manifests a hundred times
-- (for 100 ids, 372 rows and 207 kB, 72% of it duplicated). resolve_executor_chains_compact
-- returns one jsonb: each requested id with its chain as element keys (or its error), and
-- each distinct element (a tool version, keyed by ref@version: versions are immutable) with
-- its manifest once.
-- It reads the same kiwi_internal.resolve_chains as the row-shaped batch, so both answer
-- alike under the caller's RLS; the row-shaped function keeps its contract.
--
--   {"tools":    [{"requested": "ns/a", "chain": ["ns/a@1.0.0", "rt/python@1.0.0", …]},
--                 {"requested": "ns/missing", "error": "…", "error_code": "P0002"}],
--    "elements": {"ns/a@1.0.0": {"tool_id": …, "tool_type": …, "executor_id": …,
--                                  "version": …, "content_hash": …, "manifest": {…}}, …}}

create function public.resolve_executor_chains_compact(p_tool_ids text[])
  returns jsonb
  language sql stable
  set search_path = ''
as $$
  with c as (
    select c.*, c.tool_id || '@' || coalesce(c.version, '') as key
      from kiwi_internal.resolve_chains(coalesce(p_tool_ids, '{}')) c
  ),
  requested as (
    select c.ord, c.requested_tool_id,
           case when bool_or(c.error is not null)
                then jsonb_build_object('requested', c.requested_tool_id,
                                        'error', max(c.error), 'error_code', max(c.error_code))
                else jsonb_build_object('requested', c.requested_tool_id,
                                        'chain', jsonb_agg(c.key order by c.depth))
           end as entry
      from c
     group by c.ord, c.requested_tool_id
  ),
  elements as (
    select distinct on (c.key) c.key,
           jsonb_build_object('tool_id', c.tool_id, 'tool_type', c.tool_type, 'executor_id', c.executor_id,
                              'version', c.version, 'content_hash', c.content_hash, 'manifest', c.manifest) as element
      from c
     where c.error is null
  )
  select jsonb_build_object(
           'tools', coalesce((select jsonb_agg(r.entry order by r.ord) from requested r), '[]'::jsonb),
           'elements', coalesce((select jsonb_object_agg(e.key, e.element) from elements e), '{}'::jsonb))
$$;
comment on function public.resolve_executor_chains_compact(text[]) is
  'resolve_executor_chains_batch in one jsonb that names each chain element once: {"tools": [{"requested", "chain": [element keys, depth 0 first]} or {"requested", "error", "error_code"}], "elements": {key: {tool_id, tool_type, executor_id, version, content_hash, manifest}}}. Keys are ref@version (a version is immutable, so one key has one content). An id that cannot be resolved carries its error and does not fail the others; requests keep their order (a repeated id appears again).';
revoke execute on function public.resolve_executor_chains_compact(text[]) from public;
grant execute on function public.resolve_executor_chains_compact(text[]) to anon, authenticated, service_role;
