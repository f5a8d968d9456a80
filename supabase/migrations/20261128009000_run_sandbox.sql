-- Run records keep the sandbox profile the run had (what it could reach: network, files,
-- limits ...), as the runner reported it: a JSON object of at most 4096 bytes as text, or
-- nothing. record_run and record_runs take it as the optional field "sandbox", checked as
-- "warnings" is (20261121001800_run_records.sql): by the batch's screen in record_runs and,
-- when a batch is refused, by name in run_records_problems. Both are replaced whole below
-- with only the sandbox added.

alter table public.tool_runs
  add column sandbox jsonb
  constraint tool_runs_sandbox_object
  check (jsonb_typeof(sandbox) = 'object' and octet_length(sandbox::text) <= 4096);
comment on column public.tool_runs.sandbox is
  'The sandbox profile the run had, as the runner reported it: a JSON object of at most 4096 bytes (as JSON text); null when none was given.';

create or replace function kiwi_internal.run_records_problems(p_runs jsonb)
  returns table (n bigint, problems text[])
  language plpgsql stable
  set search_path = ''
as $$
begin
  return query
  select r.n, case
    when jsonb_typeof(r.run) <> 'object' then array['run: must be a JSON object']
    else
      case when (r.run - a.allowed) = '{}'::jsonb then '{}'::text[]
           else array(select format('%s: unknown field (allowed: %s)', k, array_to_string(a.allowed, ', '))
                        from jsonb_object_keys(r.run) as k
                       where not k = any (a.allowed)) end
      || array_remove(array[
        case
          when jsonb_typeof(r.run -> 'tool_id') is distinct from 'string' or t.ref = ''
            then 'tool_id: required, the tool reference that was run'
          when char_length(t.ref) > 300
               or (r.run ->> 'tool_id') ~ '[[:cntrl:]]'
            then 'tool_id: at most 300 characters, no control characters'
        end,
        case
          when jsonb_typeof(r.run -> 'status') is distinct from 'string'
               or (r.run ->> 'status') not in ('success', 'error', 'timeout')
            then format('status: required, one of success, error, timeout (got %s)',
                        coalesce((r.run -> 'status')::text, 'nothing'))
        end,
        -- an id chosen by the client (a random uuid), so a record written behind the run
        -- is known by its id at once
        case
          when jsonb_typeof(r.run -> 'id') not in ('string', 'null') then 'id: must be a uuid'
          when jsonb_typeof(r.run -> 'id') = 'string'
               and (r.run ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            then 'id: must be a uuid'
        end,
        -- optional strings (null is the same as absent)
        case when jsonb_typeof(r.run -> 'version') not in ('string', 'null') then 'version: must be a string' end,
        case when jsonb_typeof(r.run -> 'primitive') not in ('string', 'null') then 'primitive: must be a string' end,
        case when jsonb_typeof(r.run -> 'error_summary') not in ('string', 'null')
          then 'error_summary: must be a string' end,
        case when jsonb_typeof(r.run -> 'version') = 'string' and char_length(r.run ->> 'version') > 128
          then 'version: at most 128 characters' end,
        case when jsonb_typeof(r.run -> 'primitive') = 'string' and char_length(r.run ->> 'primitive') > 300
          then 'primitive: at most 300 characters' end,
        case when jsonb_typeof(r.run -> 'source') not in ('string', 'null')
                  or (r.run ->> 'source') not in ('registry', 'project', 'user')
          then format('source: one of registry, project, user (got %s)', (r.run -> 'source')::text) end,
        case
          when jsonb_typeof(r.run -> 'content_hash') not in ('string', 'null')
               or (jsonb_typeof(r.run -> 'content_hash') = 'string'
                   and (char_length(r.run ->> 'content_hash') <> 64 or (r.run ->> 'content_hash') !~ '^[0-9a-f]+$'))
            then 'content_hash: must be a sha256 in lower-case hex (64 characters)'
        end,
        case
          when jsonb_typeof(r.run -> 'params_sha256') not in ('string', 'null')
               or (jsonb_typeof(r.run -> 'params_sha256') = 'string'
                   and (char_length(r.run ->> 'params_sha256') <> 64 or (r.run ->> 'params_sha256') !~ '^[0-9a-f]+$'))
            then 'params_sha256: must be a sha256 in lower-case hex (64 characters)'
        end,
        -- numbers (a jsonb number always reads as numeric)
        case
          when jsonb_typeof(r.run -> 'exit_code') not in ('number', 'null') then 'exit_code: must be an integer'
          when jsonb_typeof(r.run -> 'exit_code') = 'number'
               and ((r.run ->> 'exit_code')::numeric <> trunc((r.run ->> 'exit_code')::numeric)
                    or (r.run ->> 'exit_code')::numeric not between -2147483648 and 2147483647)
            then 'exit_code: must be an integer'
        end,
        case
          when jsonb_typeof(r.run -> 'duration_ms') not in ('number', 'null')
            then 'duration_ms: must be a number of milliseconds from 0 to 1e12 (about 31 years)'
          when jsonb_typeof(r.run -> 'duration_ms') = 'number'
               and (r.run ->> 'duration_ms')::numeric not between 0 and 1e12
            then 'duration_ms: must be a number of milliseconds from 0 to 1e12 (about 31 years)'
        end,
        case
          when jsonb_typeof(r.run -> 'params_size') not in ('number', 'null')
            then 'params_size: must be a whole number of bytes, 0 or more'
          when jsonb_typeof(r.run -> 'params_size') = 'number'
               and ((r.run ->> 'params_size')::numeric <> trunc((r.run ->> 'params_size')::numeric)
                    or (r.run ->> 'params_size')::numeric not between 0 and 2147483647)
            then 'params_size: must be a whole number of bytes, 0 or more'
        end,
        -- the chain
        case
          when jsonb_typeof(r.run -> 'executor_chain') not in ('array', 'null')
            then 'executor_chain: must be a list of at most 64 tool references (strings)'
          when jsonb_typeof(r.run -> 'executor_chain') = 'array'
               and (jsonb_array_length(r.run -> 'executor_chain') > 64
                    or exists (select 1 from jsonb_array_elements(r.run -> 'executor_chain') as e
                                where jsonb_typeof(e) <> 'string' or char_length(e #>> '{}') > 300))
            then 'executor_chain: must be a list of at most 64 tool references (strings)'
        end,
        case
          when jsonb_typeof(r.run -> 'warnings') not in ('array', 'null')
               or (jsonb_typeof(r.run -> 'warnings') = 'array'
                   and (jsonb_array_length(r.run -> 'warnings') > 16
                        or exists (select 1 from jsonb_array_elements(r.run -> 'warnings') as e
                                    where jsonb_typeof(e) <> 'string' or char_length(e #>> '{}') > 1000)))
            then 'warnings: must be a list of at most 16 strings of at most 1000 characters'
        end,
        case
          when jsonb_typeof(r.run -> 'sandbox') not in ('object', 'null')
               or (jsonb_typeof(r.run -> 'sandbox') = 'object'
                   and octet_length((r.run -> 'sandbox')::text) > 4096)
            then 'sandbox: must be a JSON object of at most 4096 bytes (as JSON text)'
        end,
        -- times: ISO 8601 strings (parsed only when given: the parse is a subtransaction)
        case
          when jsonb_typeof(r.run -> 'started_at') = 'string' then
            case when not kiwi_internal.is_finite_timestamptz(r.run ->> 'started_at')
              then 'started_at: must be a timestamp such as "2026-11-21T10:00:00Z"' end
          when jsonb_typeof(r.run -> 'started_at') <> 'null'
            then 'started_at: must be a timestamp such as "2026-11-21T10:00:00Z"'
        end,
        case
          when jsonb_typeof(r.run -> 'finished_at') = 'string' then
            case when not kiwi_internal.is_finite_timestamptz(r.run ->> 'finished_at')
              then 'finished_at: must be a timestamp such as "2026-11-21T10:00:00Z"' end
          when jsonb_typeof(r.run -> 'finished_at') <> 'null'
            then 'finished_at: must be a timestamp such as "2026-11-21T10:00:00Z"'
        end
      ]::text[], null)
  end
  from jsonb_array_elements(p_runs) with ordinality as r(run, n)
 cross join lateral (select kiwi_internal.normalize_ref(r.run ->> 'tool_id') as ref) as t
 cross join (select array['id', 'tool_id', 'version', 'content_hash', 'status', 'exit_code', 'duration_ms',
                     'error_summary', 'executor_chain', 'primitive', 'params_sha256', 'params_size',
                     'source', 'warnings', 'sandbox', 'started_at', 'finished_at']::text[] as allowed) as a;
end
$$;
comment on function kiwi_internal.run_records_problems(jsonb) is
  'What is wrong with each run record of a JSON array (numbered from 1 in the order given), each problem naming its field; empty when the record may be stored.';
revoke execute on function kiwi_internal.run_records_problems(jsonb) from public;
-- Called by record_runs (security definer) only; service_role may ask it directly.
grant execute on function kiwi_internal.run_records_problems(jsonb) to service_role;

create or replace function kiwi_internal.record_runs(p_runs jsonb) returns setof uuid
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_role    text := kiwi_internal.caller_role();
  v_caller  text;
  v_written bigint;
  v_state   text;
  v_message text;
begin
  if v_role = 'anon' then
    raise exception 'anonymous callers cannot record runs'
      using errcode = '42501', hint = 'sign in, or run without recording';
  end if;
  if jsonb_typeof(p_runs) is distinct from 'array' then
    raise exception 'invalid run records: must be a JSON array of run records' using errcode = '22023';
  end if;
  v_caller := kiwi_internal.caller_identity();

  begin
    return query
    with given as materialized (
      select r.n, x.*,
             (r.run - array['id', 'tool_id', 'version', 'content_hash', 'status', 'exit_code', 'duration_ms',
                            'error_summary', 'executor_chain', 'primitive', 'params_sha256', 'params_size',
                            'source', 'warnings', 'sandbox', 'started_at', 'finished_at']) = '{}'::jsonb
             and jsonb_typeof(r.run -> 'tool_id') = 'string'
             and jsonb_typeof(r.run -> 'status') = 'string'
             and coalesce(jsonb_typeof(r.run -> 'id'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'version'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'content_hash'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'error_summary'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'primitive'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'source'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'params_sha256'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'started_at'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'finished_at'), 'null') in ('string', 'null')
             and coalesce(jsonb_typeof(r.run -> 'exit_code'), 'null') in ('number', 'null')
             and coalesce(jsonb_typeof(r.run -> 'duration_ms'), 'null') in ('number', 'null')
             and coalesce(jsonb_typeof(r.run -> 'params_size'), 'null') in ('number', 'null')
             and coalesce(jsonb_typeof(r.run -> 'executor_chain'), 'null') in ('array', 'null')
             -- strict: lax mode would see a null chain as [null] and unwrap nested lists
             and (jsonb_typeof(r.run -> 'executor_chain') is distinct from 'array'
                  or not jsonb_path_exists(r.run -> 'executor_chain', 'strict $[*] ? (@.type() != "string")'))
             and coalesce((select bool_and(char_length(e) <= 300) from unnest(x.executor_chain) as e), true)
             and coalesce(jsonb_typeof(r.run -> 'warnings'), 'null') in ('array', 'null')
             and (jsonb_typeof(r.run -> 'warnings') is distinct from 'array'
                  or not jsonb_path_exists(r.run -> 'warnings', 'strict $[*] ? (@.type() != "string")'))
             and coalesce((select bool_and(char_length(e) <= 1000) from unnest(x.warnings) as e), true)
             and coalesce(jsonb_typeof(r.run -> 'sandbox'), 'null') in ('object', 'null')
             and coalesce(octet_length(x.sandbox::text) <= 4096, true)
             and (r.run ->> 'tool_id') !~ '[[:cntrl:]]'
             -- the cast to uuid has checked the hex digits; the layout is 8-4-4-4-12
             and (x.id is null or (char_length(r.run ->> 'id') = 36 and strpos(r.run ->> 'id', '-') = 9
                                   and substr(r.run ->> 'id', 14, 1) = '-' and substr(r.run ->> 'id', 19, 1) = '-'
                                   and substr(r.run ->> 'id', 24, 1) = '-'))
             and coalesce(x.exit_code = trunc(x.exit_code), true)
             and coalesce(x.params_size = trunc(x.params_size), true)
             and coalesce(x.duration_ms <= 1e12, true)
             and coalesce(isfinite(x.started_at), true)
             and coalesce(isfinite(x.finished_at), true) as ok
        from jsonb_array_elements(p_runs) with ordinality as r(run, n)
       cross join lateral jsonb_to_record(r.run) as x(
               id uuid, tool_id text, version text, content_hash text, status text, exit_code numeric,
               duration_ms numeric, error_summary text, executor_chain text[], primitive text,
               params_sha256 text, params_size numeric, source text, warnings text[], sandbox jsonb,
               started_at timestamptz, finished_at timestamptz)
    ), accepted as materialized (
      select g.n, coalesce(g.id, gen_random_uuid()) as id, g.tool_id, g.version, g.content_hash, g.status,
             g.exit_code::int as exit_code, g.duration_ms::double precision as duration,
             g.error_summary, g.executor_chain, g.primitive, g.params_sha256, g.params_size::int as params_size,
             coalesce(g.source, 'registry') as source, g.warnings, g.sandbox, g.started_at, g.finished_at,
             -- The record is written when the run has finished: finished_at defaults to
             -- now, started_at to finished_at less the duration; duration_ms is computed
             -- only from two given times (never from a default).
             coalesce(g.finished_at, g.started_at + make_interval(secs => g.duration_ms::double precision / 1000),
                      greatest(now(), g.started_at)) as finish
        from given as g
       where (select bool_and(given.ok) from given)
    ), written as (
      insert into public.tool_runs (id, tool_id, version, content_hash, status, exit_code, duration_ms,
                                    error_summary, executor_chain, primitive, params_sha256, params_size, source,
                                    warnings, sandbox, caller, caller_role, started_at, finished_at)
      select a.id, kiwi_internal.normalize_ref(a.tool_id), a.version, a.content_hash, a.status, a.exit_code,
             coalesce(a.duration, extract(epoch from a.finished_at - a.started_at)::double precision * 1000),
             case when char_length(a.error_summary) > 2000 then left(a.error_summary, 1999) || '…'
                  else a.error_summary end,
             a.executor_chain, a.primitive, a.params_sha256, a.params_size, a.source, a.warnings, a.sandbox,
             v_caller, v_role,
             coalesce(a.started_at, a.finish - make_interval(secs => coalesce(a.duration, 0) / 1000)), a.finish
        from accepted as a
       order by a.n
    )
    select a.id from accepted as a order by a.n;
    get diagnostics v_written = row_count;
  exception when data_exception or integrity_constraint_violation then
    -- a cast or a constraint refused a record: say which field, and why
    get stacked diagnostics v_state = returned_sqlstate, v_message = message_text;
    perform kiwi_internal.refuse_run_records(p_runs);
    raise exception 'invalid run record: %', v_message using errcode = v_state;
  end;
  if v_written < jsonb_array_length(p_runs) then  -- the screen refused a record
    perform kiwi_internal.refuse_run_records(p_runs);
    raise exception 'invalid run record (no field named: this is a bug in record_runs)'
      using errcode = '22023', hint = 'nothing was recorded';
  end if;
end
$$;
comment on function kiwi_internal.record_runs(jsonb) is
  'Checks and writes a batch of run records in one statement, as the caller the database knows; one bad record refuses them all, naming its fields.';
revoke execute on function kiwi_internal.record_runs(jsonb) from public;
grant execute on function kiwi_internal.record_runs(jsonb) to authenticated, service_role;
