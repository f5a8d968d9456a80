-- Runners may remember that the gate (check_call) lets a call through untouched: no rate
-- limit counts it and no approval policy covers it. That stays true until a limit or a
-- policy changes, so every change to either notifies `kiwi_plans` too (the channel the
-- plan cache listens on, 220_plan_notifications.sql), delivered at commit, and
-- a listener forgets everything it remembered. Calls that some limit or policy covers are
-- never remembered: they go to check_call every time.

create trigger rate_limits_changed
  after insert or update or delete or truncate on public.rate_limits
  for each statement execute function kiwi_internal.notify_plans_changed();

create trigger approval_policies_changed
  after insert or update or delete or truncate on public.approval_policies
  for each statement execute function kiwi_internal.notify_plans_changed();
