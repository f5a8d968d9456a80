-- Registry limits: how much one version may hold, as rows a Supabase project can change
-- (update registry_limits set value = '2097152' where name = 'file_bytes'). Publish and
-- preview_execution_plan read them through manifest_problems and files_problems, so both
-- refuse the same content with the same words: each refusal (22023) names the field, what
-- it holds and the limit, with the row that sets it (registry_limits.<name>).
--
-- A deleted row lifts its limit. Two ceilings stay whatever the table says: a path is at
-- most 1024 characters (is_safe_path, the files table's constraint), and the runner still
-- refuses what its filesystem cannot hold (runner/materialize.py), with an error, never a
-- traceback.
--
-- The defaults, and why:
--   file_bytes            1 MiB    a tool's files are code and text; anon can pull any
--                                  public file, so one row must not be a download bomb
--   files_per_version     500
--   version_bytes         10 MiB   all files of one version together
--   manifest_bytes        256 KiB  the manifest as JSON (config, parameters, metadata...)
--   manifest_yaml_bytes   256 KiB  the tool.yaml kept beside it, as written
--   tags                  50       tags per version
--   tag_chars             50       characters per tag
--   text_field_chars      {name: 200, description: 4000, category: 100, subcategory: 100,
--                          author: 200, license: 100, homepage: 2048, changelog: 20000,
--                          entrypoint: 1024}   characters of each descriptive field
--   path_bytes            1024     a file's path, in UTF-8 bytes
--   path_segment_bytes    255      one name between slashes (NAME_MAX of ext4, APFS, NTFS)
--   reserved_names        [".kiwi-complete"]  no path segment may be one of these (any case)
--   reserved_segment_prefixes [".kiwi"]       nor start with one of these (any case): the
--                                  runner keeps its own files beside a tool's
--   file_field_types      {path: string, content_text: string, storage_key: string,
--                          sha256: string, size_bytes: number, is_entrypoint: boolean,
--                          media_type: string}  the JSON type of each field of a file
--                                  (null counts as not given); no other field is taken
--
-- Besides these, a file may not also be a directory of another file ("x" beside "x/y"):
-- no filesystem can hold both, so that is a rule, not a limit.

create table public.registry_limits (
  name        text primary key
              constraint name_format check (name ~ '^[a-z][a-z0-9_]*$'),
  value       jsonb not null,
  description text not null,
  updated_at  timestamptz not null default now()
);
comment on table public.registry_limits is
  'What one published version may hold (file size, files, total size, tags, text and path lengths, reserved names, file field types). Read by publish and preview; changed by service_role. A deleted row lifts its limit.';

alter table public.registry_limits enable row level security;
revoke all on table public.registry_limits from public, anon, authenticated;
grant select on table public.registry_limits to anon, authenticated;
grant select, insert, update, delete on table public.registry_limits to service_role;

create policy "anyone reads the registry limits"
  on public.registry_limits for select to anon, authenticated
  using (true);

-- The shape each row's value must have: a count or size is a whole number >= 0, the
-- reserved lists are lists of non-empty strings, the objects map names to what they say.
create function kiwi_internal.registry_limit_shape_problem(p_name text, p_value jsonb) returns text
  language sql immutable
  set search_path = ''
as $$
  select case
    when p_name in ('reserved_names', 'reserved_segment_prefixes') then
      case when jsonb_typeof(p_value) <> 'array'
                or exists (select 1 from jsonb_array_elements(p_value) e
                            where jsonb_typeof(e) <> 'string' or e #>> '{}' = '')
           then format('%s: must be a list of non-empty strings', p_name) end
    when p_name = 'text_field_chars' then
      case when jsonb_typeof(p_value) <> 'object'
                or exists (select 1 from jsonb_each(p_value) e
                            where jsonb_typeof(e.value) <> 'number' or (e.value)::numeric < 0
                               or (e.value)::numeric <> trunc((e.value)::numeric))
           then format('%s: must map field names to whole numbers of characters', p_name) end
    when p_name = 'file_field_types' then
      case when jsonb_typeof(p_value) <> 'object'
                or not p_value ? 'path'
                or exists (select 1 from jsonb_each(p_value) e
                            where coalesce(e.value #>> '{}', '') not in ('string', 'number', 'boolean', 'object', 'array'))
           then format('%s: must map file fields (path among them) to a JSON type (string, number, boolean, object, array)', p_name) end
    else
      case when jsonb_typeof(p_value) <> 'number' or (p_value)::numeric < 0
                or (p_value)::numeric <> trunc((p_value)::numeric) or (p_value)::numeric > 9223372036854775807
           then format('%s: must be a whole number >= 0', p_name) end
  end
$$;
revoke execute on function kiwi_internal.registry_limit_shape_problem(text, jsonb) from public, anon, authenticated;
grant execute on function kiwi_internal.registry_limit_shape_problem(text, jsonb) to service_role;

alter table public.registry_limits
  add constraint value_shape check (kiwi_internal.registry_limit_shape_problem(name, value) is null);

create function kiwi_internal.registry_limits_touch() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  new.updated_at := now();
  return new;
end
$$;
revoke execute on function kiwi_internal.registry_limits_touch() from public;
create trigger registry_limits_touch
  before update on public.registry_limits
  for each row execute function kiwi_internal.registry_limits_touch();

insert into public.registry_limits (name, value, description) values
  ('file_bytes', '1048576', 'bytes of one file (its content_text in UTF-8, or the size_bytes of a stored file)'),
  ('files_per_version', '500', 'files in one version'),
  ('version_bytes', '10485760', 'bytes of all files of one version together'),
  ('manifest_bytes', '262144', 'bytes of the manifest as JSON'),
  ('manifest_yaml_bytes', '262144', 'bytes of the tool.yaml published beside the manifest'),
  ('tags', '50', 'tags of one version'),
  ('tag_chars', '50', 'characters of one tag'),
  ('text_field_chars',
   '{"name": 200, "description": 4000, "category": 100, "subcategory": 100, "author": 200,
     "license": 100, "homepage": 2048, "changelog": 20000, "entrypoint": 1024}',
   'characters of each descriptive field of the manifest'),
  ('path_bytes', '1024', 'bytes (UTF-8) of a file''s path; is_safe_path caps it at 1024 characters whatever this says'),
  ('path_segment_bytes', '255', 'bytes (UTF-8) of one name between slashes in a file''s path'),
  ('reserved_names', '[".kiwi-complete"]', 'names no path segment may have (compared ignoring case): the runner''s own'),
  ('reserved_segment_prefixes', '[".kiwi"]', 'no path segment may start with one of these (ignoring case): kept for the runner'),
  ('file_field_types',
   '{"path": "string", "content_text": "string", "storage_key": "string", "sha256": "string",
     "size_bytes": "number", "is_entrypoint": "boolean", "media_type": "string"}',
   'the JSON type of each field a file may have (null counts as not given); no other field is taken');

-- A limit's value: a number (null when its row is gone: no limit) ...
create function kiwi_internal.registry_limit(p_name text) returns bigint
  language sql stable
  set search_path = ''
as $$
  select case when jsonb_typeof(l.value) = 'number' then (l.value)::numeric::bigint end
    from public.registry_limits l where l.name = p_name
$$;
revoke execute on function kiwi_internal.registry_limit(text) from public;
grant execute on function kiwi_internal.registry_limit(text) to anon, authenticated, service_role;

-- ... or a list or object (an empty one when its row is gone).
create function kiwi_internal.registry_limit_json(p_name text, p_default jsonb) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select coalesce((select l.value from public.registry_limits l where l.name = p_name), p_default)
$$;
revoke execute on function kiwi_internal.registry_limit_json(text, jsonb) from public;
grant execute on function kiwi_internal.registry_limit_json(text, jsonb) to anon, authenticated, service_role;

-- "<what> is <n> <unit>, more than the limit of <limit> (registry_limits.<name>)"
create function kiwi_internal.over_limit(p_field text, p_size bigint, p_unit text, p_name text,
                                         p_limit bigint) returns text
  language sql immutable
  set search_path = ''
as $$
  select format('%s: %s %s, more than the limit of %s (registry_limits.%s)', p_field, p_size, p_unit, p_limit, p_name)
$$;
revoke execute on function kiwi_internal.over_limit(text, bigint, text, text, bigint) from public;
grant execute on function kiwi_internal.over_limit(text, bigint, text, text, bigint) to anon, authenticated, service_role;

-- The manifest against the limits: its size, its tags, its descriptive fields.
create function kiwi_internal.manifest_limit_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p        text[] := '{}';
  v_limit  bigint;
  v_size   bigint;
  v_chars  jsonb := kiwi_internal.registry_limit_json('text_field_chars', '{}');
  v_field  record;
  v_tag    record;
begin
  if p_manifest is null or jsonb_typeof(p_manifest) <> 'object' then
    return p;   -- manifest_base_problems says so
  end if;
  v_limit := kiwi_internal.registry_limit('manifest_bytes');
  v_size := octet_length(p_manifest::text);
  if v_size > v_limit then   -- not read further, but a count of tags over its limit is said too
    p := array[kiwi_internal.over_limit('manifest', v_size, 'bytes as JSON', 'manifest_bytes', v_limit)];
    v_limit := kiwi_internal.registry_limit('tags');
    if jsonb_typeof(p_manifest -> 'tags') = 'array' and jsonb_array_length(p_manifest -> 'tags') > v_limit then
      p := p || kiwi_internal.over_limit('tags', jsonb_array_length(p_manifest -> 'tags'), 'tags', 'tags', v_limit);
    end if;
    return p;
  end if;
  for v_field in select e.key, (e.value)::numeric::bigint as lim from jsonb_each(v_chars) e loop
    if jsonb_typeof(p_manifest -> v_field.key) = 'string' and length(p_manifest ->> v_field.key) > v_field.lim then
      p := p || kiwi_internal.over_limit(v_field.key, length(p_manifest ->> v_field.key), 'characters',
                                         'text_field_chars.' || v_field.key, v_field.lim);
    end if;
  end loop;
  if jsonb_typeof(p_manifest -> 'tags') = 'array' then
    v_limit := kiwi_internal.registry_limit('tags');
    if jsonb_array_length(p_manifest -> 'tags') > v_limit then
      p := p || kiwi_internal.over_limit('tags', jsonb_array_length(p_manifest -> 'tags'), 'tags', 'tags', v_limit);
    else
      v_limit := kiwi_internal.registry_limit('tag_chars');
      for v_tag in select t.value #>> '{}' as tag, t.n
                     from jsonb_array_elements(p_manifest -> 'tags') with ordinality t(value, n)
                    where jsonb_typeof(t.value) = 'string' and length(t.value #>> '{}') > v_limit loop
        p := p || kiwi_internal.over_limit(format('tags[%s]', v_tag.n), length(v_tag.tag), 'characters',
                                           'tag_chars', v_limit);
      end loop;
    end if;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.manifest_limit_problems(jsonb) from public;
grant execute on function kiwi_internal.manifest_limit_problems(jsonb) to anon, authenticated, service_role;

-- What publish and preview call (as 20261121002900_directive_coverage.sql left it), the
-- limits first: a manifest over its size limit is not read any further.
create or replace function kiwi_internal.manifest_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_limits text[] := kiwi_internal.manifest_limit_problems(p_manifest);
  v_base   text[];
  v_dir    text[];
begin
  if v_limits[1] like 'manifest: %' then
    return v_limits;
  end if;
  v_base := kiwi_internal.manifest_base_problems(p_manifest);
  v_dir := kiwi_internal.directive_problems(p_manifest);
  return v_base || v_limits || v_dir
         || case when cardinality(v_dir) = 0 then kiwi_internal.directive_coverage_problems(p_manifest)
                 else '{}'::text[] end;
end
$$;

-- The problems of one file path against the limits and reserved names ('{}': none).
create function kiwi_internal.path_limit_problems(p_field text, p_path text) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p          text[] := '{}';
  v_limit    bigint := kiwi_internal.registry_limit('path_bytes');
  v_seg_max  bigint := kiwi_internal.registry_limit('path_segment_bytes');
  v_reserved jsonb := kiwi_internal.registry_limit_json('reserved_names', '[]');
  v_prefixes jsonb := kiwi_internal.registry_limit_json('reserved_segment_prefixes', '[]');
  v_seg      text;
begin
  if octet_length(p_path) > v_limit then
    return array[kiwi_internal.over_limit(p_field, octet_length(p_path), 'bytes', 'path_bytes', v_limit)];
  end if;
  foreach v_seg in array string_to_array(p_path, '/') loop
    if octet_length(v_seg) > v_seg_max then
      p := p || format('%s: the name "%s…" is %s bytes, more than the limit of %s (registry_limits.path_segment_bytes)',
                       p_field, left(v_seg, 40), octet_length(v_seg), v_seg_max);
    elsif exists (select 1 from jsonb_array_elements_text(v_reserved) r where lower(r) = lower(v_seg)) then
      p := p || format('%s: "%s" is a reserved name (registry_limits.reserved_names: %s)',
                       p_field, v_seg, v_reserved #>> '{}');
    elsif exists (select 1 from jsonb_array_elements_text(v_prefixes) r
                   where left(lower(v_seg), length(r)) = lower(r)) then
      p := p || format('%s: "%s" starts with a reserved prefix (registry_limits.reserved_segment_prefixes: %s)',
                       p_field, v_seg, v_prefixes #>> '{}');
    end if;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.path_limit_problems(text, text) from public;
grant execute on function kiwi_internal.path_limit_problems(text, text) to anon, authenticated, service_role;

-- files_problems (20261121001400_publish.sql) with the limits: the number of files first
-- (a list over it is not read further), then each file's fields by their JSON types
-- (registry_limits.file_field_types), its path against the limits and reserved names,
-- its size; then the total, and no file that is also another's directory.
create or replace function kiwi_internal.files_problems(p_files jsonb, p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p         text[] := '{}';
  v_file    jsonb;
  v_i       int := 0;
  v_key     text;
  v_paths   text[] := '{}';
  v_entry   text[] := '{}';
  v_types   jsonb := kiwi_internal.registry_limit_json('file_field_types', '{}');
  v_limit   bigint;
  v_file_max bigint := kiwi_internal.registry_limit('file_bytes');
  v_size    bigint;
  v_total   bigint := 0;
  v_bad     text[];
  v_mistyped text[];
  v_clash   record;
begin
  if p_files is null or jsonb_typeof(p_files) <> 'array' then
    return array['files: must be a list of {path, content_text, is_entrypoint, media_type}'];
  end if;
  v_limit := kiwi_internal.registry_limit('files_per_version');
  if jsonb_array_length(p_files) > v_limit then
    return array[kiwi_internal.over_limit('files', jsonb_array_length(p_files), 'files', 'files_per_version', v_limit)];
  end if;
  for v_file in select * from jsonb_array_elements(p_files) loop
    v_i := v_i + 1;
    if jsonb_typeof(v_file) <> 'object' then
      p := p || format('files[%s]: must be an object with a path', v_i);
      continue;
    end if;
    v_file := jsonb_strip_nulls(v_file);   -- null is not given
    v_bad := '{}';
    for v_key in select jsonb_object_keys(v_file) loop
      if not v_types ? v_key then
        p := p || format('files[%s].%s: unknown field (allowed: %s)', v_i, v_key,
                         (select string_agg(k, ', ') from jsonb_object_keys(v_types) k));
        v_bad := v_bad || v_key;
      elsif jsonb_typeof(v_file -> v_key) <> (v_types ->> v_key) then
        p := p || format('files[%s].%s: must be a JSON %s, not %s (registry_limits.file_field_types)',
                         v_i, v_key, v_types ->> v_key, jsonb_typeof(v_file -> v_key));
        v_bad := v_bad || v_key;
      end if;
    end loop;
    v_mistyped := v_bad;
    v_file := v_file - v_bad;
    if not v_file ? 'path' then
      if not 'path' = any (v_mistyped) then
        p := p || format('files[%s].path: required, a relative path', v_i);
      end if;
      continue;
    end if;
    v_bad := kiwi_internal.path_limit_problems(format('files[%s].path', v_i), v_file ->> 'path');
    if cardinality(v_bad) > 0 then
      p := p || v_bad;
    elsif not kiwi_internal.is_safe_path(v_file ->> 'path') then
      p := p || format('files[%s].path: "%s" must be relative and stay inside the tool (no leading /, no . or .. segments, no \ : or control characters)',
                       v_i, v_file ->> 'path');
    elsif (v_file ->> 'path') = any (v_paths) then
      p := p || format('files[%s].path: "%s" appears twice', v_i, v_file ->> 'path');
    end if;
    v_paths := v_paths || (v_file ->> 'path');
    if (v_file ? 'content_text') = (v_file ? 'storage_key')
       and not v_mistyped && array['content_text', 'storage_key'] then
      p := p || format('files[%s] ("%s"): give exactly one of content_text or storage_key (a string)', v_i, v_file ->> 'path');
    end if;
    if v_file ? 'storage_key' and not v_file ? 'content_text' and (
         coalesce(v_file ->> 'sha256', '') !~ '^[0-9a-f]{64}$'
         or coalesce(v_file ->> 'size_bytes', '') !~ '^[0-9]{1,18}$') then
      p := p || format('files[%s] ("%s"): a stored file needs its sha256 (64 hex digits) and size_bytes (a whole number)', v_i, v_file ->> 'path');
    end if;
    if v_file ? 'sha256' and v_file ? 'content_text'
       and (v_file ->> 'sha256') <> kiwi_internal.sha256_hex(v_file ->> 'content_text') then
      p := p || format('files[%s].sha256: does not match the content of "%s"', v_i, v_file ->> 'path');
    end if;
    v_size := case when v_file ? 'content_text' then octet_length(v_file ->> 'content_text')
                   when coalesce(v_file ->> 'size_bytes', '') ~ '^[0-9]{1,18}$' then (v_file ->> 'size_bytes')::bigint
                   else 0 end;
    if v_size > v_file_max then
      p := p || kiwi_internal.over_limit(format('files[%s] ("%s")', v_i, left(v_file ->> 'path', 100)), v_size, 'bytes',
                                         'file_bytes', v_file_max);
    end if;
    v_total := v_total + v_size;
    if (v_file ->> 'is_entrypoint')::boolean is true then
      v_entry := v_entry || (v_file ->> 'path');
    end if;
  end loop;
  v_limit := kiwi_internal.registry_limit('version_bytes');
  if v_total > v_limit then
    p := p || kiwi_internal.over_limit('files', v_total, 'bytes in all', 'version_bytes', v_limit);
  end if;
  -- a file cannot also be a directory of another file
  for v_clash in
    select f.path, min(o.path) as other
      from unnest(v_paths) f(path)
      join unnest(v_paths) o(path) on left(o.path, length(f.path) + 1) = f.path || '/'
     group by f.path order by f.path
  loop
    p := p || format('files[%s].path: "%s" is a file, but "%s" needs it to be a directory',
                     array_position(v_paths, v_clash.path), v_clash.path, v_clash.other);
  end loop;
  if cardinality(v_entry) > 1 then
    p := p || format('files: only one entrypoint allowed, found %s', array_to_string(v_entry, ', '));
  end if;
  if jsonb_typeof(p_manifest -> 'entrypoint') = 'string' then
    if not (p_manifest ->> 'entrypoint') = any (v_paths) then
      p := p || format('entrypoint: "%s" is not among the files (%s)', p_manifest ->> 'entrypoint',
                       coalesce(nullif(array_to_string(v_paths, ', '), ''), 'none given'));
    elsif cardinality(v_entry) = 1 and v_entry[1] <> (p_manifest ->> 'entrypoint') then
      p := p || format('entrypoint: "%s" disagrees with the file marked is_entrypoint ("%s")',
                       p_manifest ->> 'entrypoint', v_entry[1]);
    end if;
  end if;
  if (p_manifest ->> 'tool_type') = 'script' and cardinality(v_paths) = 0 then
    p := p || 'files: a script needs at least one file, its entrypoint'::text;
  elsif (p_manifest ->> 'tool_type') = 'script' and cardinality(v_entry) = 0
        and cardinality(v_paths) > 1 and not p_manifest ? 'entrypoint' then
    p := p || 'entrypoint: a script with several files must say which one runs (entrypoint, or is_entrypoint on the file)'::text;
  end if;
  return p;
end
$$;

-- manifest_yaml is given to publish beside the manifest: checked as the version is written.
create function kiwi_internal.tool_versions_yaml_limit() returns trigger
  language plpgsql
  set search_path = ''
as $$
declare
  v_limit bigint := kiwi_internal.registry_limit('manifest_yaml_bytes');
  v_msg   text;
begin
  if octet_length(new.manifest_yaml) > v_limit then
    v_msg := kiwi_internal.over_limit('manifest_yaml', octet_length(new.manifest_yaml), 'bytes',
                                      'manifest_yaml_bytes', v_limit);
    raise exception 'invalid manifest: %', v_msg
      using errcode = '22023', detail = to_jsonb(array[v_msg])::text,
            hint = 'fix the fields named above; nothing was published';
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.tool_versions_yaml_limit() from public;
create trigger tool_versions_yaml_limit
  before insert on public.tool_versions
  for each row execute function kiwi_internal.tool_versions_yaml_limit();
