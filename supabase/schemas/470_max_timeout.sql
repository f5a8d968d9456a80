-- A timeout is at most a day. `timeout: 1e308` was published and only the run found it
-- useless. Every `timeout` the runner reads from a config is in seconds (a process's, an
-- HTTP request's, an MCP call's, a validation rule's, an environment step's, a model
-- request's), so a config's `timeout`, at any depth, that is a number must be more than 0
-- and at most kiwi_internal.max_timeout_s(): 86400 seconds, the runner's MAX_TIMEOUT_S
-- (runner/primitives/process.py), which refuses the same at run. checked_config
-- (150_config_contracts.sql) adds these problems to a config's, after old
-- spellings are made canonical (`timeout_s` is checked as the `timeout` it becomes), so
-- publish and preview refuse it alike, naming the path. A timeout that is no number is the
-- contract's to refuse.

-- The one SQL constant of the longest timeout, in seconds (24 hours): runner/primitives/
-- process.py's MAX_TIMEOUT_S is the same number.
create function kiwi_internal.max_timeout_s() returns numeric
  language sql immutable parallel safe
  set search_path = ''
as $$
  select 86400::numeric
$$;
revoke execute on function kiwi_internal.max_timeout_s() from public;
grant execute on function kiwi_internal.max_timeout_s() to anon, authenticated, service_role;

-- Each numeric `timeout` of p_config (at p_path: 'config') outside (0, max_timeout_s()],
-- named by its path; '{}' when none. Nested at most 32 levels (a manifest is at most
-- registry_limits.manifest_bytes; deeper than that no runner config goes).
create function kiwi_internal.timeout_problems(p_config jsonb, p_path text, p_depth int default 0) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_key   text;
  v_value jsonb;
  v_i     int := 0;
begin
  if p_depth > 32 then
    return p;
  end if;
  if jsonb_typeof(p_config) = 'object' then
    for v_key, v_value in select * from jsonb_each(p_config) order by 1 loop
      if v_key = 'timeout' and jsonb_typeof(v_value) = 'number'
         and ((v_value::text)::numeric <= 0 or (v_value::text)::numeric > kiwi_internal.max_timeout_s()) then
        p := p || format('%s.timeout: %s seconds; a timeout is more than 0 and at most %s (24 hours)',
                         p_path, left(v_value::text, 60), kiwi_internal.max_timeout_s());
      else
        p := p || kiwi_internal.timeout_problems(v_value, p_path || '.' || v_key, p_depth + 1);
      end if;
    end loop;
  elsif jsonb_typeof(p_config) = 'array' then
    for v_value in select e from jsonb_array_elements(p_config) e loop
      v_i := v_i + 1;
      p := p || kiwi_internal.timeout_problems(v_value, format('%s[%s]', p_path, v_i), p_depth + 1);
    end loop;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.timeout_problems(jsonb, text, int) from public;
grant execute on function kiwi_internal.timeout_problems(jsonb, text, int) to anon, authenticated, service_role;
