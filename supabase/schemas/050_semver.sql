-- Semantic versions (semver.org 2.0.0, without build metadata) and their precedence.
-- semver_key turns a version into a text[] that sorts, under collation "C", exactly
-- as semver precedence does: numeric parts zero-padded, a release above its
-- pre-releases, pre-release identifiers numeric-below-alphanumeric and compared
-- field by field, a longer pre-release above its prefix.

create function kiwi_internal.is_semver(p_version text) returns boolean
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select p_version ~ '^(0|[1-9][0-9]{0,9})\.(0|[1-9][0-9]{0,9})\.(0|[1-9][0-9]{0,9})(-((0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?$'
$$;
revoke execute on function kiwi_internal.is_semver(text) from public;
grant execute on function kiwi_internal.is_semver(text) to anon, authenticated, service_role;

create function kiwi_internal.semver_key(p_version text) returns text[]
  language plpgsql immutable strict parallel safe
  set search_path = ''
as $$
declare
  v_core text := split_part(p_version, '-', 1);
  v_pre  text := nullif(substr(p_version, length(v_core) + 2), '');
  v_key  text[];
  v_id   text;
begin
  if not kiwi_internal.is_semver(p_version) then
    raise exception 'invalid semantic version "%": expected MAJOR.MINOR.PATCH[-PRERELEASE]', p_version
      using errcode = '22023';
  end if;
  v_key := array[lpad(split_part(v_core, '.', 1), 10, '0'),
                 lpad(split_part(v_core, '.', 2), 10, '0'),
                 lpad(split_part(v_core, '.', 3), 10, '0'),
                 case when v_pre is null then '1' else '0' end];
  if v_pre is not null then
    foreach v_id in array string_to_array(v_pre, '.') loop
      v_key := v_key || case when v_id ~ '^[0-9]+$' then '0' || lpad(v_id, 20, '0')
                             else '1' || v_id end;
    end loop;
  end if;
  return v_key;
end
$$;
revoke execute on function kiwi_internal.semver_key(text) from public;
-- For tool_versions.semver_key, computed when service_role (or publish) writes.
grant execute on function kiwi_internal.semver_key(text) to service_role;
