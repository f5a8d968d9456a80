-- A directive may only declare what its permissions allow. Its manifest says which tools
-- it uses (requires.tools: registry references; requires.mcp: servers and the subset of
-- their tools, imported as server.tool) and what the agent following it may do
-- (permissions.tools and permissions.mcp: globs). An execution context opened for the
-- directive allows exactly its permissions (260_contexts.sql), so a declared
-- tool they do not cover could never be called: a directive that needs
-- github_mcp.delete_repository but permits only filesystem_mcp.read_file is a mistake, or
-- an attempt to look harmless. Publishing refuses it (22023, through manifest_problems),
-- naming every uncovered tool:
--
--   requires.mcp[1].tools[2]: github_mcp.delete_repository is not covered by
--   permissions.mcp ["filesystem_mcp.read_file"]
--
-- Optional requirements count too: they are called when present. A kind the directive
-- does not declare permits nothing ([]), as in a top-level context. Patterns match as
-- everywhere else (kiwi_internal.glob_covers, references normalised: public/x is x).
-- Checked only once the directive's fields are well formed (directive_problems).

-- Whether some pattern of the JSON list p_patterns covers reference p_value.
create function kiwi_internal.patterns_cover(p_patterns jsonb, p_value text) returns boolean
  language sql immutable
  set search_path = ''
as $$
  select exists (select 1 from jsonb_array_elements_text(coalesce(p_patterns, '[]'::jsonb)) o
                  where kiwi_internal.glob_covers(kiwi_internal.normalize_ref(o), kiwi_internal.normalize_ref(p_value)))
$$;
revoke execute on function kiwi_internal.patterns_cover(jsonb, text) from public;
grant execute on function kiwi_internal.patterns_cover(jsonb, text) to anon, authenticated, service_role;

create or replace function kiwi_internal.directive_coverage_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p         text[] := '{}';
  v_tools   jsonb := coalesce(p_manifest #> '{permissions,tools}', '[]'::jsonb);
  v_mcp     jsonb := coalesce(p_manifest #> '{permissions,mcp}', '[]'::jsonb);
  v_perm    jsonb := coalesce(p_manifest -> 'permissions', '{}'::jsonb);
  v_item    jsonb;
  v_i       int := 0;
  v_j       int;
  v_ref     text;
  v_name    text;
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
    p := p || kiwi_internal.sandbox_coverage_problems(format('requires.tools[%s].id', v_i), v_ref, v_perm);
  end loop;
  v_i := 0;
  for v_item in select * from jsonb_array_elements(coalesce(p_manifest #> '{requires,mcp}', '[]'::jsonb)) loop
    v_i := v_i + 1;
    p := p || kiwi_internal.sandbox_coverage_problems(format('requires.mcp[%s].server', v_i), v_item ->> 'server', v_perm);
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
revoke execute on function kiwi_internal.directive_coverage_problems(jsonb) from public;
grant execute on function kiwi_internal.directive_coverage_problems(jsonb) to anon, authenticated, service_role;
