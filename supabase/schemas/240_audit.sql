-- Audit: one row per call made through Kiwi (every MCP execute action: run, dry_run,
-- create, update, publish, yank, delete, import, approve, deny, open_context; and every
-- run and dry run of `kiwi run`, threads and directives, through the same gate), allowed
-- or refused, written by record_audit. A delete without confirm=true (a preview) is
-- audited as allowed with no outcome and the reason "preview". A row says which tool (and the exact version and content_hash it
-- resolved to), whether the call was allowed, and if not why, in which session and
-- under which directive, how long it took and how it ended. Parameter values are never
-- stored: only their sha256 and size. Callers read their own rows, admins all of them;
-- rows are never updated, and service_role deletes old ones. Anonymous callers write rows
-- too, in the name role:anon and within a budget per minute
-- (530_anonymous_audit.sql).
--
-- Two questions for the dashboard: "what did this session do" (session_activity) and
-- "what did this tool look like when it ran" (audited_tool_versions: each audited call
-- with the manifest of the exact version it ran, found by its content_hash).

create table public.audit_log (
  id             uuid primary key default gen_random_uuid(),
  at             timestamptz not null default clock_timestamp(),
  session_id     text not null
                 constraint audit_log_session_id_length check (char_length(session_id) between 1 and 200),
  directive      text constraint audit_log_directive_length check (char_length(directive) <= 300),
  action         text not null default 'run'
                 constraint audit_log_action_values check (action in (
                   'run', 'dry_run', 'create', 'update', 'publish', 'yank', 'deprecate', 'delete', 'import',
                   'approve', 'deny', 'open_context')),
  tool_id        text not null
                 constraint audit_log_tool_id_length check (char_length(tool_id) between 1 and 300),
  server         text constraint audit_log_server_length check (char_length(server) <= 300),
  version        text constraint audit_log_version_length check (char_length(version) <= 128),
  -- the hashes checked as a length and a plain class: a regular expression with a counted
  -- repetition ({64}) costs some 12 µs a row, and every call writes a row
  content_hash   text constraint audit_log_content_hash_format
                 check (char_length(content_hash) = 64 and content_hash ~ '^[0-9a-f]+$'),
  decision       text not null
                 constraint audit_log_decision_values check (decision in ('allowed', 'refused')),
  reason         text constraint audit_log_reason_length check (char_length(reason) <= 2000),
  retry_after_s  numeric constraint audit_log_retry_after_s_range check (retry_after_s >= 0),
  duration_ms    double precision
                 constraint audit_log_duration_ms_range check (duration_ms >= 0 and duration_ms < 'Infinity'),
  outcome        text constraint audit_log_outcome_values check (outcome in ('success', 'error', 'timeout')),
  params_sha256  text constraint audit_log_params_sha256_format
                 check (char_length(params_sha256) = 64 and params_sha256 ~ '^[0-9a-f]+$'),
  params_size    int constraint audit_log_params_size_range check (params_size >= 0),
  run_id         uuid,
  caller         text not null,
  caller_role    text not null,
  constraint audit_log_refusals_have_a_reason check (decision = 'allowed' or reason is not null),
  constraint audit_log_refusals_did_not_run check (decision = 'allowed' or outcome is null)
);
comment on table public.audit_log is
  'One row per call made through Kiwi (every MCP execute action), allowed or refused, written through record_audit. Callers read their own rows, admins all. No parameter values or manifests: only their sha256 and size.';
comment on column public.audit_log.action is
  'The execute action: run, dry_run, create, update, publish, delete, import, approve, deny or open_context.';
comment on column public.audit_log.session_id is 'The session the call came in (an MCP server instance or session).';
comment on column public.audit_log.directive is 'The directive the agent was following, when known.';
comment on column public.audit_log.tool_id is 'The tool as requested or resolved (public/x is stored as x); not a foreign key: audit rows outlive tools.';
comment on column public.audit_log.server is 'The mcp_server the tool runs on (for mcp_tool calls), as rate limits name it.';
comment on column public.audit_log.version is 'The exact version the call resolved to (null when it could not be resolved).';
comment on column public.audit_log.content_hash is 'The content_hash of that version: what the tool looked like when it ran.';
comment on column public.audit_log.decision is 'allowed, or refused (reason says why: a rate limit, a permission ...).';
comment on column public.audit_log.reason is 'Why a call was refused (required then), or a note on an allowed one.';
comment on column public.audit_log.retry_after_s is 'For a call refused by a rate limit: seconds until it may be retried.';
comment on column public.audit_log.outcome is 'How an allowed call ended: success, error or timeout; null for a refused one.';
comment on column public.audit_log.params_size is 'Size in bytes of the serialised parameters.';
comment on column public.audit_log.run_id is 'The tool_runs row of the call, when one was recorded.';
comment on column public.audit_log.caller is 'Set by the database (kiwi_internal.caller_identity()): a user id, or role:<role> without a JWT subject; role:anon for every anonymous caller, whatever its claims say.';
comment on column public.audit_log.caller_role is 'The role the caller acted as, set by the database.';

alter table public.audit_log enable row level security;
revoke all on table public.audit_log from public, anon, authenticated, service_role;
grant select on table public.audit_log to authenticated;
grant select, delete on table public.audit_log to service_role;
comment on column public.audit_log.params_sha256 is 'sha256 (hex) of the parameters as the runner serialised them; never the values.';

create index audit_log_session_id_at_idx on public.audit_log (session_id, at, id);
create index audit_log_caller_at_idx on public.audit_log (caller, at desc);
create index audit_log_tool_id_at_idx on public.audit_log (tool_id, at desc);
create index audit_log_content_hash_idx on public.audit_log (content_hash);
create index audit_log_at_idx on public.audit_log (at desc);

create policy "callers read their own audit rows, admins all"
  on public.audit_log for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete audit rows"
  on public.audit_log for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- Append-only, for everyone: a call that was made does not change afterwards.
create function kiwi_internal.audit_log_append_only() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  raise exception 'the audit log is append-only: row % cannot be changed', old.id
    using errcode = '23514', hint = 'record a new audit row instead; service_role may delete old rows';
end
$$;
revoke execute on function kiwi_internal.audit_log_append_only() from public;
create trigger audit_log_append_only
  before update on public.audit_log
  for each row execute function kiwi_internal.audit_log_append_only();

-- What is wrong with an audit entry, each problem named by its field.
create function kiwi_internal.audit_problems(p_entry jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p     text[] := '{}';
  v_key text;
  v_max int;
  v_allowed constant text[] := array[
    'id', 'at', 'session_id', 'directive', 'action', 'tool_id', 'server', 'version', 'content_hash',
    'decision', 'reason', 'retry_after_s', 'duration_ms', 'outcome', 'params_sha256', 'params_size', 'run_id'];
  v_actions constant text[] := array[
    'run', 'dry_run', 'create', 'update', 'publish', 'yank', 'deprecate', 'delete', 'import', 'approve', 'deny',
    'open_context'];
begin
  if p_entry is null or jsonb_typeof(p_entry) <> 'object' then
    return array['entry: must be a JSON object'];
  end if;

  for v_key in select jsonb_object_keys(p_entry) loop
    if not v_key = any (v_allowed) then
      p := p || format('%s: unknown field (allowed: %s)', v_key, array_to_string(v_allowed, ', '));
    end if;
  end loop;

  if jsonb_typeof(p_entry -> 'tool_id') is distinct from 'string'
     or kiwi_internal.normalize_ref(p_entry ->> 'tool_id') = '' then
    p := p || 'tool_id: required, the tool reference that was called'::text;
  elsif char_length(kiwi_internal.normalize_ref(p_entry ->> 'tool_id')) > 300 or (p_entry ->> 'tool_id') ~ '[[:cntrl:]]' then
    p := p || 'tool_id: at most 300 characters, no control characters'::text;
  end if;
  if jsonb_typeof(p_entry -> 'session_id') is distinct from 'string'
     or btrim(p_entry ->> 'session_id') = '' or char_length(p_entry ->> 'session_id') > 200
     or (p_entry ->> 'session_id') ~ '[[:cntrl:]]' then
    p := p || 'session_id: required, at most 200 characters, no control characters'::text;
  end if;
  if jsonb_typeof(p_entry -> 'decision') is distinct from 'string'
     or (p_entry ->> 'decision') not in ('allowed', 'refused') then
    p := p || format('decision: required, one of allowed, refused (got %s)',
                     coalesce((p_entry -> 'decision')::text, 'nothing'));
  elsif p_entry ->> 'decision' = 'refused' then
    if jsonb_typeof(p_entry -> 'reason') is distinct from 'string' or btrim(p_entry ->> 'reason') = '' then
      p := p || 'reason: required when the decision is refused'::text;
    end if;
    if jsonb_typeof(p_entry -> 'outcome') not in ('null') then
      p := p || 'outcome: a refused call did not run, so it has no outcome'::text;
    end if;
  end if;
  if jsonb_typeof(p_entry -> 'action') not in ('string', 'null')
     or (jsonb_typeof(p_entry -> 'action') = 'string' and not (p_entry ->> 'action') = any (v_actions)) then
    p := p || format('action: one of %s', array_to_string(v_actions, ', '));
  end if;
  if jsonb_typeof(p_entry -> 'outcome') not in ('string', 'null')
     or (jsonb_typeof(p_entry -> 'outcome') = 'string'
         and (p_entry ->> 'outcome') not in ('success', 'error', 'timeout')) then
    p := p || 'outcome: one of success, error, timeout'::text;
  end if;

  foreach v_key in array array['id', 'run_id'] loop
    if jsonb_typeof(p_entry -> v_key) not in ('string', 'null')
       or (jsonb_typeof(p_entry -> v_key) = 'string'
           and (p_entry ->> v_key) !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') then
      p := p || format('%s: must be a uuid', v_key);
    end if;
  end loop;

  -- optional strings (null is the same as absent)
  foreach v_key in array array['directive', 'server', 'version', 'reason'] loop
    if jsonb_typeof(p_entry -> v_key) not in ('string', 'null') then
      p := p || format('%s: must be a string', v_key);
    else
      v_max := (jsonb_build_object('version', 128, 'reason', 2000) ->> v_key)::int;
      if char_length(p_entry ->> v_key) > coalesce(v_max, 300) then
        p := p || format('%s: at most %s characters', v_key, coalesce(v_max, 300));
      end if;
    end if;
  end loop;
  foreach v_key in array array['content_hash', 'params_sha256'] loop
    if jsonb_typeof(p_entry -> v_key) not in ('string', 'null')
       or (jsonb_typeof(p_entry -> v_key) = 'string' and (p_entry ->> v_key) !~ '^[0-9a-f]{64}$') then
      p := p || format('%s: must be a sha256 in lower-case hex (64 characters)', v_key);
    end if;
  end loop;

  -- numbers
  foreach v_key in array array['duration_ms', 'retry_after_s'] loop
    if jsonb_typeof(p_entry -> v_key) not in ('number', 'null')
       or (jsonb_typeof(p_entry -> v_key) = 'number' and (p_entry ->> v_key)::numeric not between 0 and 1e15) then
      p := p || format('%s: must be a number, 0 or more', v_key);
    end if;
  end loop;
  if jsonb_typeof(p_entry -> 'params_size') not in ('number', 'null')
     or (jsonb_typeof(p_entry -> 'params_size') = 'number'
         and ((p_entry ->> 'params_size')::numeric <> trunc((p_entry ->> 'params_size')::numeric)
              or (p_entry ->> 'params_size')::numeric not between 0 and 2147483647)) then
    p := p || 'params_size: must be a whole number of bytes, 0 or more'::text;
  end if;

  if jsonb_typeof(p_entry -> 'at') not in ('string', 'null')
     or (jsonb_typeof(p_entry -> 'at') = 'string' and not kiwi_internal.is_finite_timestamptz(p_entry ->> 'at')) then
    p := p || 'at: must be a timestamp such as "2026-11-21T10:00:00Z"'::text;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.audit_problems(jsonb) from public;
-- Called by record_audit (security definer) only.
grant execute on function kiwi_internal.audit_problems(jsonb) to service_role;

create function kiwi_internal.record_audit(p_entry jsonb) returns uuid
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_problems text[] := kiwi_internal.audit_problems(p_entry);
  v_role     text := kiwi_internal.caller_role();
  v_id       uuid;
begin
  if cardinality(v_problems) > 0 then
    raise exception 'invalid audit entry: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was recorded';
  end if;
  if v_role = 'anon' then   -- within the anonymous budget (530_anonymous_audit.sql), or PT429
    perform kiwi_internal.anon_audit_take(1);
  end if;

  insert into public.audit_log (id, at, session_id, directive, action, tool_id, server, version, content_hash,
                                decision, reason, retry_after_s, duration_ms, outcome, params_sha256,
                                params_size, run_id, caller, caller_role)
  values (coalesce((p_entry ->> 'id')::uuid, gen_random_uuid()),
          coalesce((p_entry ->> 'at')::timestamptz, clock_timestamp()),
          p_entry ->> 'session_id', p_entry ->> 'directive', coalesce(p_entry ->> 'action', 'run'),
          kiwi_internal.normalize_ref(p_entry ->> 'tool_id'), kiwi_internal.normalize_ref(p_entry ->> 'server'),
          p_entry ->> 'version', p_entry ->> 'content_hash',
          p_entry ->> 'decision', p_entry ->> 'reason', (p_entry ->> 'retry_after_s')::numeric,
          (p_entry ->> 'duration_ms')::double precision, p_entry ->> 'outcome',
          p_entry ->> 'params_sha256', (p_entry ->> 'params_size')::int, (p_entry ->> 'run_id')::uuid,
          case when v_role = 'anon' then 'role:anon' else kiwi_internal.caller_identity() end, v_role)
  returning id into v_id;
  return v_id;
end
$$;
revoke execute on function kiwi_internal.record_audit(jsonb) from public;
-- Writes only in the caller's name (anon: role:anon, within its budget).
grant execute on function kiwi_internal.record_audit(jsonb) to anon, authenticated, service_role;

create function public.record_audit(p_entry jsonb) returns uuid
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.record_audit(p_entry);
end
$$;
comment on function public.record_audit(jsonb) is
  'Audit one call: {session_id, tool_id, decision (allowed|refused), reason (required when refused), directive, action (run|dry_run|create|update|publish|delete|import|approve|deny|open_context), server, version, content_hash, retry_after_s, duration_ms, outcome (success|error|timeout; none when refused), params_sha256, params_size, run_id, id, at}. The database sets who asked (anonymous callers: role:anon, within registry_limits.anon_audit_rows_per_minute, else PT429); unknown or bad fields are refused by name. Returns the row''s id.';
revoke execute on function public.record_audit(jsonb) from public;
grant execute on function public.record_audit(jsonb) to anon, authenticated, service_role;

-- Many entries in one call, all or nothing, in one INSERT (the runner writes an audit row
-- for every call, in batches behind the replies: a statement per row cost ~120 µs each).
-- Working out an entry's problems (audit_problems, a function call per entry) cost more
-- than writing it, so a batch is screened first, in one statement, for exactly what
-- audit_problems accepts; only a batch the screen fails (or a value it cannot even cast)
-- is checked entry by entry, for the messages audit_problems gives.
--
-- The entries are written in the name of p_caller, as p_role: for record_audits (the caller
-- of the session) and for worker_finish (the caller who queued the run, in the transaction
-- that ends it). Anonymous rows are taken from the minute's budget.
create function kiwi_internal.write_audits(p_entries jsonb, p_caller text, p_role text) returns setof uuid
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_bad    text[];
  v_plain  boolean;
begin
  if jsonb_typeof(p_entries) is distinct from 'array' then
    raise exception 'invalid audit entries: must be a JSON array of audit entries' using errcode = '22023';
  end if;
  begin
    select coalesce(bool_and(coalesce(
             jsonb_typeof(e.entry) = 'object'
             and (e.entry - array['id', 'at', 'session_id', 'directive', 'action', 'tool_id', 'server', 'version',
                                  'content_hash', 'decision', 'reason', 'retry_after_s', 'duration_ms', 'outcome',
                                  'params_sha256', 'params_size', 'run_id']) = '{}'::jsonb
             and jsonb_typeof(e.entry -> 'tool_id') = 'string'
             and kiwi_internal.normalize_ref(e.entry ->> 'tool_id') <> ''
             and char_length(kiwi_internal.normalize_ref(e.entry ->> 'tool_id')) <= 300
             and (e.entry ->> 'tool_id') !~ '[[:cntrl:]]'
             and jsonb_typeof(e.entry -> 'session_id') = 'string'
             and btrim(e.entry ->> 'session_id') <> '' and char_length(e.entry ->> 'session_id') <= 200
             and (e.entry ->> 'session_id') !~ '[[:cntrl:]]'
             and jsonb_typeof(e.entry -> 'decision') = 'string'
             and ((e.entry ->> 'decision') = 'allowed'
                  or ((e.entry ->> 'decision') = 'refused'
                      and jsonb_typeof(e.entry -> 'reason') = 'string' and btrim(e.entry ->> 'reason') <> ''
                      and coalesce(jsonb_typeof(e.entry -> 'outcome'), 'null') = 'null'))
             and case coalesce(jsonb_typeof(e.entry -> 'action'), 'null') when 'null' then true
                   when 'string' then (e.entry ->> 'action') in ('run', 'dry_run', 'create', 'update', 'publish',
                     'yank', 'deprecate', 'delete', 'import', 'approve', 'deny', 'open_context')
                   else false end
             and case coalesce(jsonb_typeof(e.entry -> 'outcome'), 'null') when 'null' then true
                   when 'string' then (e.entry ->> 'outcome') in ('success', 'error', 'timeout') else false end
             and case coalesce(jsonb_typeof(e.entry -> 'id'), 'null') when 'null' then true
                   when 'string' then (e.entry ->> 'id') like '________-____-____-____-____________'
                                      and (e.entry ->> 'id')::uuid is not null
                   else false end
             and case coalesce(jsonb_typeof(e.entry -> 'run_id'), 'null') when 'null' then true
                   when 'string' then (e.entry ->> 'run_id') like '________-____-____-____-____________'
                                      and (e.entry ->> 'run_id')::uuid is not null
                   else false end
             and case coalesce(jsonb_typeof(e.entry -> 'directive'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'directive') <= 300 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'server'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'server') <= 300 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'version'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'version') <= 128 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'reason'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'reason') <= 2000 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'content_hash'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'content_hash') = 64
                                      and (e.entry ->> 'content_hash') ~ '^[0-9a-f]+$' else false end
             and case coalesce(jsonb_typeof(e.entry -> 'params_sha256'), 'null') when 'null' then true
                   when 'string' then char_length(e.entry ->> 'params_sha256') = 64
                                      and (e.entry ->> 'params_sha256') ~ '^[0-9a-f]+$' else false end
             and case coalesce(jsonb_typeof(e.entry -> 'duration_ms'), 'null') when 'null' then true
                   when 'number' then (e.entry ->> 'duration_ms')::numeric between 0 and 1e15 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'retry_after_s'), 'null') when 'null' then true
                   when 'number' then (e.entry ->> 'retry_after_s')::numeric between 0 and 1e15 else false end
             and case coalesce(jsonb_typeof(e.entry -> 'params_size'), 'null') when 'null' then true
                   when 'number' then (e.entry ->> 'params_size')::numeric = trunc((e.entry ->> 'params_size')::numeric)
                                      and (e.entry ->> 'params_size')::numeric between 0 and 2147483647
                   else false end
             and case coalesce(jsonb_typeof(e.entry -> 'at'), 'null') when 'null' then true
                   when 'string' then isfinite((e.entry ->> 'at')::timestamptz) else false end, false)), true)
      into v_plain
      from jsonb_array_elements(p_entries) as e(entry);
  exception when data_exception then  -- a value the screen cannot cast: audit_problems names it
    v_plain := false;
  end;
  if v_plain is not true then
    select p.problems into v_bad
      from jsonb_array_elements(p_entries) with ordinality as e(entry, n)
      cross join lateral (select kiwi_internal.audit_problems(e.entry) as problems) p
     where cardinality(p.problems) > 0
     order by e.n
     limit 1;
  end if;
  if v_bad is not null then
    raise exception 'invalid audit entry: %', array_to_string(v_bad, '; ')
      using errcode = '22023', detail = to_jsonb(v_bad)::text,
            hint = 'fix the fields named above; nothing was recorded';
  end if;
  if p_role = 'anon' then   -- within the anonymous budget (530_anonymous_audit.sql), or PT429
    perform kiwi_internal.anon_audit_take(jsonb_array_length(p_entries));
  end if;
  return query
  insert into public.audit_log (id, at, session_id, directive, action, tool_id, server, version, content_hash,
                                decision, reason, retry_after_s, duration_ms, outcome, params_sha256,
                                params_size, run_id, caller, caller_role)
  select coalesce((e.entry ->> 'id')::uuid, gen_random_uuid()),
         coalesce((e.entry ->> 'at')::timestamptz, clock_timestamp()),
         e.entry ->> 'session_id', e.entry ->> 'directive', coalesce(e.entry ->> 'action', 'run'),
         kiwi_internal.normalize_ref(e.entry ->> 'tool_id'), kiwi_internal.normalize_ref(e.entry ->> 'server'),
         e.entry ->> 'version', e.entry ->> 'content_hash',
         e.entry ->> 'decision', e.entry ->> 'reason', (e.entry ->> 'retry_after_s')::numeric,
         (e.entry ->> 'duration_ms')::double precision, e.entry ->> 'outcome',
         e.entry ->> 'params_sha256', (e.entry ->> 'params_size')::int, (e.entry ->> 'run_id')::uuid,
         case when p_role = 'anon' then 'role:anon' else p_caller end, p_role
    from jsonb_array_elements(p_entries) with ordinality as e(entry, n)
   order by e.n
  returning id;
end
$$;
-- It trusts p_caller and p_role: only security-definer functions that read them call it.
revoke execute on function kiwi_internal.write_audits(jsonb, text, text) from public, anon, authenticated, service_role;

create function kiwi_internal.record_audits(p_entries jsonb) returns setof uuid
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_role text := kiwi_internal.caller_role();
begin
  return query select kiwi_internal.write_audits(
    p_entries, case when v_role = 'anon' then 'role:anon' else kiwi_internal.caller_identity() end, v_role);
end
$$;
revoke execute on function kiwi_internal.record_audits(jsonb) from public;
-- Writes rows only in the caller's name (anon: role:anon, within its budget).
grant execute on function kiwi_internal.record_audits(jsonb) to anon, authenticated, service_role;

create function public.record_audits(p_entries jsonb) returns setof uuid
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return query select kiwi_internal.record_audits(p_entries);
end
$$;
comment on function public.record_audits(jsonb) is
  'record_audit for a JSON array of entries in one call, in order; returns their ids. One bad entry refuses them all, and so does an anonymous batch that does not fit in the minute''s budget (PT429, saying when to retry).';
revoke execute on function public.record_audits(jsonb) from public;
grant execute on function public.record_audits(jsonb) to anon, authenticated, service_role;

-- Views for the dashboard. security_invoker: each reader sees only the rows RLS lets
-- them read (their own; admins all), and only the tool versions they may see.

-- What did this session do? `select * from session_activity where session_id = '...'`
create view public.session_activity with (security_invoker = true) as
select a.session_id,
       row_number() over (partition by a.session_id order by a.at, a.id) as seq,
       a.at, a.action, a.tool_id, a.version, a.decision, a.reason, a.retry_after_s, a.outcome,
       round(a.duration_ms::numeric, 1) as duration_ms, a.directive, a.server, a.content_hash,
       a.params_sha256, a.params_size, a.caller, a.id
  from public.audit_log a
 order by a.session_id, a.at, a.id;
comment on view public.session_activity is
  'Every call of each session you may read, in order (seq): what was called, at which version, whether it was allowed, how it ended.';
grant select on public.session_activity to authenticated, service_role;

-- What did this tool look like when it ran? The manifest of the exact version each
-- audited call resolved to, found by its content_hash (null when that version is gone
-- or not visible to the reader).
create view public.audited_tool_versions with (security_invoker = true) as
select a.id as audit_id, a.at, a.session_id, a.tool_id, a.version, a.content_hash, a.decision, a.outcome,
       v.manifest, v.published_at, v.is_yanked, v.is_deprecated,
       (v.id is not null) as version_found
  from public.audit_log a
  left join lateral (
        select tv.id, tv.manifest, tv.published_at, tv.is_yanked, tv.is_deprecated
          from public.tool_versions tv
          join public.tools t on t.id = tv.tool_uuid
         where tv.content_hash = a.content_hash
         order by (t.ref = a.tool_id) desc, tv.published_at
         limit 1) v on true
 order by a.at desc, a.id;
comment on view public.audited_tool_versions is
  'Each audited call you may read with the manifest of the exact version it ran (joined on content_hash): what the tool looked like when it ran.';
grant select on public.audited_tool_versions to authenticated, service_role;
