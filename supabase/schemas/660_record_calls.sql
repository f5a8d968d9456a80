-- Run records and audit rows in one call. The runner writes both behind its replies, in
-- batches per caller; each kind in a call of its own cost a round trip (and its client
-- work) per batch, so a batch of runs and the audit rows of the same calls go together.
-- Each half is record_runs's and record_audits's own (the same checks, messages and
-- inserts, as the caller the database knows), in one statement: all or nothing. An empty
-- or null half writes nothing; anonymous callers, who keep no run records and write audit
-- rows within a budget (530_anonymous_audit.sql), use record_audits.
create function public.record_calls(p_runs jsonb, p_audits jsonb) returns setof uuid
  language plpgsql volatile
  set search_path = ''
as $$
begin
  if coalesce(p_runs, '[]') not in ('[]', 'null') then
    return query select kiwi_internal.record_runs(p_runs);
  end if;
  if coalesce(p_audits, '[]') not in ('[]', 'null') then
    return query select kiwi_internal.record_audits(p_audits);
  end if;
end
$$;
comment on function public.record_calls(jsonb, jsonb) is
  'record_runs(p_runs) and record_audits(p_audits) in one call, all or nothing; returns the runs'' ids, then the audit rows'', each in order. An empty or null array writes nothing of its kind.';
revoke execute on function public.record_calls(jsonb, jsonb) from public;
grant execute on function public.record_calls(jsonb, jsonb) to authenticated, service_role;
