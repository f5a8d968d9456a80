-- A directive's permissions cover the hosts and paths of the tools and MCP servers it
-- declares, as they cover the tools themselves (310_directive_coverage.sql). Every tool process
-- runs in the sandbox of its plan, config.sandbox (410_sandbox_narrowing.sql,
-- computed by plan_trust): what it may reach (network: ["host:port"]) and which host paths
-- are mounted (fs: {read, write}). Under the directive's context a call to a tool whose
-- sandbox reaches further than its permissions is refused (public.admit_call,
-- runner/policy/permissions.py), so publishing refuses the directive first, naming each:
--
--   requires.tools[1].id: fetch_weather reaches api.weather.example:443, not covered by permissions.net []
--   requires.tools[1].id: indexer reads /srv/data, not covered by permissions.fs_read [] or permissions.fs_write []
--   requires.tools[1].id: indexer writes /srv/index, not covered by permissions.fs_write ["out/**"]
--   requires.mcp[1].server: filesystem_mcp reaches registry.npmjs.org:443, not covered by permissions.net []
--
-- The sandbox read is the latest version's plan as the publisher sees it
-- (kiwi_internal.executor_plan: null for a tool they cannot see or whose chain does not
-- resolve, which is then not checked: a directive may be published before its tools). A
-- path is compared as written (a ${VAR} in it is text), a read path may be covered by
-- fs_read or fs_write, and patterns match as everywhere else (kiwi_internal.patterns_cover).
-- A stdio MCP server runs in its plan's sandbox (mcp_server -> subprocess), and every call to
-- one of its tools in the same one (mcp_tool -> mcp_server -> subprocess): requires.mcp
-- servers are checked as tools are; a remote server's plan ends in http_client and has no
-- sandbox, so nothing is checked for it.
--
-- directive_coverage_problems is replaced whole, with the sandbox checks added.

-- What the sandbox of p_ref's latest plan reaches that p_permissions do not cover, each
-- problem prefixed with p_where (where the directive names it).
create function kiwi_internal.sandbox_coverage_problems(p_where text, p_ref text, p_permissions jsonb)
  returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_net   jsonb := coalesce(p_permissions -> 'net', '[]'::jsonb);
  v_read  jsonb := coalesce(p_permissions -> 'fs_read', '[]'::jsonb);
  v_write jsonb := coalesce(p_permissions -> 'fs_write', '[]'::jsonb);
  v_sandbox jsonb := kiwi_internal.executor_plan(p_ref) #> '{config,sandbox}';
  v_name  text;
begin
  if jsonb_typeof(v_sandbox) is distinct from 'object' then
    return p;
  end if;
  for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox -> 'network')) loop
    if not kiwi_internal.patterns_cover(v_net, v_name) then
      p := p || format('%s: %s reaches %s, not covered by permissions.net %s', p_where, p_ref, v_name, v_net);
    end if;
  end loop;
  for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,read}')) loop
    if not kiwi_internal.patterns_cover(v_read || v_write, v_name) then
      p := p || format('%s: %s reads %s, not covered by permissions.fs_read %s or permissions.fs_write %s',
                       p_where, p_ref, v_name, v_read, v_write);
    end if;
  end loop;
  for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,write}')) loop
    if not kiwi_internal.patterns_cover(v_write, v_name) then
      p := p || format('%s: %s writes %s, not covered by permissions.fs_write %s', p_where, p_ref, v_name, v_write);
    end if;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.sandbox_coverage_problems(text, text, jsonb) from public;
grant execute on function kiwi_internal.sandbox_coverage_problems(text, text, jsonb) to anon, authenticated, service_role;
