-- Secrets are scoped. A config reads the runner's environment two ways: a ${VAR} (also
-- ${VAR:-default}, ${VAR:+alt}; runner/core/expand.py) in any of its strings, and an
-- env_passthrough entry (a NAME, or a PREFIX_* naming every variable that begins so) at
-- config.env_passthrough or config.environment.env_passthrough. Which variables a tool
-- may read is decided by admins:
--   * an admin-published version (390_admin_published.sql) may read what it
--     names, and so may every tool running on it (a runtime's PATH, HOME, UV_*, ...);
--   * anyone else's version may read only what those below it read, and what an admin
--     granted its namespace here (grant_secret): an exact name, or a PREFIX_* covering
--     the names and prefixes that begin with PREFIX_.
-- Publish and preview_execution_plan refuse any other reference by a non-admin, naming it
-- (kiwi_internal.variable_problems), and every plan says which variables its run may read
-- (allowed_variables, 410_sandbox_narrowing.sql): the runner expands and passes through
-- only those. A change of a namespace's grants rebuilds the cached plans of its tools.

create table public.namespace_secret_grants (
  namespace  text not null references public.namespaces (namespace) on delete cascade,
  variable   text not null
             constraint namespace_secret_grants_variable_format check (variable ~ '^[A-Za-z_][A-Za-z0-9_]*\*?$'),
  granted_by uuid default auth.uid(),
  granted_at timestamptz not null default now(),
  primary key (namespace, variable)
);
comment on table public.namespace_secret_grants is
  'Variables of the runner''s environment the tools of a namespace may read (${VAR}, env_passthrough): a NAME, or PREFIX_* for every name that begins with PREFIX_. Granted by admins (grant_secret); read by the namespace''s members.';

alter table public.namespace_secret_grants enable row level security;
revoke all on table public.namespace_secret_grants from public, anon, authenticated, service_role;
grant select on table public.namespace_secret_grants to authenticated;
grant select, insert, delete on table public.namespace_secret_grants to service_role;

create policy "members read their namespaces' grants and admins all"
  on public.namespace_secret_grants for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin())
         or namespace = any ((select kiwi_internal.my_namespaces())::text[]));
create policy "admins grant variables"
  on public.namespace_secret_grants for insert to service_role
  with check ((select kiwi_internal.caller_is_admin()));
create policy "admins revoke variables"
  on public.namespace_secret_grants for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- Whether p_entry (a NAME or a PREFIX_* pattern) is covered by one of p_patterns: the same
-- entry, or a PREFIX_* whose prefix begins it (UV_* covers UV_INDEX_URL and UV_CACHE_*).
create function kiwi_internal.variable_covered(p_entry text, p_patterns text[]) returns boolean
  language sql immutable parallel safe
  set search_path = ''
as $$
  select exists (
    select 1 from unnest(p_patterns) g
     where g = p_entry
        or (right(g, 1) = '*'
            and starts_with(case when right(p_entry, 1) = '*' then left(p_entry, -1) else p_entry end, left(g, -1))))
$$;
revoke execute on function kiwi_internal.variable_covered(text, text[]) from public;
grant execute on function kiwi_internal.variable_covered(text, text[]) to anon, authenticated, service_role;

-- Every reference p_config makes to the runner's environment, with where it is:
-- (path: config.env.TOKEN, variable: the NAME or PREFIX_*, shown: ${NAME} or "PREFIX_*").
create function kiwi_internal.config_variable_refs(p_config jsonb)
  returns table (path text, variable text, shown text)
  language sql immutable parallel safe
  set search_path = ''
as $$
  with recursive walk (path, value) as (
    select 'config'::text, p_config
     where strpos(p_config::text, '${') > 0   -- most configs have none: no walk
    union all
    select case when jsonb_typeof(w.value) = 'object' then w.path || '.' || c.key
                else format('%s[%s]', w.path, c.key) end,
           c.value
      from walk w
     cross join lateral (
       select o.key, o.value from jsonb_each(case when jsonb_typeof(w.value) = 'object' then w.value end) o
       union all
       select a.n::text, a.value
         from jsonb_array_elements(case when jsonb_typeof(w.value) = 'array' then w.value end)
              with ordinality as a(value, n)) c
     where jsonb_typeof(w.value) in ('object', 'array')
  )
  select w.path, m[1], '${' || m[1] || '}'
    from walk w
   cross join lateral regexp_matches(w.value #>> '{}', '\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(?::-|:\+)[^}]*)?\}', 'g') m
   where jsonb_typeof(w.value) = 'string' and position('${' in w.value #>> '{}') > 0
  union all
  select l.path, e #>> '{}', (e #>> '{}')::text
    from (values ('config.env_passthrough', p_config -> 'env_passthrough'),
                 ('config.environment.env_passthrough', p_config #> '{environment,env_passthrough}')) l(path, list)
   cross join lateral jsonb_array_elements(case when jsonb_typeof(l.list) = 'array' then l.list else '[]' end) e
   where jsonb_typeof(e) = 'string'
$$;
revoke execute on function kiwi_internal.config_variable_refs(jsonb) from public;
grant execute on function kiwi_internal.config_variable_refs(jsonb) to anon, authenticated, service_role;

-- The references of p_config (a non-admin's tool of namespace p_namespace) that neither
-- p_allowed (what its executor chain reads: its plan's allowed_variables) nor p_grants (the
-- namespace's grants) cover, one message each, by path.
create function kiwi_internal.variable_problems(p_config jsonb, p_allowed text[], p_grants text[], p_namespace text)
  returns text[]
  language sql immutable
  set search_path = ''
as $$
  select coalesce(array_agg(format('%s: %s is not granted to namespace "%s"; an admin grants it (grant_secret) or publishes the tool',
                                   r.path, case when r.shown like '${%' then r.shown else to_jsonb(r.shown)::text end,
                                   p_namespace)
                            order by r.path, r.shown), '{}')
    from (select distinct r.path, r.variable, r.shown from kiwi_internal.config_variable_refs(p_config) r) r
   where not kiwi_internal.variable_covered(r.variable, coalesce(p_allowed, '{}') || coalesce(p_grants, '{}'))
$$;
revoke execute on function kiwi_internal.variable_problems(jsonb, text[], text[], text) from public;
grant execute on function kiwi_internal.variable_problems(jsonb, text[], text[], text) to anon, authenticated, service_role;

-- The thin RPCs: admins only, refused in words to anyone else.
create function public.grant_secret(p_namespace text, p_variable text) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row public.namespace_secret_grants;
begin
  if not kiwi_internal.caller_is_admin() then
    raise exception 'only an admin may grant a namespace the variables of the runner''s environment'
      using errcode = '42501', hint = 'ask an admin to run: select grant_secret(''namespace'', ''VARIABLE'')';
  end if;
  if p_variable is null or p_variable !~ '^[A-Za-z_][A-Za-z0-9_]*\*?$' then
    raise exception 'variable "%" is not a NAME or a PREFIX_* (letters, digits and _, not starting with a digit; * only at the end)',
      p_variable using errcode = '22023';
  end if;
  if not exists (select 1 from public.namespaces n where n.namespace = p_namespace) then
    raise exception 'namespace "%" does not exist', p_namespace using errcode = 'PT404';
  end if;
  insert into public.namespace_secret_grants (namespace, variable) values (p_namespace, p_variable)
  on conflict (namespace, variable) do nothing;
  select * into v_row from public.namespace_secret_grants g where g.namespace = p_namespace and g.variable = p_variable;
  return to_jsonb(v_row);
end
$$;
comment on function public.grant_secret(text, text) is
  'Admins: let the tools of a namespace read a variable of the runner''s environment (${VAR}, env_passthrough): a NAME, or PREFIX_* for every name that begins with PREFIX_.';
revoke execute on function public.grant_secret(text, text) from public;
grant execute on function public.grant_secret(text, text) to authenticated, service_role;

create function public.revoke_secret(p_namespace text, p_variable text) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_count int;
begin
  if not kiwi_internal.caller_is_admin() then
    raise exception 'only an admin may revoke a namespace''s variables'
      using errcode = '42501', hint = 'ask an admin';
  end if;
  delete from public.namespace_secret_grants g where g.namespace = p_namespace and g.variable = p_variable;
  get diagnostics v_count = row_count;
  return jsonb_build_object('namespace', p_namespace, 'variable', p_variable, 'revoked', v_count > 0);
end
$$;
comment on function public.revoke_secret(text, text) is
  'Admins: take back a grant_secret. Versions already published keep their config, but their plans no longer allow the variable.';
revoke execute on function public.revoke_secret(text, text) from public;
grant execute on function public.revoke_secret(text, text) to authenticated, service_role;

-- A namespace's grants are in its tools' plans (allowed_variables): rebuild them.
create function kiwi_internal.secret_grants_rebuild_plans() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.rebuild_plans(array(
    select t.id from public.tools t
     where t.namespace in (select n.namespace from changed n)));
  return null;
end
$$;
revoke execute on function kiwi_internal.secret_grants_rebuild_plans() from public;
create trigger namespace_secret_grants_inserted
  after insert on public.namespace_secret_grants
  referencing new table as changed
  for each statement execute function kiwi_internal.secret_grants_rebuild_plans();
create trigger namespace_secret_grants_deleted
  after delete on public.namespace_secret_grants
  referencing old table as changed
  for each statement execute function kiwi_internal.secret_grants_rebuild_plans();
