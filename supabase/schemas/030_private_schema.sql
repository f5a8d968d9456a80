-- kiwi_internal holds what must not be an API: security-definer helpers, trigger
-- functions and the write paths behind the public RPCs. It is never listed in the
-- API's exposed schemas, so nothing here is reachable over REST except through the
-- public functions that call it.
create schema if not exists kiwi_internal;
revoke all on schema kiwi_internal from public;
grant usage on schema kiwi_internal to anon, authenticated, service_role;

-- Nothing created from here on is granted by default: every grant is explicit and
-- stands next to its object.
alter default privileges in schema public revoke all on tables from public, anon, authenticated, service_role;
alter default privileges in schema public revoke all on sequences from public, anon, authenticated, service_role;
alter default privileges in schema public revoke execute on functions from public, anon, authenticated, service_role;
-- PostgreSQL grants EXECUTE on every new function to PUBLIC, and a per-schema default
-- cannot take a built-in grant away (a global one would also strip extensions added
-- later). So each kiwi_internal function revokes it next to its own grants.

-- The role the caller really acts as. Inside a security-definer function current_user
-- is the owner, but the `role` setting still holds what PostgREST (or a person) set.
-- plpgsql rather than SQL: these run on every resolution, and plpgsql keeps its plans.
create function kiwi_internal.caller_role() returns text
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_role text := current_setting('role');
begin
  return case when v_role = 'none' then session_user::text else v_role end;
end
$$;
revoke execute on function kiwi_internal.caller_role() from public;
grant execute on function kiwi_internal.caller_role() to anon, authenticated, service_role;

-- Admins: service_role, or a role that bypasses RLS anyway (the dashboard's postgres).
create function kiwi_internal.caller_is_admin() returns boolean
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_role text := current_setting('role');
begin
  if v_role in ('anon', 'authenticated') then
    return false;
  elsif v_role = 'service_role' then
    return true;
  elsif current_setting('is_superuser') = 'on' then
    -- Reports the caller even inside security-definer code, and cannot be SET.
    return true;
  elsif v_role = 'none' then
    v_role := session_user;
  end if;
  return coalesce((select r.rolsuper or r.rolbypassrls
                     from pg_catalog.pg_roles r where r.rolname = v_role), false);
end
$$;
revoke execute on function kiwi_internal.caller_is_admin() from public;
grant execute on function kiwi_internal.caller_is_admin() to anon, authenticated, service_role;
