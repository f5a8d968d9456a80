-- Namespaces own tools. A namespace has members; its owner adds and removes them.
-- The `public` namespace is the platform's: bare tool references (`hello_world`)
-- mean `public/hello_world`, and only admins publish there (members added to it do
-- not change that: see kiwi_internal.refuse_command_write, 160_publish.sql).
--
-- User ids are not for anon: the namespace directory is public, but who owns a
-- namespace (owner_id) is read only by signed-in users, who need it to know whom to ask
-- for membership and to manage members. Anon's grant is per column, without owner_id;
-- the same holds for every column that names a user (tools.owner_id,
-- tool_versions.published_by, tool_version_signatures.signed_by). Signed-in users read
-- those on the rows RLS shows them: a publisher is accountable to the registry's users.

create table public.namespaces (
  namespace    text primary key
               constraint namespace_format check (namespace ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  display_name text,
  description  text,
  owner_id     uuid,            -- null for platform namespaces such as `public`
  created_at   timestamptz not null default now()
);
comment on table public.namespaces is
  'Who owns tools. Bare references (hello_world) resolve in the `public` namespace; others are written namespace/tool_id.';

alter table public.namespaces enable row level security;
revoke all on table public.namespaces from public, anon, authenticated;
grant select (namespace, display_name, description, created_at) on table public.namespaces to anon;
grant select on table public.namespaces to authenticated;
grant insert (namespace, display_name, description, owner_id) on table public.namespaces to authenticated;
grant update (display_name, description) on table public.namespaces to authenticated;
grant delete on table public.namespaces to authenticated;
grant all on table public.namespaces to service_role;

create table public.namespace_members (
  namespace  text not null references public.namespaces (namespace) on delete cascade,
  user_id    uuid not null,
  role       text not null default 'member' constraint member_role check (role in ('owner', 'member')),
  created_at timestamptz not null default now(),
  primary key (namespace, user_id)
);
comment on table public.namespace_members is
  'Members may publish into their namespace and read its private tools; owners also manage members.';

alter table public.namespace_members enable row level security;
revoke all on table public.namespace_members from public, anon, authenticated;
grant select, delete on table public.namespace_members to authenticated;
grant insert (namespace, user_id, role) on table public.namespace_members to authenticated;
grant all on table public.namespace_members to service_role;
create index namespace_members_user_id_idx on public.namespace_members (user_id);

-- Membership lookups bypass RLS (security definer) so that policies on
-- namespace_members can use them without recursing into themselves.
create function kiwi_internal.my_namespaces(p_owned_only boolean default false) returns text[]
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
  v_out text[];
begin
  if v_uid is null then
    return '{}';
  end if;
  select coalesce(array_agg(m.namespace), '{}') into v_out
    from public.namespace_members m
   where m.user_id = v_uid and (not p_owned_only or m.role = 'owner');
  return v_out;
end
$$;
revoke execute on function kiwi_internal.my_namespaces(boolean) from public;
grant execute on function kiwi_internal.my_namespaces(boolean) to anon, authenticated, service_role;

create function kiwi_internal.can_publish_to(p_namespace text) returns boolean
  language sql stable
  set search_path = ''
as $$
  select kiwi_internal.caller_is_admin() or p_namespace = any (kiwi_internal.my_namespaces())
$$;
revoke execute on function kiwi_internal.can_publish_to(text) from public;
-- Called only from security definer code (publish, the lifecycle RPCs, signing).
grant execute on function kiwi_internal.can_publish_to(text) to service_role;

create policy "namespaces are a public directory"
  on public.namespaces for select to anon, authenticated
  using (true);
create policy "signed-in users create namespaces they own"
  on public.namespaces for insert to authenticated
  with check (owner_id = (select auth.uid()));
create policy "owners describe their namespaces"
  on public.namespaces for update to authenticated
  using (namespace = any ((select kiwi_internal.my_namespaces(true))::text[]))
  with check (namespace = any ((select kiwi_internal.my_namespaces(true))::text[]));
create policy "owners delete their namespaces"
  on public.namespaces for delete to authenticated
  using (namespace = any ((select kiwi_internal.my_namespaces(true))::text[]));

create policy "members see their namespaces' members"
  on public.namespace_members for select to authenticated
  using (user_id = (select auth.uid()) or namespace = any ((select kiwi_internal.my_namespaces())::text[]));
create policy "owners add members"
  on public.namespace_members for insert to authenticated
  with check (namespace = any ((select kiwi_internal.my_namespaces(true))::text[]));
create policy "owners remove members and members leave"
  on public.namespace_members for delete to authenticated
  using (namespace = any ((select kiwi_internal.my_namespaces(true))::text[])
         or user_id = (select auth.uid()));

-- The creator of a namespace becomes its first owner.
create function kiwi_internal.add_namespace_owner() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  if new.owner_id is not null then
    insert into public.namespace_members (namespace, user_id, role)
    values (new.namespace, new.owner_id, 'owner')
    on conflict (namespace, user_id) do update set role = 'owner';
  end if;
  return null;
end
$$;
revoke execute on function kiwi_internal.add_namespace_owner() from public;
create trigger namespaces_add_owner
  after insert on public.namespaces
  for each row execute function kiwi_internal.add_namespace_owner();

-- A namespace keeps at least one owner while it exists (removing the namespace itself
-- cascades to its members from a deeper trigger level and is not stopped here).
create function kiwi_internal.keep_an_owner() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  if pg_trigger_depth() = 1 and old.role = 'owner'
     and (tg_op = 'DELETE' or new.role <> 'owner')
     and not exists (select 1 from public.namespace_members m
                      where m.namespace = old.namespace and m.role = 'owner' and m.user_id <> old.user_id) then
    raise exception 'namespace "%" would have no owner left', old.namespace
      using errcode = '23514', hint = 'make another member an owner first, or delete the namespace';
  end if;
  return coalesce(new, old);
end
$$;
revoke execute on function kiwi_internal.keep_an_owner() from public;
create trigger namespace_members_keep_an_owner
  before update or delete on public.namespace_members
  for each row execute function kiwi_internal.keep_an_owner();

insert into public.namespaces (namespace, display_name, description)
values ('public', 'Public', 'The platform namespace: bare tool references resolve here.');
