-- The sandbox is data, narrowed up the chain. Every process the subprocess primitive
-- starts runs in a sandbox whose profile is the plan's config.sandbox (subprocess declares
-- its shape and defaults: supabase/seed/subprocess/tool.yaml):
--   network: ["host:port", ...]     reachable through the egress proxy ([]: none)
--   fs: {read: [path], write: [path]} host paths mounted read-only / read-write
--   limits: {memory_mb, pids, cpu_s, file_mb, open_files}
-- and config.environment.sandbox, of the same shape, is what a runtime's environment steps
-- (its installs) run in instead.
--
-- A plan's profile is computed walking its chain from the primitive up
-- (kiwi_internal.sandbox_step, folded by plan_trust, 420_plan_trust.sql):
--   * an admin-published element (390_admin_published.sql) merges its sandbox
--     like the rest of config: it may set anything, the child winning;
--   * any other element only narrows what is below it (sandbox_narrowed): a network entry
--     not allowed below is dropped; an fs entry is kept only if it is, or is under
--     (prefix + '/'), a path allowed below for the same access (a read also under a write
--     path), with no '..' segment nor ${VAR} in the part below that path; a limit becomes
--     the lower of its value and the one below; any other key is dropped;
--   * environment.sandbox is set by admin-published elements only; anyone else's is
--     ignored in the plan.
-- So no version, whatever its manifest says (a row written past publish, an executor
-- republished narrower), can give a tool more than its admin-published chain allows.
-- Publish refuses a non-admin's widening outright, naming it (sandbox_problems,
-- 430_publish_trust.sql), rather than storing a config the plan would cut.

-- p_value as a list (a value that is no list: an empty one).
create function kiwi_internal.json_list(p_value jsonb) returns jsonb
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case when jsonb_typeof(p_value) = 'array' then p_value else '[]'::jsonb end
$$;
revoke execute on function kiwi_internal.json_list(jsonb) from public;
grant execute on function kiwi_internal.json_list(jsonb) to anon, authenticated, service_role;

-- The limits a sandbox knows; any other key of a non-admin's limits is dropped.
create function kiwi_internal.sandbox_limit_keys() returns text[]
  language sql immutable parallel safe
  set search_path = ''
as $$
  select array['memory_mb', 'pids', 'cpu_s', 'file_mb', 'open_files']
$$;
revoke execute on function kiwi_internal.sandbox_limit_keys() from public;
grant execute on function kiwi_internal.sandbox_limit_keys() to anon, authenticated, service_role;

-- Whether the host path p_entry is one of p_allowed (a list of paths) or under one of them:
-- the same string, or that path + '/' + a rest with no '..' segment and no ${VAR} (which
-- could climb out once expanded).
create function kiwi_internal.sandbox_path_allowed(p_entry text, p_allowed jsonb) returns boolean
  language sql immutable parallel safe
  set search_path = ''
as $$
  select exists (
    select 1 from jsonb_array_elements_text(kiwi_internal.json_list(p_allowed)) a(p)
     where a.p <> ''
       and (p_entry = a.p
            or (starts_with(p_entry, rtrim(a.p, '/') || '/')
                and substr(p_entry, length(rtrim(a.p, '/')) + 2) !~ '(^|/)\.\.(/|$)'
                and position('${' in substr(p_entry, length(rtrim(a.p, '/')) + 2)) = 0)))
$$;
revoke execute on function kiwi_internal.sandbox_path_allowed(text, jsonb) from public;
grant execute on function kiwi_internal.sandbox_path_allowed(text, jsonb) to anon, authenticated, service_role;

-- The keys p_over (the sandbox a non-admin element writes) sets, each cut to what p_below
-- (the effective sandbox under it) allows. Only network, fs.read, fs.write and the known
-- limits survive, and only in their own types.
create function kiwi_internal.sandbox_narrowed(p_below jsonb, p_over jsonb) returns jsonb
  language sql immutable parallel safe
  set search_path = ''
as $$
  select jsonb_strip_nulls(jsonb_build_object(
    'network',
      case when jsonb_typeof(p_over -> 'network') = 'array' then coalesce((
        select jsonb_agg(e order by n) from jsonb_array_elements(p_over -> 'network') with ordinality x(e, n)
         where jsonb_typeof(e) = 'string' and kiwi_internal.json_list(p_below -> 'network') @> jsonb_build_array(e)),
        '[]'::jsonb) end,
    'fs',
      case when jsonb_typeof(p_over -> 'fs') = 'object' then jsonb_strip_nulls(jsonb_build_object(
        'read',
          case when jsonb_typeof(p_over #> '{fs,read}') = 'array' then coalesce((
            select jsonb_agg(e order by n) from jsonb_array_elements(p_over #> '{fs,read}') with ordinality x(e, n)
             where jsonb_typeof(e) = 'string'
               and kiwi_internal.sandbox_path_allowed(e #>> '{}', kiwi_internal.json_list(p_below #> '{fs,read}')
                                                                  || kiwi_internal.json_list(p_below #> '{fs,write}'))),
            '[]'::jsonb) end,
        'write',
          case when jsonb_typeof(p_over #> '{fs,write}') = 'array' then coalesce((
            select jsonb_agg(e order by n) from jsonb_array_elements(p_over #> '{fs,write}') with ordinality x(e, n)
             where jsonb_typeof(e) = 'string'
               and kiwi_internal.sandbox_path_allowed(e #>> '{}', p_below #> '{fs,write}')),
            '[]'::jsonb) end)) end,
    'limits',
      case when jsonb_typeof(p_over -> 'limits') = 'object' then coalesce((
        select jsonb_object_agg(l.key,
                 case when jsonb_typeof(p_below #> array['limits', l.key]) = 'number'
                           and (p_below #>> array['limits', l.key])::numeric < (l.value #>> '{}')::numeric
                      then p_below #> array['limits', l.key] else l.value end)
          from jsonb_each(p_over -> 'limits') l
         where l.key = any (kiwi_internal.sandbox_limit_keys()) and jsonb_typeof(l.value) = 'number'),
        '{}'::jsonb) end))
$$;
revoke execute on function kiwi_internal.sandbox_narrowed(jsonb, jsonb) from public;
grant execute on function kiwi_internal.sandbox_narrowed(jsonb, jsonb) to anon, authenticated, service_role;

-- One step up the chain: the effective sandbox once an element writing p_over (its
-- config.sandbox, SQL null when it has none) is laid over p_below. p_trusted: the element
-- is admin-published.
create function kiwi_internal.sandbox_step(p_below jsonb, p_over jsonb, p_trusted boolean) returns jsonb
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case when p_over is null then p_below
              when p_trusted then kiwi_internal.jsonb_deep_merge(p_below, p_over)
              when jsonb_typeof(p_over) = 'object'
                then kiwi_internal.jsonb_deep_merge(coalesce(p_below, '{}'::jsonb),
                                                    kiwi_internal.sandbox_narrowed(p_below, p_over))
              else p_below end
$$;
revoke execute on function kiwi_internal.sandbox_step(jsonb, jsonb, boolean) from public;
grant execute on function kiwi_internal.sandbox_step(jsonb, jsonb, boolean) to anon, authenticated, service_role;

-- What in p_over (a non-admin's config.sandbox, at p_path) p_below (the effective sandbox
-- of its executor chain, p_exec) does not allow, one message each. Empty: it only narrows.
create function kiwi_internal.sandbox_problems(p_over jsonb, p_below jsonb, p_path text, p_exec text)
  returns text[]
  language sql immutable parallel safe
  set search_path = ''
as $$
  with allowed as (
    select kiwi_internal.json_list(p_below -> 'network') as network,
           kiwi_internal.json_list(p_below #> '{fs,read}') || kiwi_internal.json_list(p_below #> '{fs,write}') as fs_read,
           kiwi_internal.json_list(p_below #> '{fs,write}') as fs_write,
           coalesce(p_exec, 'no executor') as below
  ), shown as (
    select a.*,
           case when jsonb_array_length(a.network) = 0 then 'none'
                else (select string_agg(e, ', ' order by n) from jsonb_array_elements_text(a.network) with ordinality x(e, n)) end as network_shown,
           case when jsonb_array_length(a.fs_read) = 0 then 'none'
                else (select string_agg(e, ', ' order by n) from jsonb_array_elements_text(a.fs_read) with ordinality x(e, n)) end as read_shown,
           case when jsonb_array_length(a.fs_write) = 0 then 'none'
                else (select string_agg(e, ', ' order by n) from jsonb_array_elements_text(a.fs_write) with ordinality x(e, n)) end as write_shown
      from allowed a
  ), problems (n, m, message) as (
    select 1, x.n, format('%s.network: %s is not allowed by its executor chain (%s: %s); only an admin may widen a sandbox',
                          p_path, x.e, s.below, s.network_shown)
      from shown s, jsonb_array_elements(kiwi_internal.json_list(p_over -> 'network')) with ordinality x(e, n)
     where jsonb_typeof(x.e) = 'string' and not s.network @> jsonb_build_array(x.e)
    union all
    select 2, x.n, format('%s.fs.read: %s is not under a path its executor chain allows (%s: %s); only an admin may widen a sandbox',
                          p_path, x.e, s.below, s.read_shown)
      from shown s, jsonb_array_elements(kiwi_internal.json_list(p_over #> '{fs,read}')) with ordinality x(e, n)
     where jsonb_typeof(x.e) = 'string' and not kiwi_internal.sandbox_path_allowed(x.e #>> '{}', s.fs_read)
    union all
    select 3, x.n, format('%s.fs.write: %s is not under a path its executor chain allows to write (%s: %s); only an admin may widen a sandbox',
                          p_path, x.e, s.below, s.write_shown)
      from shown s, jsonb_array_elements(kiwi_internal.json_list(p_over #> '{fs,write}')) with ordinality x(e, n)
     where jsonb_typeof(x.e) = 'string' and not kiwi_internal.sandbox_path_allowed(x.e #>> '{}', s.fs_write)
    union all
    select 4, array_position(kiwi_internal.sandbox_limit_keys(), l.key),
           format('%s.limits.%s: %s is more than its executor chain allows (%s: %s); only an admin may widen a sandbox',
                  p_path, l.key, l.value, s.below, p_below #> array['limits', l.key])
      from shown s, jsonb_each(case when jsonb_typeof(p_over -> 'limits') = 'object' then p_over -> 'limits' end) l
     where jsonb_typeof(l.value) = 'number' and jsonb_typeof(p_below #> array['limits', l.key]) = 'number'
       and (l.value #>> '{}')::numeric > (p_below #>> array['limits', l.key])::numeric
  )
  select coalesce(array_agg(p.message order by p.n, p.m), '{}') from problems p
$$;
revoke execute on function kiwi_internal.sandbox_problems(jsonb, jsonb, text, text) from public;
grant execute on function kiwi_internal.sandbox_problems(jsonb, jsonb, text, text) to anon, authenticated, service_role;
revoke execute on function kiwi_internal.sandbox_problems(jsonb, jsonb, text, text) from public, anon, authenticated;
