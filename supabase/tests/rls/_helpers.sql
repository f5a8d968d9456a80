-- Helpers for the RLS matrix, included after ../_setup.sql (inside the test's
-- transaction, so they are rolled back with it). Both run as the current role.

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
