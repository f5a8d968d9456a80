-- whoami: the caller as the database sees it, for `kiwi whoami` and the SQL editor. What a
-- client believes it acts as and what RLS applies can differ (a token for another project,
-- a login that cannot take the role): this says what the database applies.

create function public.whoami() returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_uid        uuid := auth.uid();
  v_namespaces jsonb := '[]';
begin
  if v_uid is not null and kiwi_internal.caller_role() <> 'anon' then
    select coalesce(jsonb_agg(jsonb_build_object('namespace', m.namespace, 'role', m.role) order by m.namespace), '[]')
      into v_namespaces
      from public.namespace_members m
     where m.user_id = v_uid;
  end if;
  return jsonb_build_object(
    'role', kiwi_internal.caller_role(),
    'user_id', v_uid,
    'is_admin', kiwi_internal.caller_is_admin(),
    'identity', kiwi_internal.caller_identity(),
    'namespaces', v_namespaces);
end
$$;
comment on function public.whoami() is
  'Who is asking, as RLS sees it: {role, user_id (auth.uid()), is_admin, identity (as run records and audit rows name the caller), namespaces [{namespace, role}] the user belongs to}.';
revoke execute on function public.whoami() from public;
grant execute on function public.whoami() to anon, authenticated, service_role;
