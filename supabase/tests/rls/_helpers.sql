-- Helpers for the RLS matrix, included after ../_setup.sql (inside the test's
-- transaction, so they are rolled back with it). Both run as the current role.

-- pgTAP's functions are created by ../_setup.sql inside the transaction. If the
-- database's default privileges withhold PUBLIC's EXECUTE on new functions, the API
-- roles the matrix acts as could not even make an assertion: grant them pgTAP's own
-- functions, and nothing else (so a missing grant on anything the registry needs,
-- such as pg_trgm's similarity() behind search_tools, still shows).
do $$
declare
  v_fn regprocedure;
begin
  for v_fn in
    select d.objid::regprocedure from pg_catalog.pg_depend d
      join pg_catalog.pg_extension e on e.oid = d.refobjid
     where e.extname = 'pgtap' and d.classid = 'pg_catalog.pg_proc'::regclass and d.deptype = 'e'
  loop
    execute format('grant execute on function %s to anon, authenticated, service_role', v_fn);
  end loop;
end $$;

-- How many rows a write touched: RLS turns an update or delete the caller may not
-- make into one that touches nothing, without an error.
create function tests.rows_affected(p_sql text) returns int
  language plpgsql as $$
declare
  v_rows int;
begin
  execute p_sql;
  get diagnostics v_rows = row_count;
  return v_rows;
end $$;

-- The message of the error a statement raises (null when it succeeds), to check what
-- an error says, or does not say.
create function tests.error_of(p_sql text) returns text
  language plpgsql as $$
begin
  execute p_sql;
  return null;
exception when others then
  return sqlerrm;
end $$;

grant execute on function tests.rows_affected(text), tests.error_of(text) to anon, authenticated, service_role;
