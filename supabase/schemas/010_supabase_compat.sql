-- What a Supabase project provides and an embedded PostgreSQL lacks: the API roles and
-- the auth helpers that read PostgREST's request JWT claims. `supabase db reset --remote`
-- drops every non-system schema but keeps roles, so each piece is created only where it
-- is absent; on a real Supabase project this migration changes nothing. The auth
-- functions are defined as Supabase defines them, without a SET clause, so that
-- PostgreSQL can inline them into policies (their bodies name only pg_catalog).

do $$
begin
  if not exists (select from pg_catalog.pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
end
$$;

create schema if not exists auth;

do $$
begin
  if to_regprocedure('auth.jwt()') is null then
    -- PostgREST sets `request.jwt.claims` (JSON); older versions set `request.jwt.claim`.
    create function auth.jwt() returns jsonb
      language sql stable
    as $fn$
      select coalesce(
        nullif(current_setting('request.jwt.claim', true), ''),
        nullif(current_setting('request.jwt.claims', true), '')
      )::jsonb
    $fn$;
    grant usage on schema auth to anon, authenticated, service_role;
    grant execute on function auth.jwt() to anon, authenticated, service_role;
  end if;

  if to_regprocedure('auth.uid()') is null then
    create function auth.uid() returns uuid
      language sql stable
    as $fn$
      select coalesce(
        nullif(current_setting('request.jwt.claim.sub', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
      )::uuid
    $fn$;
    grant execute on function auth.uid() to anon, authenticated, service_role;
  end if;

  if to_regprocedure('auth.role()') is null then
    create function auth.role() returns text
      language sql stable
    as $fn$
      select coalesce(
        nullif(current_setting('request.jwt.claim.role', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
      )::text
    $fn$;
    grant execute on function auth.role() to anon, authenticated, service_role;
  end if;
end
$$;
