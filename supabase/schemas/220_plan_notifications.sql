-- Runners may keep execution plans in memory, and must drop them the moment a plan
-- could have changed. Every change to the cached plans (a new latest version, a yank,
-- an executor or visibility change, a deleted tool: all rebuild or drop rows of
-- kiwi_internal.plan_cache) and every change of namespace membership (which decides who
-- may read private tools) notifies the channel `kiwi_plans`, delivered at commit.
-- The payload is empty: a listener drops everything it holds.

create function kiwi_internal.notify_plans_changed() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  perform pg_notify('kiwi_plans', '');
  return null;
end
$$;
revoke execute on function kiwi_internal.notify_plans_changed() from public;

create trigger plan_cache_changed
  after insert or update or delete or truncate on kiwi_internal.plan_cache
  for each statement execute function kiwi_internal.notify_plans_changed();

create trigger namespace_members_changed
  after insert or update or delete or truncate on public.namespace_members
  for each statement execute function kiwi_internal.notify_plans_changed();
