-- A directive's permissions cover the hosts and paths of the MCP servers it requires, as
-- they cover those of its tools (20261128010100_directive_sandbox_coverage.sql). A stdio
-- server runs in the sandbox of its plan (config.sandbox, the server's mcp_server plan:
-- mcp_server -> subprocess), and so does every call to one of its tools, whose plan
-- (mcp_tool -> mcp_server -> subprocess) holds the same sandbox: under the directive's
-- context such a call is refused when the sandbox reaches further than its permissions
-- (runner/policy/permissions.py needs() and check(), public.admit_call), so publishing
-- refuses the directive first, naming the server as the tools are named:
--
--   requires.mcp[1].server: filesystem_mcp reaches registry.npmjs.org:443, not covered by permissions.net []
--   requires.mcp[1].server: filesystem_mcp writes ${KIWI_FILESYSTEM_ROOT:-.}, not covered by permissions.fs_write ["tools/**"]
--
-- The sandbox read is the server's latest plan as the publisher sees it
-- (kiwi_internal.executor_plan(server): null for a server they cannot see or whose chain
-- does not resolve, which is then not checked); a remote server's plan (streamable_http,
-- sse) ends in http_client and has no sandbox: nothing to check. Paths are compared as
-- written and a read path may be covered by fs_read or fs_write, as for tools.
--
-- directive_coverage_problems is replaced whole, with the servers' sandbox checks added.

create or replace function kiwi_internal.directive_coverage_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p         text[] := '{}';
  v_tools   jsonb := coalesce(p_manifest #> '{permissions,tools}', '[]'::jsonb);
  v_mcp     jsonb := coalesce(p_manifest #> '{permissions,mcp}', '[]'::jsonb);
  v_net     jsonb := coalesce(p_manifest #> '{permissions,net}', '[]'::jsonb);
  v_read    jsonb := coalesce(p_manifest #> '{permissions,fs_read}', '[]'::jsonb);
  v_write   jsonb := coalesce(p_manifest #> '{permissions,fs_write}', '[]'::jsonb);
  v_item    jsonb;
  v_i       int := 0;
  v_j       int;
  v_ref     text;
  v_name    text;
  v_sandbox jsonb;
begin
  if (p_manifest ->> 'tool_type') is distinct from 'directive' and (p_manifest ->> 'tool_type') is distinct from 'thread' then
    return p;
  end if;
  for v_item in select * from jsonb_array_elements(coalesce(p_manifest #> '{requires,tools}', '[]'::jsonb)) loop
    v_i := v_i + 1;
    v_ref := case when jsonb_typeof(v_item) = 'string' then v_item #>> '{}' else v_item ->> 'id' end;
    if not kiwi_internal.patterns_cover(v_tools, v_ref) then
      p := p || format('requires.tools[%s].id: %s is not covered by permissions.tools %s', v_i, v_ref, v_tools);
    end if;
    -- the hosts and paths its sandbox reaches
    v_sandbox := kiwi_internal.executor_plan(v_ref) #> '{config,sandbox}';
    if jsonb_typeof(v_sandbox) = 'object' then
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox -> 'network')) loop
        if not kiwi_internal.patterns_cover(v_net, v_name) then
          p := p || format('requires.tools[%s].id: %s reaches %s, not covered by permissions.net %s',
                           v_i, v_ref, v_name, v_net);
        end if;
      end loop;
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,read}')) loop
        if not kiwi_internal.patterns_cover(v_read || v_write, v_name) then
          p := p || format('requires.tools[%s].id: %s reads %s, not covered by permissions.fs_read %s or permissions.fs_write %s',
                           v_i, v_ref, v_name, v_read, v_write);
        end if;
      end loop;
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,write}')) loop
        if not kiwi_internal.patterns_cover(v_write, v_name) then
          p := p || format('requires.tools[%s].id: %s writes %s, not covered by permissions.fs_write %s',
                           v_i, v_ref, v_name, v_write);
        end if;
      end loop;
    end if;
  end loop;
  v_i := 0;
  for v_item in select * from jsonb_array_elements(coalesce(p_manifest #> '{requires,mcp}', '[]'::jsonb)) loop
    v_i := v_i + 1;
    -- the hosts and paths its server's sandbox reaches (a remote server's has none)
    v_ref := v_item ->> 'server';
    v_sandbox := kiwi_internal.executor_plan(v_ref) #> '{config,sandbox}';
    if jsonb_typeof(v_sandbox) = 'object' then
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox -> 'network')) loop
        if not kiwi_internal.patterns_cover(v_net, v_name) then
          p := p || format('requires.mcp[%s].server: %s reaches %s, not covered by permissions.net %s',
                           v_i, v_ref, v_name, v_net);
        end if;
      end loop;
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,read}')) loop
        if not kiwi_internal.patterns_cover(v_read || v_write, v_name) then
          p := p || format('requires.mcp[%s].server: %s reads %s, not covered by permissions.fs_read %s or permissions.fs_write %s',
                           v_i, v_ref, v_name, v_read, v_write);
        end if;
      end loop;
      for v_name in select jsonb_array_elements_text(kiwi_internal.json_list(v_sandbox #> '{fs,write}')) loop
        if not kiwi_internal.patterns_cover(v_write, v_name) then
          p := p || format('requires.mcp[%s].server: %s writes %s, not covered by permissions.fs_write %s',
                           v_i, v_ref, v_name, v_write);
        end if;
      end loop;
    end if;
    v_j := 0;
    for v_name in select jsonb_array_elements_text(v_item -> 'tools') loop
      v_j := v_j + 1;
      v_ref := kiwi_internal.normalize_ref(v_item ->> 'server') || '.' || v_name;
      if not kiwi_internal.patterns_cover(v_mcp, v_ref) then
        p := p || format('requires.mcp[%s].tools[%s]: %s is not covered by permissions.mcp %s', v_i, v_j, v_ref, v_mcp);
      end if;
    end loop;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.directive_coverage_problems(jsonb) from public;
grant execute on function kiwi_internal.directive_coverage_problems(jsonb) to anon, authenticated, service_role;
