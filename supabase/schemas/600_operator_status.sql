-- What an operator's probes read (`kiwi serve`'s /readyz and /metrics): that the schema is
-- current (the function exists, so the migrations that made it have run) and, for admins, how
-- deep the run queue is by status. Anyone may ask: others learn only that the schema is there.
create function public.operator_status() returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  if not kiwi_internal.caller_is_admin() then
    return jsonb_build_object('schema', 'current');
  end if;
  return jsonb_build_object(
    'schema', 'current',
    'queue', (select coalesce(jsonb_object_agg(d.status, d.runs), '{}'::jsonb) from public.run_queue_depth d));
end
$$;
comment on function public.operator_status() is
  'The schema is current; for admins also the open queued runs by status (for /readyz and /metrics).';
revoke execute on function public.operator_status() from public;
grant execute on function public.operator_status() to anon, authenticated, service_role;
