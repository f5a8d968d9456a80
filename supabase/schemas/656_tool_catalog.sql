-- The dashboard's catalog: every tool the reader can see (security_invoker: RLS decides), its
-- latest version, its executor chain and its quality score. After 655_quality_score.sql, whose
-- column it shows.

create view public.tool_catalog with (security_invoker = true) as
with chains as (
  select c.requested_tool_id,
         string_agg(c.tool_id, ' -> ' order by c.depth) as executor_chain,
         max(c.error) as chain_error
    from public.resolve_executor_chains_batch(
           (select coalesce(array_agg(t.ref), '{}') from public.tools t where t.latest_version is not null)) c
   group by c.requested_tool_id
)
select t.ref as tool_id, t.namespace, t.tool_type, t.name, t.latest_version,
       ch.executor_chain, ch.chain_error, t.visibility, t.is_official, t.is_builtin,
       t.category, t.tags, t.description, t.run_count, t.download_count, t.updated_at, t.quality_score
  from public.tools t
  left join chains ch on ch.requested_tool_id = t.ref
 order by t.namespace, t.tool_type, t.ref;
comment on view public.tool_catalog is 'Every tool you can see, its latest version, its executor chain and its quality score (0 to 1).';
grant select on public.tool_catalog to anon, authenticated, service_role;
