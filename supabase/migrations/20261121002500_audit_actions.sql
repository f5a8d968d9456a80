-- Audit every execute action, not only run and dry_run (issue 5: "every call, allowed or
-- refused, is a row"). Kiwi's MCP server now also audits create, update, publish, delete,
-- import, approve, deny and open_context: one row each, allowed or refused, with the
-- tool (and, when known, the version and content_hash it touched), the duration and the
-- outcome, and only the sha256 and size of the call's inputs (a manifest is never stored).
--
-- This widens audit_log.action and record_audit's validation (audit_problems) to those
-- actions. A delete without confirm=true (a preview) is audited as allowed with no outcome
-- and the reason "preview"; nothing was deleted.

alter table public.audit_log drop constraint audit_log_action_values;
alter table public.audit_log add constraint audit_log_action_values check (action in (
  'run', 'dry_run', 'create', 'update', 'publish', 'delete', 'import', 'approve', 'deny', 'open_context'));
comment on column public.audit_log.action is
  'The execute action: run, dry_run, create, update, publish, delete, import, approve, deny or open_context.';
comment on table public.audit_log is
  'One row per call made through Kiwi (every MCP execute action), allowed or refused, written through record_audit. Callers read their own rows, admins all. No parameter values or manifests: only their sha256 and size.';

-- What is wrong with an audit entry, each problem named by its field (action widened).
create or replace function kiwi_internal.audit_problems(p_entry jsonb) returns text[]
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
    'run', 'dry_run', 'create', 'update', 'publish', 'delete', 'import', 'approve', 'deny', 'open_context'];
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

comment on function public.record_audit(jsonb) is
  'Audit one call: {session_id, tool_id, decision (allowed|refused), reason (required when refused), directive, action (run|dry_run|create|update|publish|delete|import|approve|deny|open_context), server, version, content_hash, retry_after_s, duration_ms, outcome (success|error|timeout; none when refused), params_sha256, params_size, run_id, id, at}. The database sets who asked; unknown or bad fields are refused by name. Returns the row''s id.';
