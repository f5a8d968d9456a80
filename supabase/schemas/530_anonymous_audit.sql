-- Anonymous callers' audit rows. Every call leaves an audit row (240_audit.sql),
-- an anonymous one too: over HTTP a caller holding only the project's anon key may run public
-- tools, and the runner writes that call's row as that caller. So anon may write audit rows,
-- but only in its own name (caller 'role:anon', caller_role anon, whatever its claims say: an
-- anon key names nobody), and only so many: the anon key is public, and anyone holding it could
-- otherwise fill the table through record_audits without calling anything.
--
-- The bound: all anonymous callers together write at most registry_limits
-- .anon_audit_rows_per_minute rows per minute (a fixed window aligned to the minute; a batch
-- is written whole or refused whole, PT429, saying when to retry). A row is at most about
-- 3.5 KB (audit_problems bounds every field), so the table grows by at most that many rows
-- times 3.5 KB a minute from anonymous callers, whatever they send. The gate (check_call)
-- refuses an anonymous call, as rate limited, while the minute's rows are used up, so an
-- anonymous call that runs finds room for its row; the runner keeps a row refused for want
-- of room and writes it once the window turns (runner/harness/recorder.py). Signed-in
-- callers are not counted: their rows are theirs, and their calls have their own limits.
-- Deleting the registry_limits row lifts the bound.

insert into public.registry_limits (name, value, description) values
  ('anon_audit_rows_per_minute', '600',
   'audit rows all anonymous callers together may write per minute; the gate refuses anonymous calls once they are used up');

-- The current window's count: one row, moved to the current minute when it is taken from.
create table kiwi_internal.anon_audit_window (
  id            boolean primary key default true constraint anon_audit_window_one_row check (id),
  window_start  timestamptz not null,
  rows_written  int not null default 0 constraint anon_audit_window_rows_range check (rows_written >= 0)
);
comment on table kiwi_internal.anon_audit_window is
  'Audit rows anonymous callers wrote in the current minute (one row): the bound of registry_limits.anon_audit_rows_per_minute. Written only by anon_audit_budget.';
revoke all on table kiwi_internal.anon_audit_window from public, anon, authenticated, service_role;

-- Whether anonymous callers may write p_rows more audit rows this minute, and with p_take
-- true, take them (the window's row locked, so concurrent writers never pass the bound
-- together). p_take false only reads (the gate: no lock, nothing written). Answers
-- {allowed, rows, max_rows, window_resets_at, retry_after_s, reason}; allowed with no other
-- field when the registry_limits row is gone.
create function kiwi_internal.anon_audit_budget(p_rows int, p_take boolean) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_max     bigint := kiwi_internal.registry_limit('anon_audit_rows_per_minute');
  v_now     timestamptz := clock_timestamp();
  v_current timestamptz := date_trunc('minute', v_now);
  v_written int;
  v_start   timestamptz;
  v_retry   numeric;
begin
  if v_max is null then
    return jsonb_build_object('allowed', true);
  end if;
  if p_take then
    insert into kiwi_internal.anon_audit_window as w (id, window_start, rows_written) values (true, v_current, 0)
    on conflict (id) do update
      set window_start = greatest(w.window_start, excluded.window_start),
          rows_written = case when w.window_start < excluded.window_start then 0 else w.rows_written end
    returning w.window_start, w.rows_written into v_start, v_written;
  else
    select w.window_start, w.rows_written into v_start, v_written from kiwi_internal.anon_audit_window w;
    if v_start is null or v_start < v_current then
      v_start := v_current;
      v_written := 0;
    end if;
  end if;
  v_retry := round(extract(epoch from v_start + interval '1 minute' - v_now)::numeric, 3);
  if v_written + p_rows > v_max then
    return jsonb_build_object(
      'allowed', false, 'rows', v_written, 'max_rows', v_max, 'window_resets_at', v_start + interval '1 minute',
      'retry_after_s', v_retry,
      'reason', format('anonymous callers may write %s audit rows a minute together '
                       || '(registry_limits.anon_audit_rows_per_minute); %s are written this minute, and %s more do not fit; '
                       || 'retry in %s s, or sign in', v_max, v_written, p_rows, v_retry));
  end if;
  if p_take then
    update kiwi_internal.anon_audit_window w set rows_written = w.rows_written + p_rows where w.id;
    v_written := v_written + p_rows;
  end if;
  return jsonb_build_object('allowed', true, 'rows', v_written, 'max_rows', v_max,
                            'window_resets_at', v_start + interval '1 minute', 'retry_after_s', null);
end
$$;
-- Called by record_audit, record_audits and check_call (security definer) only.
revoke execute on function kiwi_internal.anon_audit_budget(int, boolean) from public, anon, authenticated, service_role;

-- Take p_rows from the anonymous budget, or raise PT429 saying when to retry (nothing taken).
create function kiwi_internal.anon_audit_take(p_rows int) returns void
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_budget jsonb := kiwi_internal.anon_audit_budget(p_rows, true);
begin
  if not (v_budget ->> 'allowed')::boolean then
    raise exception 'anonymous audit rows: %', v_budget ->> 'reason'
      using errcode = 'PT429', detail = v_budget::text,
            hint = 'nothing was recorded; write them again after retry_after_s';
  end if;
end
$$;
revoke execute on function kiwi_internal.anon_audit_take(int) from public, anon, authenticated, service_role;
