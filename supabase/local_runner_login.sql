-- The runner's database login on the local stack, made like Supabase's `authenticator`:
-- it can log in and SET ROLE to anon, authenticated and service_role (runner/principal.py,
-- runner/registry/postgres.py), and nothing else. NOINHERIT: as itself, before any SET ROLE,
-- it holds none of those roles' grants, only what PUBLIC holds; not a superuser, and it
-- cannot bypass RLS. kiwi_internal.caller_is_admin() is false for it.
--
-- The password `kiwi_runner` is public on purpose, like the stack's postgres/postgres: the
-- stack listens on 127.0.0.1 only. A hosted project brings its own login (authenticator or
-- one made like it); never apply this file there.
--
-- Applied by scripts/stack after every reset, as the superuser. Roles outlive a reset, so
-- it alters the login when it is there already, back to exactly these attributes.
do $$
begin
  if not exists (select from pg_catalog.pg_roles where rolname = 'kiwi_runner') then
    create role kiwi_runner login noinherit nosuperuser nocreatedb nocreaterole nobypassrls noreplication
      password 'kiwi_runner';
  else
    alter role kiwi_runner login noinherit nosuperuser nocreatedb nocreaterole nobypassrls noreplication
      password 'kiwi_runner';
  end if;
end
$$;

-- Membership only, to SET ROLE to each (NOINHERIT keeps their grants off the login itself).
grant anon, authenticated, service_role to kiwi_runner;
