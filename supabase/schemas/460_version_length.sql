-- A version is at most as long as a call can name it. Every call of a version is named by
-- check_call and admit_call, its run record (tool_runs.version) and its audit row
-- (audit_log.version), approvals (approvals.version), all at most 128 characters, and the
-- runner cuts what it records to the same (runner/mcp_server/meta/audit.py). A longer version was
-- published, became latest, and then no call could ever run it ("version: must be a string
-- of at most 128 characters"). So publish refuses it (manifest_base_problems,
-- 160_publish.sql, says which field and the maximum) and tool_versions holds the
-- same rule as a constraint.
--
-- A numeric pre-release identifier is ordered by semver_key padded to 20 digits
-- (050_semver.sql): one of more digits would be cut and two versions could tie,
-- so it is refused too.

-- The one SQL constant of a version's length (128 characters, as the columns above hold).
create function kiwi_internal.version_max_chars() returns int
  language sql immutable parallel safe
  set search_path = ''
as $$
  select 128
$$;
revoke execute on function kiwi_internal.version_max_chars() from public;
grant execute on function kiwi_internal.version_max_chars() to anon, authenticated, service_role;

-- What is wrong with a version's length, before it is read as a semantic version (a
-- 100,000-character version is not repeated in the message); null when nothing.
create function kiwi_internal.version_length_problem(p_version text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case
    when char_length(p_version) > kiwi_internal.version_max_chars() then
      format('version: %s characters, more than the maximum of %s (a call, its run record and its audit row name a version of at most %s)',
             char_length(p_version), kiwi_internal.version_max_chars(), kiwi_internal.version_max_chars())
    when exists (select 1 from unnest(string_to_array(substr(p_version, strpos(p_version, '-') + 1), '.')) i(id)
                  where strpos(p_version, '-') > 0 and i.id ~ '^[0-9]{21,}$') then
      format('version: "%s" has a numeric pre-release identifier of more than 20 digits', p_version)
  end
$$;
revoke execute on function kiwi_internal.version_length_problem(text) from public;
grant execute on function kiwi_internal.version_length_problem(text) to anon, authenticated, service_role;

-- Not valid: a version an older registry took stays readable; every new one is checked.
alter table public.tool_versions
  add constraint version_length check (char_length(version) <= kiwi_internal.version_max_chars()) not valid;
