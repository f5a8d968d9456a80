-- One version's file paths are unique under Unicode normalisation and case. `café` written
-- precomposed (NFC) and decomposed (NFD), or `Readme` beside `README`, are two paths to
-- Postgres, but one name to a filesystem that normalises names (APFS, HFS+) or ignores case
-- (those and NTFS): a checkout or a cache there keeps only one of the two, silently. So
-- files_problems (160_publish.sql) compares paths by folded_path, refusing the
-- second of two that fold alike and naming both, and a file whose folded path is the
-- directory of another's ("x" beside "X/y"), as publish and preview already did for
-- paths that are equal as written.

-- A path as such a filesystem compares it: NFC, then lower case.
create function kiwi_internal.folded_path(p_path text) returns text
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select lower(normalize(p_path, NFC))
$$;
revoke execute on function kiwi_internal.folded_path(text) from public;
grant execute on function kiwi_internal.folded_path(text) to anon, authenticated, service_role;
