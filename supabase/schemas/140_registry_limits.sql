-- Registry limits: how much one version may hold, as rows a Supabase project can change
-- (update registry_limits set value = '2097152' where name = 'file_bytes'). Publish and
-- preview_execution_plan read them through manifest_problems and files_problems
-- (160_publish.sql, which calls manifest_limit_problems and
-- path_limit_problems below), so both refuse the same content with the same words: each
-- refusal (22023) names the field, what it holds and the limit, with the row that sets it
-- (registry_limits.<name>). This migration sorts before publish, whose validation reads it.
--
-- A deleted row lifts its limit. Two ceilings stay whatever the table says: a path is at
-- most 1024 characters (is_safe_path, the files table's constraint), and the runner still
-- refuses what its filesystem cannot hold (runner/core/materialize.py), with an error, never a
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
