-- The permission kind `net`: the hosts a directive's agent may reach, as a list of
-- "host:port" globs (kiwi_internal.glob_covers, as the other kinds: "127.0.0.1:*",
-- "*.example.com:443"; "*" is any). It is what the sandbox profile of a tool it runs may
-- reach (config.sandbox.network, 20261128000300_sandbox_narrowing.sql): a call under a
-- context to a tool whose sandbox reaches a host its `net` does not cover is refused
-- (public.admit_call, 20261128010200_admit_call_sandbox_needs.sql, and
-- runner/policy/permissions.py), and publishing refuses a directive whose required tools
-- reach hosts it does not permit (20261128010100_directive_sandbox_coverage.sql).
--
-- Replaced here, whole, each with only `net` added where the kinds are listed:
--   directive_problems    (20261121002000_directives.sql) validates permissions.net
--   permissions_widening  (20261121002300_contexts.sql) a child's net narrows its parent's
--   open_context          (20261121002300_contexts.sql) every context holds net: a
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
            if not v_key = any (array['server', 'tools', 'required']) then
              p := p || format('%s.%s: unknown field (allowed: server, tools, required)', v_field, v_key);
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

-- The first permission of p_child not covered by p_whose's p_outer, as
-- `permissions.KIND: "PATTERN" is wider than <p_whose> [...]`; null when p_child is a subset.
create or replace function kiwi_internal.permissions_widening(p_child jsonb, p_outer jsonb, p_whose text) returns text
  language plpgsql immutable
  set search_path = ''
as $$
declare
  v_kind    text;
  v_pattern text;
begin
  foreach v_kind in array array['fs_read', 'fs_write', 'shell', 'mcp', 'tools', 'net'] loop
    for v_pattern in select jsonb_array_elements_text(coalesce(p_child -> v_kind, '[]')) loop
      if not exists (select 1 from jsonb_array_elements_text(coalesce(p_outer -> v_kind, '[]')) o
                      where kiwi_internal.glob_covers(kiwi_internal.normalize_ref(o), kiwi_internal.normalize_ref(v_pattern))) then
        return format('permissions.%s: %s is wider than %s %s',
                      v_kind, to_jsonb(v_pattern), p_whose, coalesce(p_outer -> v_kind, '[]'));
      end if;
    end loop;
  end loop;
  return null;
end
$$;
revoke execute on function kiwi_internal.permissions_widening(jsonb, jsonb, text) from public;
-- Called by open_context (security definer) only.
grant execute on function kiwi_internal.permissions_widening(jsonb, jsonb, text) to service_role;

-- The work of open_context, bypassing RLS to write the row. p_version_id is the directive
-- version public.open_context found under the caller's RLS; it is checked again here (a
-- version of a tool the caller may read), since anyone signed in can call this function
-- with any id. The parent must be the caller's.
create or replace function kiwi_internal.open_context(p_session text, p_version_id uuid, p_parent uuid, p_permissions jsonb)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_kinds     constant text[] := array['fs_read', 'fs_write', 'shell', 'mcp', 'tools', 'net'];
  v_all       constant jsonb := '{"fs_read": ["*"], "fs_write": ["*"], "shell": ["*"], "mcp": ["*"], "tools": ["*"], "net": ["*"]}';
  v_none      constant jsonb := '{"fs_read": [], "fs_write": [], "shell": ["*"], "mcp": [], "tools": [], "net": []}';
  v_session   text := btrim(p_session);
  v_parent    public.execution_contexts;
  v_directive text;
  v_declared  jsonb;
  v_base      jsonb;
  v_effective jsonb := '{}';
  v_kind      text;
  v_problems  text[];
  v_problem   text;
  v_row       public.execution_contexts;
begin
  if v_session is null or v_session = '' or char_length(v_session) > 200 or v_session ~ '[[:cntrl:]]' then
    raise exception 'open_context: p_session is required, at most 200 characters' using errcode = '22023',
      hint = 'name the session the context belongs to';
  end if;
  if p_permissions is not null then
    v_problems := kiwi_internal.directive_problems(
      jsonb_build_object('tool_type', 'directive', 'permissions', p_permissions));
    if cardinality(v_problems) > 0 then
      raise exception 'invalid permissions: %', array_to_string(v_problems, '; ') using errcode = '22023',
        detail = to_jsonb(v_problems)::text,
        hint = 'permissions is {fs_read, fs_write, shell, mcp, tools, net}, each a list of patterns';
    end if;
  end if;

  if p_parent is not null then
    select * into v_parent from public.execution_contexts c
     where c.id = p_parent
       and (c.caller = kiwi_internal.caller_identity() or kiwi_internal.caller_is_admin());
    if not found then
      raise exception 'context % not found', p_parent using errcode = 'PT404',
        hint = 'a parent is a context you opened (its id from open_context)';
    elsif v_parent.expires_at <= now() then
      raise exception 'context % expired at %', p_parent, v_parent.expires_at using errcode = '42501',
        hint = 'open a new context';
    end if;
  end if;

  -- 1. the base
  if p_version_id is not null then
    select t.ref || '@' || v.version, coalesce(v.manifest -> 'permissions', '{}')
      into v_directive, v_declared
      from public.tool_versions v join public.tools t on t.id = v.tool_uuid
     where v.id = p_version_id
       and t.tool_type in ('directive', 'thread')
       and kiwi_internal.can_read(t.visibility, t.namespace);
    if not found then
      raise exception 'directive version % not found', p_version_id using errcode = 'PT404',
        hint = 'name a directive as ref or ref@version; find them with search_tools(''type:directive'')';
    end if;
    v_base := (case when p_parent is null then v_none else v_parent.permissions end) || v_declared;
  else
    v_base := case when p_parent is null then v_all else v_parent.permissions end;
  end if;

  -- 2. narrowed by p_permissions, kind by kind
  foreach v_kind in array v_kinds loop
    if p_permissions ? v_kind then
      v_problem := kiwi_internal.permissions_widening(
        jsonb_build_object(v_kind, p_permissions -> v_kind), v_base,
        case when v_declared ? v_kind then format('the directive %s''s', v_directive)
             when p_parent is not null then 'the parent''s'
             when v_directive is not null then format('the directive %s''s (undeclared)', v_directive)
             else 'the session''s' end);
      if v_problem is not null then
        raise exception '%', v_problem using errcode = '42501',
          hint = 'a context may only narrow the permissions it starts from';
      end if;
      v_effective := v_effective || jsonb_build_object(v_kind, p_permissions -> v_kind);
    else
      v_effective := v_effective || jsonb_build_object(v_kind, coalesce(v_base -> v_kind, '[]'));
    end if;
  end loop;

  -- 3. never wider than the parent
  if p_parent is not null then
    v_problem := kiwi_internal.permissions_widening(v_effective, v_parent.permissions, 'the parent''s');
    if v_problem is not null then
      raise exception '%', v_problem using errcode = '42501',
        hint = 'a child context (a thread, a subagent, a directive run from a directive) can only narrow its parent''s permissions';
    end if;
  end if;

  insert into public.execution_contexts (parent_id, session_id, directive, permissions, caller)
  values (p_parent, v_session, coalesce(v_directive, v_parent.directive), v_effective, kiwi_internal.caller_identity())
  returning * into v_row;
  return jsonb_build_object('id', v_row.id, 'parent_id', v_row.parent_id, 'session_id', v_row.session_id,
                            'directive', v_row.directive, 'permissions', v_row.permissions,
                            'created_at', v_row.created_at, 'expires_at', v_row.expires_at);
end
$$;
revoke execute on function kiwi_internal.open_context(text, uuid, uuid, jsonb) from public;
grant execute on function kiwi_internal.open_context(text, uuid, uuid, jsonb) to authenticated, service_role;

comment on column public.execution_contexts.permissions is 'Effective permissions {fs_read, fs_write, shell, mcp, tools, net}, each a list of globs; ["*"] is unrestricted, [] nothing.';
