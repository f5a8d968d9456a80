-- Directives: the manifest format of a directive, validated when it is published.
--
-- A directive is a tool whose entrypoint file (markdown) holds its instructions and
-- whose manifest declares, beside `parameters` (its inputs, as for any tool):
--
--   requires:                      # the tools it needs; checked when it runs
--     tools:                       # registry tools
--       - id: bash_runtime         # a tool reference (or just the string: bash_runtime)
--         required: true           # default true; false = optional (a warning if missing)
--         version: 1.0.0           # optional: an exact version
--     mcp:                         # MCP servers, with the subset of their tools it uses
--       - server: filesystem_mcp   # the mcp_server's tool reference
--         tools: [read_file]       # upstream tool names (imported as filesystem_mcp.read_file)
--         required: false          # default true
--   permissions:                   # what the agent following it may do
--     fs_read: ["src/**"]          # path globs
--     fs_write: ["tools/**"]       # path globs
--     shell: ["uv", "bash"]        # commands
--     mcp: ["filesystem_mcp.*"]    # server.tool patterns; * matches anything
--     tools: ["kiwi_*"]            # registry tool references; * matches anything
--   cites: [kiwi_tool_authoring]   # knowledge entries it relies on
--
-- `requires`, `permissions` and `cites` belong to directives (and threads, directives run
-- by a model) only. Every problem is named by its field, lists counted from 1 as
-- parameters[n] is: `requires.tools[2].id: must be a tool reference`. Whether the
-- required tools exist is a question for run time (runner/handlers/directive.py), not publish:
-- a directive may be published before the tools it needs.
--
-- Publishing checks them through manifest_problems (160_publish.sql), which
-- calls directive_problems after manifest_base_problems (whose allowed keys already name
-- requires, permissions and cites).

-- Problems of a value that must be a list of non-empty strings matching p_pattern (any
-- string when null), each named `p_field[n]: must be <p_what>`.
create function kiwi_internal.string_list_problems(p_value jsonb, p_field text, p_what text,
                                                   p_pattern text default null) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p   text[] := '{}';
  v   jsonb;
  v_i int := 0;
begin
  if p_value is null then
    return p;
  end if;
  if jsonb_typeof(p_value) <> 'array' then
    return array[format('%s: must be a list of %ss', p_field, p_what)];
  end if;
  for v in select * from jsonb_array_elements(p_value) loop
    v_i := v_i + 1;
    if jsonb_typeof(v) <> 'string' or btrim(v #>> '{}') = ''
       or (v #>> '{}') ~ '[[:cntrl:]]'
       or (p_pattern is not null and (v #>> '{}') !~ p_pattern) then
      p := p || format('%s[%s]: must be a %s', p_field, v_i, p_what);
    end if;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.string_list_problems(jsonb, text, text, text) from public;
grant execute on function kiwi_internal.string_list_problems(jsonb, text, text, text) to anon, authenticated, service_role;
-- The permission kind `net`: the hosts a directive's agent may reach, as a list of
-- "host:port" globs (kiwi_internal.glob_covers, as the other kinds: "127.0.0.1:*",
-- "*.example.com:443"; "*" is any). It is what the sandbox profile of a tool it runs may
-- reach (config.sandbox.network, 410_sandbox_narrowing.sql): a call under a
-- context to a tool whose sandbox reaches a host its `net` does not cover is refused
-- (public.admit_call, 370_admit_call.sql, and
-- runner/policy/permissions.py), and publishing refuses a directive whose required tools
-- reach hosts it does not permit (450_directive_sandbox_coverage.sql).
--
-- Replaced here, whole, each with only `net` added where the kinds are listed:
--   directive_problems    (230_directives.sql) validates permissions.net
--   permissions_widening  (260_contexts.sql) a child's net narrows its parent's
--   open_context          (260_contexts.sql) every context holds net: a
--                         directive that does not declare it has [] at the top level (its
--                         parent's in a child), a session's default context ["*"]

create or replace function kiwi_internal.directive_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p        text[] := '{}';
  v_ref    constant text := '^([a-z0-9][a-z0-9_-]{0,62}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$';
  v_type   text := p_manifest ->> 'tool_type';
  v_key    text;
  v_item   jsonb;
  v_i      int;
  v_field  text;
  v_seen   text[];
  v_req    jsonb := p_manifest -> 'requires';
  v_perm   jsonb := p_manifest -> 'permissions';
begin
  if p_manifest is null or jsonb_typeof(p_manifest) <> 'object' then
    return p;
  end if;
  if v_type is distinct from 'directive' and v_type is distinct from 'thread' then
    foreach v_key in array array['requires', 'permissions', 'cites'] loop
      if p_manifest ? v_key then
        p := p || format('%s: only a directive declares %s (this is a %s)', v_key, v_key, coalesce(v_type, 'tool'));
      end if;
    end loop;
    return p;
  end if;

  -- requires: {tools: [...], mcp: [...]}
  if v_req is not null then
    if jsonb_typeof(v_req) <> 'object' then
      p := p || 'requires: must be an object with tools and/or mcp'::text;
    else
      for v_key in select jsonb_object_keys(v_req) loop
        if not v_key = any (array['tools', 'mcp']) then
          p := p || format('requires.%s: unknown field (allowed: tools, mcp)', v_key);
        end if;
      end loop;

      if v_req ? 'tools' and jsonb_typeof(v_req -> 'tools') <> 'array' then
        p := p || 'requires.tools: must be a list of {id, required, version}'::text;
      elsif v_req ? 'tools' then
        v_i := 0;
        v_seen := '{}';
        for v_item in select * from jsonb_array_elements(v_req -> 'tools') loop
          v_i := v_i + 1;
          v_field := format('requires.tools[%s]', v_i);
          if jsonb_typeof(v_item) = 'string' then
            v_item := jsonb_build_object('id', v_item);
          elsif jsonb_typeof(v_item) <> 'object' then
            p := p || format('%s: must be a tool reference or {id, required, version}', v_field);
            continue;
          end if;
          for v_key in select jsonb_object_keys(v_item) loop
            if not v_key = any (array['id', 'required', 'version']) then
              p := p || format('%s.%s: unknown field (allowed: id, required, version)', v_field, v_key);
            end if;
          end loop;
          if jsonb_typeof(v_item -> 'id') is distinct from 'string' or (v_item ->> 'id') !~ v_ref then
            p := p || format('%s.id: must be a tool reference such as "bash_runtime" or "namespace/tool"', v_field);
          elsif (v_item ->> 'id') = any (v_seen) then
            p := p || format('%s.id: "%s" is required twice', v_field, v_item ->> 'id');
          else
            v_seen := v_seen || (v_item ->> 'id');
          end if;
          if v_item ? 'required' and jsonb_typeof(v_item -> 'required') <> 'boolean' then
            p := p || format('%s.required: must be true or false', v_field);
          end if;
          if v_item ? 'version' and (jsonb_typeof(v_item -> 'version') <> 'string'
                                     or not kiwi_internal.is_semver(v_item ->> 'version')) then
            p := p || format('%s.version: must be a semantic version such as "1.0.0"', v_field);
          end if;
        end loop;
      end if;

      if v_req ? 'mcp' and jsonb_typeof(v_req -> 'mcp') <> 'array' then
        p := p || 'requires.mcp: must be a list of {server, tools, required}'::text;
      elsif v_req ? 'mcp' then
        v_i := 0;
        v_seen := '{}';
        for v_item in select * from jsonb_array_elements(v_req -> 'mcp') loop
          v_i := v_i + 1;
          v_field := format('requires.mcp[%s]', v_i);
          if jsonb_typeof(v_item) <> 'object' then
            p := p || format('%s: must be {server, tools, required}', v_field);
            continue;
          end if;
          for v_key in select jsonb_object_keys(v_item) loop
            if not v_key = any (array['server', 'alias', 'tools', 'required']) then
              p := p || format('%s.%s: unknown field (allowed: server, alias, tools, required)', v_field, v_key);
            end if;
          end loop;
          if jsonb_typeof(v_item -> 'server') is distinct from 'string' or (v_item ->> 'server') !~ v_ref then
            p := p || format('%s.server: must be the tool reference of an MCP server such as "filesystem_mcp"', v_field);
          elsif (v_item ->> 'server') = any (v_seen) then
            p := p || format('%s.server: "%s" is listed twice', v_field, v_item ->> 'server');
          else
            v_seen := v_seen || (v_item ->> 'server');
          end if;
          if jsonb_typeof(v_item -> 'tools') is distinct from 'array' or jsonb_array_length(v_item -> 'tools') = 0 then
            p := p || format('%s.tools: required, a non-empty list of the server''s tool names', v_field);
          else
            p := p || kiwi_internal.string_list_problems(v_item -> 'tools', v_field || '.tools', 'tool name');
          end if;
          if v_item ? 'required' and jsonb_typeof(v_item -> 'required') <> 'boolean' then
            p := p || format('%s.required: must be true or false', v_field);
          end if;
          -- alias: the short name the directive calls the server's tools by (alias.tool)
          if v_item ? 'alias' and (jsonb_typeof(v_item -> 'alias') is distinct from 'string'
                                   or (v_item ->> 'alias') !~ '^[A-Za-z][A-Za-z0-9_-]{0,63}$') then
            p := p || format('%s.alias: must be a short name (a letter, then letters, digits, _ or -)', v_field);
          elsif v_item ? 'alias' and ('alias:' || (v_item ->> 'alias')) = any (v_seen) then
            p := p || format('%s.alias: "%s" is used twice', v_field, v_item ->> 'alias');
          elsif v_item ? 'alias' then
            v_seen := v_seen || ('alias:' || (v_item ->> 'alias'));
          end if;
        end loop;
      end if;
    end if;
  end if;

  -- permissions: {fs_read, fs_write, shell, mcp, tools, net}, each a list of strings
  if v_perm is not null then
    if jsonb_typeof(v_perm) <> 'object' then
      p := p || 'permissions: must be an object with fs_read, fs_write, shell, mcp, tools and/or net'::text;
    else
      for v_key in select jsonb_object_keys(v_perm) loop
        if not v_key = any (array['fs_read', 'fs_write', 'shell', 'mcp', 'tools', 'net']) then
          p := p || format('permissions.%s: unknown field (allowed: fs_read, fs_write, shell, mcp, tools, net)', v_key);
        end if;
      end loop;
      p := p || kiwi_internal.string_list_problems(v_perm -> 'fs_read', 'permissions.fs_read', 'glob string')
             || kiwi_internal.string_list_problems(v_perm -> 'fs_write', 'permissions.fs_write', 'glob string')
             || kiwi_internal.string_list_problems(v_perm -> 'shell', 'permissions.shell', 'command string')
             || kiwi_internal.string_list_problems(v_perm -> 'mcp', 'permissions.mcp',
                  'server.tool pattern (such as "github_mcp.*" or "*.*")', '^[A-Za-z0-9_*/-]+\.[A-Za-z0-9_.*-]+$')
             || kiwi_internal.string_list_problems(v_perm -> 'tools', 'permissions.tools',
                  'tool reference or pattern (such as "kiwi_*")',
                  '^([a-z0-9*][a-z0-9_*-]{0,62}/)?[A-Za-z0-9*][A-Za-z0-9_.*-]{0,127}$')
             || kiwi_internal.string_list_problems(v_perm -> 'net', 'permissions.net',
                  'host:port pattern (such as "api.example.com:443" or "127.0.0.1:*")',
                  '^(\*|[A-Za-z0-9_.*?:\[\]-]+:[0-9*?]+)$');
    end if;
  end if;

  -- cites: knowledge entries, by reference
  p := p || kiwi_internal.string_list_problems(p_manifest -> 'cites', 'cites', 'knowledge tool reference', v_ref);
  return p;
end
$$;
revoke execute on function kiwi_internal.directive_problems(jsonb) from public;
grant execute on function kiwi_internal.directive_problems(jsonb) to anon, authenticated, service_role;
revoke execute on function kiwi_internal.directive_problems(jsonb) from public;
grant execute on function kiwi_internal.directive_problems(jsonb) to anon, authenticated, service_role;
