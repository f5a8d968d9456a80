-- list_items: the directives or knowledge entries the caller can see, a page at a time, in
-- a stable order (by reference, byte order), for Kiwi's MCP server: prompts/list lists the
-- directives, resources/list the knowledge entries (runner/mcp_server/catalog/).
--
-- Security invoker: RLS decides, as for reading public.tools itself. An anonymous caller
-- sees public entries, a signed-in one also those of its namespaces (private and unlisted),
-- service_role everything; another tenant's unlisted entry is not listed (it stays
-- readable by its exact reference, as resolve_execution_plan allows).
--
-- Keyset pagination: `p_after` is the last reference of the previous page (the page starts
-- after it), so a page never repeats or skips an entry because another was published or
-- deleted meanwhile. Each row is the latest version: its parameters (JSON Schema form) and
-- its entrypoint's media type and size (null without an entrypoint).
create function public.list_items(p_tool_type text, p_after text default null, p_limit int default 50)
  returns table (tool_id text, tool_type text, name text, description text, latest_version text,
                 parameters jsonb, media_type text, size_bytes bigint)
  language sql stable
  set search_path = ''
as $$
  select t.ref, t.tool_type, t.name, t.description, t.latest_version, v.parameters_schema,
         f.media_type, f.size_bytes
    from public.tools t
    join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
    left join public.tool_version_files f on f.version_id = v.id and f.is_entrypoint
   where t.tool_type = p_tool_type
     and p_tool_type in ('directive', 'knowledge')
     and (p_after is null or t.ref collate "C" > p_after collate "C")
   order by t.ref collate "C"
   limit least(greatest(coalesce(p_limit, 50), 1), 200)
$$;
comment on function public.list_items(text, text, int) is
  'Directives or knowledge entries the caller can see (RLS), after p_after by reference, at most p_limit (1..200): ref, type, name, description, latest version, its parameters schema and entrypoint media type and size.';
revoke execute on function public.list_items(text, text, int) from public;
grant execute on function public.list_items(text, text, int) to anon, authenticated, service_role;
