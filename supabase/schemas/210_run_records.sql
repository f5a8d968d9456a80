-- Run records: one row per run of a tool, written by record_run after the run. They say
-- what ran, how it ended and who asked; never what went in or came out (parameters are
-- kept as their sha256 and size only, outputs not at all). Callers read their own runs,
-- admins all of them; rows are never updated, and service_role deletes old ones.
--
-- Records are written in one statement per batch. The runner writes its records behind
-- the runs, in batches (runner/harness/recorder.py), so a record must cost less database CPU
-- than the proxied MCP call it records: a batch is checked in one query and written in
-- one INSERT ... SELECT (record_runs), and record_run is a batch of one, so the two
-- cannot drift apart. The tests in supabase/tests/runs/ hold both to the same rules.

-- Who is asking, as run records name them: the signed-in user's id when the request
-- carries a JWT with a subject (PostgREST: auth.uid()), otherwise `role:` and the role
-- the caller acts as (kiwi_internal.caller_role(): `role:postgres` for the runner's
-- direct connection, `role:service_role` for a service key, which has no subject).
-- A uuid never starts with `role:`, so the two kinds cannot collide.
create function kiwi_internal.caller_identity() returns text
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
begin
  if v_uid is not null then
    return v_uid::text;
  end if;
  return 'role:' || kiwi_internal.caller_role();
end
$$;
comment on function kiwi_internal.caller_identity() is
  'Who is asking: auth.uid() as text when the request has a JWT subject, else role:<the role the caller acts as>.';
revoke execute on function kiwi_internal.caller_identity() from public;
grant execute on function kiwi_internal.caller_identity() to anon, authenticated, service_role;

create table public.tool_runs (
  id             uuid primary key default gen_random_uuid(),
  tool_id        text not null
                 constraint tool_runs_tool_id_length check (char_length(tool_id) between 1 and 300),
  version        text constraint tool_runs_version_length check (char_length(version) <= 128),
  -- the hash checks as a length and a plain class: a regular expression with a counted
  -- repetition ({64}) costs some 5 µs a row; these do not
  content_hash   text constraint tool_runs_content_hash_format
                 check (char_length(content_hash) = 64 and content_hash ~ '^[0-9a-f]+$'),
  status         text not null
                 constraint tool_runs_status_values check (status in ('success', 'error', 'timeout')),
  exit_code      int,
  duration_ms    double precision
                 constraint tool_runs_duration_ms_range check (duration_ms >= 0 and duration_ms < 'Infinity'),
  error_summary  text constraint tool_runs_error_summary_length check (char_length(error_summary) <= 2000),
  executor_chain text[] constraint tool_runs_executor_chain_length check (cardinality(executor_chain) <= 64),
  primitive      text constraint tool_runs_primitive_length check (char_length(primitive) <= 300),
  params_sha256  text constraint tool_runs_params_sha256_format
                 check (char_length(params_sha256) = 64 and params_sha256 ~ '^[0-9a-f]+$'),
  params_size    int constraint tool_runs_params_size_range check (params_size >= 0),
  source         text not null default 'registry'
                 constraint tool_runs_source_values check (source in ('registry', 'project', 'user')),
  warnings       text[] constraint tool_runs_warnings_length check (cardinality(warnings) <= 16),
  caller         text not null,
  caller_role    text not null,
  started_at     timestamptz not null default now(),
  finished_at    timestamptz,
  -- the sandbox profile the run had, as the runner reported it (a JSON object, at most 4096 bytes)
  sandbox        jsonb constraint tool_runs_sandbox_object
                 check (jsonb_typeof(sandbox) = 'object' and octet_length(sandbox::text) <= 4096),
  -- the run's OpenTelemetry trace id when telemetry was on (W3C: 32 lower-case hex digits, not all zero)
  trace_id       text constraint tool_runs_trace_id_format
                 check (char_length(trace_id) = 32 and trace_id ~ '^[0-9a-f]+$' and trace_id <> repeat('0', 32)),
  -- what the run was given and gave back, scrubbed and capped by the runner (a JSON object, at most 64 KiB)
  payload        jsonb constraint tool_runs_payload_object
                 check (jsonb_typeof(payload) = 'object' and octet_length(payload::text) <= 65536),
  constraint tool_runs_finished_after_start check (finished_at >= started_at)
);
comment on table public.tool_runs is
  'One row per run of a tool, written through record_run. Callers read their own runs, admins all. The parameters'' sha256 and size always; their values, the output and stderr only in payload, scrubbed of secrets and capped, when the runner keeps payloads (KIWI_RUN_PAYLOADS).';
comment on column public.tool_runs.tool_id is 'The tool as requested or resolved (public/x is stored as x); not a foreign key: runs outlive tools.';
comment on column public.tool_runs.error_summary is 'The error''s first 2000 characters (a longer one ends in …).';
comment on column public.tool_runs.executor_chain is 'The refs from the tool down to its primitive, as the plan resolved them.';
comment on column public.tool_runs.params_size is 'Size in bytes of the serialised parameters.';
comment on column public.tool_runs.source is 'Where the tool came from: registry, or a local space''s tool.yaml (project or user), which may shadow the registry''s tool of the same name.';
comment on column public.tool_runs.warnings is 'What the run warned of (a deprecated or yanked version, an unsigned link, a validation rule ...): at most 16, each at most 1000 characters.';
comment on column public.tool_runs.caller is 'Set by the database (kiwi_internal.caller_identity()): a user id, or role:<role> without a JWT subject.';
comment on column public.tool_runs.caller_role is 'The role the caller acted as (anon, authenticated, service_role, postgres ...), set by the database.';

alter table public.tool_runs enable row level security;
revoke all on table public.tool_runs from public, anon, authenticated, service_role;
grant select on table public.tool_runs to authenticated;
grant select, delete on table public.tool_runs to service_role;
comment on column public.tool_runs.sandbox is
  'The sandbox profile the run had, as the runner reported it: a JSON object of at most 4096 bytes (as JSON text); null when none was given.';
comment on column public.tool_runs.trace_id is
  'The OpenTelemetry trace the run was part of (32 lower-case hex digits, not all zero), when the runner had telemetry on; null otherwise.';
comment on column public.tool_runs.payload is
  'What the run was given and gave back, as the runner kept it: {params, output, stderr, truncated: [names of the parts cut to fit]}, every secret the tool''s config refers to masked; a JSON object of at most 65536 bytes as text; null when the runner keeps no payloads (KIWI_RUN_PAYLOADS=off).';
comment on column public.tool_runs.params_sha256 is 'sha256 (hex) of the parameters as the runner serialised them; never the values.';

create index tool_runs_caller_started_at_idx on public.tool_runs (caller, started_at desc);
create index tool_runs_tool_id_started_at_idx on public.tool_runs (tool_id, started_at desc);
create index tool_runs_started_at_idx on public.tool_runs (started_at desc);

create policy "callers read their own runs, admins all"
  on public.tool_runs for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete runs"
  on public.tool_runs for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- Append-only, for everyone: a run that happened does not change afterwards.
create function kiwi_internal.tool_runs_append_only() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  raise exception 'run records are append-only: run % cannot be changed', old.id
    using errcode = '23514', hint = 'record a new run instead; service_role may delete old runs';
end
$$;
revoke execute on function kiwi_internal.tool_runs_append_only() from public;
create trigger tool_runs_append_only
  before update on public.tool_runs
  for each row execute function kiwi_internal.tool_runs_append_only();

-- Whether a text is a finite timestamp (PostgreSQL 15 has no pg_input_is_valid).
create function kiwi_internal.is_finite_timestamptz(p_text text) returns boolean
  language plpgsql stable
  set search_path = ''
as $$
begin
  return pg_catalog.isfinite(p_text::timestamptz);
exception when others then
  return false;
end
$$;
revoke execute on function kiwi_internal.is_finite_timestamptz(text) from public;
-- Called by the run record checks, inside record_runs (security definer).
grant execute on function kiwi_internal.is_finite_timestamptz(text) to service_role;

-- What is wrong with each record of a batch, each problem named by its field, in one
-- query per batch (called once per record, a function would cost more than its checks).
-- plpgsql rather than sql so that the session keeps the query's plan (a sql function's
-- is made again on every call).

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
        case
          when jsonb_typeof(r.run -> 'trace_id') not in ('string', 'null')
               or (jsonb_typeof(r.run -> 'trace_id') = 'string'
                   and (char_length(r.run ->> 'trace_id') <> 32 or (r.run ->> 'trace_id') !~ '^[0-9a-f]+$'
                        or (r.run ->> 'trace_id') = repeat('0', 32)))
            then 'trace_id: must be a trace id in lower-case hex (32 characters, not all zero)'
        end,
        case
          when jsonb_typeof(r.run -> 'payload') not in ('object', 'null')
               or (jsonb_typeof(r.run -> 'payload') = 'object'
                   and octet_length((r.run -> 'payload')::text) > 65536)
            then 'payload: must be a JSON object of at most 65536 bytes (as JSON text)'
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
                     'source', 'warnings', 'sandbox', 'trace_id', 'payload', 'started_at', 'finished_at']::text[] as allowed) as a;
end
$$;
revoke execute on function kiwi_internal.run_records_problems(jsonb) from public;
-- Called by record_runs (security definer) only; service_role may ask it directly.
grant execute on function kiwi_internal.run_records_problems(jsonb) to service_role;
comment on function kiwi_internal.run_records_problems(jsonb) is
  'What is wrong with each run record of a JSON array (numbered from 1 in the order given), each problem naming its field; empty when the record may be stored.';
revoke execute on function kiwi_internal.run_records_problems(jsonb) from public;
-- Called by record_runs (security definer) only; service_role may ask it directly.
grant execute on function kiwi_internal.run_records_problems(jsonb) to service_role;

-- Why a batch is refused: the first record with problems, each named by its field, or a
-- record that finishes before it starts. Returns when it finds nothing to say.
create function kiwi_internal.refuse_run_records(p_runs jsonb) returns void
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_problems text[];
  v_bad      record;
begin
  select c.problems into v_problems
    from kiwi_internal.run_records_problems(p_runs) as c
   where cardinality(c.problems) > 0
   order by c.n
   limit 1;
  if found then
    raise exception 'invalid run record: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was recorded';
  end if;
  -- only a record giving both times can finish before it starts (otherwise one follows from the other)
  select r.run ->> 'started_at' as started, r.run ->> 'finished_at' as finished into v_bad
    from jsonb_array_elements(p_runs) with ordinality as r(run, n)
   where (r.run ->> 'finished_at')::timestamptz < (r.run ->> 'started_at')::timestamptz
   order by r.n
   limit 1;
  if found then
    raise exception 'invalid run record: finished_at: % is before started_at %',
      v_bad.finished::timestamptz, v_bad.started::timestamptz
      using errcode = '22023', hint = 'fix the fields named above; nothing was recorded';
  end if;
end
$$;
comment on function kiwi_internal.refuse_run_records(jsonb) is
  'Raises the reason a batch of run records is refused (the first bad record''s problems, by field); returns when it finds none.';
revoke execute on function kiwi_internal.refuse_run_records(jsonb) from public;
-- Called by record_runs (security definer) only.
grant execute on function kiwi_internal.refuse_run_records(jsonb) to service_role;

-- A batch, all or nothing, in one INSERT ... SELECT, as the caller the database knows.
--
-- Working out every problem of every record (run_records_problems) costs more than
-- writing the record, so a batch is not checked that way first. Each record is read
-- into typed columns (jsonb_to_record) and screened, in the same statement, for what
-- neither those casts nor the table's constraints would refuse: unknown fields, JSON
-- types, control characters, uuid layout, whole numbers, bounds, finite times. A batch
-- whose every record passes is written; a record that fails the screen, a cast or a
-- constraint refuses the batch, and only then are the reasons worked out, with the
-- messages run_records_problems gives. tests/test_fuzz.py holds the two to the same
-- verdict on generated records.

create or replace function kiwi_internal.record_runs(p_runs jsonb) returns setof uuid
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_role text := kiwi_internal.caller_role();
begin
  if v_role = 'anon' then
    raise exception 'anonymous callers cannot record runs'
      using errcode = '42501', hint = 'sign in, or run without recording';
  end if;
  return query select kiwi_internal.write_run_records(p_runs, kiwi_internal.caller_identity(), v_role);
end
$$;
revoke execute on function kiwi_internal.record_runs(jsonb) from public;
grant execute on function kiwi_internal.record_runs(jsonb) to authenticated, service_role;
comment on function kiwi_internal.record_runs(jsonb) is
  'Checks and writes a batch of run records in one statement, as the caller the database knows; one bad record refuses them all, naming its fields.';

-- The checks and the insert, for a caller already known: record_runs's (from the claims) or
-- a queued run's (560_run_queue.sql: the claims it was queued with). Granted to no one: only
-- those two security-definer functions call it, so nobody names the caller of a record.
create function kiwi_internal.write_run_records(p_runs jsonb, p_caller text, p_role text) returns setof uuid
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_role    text := p_role;
  v_caller  text := p_caller;
  v_written bigint;
  v_state   text;
  v_message text;
begin
  if jsonb_typeof(p_runs) is distinct from 'array' then
    raise exception 'invalid run records: must be a JSON array of run records' using errcode = '22023';
  end if;

  begin
    return query
    with given as materialized (
      select r.n, x.*,
             (r.run - array['id', 'tool_id', 'version', 'content_hash', 'status', 'exit_code', 'duration_ms',
                            'error_summary', 'executor_chain', 'primitive', 'params_sha256', 'params_size',
                            'source', 'warnings', 'sandbox', 'trace_id', 'payload', 'started_at', 'finished_at']) = '{}'::jsonb
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
             and coalesce(jsonb_typeof(r.run -> 'trace_id'), 'null') in ('string', 'null')
             and coalesce(octet_length(x.sandbox::text) <= 4096, true)
             and coalesce(jsonb_typeof(r.run -> 'payload'), 'null') in ('object', 'null')
             and coalesce(octet_length(x.payload::text) <= 65536, true)
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
               trace_id text, payload jsonb, started_at timestamptz, finished_at timestamptz)
    ), accepted as materialized (
      select g.n, coalesce(g.id, gen_random_uuid()) as id, g.tool_id, g.version, g.content_hash, g.status,
             g.exit_code::int as exit_code, g.duration_ms::double precision as duration,
             g.error_summary, g.executor_chain, g.primitive, g.params_sha256, g.params_size::int as params_size,
             coalesce(g.source, 'registry') as source, g.warnings, g.sandbox, g.trace_id, g.payload,
             g.started_at, g.finished_at,
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
                                    warnings, sandbox, trace_id, payload, caller, caller_role, started_at,
                                    finished_at)
      select a.id, kiwi_internal.normalize_ref(a.tool_id), a.version, a.content_hash, a.status, a.exit_code,
             coalesce(a.duration, extract(epoch from a.finished_at - a.started_at)::double precision * 1000),
             case when char_length(a.error_summary) > 2000 then left(a.error_summary, 1999) || '…'
                  else a.error_summary end,
             a.executor_chain, a.primitive, a.params_sha256, a.params_size, a.source, a.warnings, a.sandbox,
             a.trace_id, a.payload, v_caller, v_role,
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
revoke execute on function kiwi_internal.write_run_records(jsonb, text, text) from public;

-- One record is a batch of one: the same checks, the same messages, the same insert.
create function kiwi_internal.record_run(p_run jsonb) returns uuid
  language sql volatile
  set search_path = ''
as $$
  select id from kiwi_internal.record_runs(jsonb_build_array(p_run)) as id
$$;
revoke execute on function kiwi_internal.record_run(jsonb) from public;
grant execute on function kiwi_internal.record_run(jsonb) to authenticated, service_role;

create function public.record_run(p_run jsonb) returns uuid
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.record_run(p_run);
end
$$;
comment on function public.record_run(jsonb) is
  'Record one finished run: {id (optional uuid), tool_id, status (success|error|timeout), version, content_hash, exit_code, duration_ms, error_summary, executor_chain, primitive, params_sha256, params_size, source (registry|project|user), sandbox, trace_id (32 hex), payload ({params, output, stderr, truncated}, at most 64 KiB), started_at, finished_at}. The database sets who asked; unknown or bad fields are refused by name. Returns the run''s id.';
revoke execute on function public.record_run(jsonb) from public;
grant execute on function public.record_run(jsonb) to authenticated, service_role;

-- Many records in one call: the runner writes its records behind the runs, in batches.
-- All or nothing: one bad record refuses the batch (its error names the field).
create function public.record_runs(p_runs jsonb) returns setof uuid
  language sql volatile
  set search_path = ''
as $$
  select id from kiwi_internal.record_runs(p_runs) as id
$$;
comment on function public.record_runs(jsonb) is
  'record_run for a JSON array of run records in one call, in order; returns their ids. One bad record refuses them all.';
revoke execute on function public.record_runs(jsonb) from public;
grant execute on function public.record_runs(jsonb) to authenticated, service_role;

-- Views for people in the dashboard. security_invoker: each reader sees only the runs
-- RLS lets them read (their own; admins all).

create view public.recent_runs with (security_invoker = true) as
select r.tool_id, r.version, r.status, r.exit_code,
       round(r.duration_ms::numeric, 1) as duration_ms,
       r.error_summary, r.caller, r.started_at, r.id
  from public.tool_runs r
 order by r.started_at desc, r.id;
comment on view public.recent_runs is 'Runs you may read, newest first: what ran, how it ended, how long it took and who asked.';
grant select on public.recent_runs to authenticated, service_role;

create view public.run_summary with (security_invoker = true) as
select r.tool_id,
       count(*) as runs,
       count(*) filter (where r.status = 'success') as successes,
       count(*) filter (where r.status = 'error') as errors,
       count(*) filter (where r.status = 'timeout') as timeouts,
       round((count(*) filter (where r.status <> 'success'))::numeric / count(*), 3) as failure_rate,
       round((percentile_cont(0.5) within group (order by r.duration_ms))::numeric, 1) as p50_duration_ms,
       round((percentile_cont(0.95) within group (order by r.duration_ms))::numeric, 1) as p95_duration_ms,
       max(r.started_at) as last_run_at,
       (array_agg(r.error_summary order by r.started_at desc)
          filter (where r.status <> 'success' and r.error_summary is not null))[1] as last_error
  from public.tool_runs r
 where r.started_at >= now() - interval '7 days'
 group by r.tool_id
 order by r.tool_id;
comment on view public.run_summary is
  'Per tool, over the runs of the last 7 days you may read: counts by status, failure_rate (errors and timeouts over runs, 0..1), median and 95th percentile duration, the last run and the last error.';
grant select on public.run_summary to authenticated, service_role;
