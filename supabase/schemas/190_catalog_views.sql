-- Views for people in the dashboard. security_invoker: each reader sees only what
-- RLS lets them see.

-- public.tool_catalog is in 656_tool_catalog.sql: it shows the quality score (655).

create view public.tool_version_history with (security_invoker = true) as
select t.ref as tool_id, v.version,
       case when v.is_yanked then 'yanked'
            when v.is_latest then 'latest'
            when v.is_deprecated then 'deprecated'
            else 'published' end as status,
       v.executor_id, v.content_hash,
       (select count(*) from public.tool_version_files f where f.version_id = v.id) as files,
       (select coalesce(sum(f.size_bytes), 0) from public.tool_version_files f where f.version_id = v.id) as total_bytes,
       v.changelog, v.deprecation_message, v.yanked_reason, v.published_at
  from public.tool_versions v
  join public.tools t on t.id = v.tool_uuid
 order by t.ref, v.semver_key desc;
comment on view public.tool_version_history is 'Every version of every tool you can see, newest first, with its status.';
grant select on public.tool_version_history to anon, authenticated, service_role;

create view public.tool_dependents with (security_invoker = true) as
select e.ref as executor_id, e.tool_type,
       count(t.id) as dependents,
       coalesce(array_agg(t.ref order by t.ref) filter (where t.id is not null), '{}') as tools
  from public.tools e
  left join public.tools t on t.executor_id = e.ref
 where e.tool_type in ('primitive', 'runtime', 'mcp_server')
 group by e.ref, e.tool_type
 order by e.tool_type, e.ref;
comment on view public.tool_dependents is 'What executes on each primitive, runtime and MCP server: what removing it would break.';
grant select on public.tool_dependents to anon, authenticated, service_role;
