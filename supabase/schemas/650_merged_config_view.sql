-- The merged config of every tool, for the dashboard's SQL editor: what a run of its latest
-- version would be given (its executor chain's configs merged from the primitive up, as
-- resolve_execution_plan merges them), one row per tool the reader can see.
--
-- security_invoker: the tools are read through RLS as the reader, and each plan is computed
-- as the reader (execution_plan checks every link's visibility), so a private tool, or a
-- private runtime under a public tool, shows only to its namespace's members and admins.
-- A tool whose chain cannot be planned shows its error instead of failing the whole query.

create function kiwi_internal.plan_or_error(p_tool_id text)
  returns table (plan jsonb, error text)
  language plpgsql stable
  set search_path = ''
as $$
begin
  plan := kiwi_internal.execution_plan(p_tool_id, null);
  return next;
exception when others then
  plan := null;
  error := sqlerrm;
  return next;
end
$$;
comment on function kiwi_internal.plan_or_error(text) is
  'The caller''s plan of a tool''s latest version, or the error that prevents it (for tool_merged_config).';
revoke execute on function kiwi_internal.plan_or_error(text) from public;
grant execute on function kiwi_internal.plan_or_error(text) to anon, authenticated, service_role;

create view public.tool_merged_config with (security_invoker = true) as
select t.ref as tool_id, t.namespace, t.tool_type, t.latest_version as version,
       (select string_agg(c ->> 'tool_id', ' -> ' order by n)
          from jsonb_array_elements(p.plan -> 'chain') with ordinality as e (c, n)) as executor_chain,
       p.plan -> 'config' as config,
       p.plan -> 'parameters' as parameters,
       p.error as chain_error
  from public.tools t
  cross join lateral kiwi_internal.plan_or_error(t.ref) p
 where t.latest_version is not null and t.tool_type <> 'knowledge'
 order by t.namespace, t.tool_type, t.ref;
comment on view public.tool_merged_config is
  'Every tool you can see with the config its latest version runs with: its chain''s configs merged from the primitive up (child wins), or the error that keeps it from running.';
grant select on public.tool_merged_config to anon, authenticated, service_role;
