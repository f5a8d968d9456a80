-- Approvals that resume, and that someone hears about. A queued run the gate holds for
-- approval waits off the queue (worker_wait_approval, 560_run_queue.sql). When a person
-- decides (decide_approval: SQL, `kiwi approve`, MCP), the run goes back on the queue by
-- itself and uses the approval once, or ends with the denial's reason; its events say each
-- decision. A policy may name a notifier: a tool queued, as an admin, each time a request
-- is filed under the policy, with {event, text, approval}; everything is a tool.

-- The approval as a notifier tool gets it: what, who, until when, and how to decide.
create function kiwi_internal.approval_notice(p_row public.approvals) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select jsonb_build_object(
    'event', 'approval_requested',
    'text', format('%s asks to run %s%s (policy %s); decide before %s: kiwi approve %s (or kiwi deny %s)',
                   p_row.requested_by, p_row.tool_id, coalesce('@' || p_row.version, ''), p_row.policy,
                   p_row.expires_at, p_row.id, p_row.id),
    'approval', jsonb_build_object(
      'id', p_row.id, 'tool_id', p_row.tool_id, 'version', p_row.version, 'namespace', p_row.namespace,
      'policy', p_row.policy, 'requested_by', p_row.requested_by, 'requested_at', p_row.requested_at,
      'expires_at', p_row.expires_at))
$$;
revoke execute on function kiwi_internal.approval_notice(public.approvals) from public;

-- The notifier of the request's policy, queued as the request is filed, unless the same call
-- (tool, parameters' sha256, requester) is still pending and was notified within the last
-- ten minutes: five identical calls once sent five notices. What became of
-- it is kept on the approval (notice), where `kiwi approvals` shows it: queued, not sent
-- (and which approval was), or failed and why (a notifier that cannot even be queued
-- never stops the request being filed); approval_notice_outcome below records how its run
-- ended. Taken under a lock on the call, so concurrent identical requests notify once.
create function kiwi_internal.approvals_notify() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_notifier text;
  v_same     public.approvals;
  v_run      public.queued_runs;
begin
  select p.notifier into v_notifier from public.approval_policies p
   where p.pattern = new.policy and p.notifier is not null;
  if v_notifier is null then
    return new;
  end if;
  perform pg_advisory_xact_lock(hashtext('kiwi.approval_notice'),
                                hashtext(concat_ws(' ', new.tool_id, new.params_sha256, new.requested_by)));
  select * into v_same from public.approvals a
   where a.requested_by = new.requested_by and a.tool_id = new.tool_id and a.params_sha256 = new.params_sha256
     and a.notice_run_id is not null and a.requested_at > clock_timestamp() - interval '10 minutes'
     and kiwi_internal.approval_status(a.status, a.expires_at) = 'pending'
   order by a.requested_at desc
   limit 1;
  if found then
    new.notice := format('not sent: the same call is waiting in approval %s, whose notice went out at %s',
                         v_same.id, v_same.requested_at);
    return new;
  end if;
  begin
    v_run := kiwi_internal.enqueue_run(
      jsonb_build_object('tool_id', v_notifier, 'params', kiwi_internal.approval_notice(new),
                         'session_id', 'approval-notifier'),
      '{"role": "service_role"}'::jsonb);
    new.notice_run_id := v_run.id;
    new.notice := format('queued: notifier %s (run %s)', v_notifier, v_run.id);
  exception when others then
    new.notice := left(format('failed: notifier %s could not be queued: %s', v_notifier, sqlerrm), 2000);
  end;
  return new;
end
$$;
revoke execute on function kiwi_internal.approvals_notify() from public;
create trigger approvals_notify
  before insert on public.approvals
  for each row execute function kiwi_internal.approvals_notify();

-- How a notifier's run ended, on the approval it told of: sent, or failed and why (a
-- notifier whose parameters do not fit, a webhook that answers 500, a tool that is gone).
create function kiwi_internal.approval_notice_outcome() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  update public.approvals a
     set notice = case when new.status = 'success' then format('sent: notifier %s (run %s)', new.tool_id, new.id)
                       else left(format('failed: notifier %s (run %s) ended %s: %s', new.tool_id, new.id, new.status,
                                        regexp_replace(coalesce(new.error, 'no reason given'), '\s+', ' ', 'g')),
                                 2000) end  -- one line, as `kiwi approvals` prints it
   where a.notice_run_id = new.id;
  return null;
end
$$;
revoke execute on function kiwi_internal.approval_notice_outcome() from public;
create trigger approval_notice_outcome
  after update of status on public.queued_runs
  for each row when (new.session_id = 'approval-notifier' and new.finished_at is not null and old.finished_at is null)
  execute function kiwi_internal.approval_notice_outcome();

-- A decision reaches the runs waiting for it: approved, back on the queue; denied, ended.
create function kiwi_internal.approvals_resume() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_run public.queued_runs;
  v_why text;
begin
  for v_run in select * from public.queued_runs r
                where r.approval_id = new.id and r.status = 'waiting_approval' for update loop
    if new.status = 'approved' then
      update public.queued_runs r
         set status = 'queued', msg_id = (select pgmq.send('kiwi_runs', jsonb_build_object('run_id', r.id)))
       where r.id = v_run.id;
      insert into public.queued_run_events (run_id, kind, message)
      values (v_run.id, 'status', format('approved by %s%s', new.decided_by, coalesce(': ' || new.reason, '')));
      perform pg_notify('kiwi_runs', v_run.id::text);
    else
      v_why := format('denied by %s%s', new.decided_by, coalesce(': ' || new.reason, ''));
      perform kiwi_internal.end_queued_run(v_run.id, 'error', v_why,
                                           jsonb_build_object('status', 'error', 'error', v_why));
    end if;
  end loop;
  return null;
end
$$;
revoke execute on function kiwi_internal.approvals_resume() from public;
create trigger approvals_resume
  after update of status on public.approvals
  for each row when (new.status in ('approved', 'denied') and old.status = 'pending')
  execute function kiwi_internal.approvals_resume();

-- Runs whose approval expired undecided end, saying so (queue_tick calls this).
create function kiwi_internal.end_runs_of_expired_approvals() returns int
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_run public.queued_runs;
  v_n   int := 0;
begin
  for v_run in select r.* from public.queued_runs r
                 join public.approvals a on a.id = r.approval_id
                where r.status = 'waiting_approval'
                  and kiwi_internal.approval_status(a.status, a.expires_at) = 'expired'
                  for update of r skip locked loop
    perform kiwi_internal.end_queued_run(v_run.id, 'error',
      format('approval %s expired before anyone decided it', v_run.approval_id),
      jsonb_build_object('status', 'error', 'error', 'the approval expired before anyone decided it'));
    v_n := v_n + 1;
  end loop;
  return v_n;
end
$$;
revoke execute on function kiwi_internal.end_runs_of_expired_approvals() from public;
