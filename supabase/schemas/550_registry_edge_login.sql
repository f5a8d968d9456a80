-- The registry edge function's database login (supabase/functions/registry): a role that can
-- become `anon` and nothing else. The function runs every query as anon (public tools only,
-- RLS applied), so it needs no more; it never connects as the project's superuser-level
-- login (SUPABASE_DB_URL) and refuses a login that is a superuser or bypasses RLS.
--
-- NOLOGIN here: a migration holds no password. To deploy the function, an admin gives it one
-- once and stores the URL as the function's secret:
--   alter role kiwi_registry_edge login password '<a new secret>';
--   supabase secrets set KIWI_EDGE_DATABASE_URL='postgresql://kiwi_registry_edge.<ref>:<secret>@<pooler host>:6543/postgres'
-- Roles are cluster-wide and outlive a reset: made when missing, else left as an admin set it.
do $$
begin
  if not exists (select from pg_catalog.pg_roles where rolname = 'kiwi_registry_edge') then
    create role kiwi_registry_edge nologin noinherit nosuperuser nocreatedb nocreaterole nobypassrls noreplication;
  end if;
end
$$;

-- Membership only, to SET ROLE anon (NOINHERIT keeps anon's grants off the login itself).
grant anon to kiwi_registry_edge;
