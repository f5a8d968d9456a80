-- Execution contexts: what an agent may do while it follows a directive.
--
-- Every MCP `execute` may carry a context. A context belongs to a session, names the
-- directive it follows (ref@version; a child without a directive of its own follows its
-- parent's; none for a session's default context) and holds its
-- EFFECTIVE permissions, in the directive manifest's format with all five kinds present:
--
--   {fs_read: [globs], fs_write: [globs], shell: [commands], mcp: ["server.tool"], tools: [refs]}
--
-- open_context computes them:
--   1. the base: the directive's declared permissions (its latest version, or the one
--      pinned as `ref@version`). A kind the directive does not declare is the parent's
--      (in a child context) or, at the top level, nothing, except shell which is then
--      unrestricted (["*"]: the `tools` permission already decides what runs). Without
--      a directive the base is the parent's permissions, or at the top level everything
--      (["*"] for every kind: the session's default context, unrestricted).
--   2. p_permissions, when given, narrows the base kind by kind (a kind it leaves out is
--      kept); it may not widen it.
--   3. with a parent, the result must be a subset of the parent's. A child (a thread, a
--      subagent, a directive run from a directive) narrows, never widens.
-- Anything that would widen is refused (SQLSTATE 42501) naming the permission:
--   permissions.fs_write: "**" is wider than the parent's ["tools/**"]
--
-- Patterns are fnmatch-style globs: `*` matches any run of characters (including `/` and
-- `.`, so `**` means the same as `*`), `?` one character; everything else is literal.
-- SUBSET: a child's list is a subset of a parent's when every child pattern is covered by
-- some parent pattern, and a pattern C is covered by P when C, read as a plain string, is
-- matched by P, where P's `?` does not match a `*` in C (so "a?" does not cover "a*", but
-- "a*" covers "a?b", "tools/**" covers "tools/x/*", "*" covers everything). Sound (a
-- covered pattern never matches more than its cover), not complete (["a*", "b*"] does not
-- cover "[ab]*"; there are no sets anyway). runner/policy/permissions.py matches the same way.
--
-- Callers read their own contexts, admins all; rows are written only by open_context and
-- never change. Contexts expire after a day (get_context then says so).

create table public.execution_contexts (
  id           uuid primary key default gen_random_uuid(),
  parent_id    uuid references public.execution_contexts (id) on delete cascade,
  session_id   text not null
               constraint execution_contexts_session_id_format
               check (char_length(session_id) between 1 and 200 and session_id !~ '[[:cntrl:]]'),
  directive    text constraint execution_contexts_directive_length check (char_length(directive) <= 300),
  permissions  jsonb not null
               constraint execution_contexts_permissions_object check (jsonb_typeof(permissions) = 'object'),
  caller       text not null,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null default now() + interval '1 day'
);
comment on table public.execution_contexts is
  'What an agent may do in a session while following a directive: the effective permissions (directive declared, narrowed, never wider than the parent). Written only by open_context; callers read their own, admins all.';
comment on column public.execution_contexts.directive is 'The directive followed, as ref@version (a child without one follows its parent''s); null for a session''s default context.';
comment on column public.execution_contexts.caller is 'Set by the database (kiwi_internal.caller_identity()).';

alter table public.execution_contexts enable row level security;
revoke all on table public.execution_contexts from public, anon, authenticated, service_role;
grant select on table public.execution_contexts to authenticated;
grant select, delete on table public.execution_contexts to service_role;

comment on column public.execution_contexts.permissions is 'Effective permissions {fs_read, fs_write, shell, mcp, tools, net}, each a list of globs; ["*"] is unrestricted, [] nothing.';

create index execution_contexts_parent_id_idx on public.execution_contexts (parent_id);
create index execution_contexts_caller_session_idx on public.execution_contexts (caller, session_id);

create policy "callers read their own contexts, admins all"
  on public.execution_contexts for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete contexts"
  on public.execution_contexts for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- Whether glob p_pattern covers p_value (a value, or a pattern read as a string); see above.
create function kiwi_internal.glob_covers(p_pattern text, p_value text) returns boolean
  language plpgsql immutable strict parallel safe
  set search_path = ''
as $$
begin
  return p_value ~ ('^' || replace(replace(
            regexp_replace(p_pattern, '([].+^$(){}|\\*?[])', '\\\1', 'g'),
            '\*', '.*'), '\?', '[^*]') || '$');
end
$$;
revoke execute on function kiwi_internal.glob_covers(text, text) from public;
grant execute on function kiwi_internal.glob_covers(text, text) to anon, authenticated, service_role;

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
revoke execute on function kiwi_internal.open_context(text, uuid, uuid, jsonb) from public;
grant execute on function kiwi_internal.open_context(text, uuid, uuid, jsonb) to authenticated, service_role;

create function public.open_context(p_session text, p_directive text default null, p_parent uuid default null,
                                    p_permissions jsonb default null) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_ref     text := kiwi_internal.normalize_ref(split_part(p_directive, '@', 1));
  v_version text := nullif(split_part(p_directive, '@', 2), '');
  v_id      uuid;
  v_type    text;
begin
  if nullif(btrim(p_directive), '') is not null then
    -- Under the caller's RLS: only a directive they can see.
    select v.id, t.tool_type into v_id, v_type
      from public.tools t join public.tool_versions v on v.tool_uuid = t.id
     where t.ref = v_ref and (v.version = v_version or (v_version is null and v.is_latest));
    if v_id is null then
      raise exception 'directive % not found', p_directive using errcode = 'PT404',
        hint = 'name a directive as ref or ref@version; find them with search_tools(''type:directive'')';
    elsif v_type not in ('directive', 'thread') then
      raise exception '% is a %, not a directive: only directives declare permissions', v_ref, v_type
        using errcode = '22023', hint = 'open a context for the directive the agent follows, or none';
    end if;
  end if;
  return kiwi_internal.open_context(p_session, v_id, p_parent, p_permissions);
end
$$;
comment on function public.open_context(text, text, uuid, jsonb) is
  'Open an execution context in session p_session, following directive p_directive (ref or ref@version; none: the session''s default, unrestricted at the top level), as a child of p_parent, narrowed by p_permissions. Returns {id, parent_id, session_id, directive, permissions, created_at, expires_at}. Widening is refused (42501) naming the permission.';
revoke execute on function public.open_context(text, text, uuid, jsonb) from public;
grant execute on function public.open_context(text, text, uuid, jsonb) to authenticated, service_role;

create function public.get_context(p_id uuid) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_row public.execution_contexts;
begin
  select * into v_row from public.execution_contexts c where c.id = p_id;  -- RLS: the caller's own
  if not found then
    raise exception 'context % not found', p_id using errcode = 'PT404',
      hint = 'pass the id open_context (or running a directive) returned, in the session that opened it';
  elsif v_row.expires_at <= now() then
    raise exception 'context % expired at %', p_id, v_row.expires_at using errcode = '42501',
      hint = 'open a new context (run the directive again)';
  end if;
  return jsonb_build_object('id', v_row.id, 'parent_id', v_row.parent_id, 'session_id', v_row.session_id,
                            'directive', v_row.directive, 'permissions', v_row.permissions,
                            'created_at', v_row.created_at, 'expires_at', v_row.expires_at);
end
$$;
comment on function public.get_context(uuid) is
  'One of your execution contexts: {id, parent_id, session_id, directive, permissions, created_at, expires_at}; PT404 if unknown, 42501 if expired.';
revoke execute on function public.get_context(uuid) from public;
grant execute on function public.get_context(uuid) to authenticated, service_role;
