-- publish_tool_version: the only way tools are written. It validates the manifest and
-- files (every problem named by its field), checks that the caller may publish into
-- the namespace, computes hashes, inserts, lets the triggers move is_latest, and
-- checks that the new version's chain resolves. It runs in the caller's transaction:
-- any refusal leaves the registry as it was.
--
-- One validation, used by publish (publish_target) and by preview_execution_plan
-- (290_local_plans.sql) alike, so both refuse the same content with the same
-- words: the manifest's problems, else (when it has none) the files':
--
--   manifest_problems(manifest)      the manifest, composed of named parts:
--     manifest_limit_problems          its size, tags and text fields against
--                                      registry_limits (140_registry_limits.sql)
--     manifest_base_problems           the fields every tool has (below)
--     directive_problems               a directive's requires, permissions and cites
--                                      (230_directives.sql)
--     directive_coverage_problems      what a directive requires, its permissions cover
--                                      (310_directive_coverage.sql)
--   files_problems(files, manifest)  the files, against the manifest and registry_limits
--   checked_config(manifest)         then its config, against its chain's contract, old
--                                    spellings made canonical
--                                    (150_config_contracts.sql)
--
-- Both also plan the files one way (planned_files: hashed, sized, the entrypoint marked),
-- so a preview carries the content_hash publishing would give, and refuse a chain that
-- ends where its type forbids in one wording (chain_error 'wrong_primitive'); their
-- chains are walked by walk_chains (120_chain_resolution.sql).
--
-- The limits sort before this migration. The two directive parts are created by later
-- migrations (directive coverage needs the glob matching of 260_contexts.sql):
-- manifest_problems is plpgsql, whose body resolves the functions it calls when it runs,
-- not when it is created (late binding), so it names them here.

-- The fields every tool's manifest has: identity, type and executor, version, the
-- descriptive fields and parameters. Unknown fields are refused; a directive's own
-- fields are allowed here and checked by directive_problems.
create function kiwi_internal.manifest_base_problems(p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p        text[] := '{}';
  v_rule   public.tool_type_rules;
  v_key    text;
  v_param  jsonb;
  v_names  text[] := '{}';
  v_i      int := 0;
  v_allowed constant text[] := array[
    'tool_id', 'namespace', 'tool_type', 'executor', 'version', 'name', 'description',
    'category', 'subcategory', 'tags', 'visibility', 'config', 'config_schema', 'parameters', 'outputs',
    'entrypoint', 'changelog', 'is_official', 'is_builtin', 'author', 'license',
    'homepage', 'metadata',
    -- a directive's declarations, checked by directive_problems (230_directives.sql)
    'requires', 'permissions', 'cites'];
begin
  if p_manifest is null or jsonb_typeof(p_manifest) <> 'object' then
    return array['manifest: must be a JSON object'];
  end if;

  for v_key in select jsonb_object_keys(p_manifest) loop
    if not v_key = any (v_allowed) then
      p := p || format('%s: unknown field (allowed: %s)', v_key, array_to_string(v_allowed, ', '));
    end if;
  end loop;

  -- identity
  if jsonb_typeof(p_manifest -> 'tool_id') is distinct from 'string' then
    p := p || 'tool_id: required, a string such as "my_tool" or "namespace/my_tool"'::text;
  elsif (p_manifest ->> 'tool_id') !~ '^([a-z0-9][a-z0-9_-]{0,62}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$' then
    p := p || format('tool_id: "%s" is not a valid id (letters, digits, _ . -; start with a letter or digit; at most 128 characters; optionally namespace/ first)',
                     p_manifest ->> 'tool_id');
  end if;
  if p_manifest ? 'namespace' then
    if jsonb_typeof(p_manifest -> 'namespace') <> 'string'
       or (p_manifest ->> 'namespace') !~ '^[a-z0-9][a-z0-9_-]{0,62}$' then
      p := p || 'namespace: must be a lower-case name (a-z, 0-9, _ -)'::text;
    elsif position('/' in coalesce(p_manifest ->> 'tool_id', '')) > 0
          and split_part(p_manifest ->> 'tool_id', '/', 1) <> (p_manifest ->> 'namespace') then
      p := p || format('namespace: "%s" disagrees with tool_id "%s"', p_manifest ->> 'namespace', p_manifest ->> 'tool_id');
    end if;
  end if;

  -- type and executor
  select * into v_rule from public.tool_type_rules r where r.tool_type = p_manifest ->> 'tool_type';
  if not found then
    p := p || format('tool_type: required, one of %s',
                     (select string_agg(r.tool_type, ', ' order by r.tool_type) from public.tool_type_rules r));
  elsif v_rule.requires_executor and jsonb_typeof(p_manifest -> 'executor') is distinct from 'string' then
    p := p || format('executor: required for a %s (a tool reference to a %s)', v_rule.tool_type,
                     array_to_string(v_rule.executor_types, ' or '));
  elsif not v_rule.requires_executor and p_manifest ? 'executor' and p_manifest -> 'executor' <> 'null' then
    p := p || format('executor: a %s has no executor', v_rule.tool_type);
  end if;
  if jsonb_typeof(p_manifest -> 'executor') = 'string'
     and (p_manifest ->> 'executor') !~ '^([a-z0-9][a-z0-9_-]{0,62}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$' then
    p := p || format('executor: "%s" is not a tool reference', p_manifest ->> 'executor');
  end if;

  -- version
  if jsonb_typeof(p_manifest -> 'version') is distinct from 'string' then
    p := p || 'version: required, a semantic version string such as "1.0.0"'::text;
  elsif kiwi_internal.version_length_problem(p_manifest ->> 'version') is not null then
    -- at most as long as a call names it (460_version_length.sql)
    p := p || kiwi_internal.version_length_problem(p_manifest ->> 'version');
  elsif not kiwi_internal.is_semver(p_manifest ->> 'version') then
    p := p || format('version: "%s" is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE], no leading zeros%s)',
                     p_manifest ->> 'version',
                     case when (p_manifest ->> 'version') like '%+%' then ', no +build metadata' else '' end);
  end if;

  -- descriptive strings
  foreach v_key in array array['name', 'description', 'category', 'subcategory', 'entrypoint',
                               'changelog', 'author', 'license', 'homepage'] loop
    if p_manifest ? v_key and jsonb_typeof(p_manifest -> v_key) <> 'string' then
      p := p || format('%s: must be a string', v_key);
    end if;
  end loop;
  if p_manifest ? 'tags' and (jsonb_typeof(p_manifest -> 'tags') <> 'array'
       or exists (select 1 from jsonb_array_elements(p_manifest -> 'tags') t where jsonb_typeof(t) <> 'string')) then
    p := p || 'tags: must be a list of strings'::text;
  end if;
  if p_manifest ? 'visibility' and coalesce(p_manifest ->> 'visibility', '') not in ('public', 'unlisted', 'private') then
    p := p || format('visibility: "%s" is not one of public, unlisted, private', p_manifest ->> 'visibility');
  end if;
  foreach v_key in array array['is_official', 'is_builtin'] loop
    if p_manifest ? v_key and jsonb_typeof(p_manifest -> v_key) <> 'boolean' then
      p := p || format('%s: must be true or false', v_key);
    end if;
  end loop;
  foreach v_key in array array['config', 'metadata'] loop
    if p_manifest ? v_key and jsonb_typeof(p_manifest -> v_key) <> 'object' then
      p := p || format('%s: must be an object', v_key);
    end if;
  end loop;
  -- a knowledge entry's source_url (its type's contract makes it a string) is a link an agent
  -- is given with the text: an http(s) URL, with a host and no user name or password
  if p_manifest ->> 'tool_type' = 'knowledge' and jsonb_typeof(p_manifest #> '{config,source_url}') = 'string'
     and (p_manifest #>> '{config,source_url}') !~* '^https?://[^[:space:][:cntrl:]/?#@]+([/?#][^[:space:][:cntrl:]]*)?$' then
    p := p || format('config.source_url: %s is not an http or https URL (such as "https://example.com/guide"; no spaces, no user:password@)',
                     left(to_jsonb(p_manifest #>> '{config,source_url}')::text, 120));
  end if;
  -- the contract of the config this tool understands (150_config_contracts.sql)
  if p_manifest ? 'config_schema' then
    p := p || kiwi_internal.contract_problems(p_manifest -> 'config_schema', 'config_schema');
  end if;
  if p_manifest ? 'outputs' and jsonb_typeof(p_manifest -> 'outputs') not in ('object', 'array') then
    p := p || 'outputs: must be an object (a JSON Schema) or a list'::text;
  end if;
  -- parameters and outputs are schemas the runner can compile (500_schema_checks.sql)
  p := p || kiwi_internal.outputs_problems(p_manifest -> 'outputs');

  -- parameters: a list of {name, type, ...} or a JSON Schema object
  if p_manifest ? 'parameters' then
    case jsonb_typeof(p_manifest -> 'parameters')
      when 'object' then
        if coalesce(p_manifest #>> '{parameters,type}', 'object') <> 'object' then
          p := p || 'parameters: a JSON Schema for parameters must have "type": "object"'::text;
        end if;
        p := p || kiwi_internal.schema_problems(p_manifest -> 'parameters', 'parameters');
      when 'array' then
        for v_param in select * from jsonb_array_elements(p_manifest -> 'parameters') loop
          v_i := v_i + 1;
          if jsonb_typeof(v_param) <> 'object' then
            p := p || format('parameters[%s]: must be an object with a name', v_i);
            continue;
          end if;
          if jsonb_typeof(v_param -> 'name') is distinct from 'string'
             or (v_param ->> 'name') !~ '^[A-Za-z_][A-Za-z0-9_]{0,63}$' then
            p := p || format('parameters[%s].name: required, an identifier (letters, digits, _)', v_i);
          elsif (v_param ->> 'name') = any (v_names) then
            p := p || format('parameters[%s].name: "%s" is declared twice', v_i, v_param ->> 'name');
          else
            v_names := v_names || (v_param ->> 'name');
          end if;
          if v_param ? 'type' and coalesce(v_param ->> 'type', '') not in
               ('string', 'integer', 'number', 'boolean', 'array', 'object') then
            p := p || format('parameters[%s].type: "%s" is not one of string, integer, number, boolean, array, object',
                             v_i, v_param ->> 'type');
          end if;
          if v_param ? 'required' and jsonb_typeof(v_param -> 'required') <> 'boolean' then
            p := p || format('parameters[%s].required: must be true or false', v_i);
          end if;
          if v_param ? 'enum' and jsonb_typeof(v_param -> 'enum') <> 'array' then
            p := p || format('parameters[%s].enum: must be a list', v_i);
          end if;
          if v_param ? 'description' and jsonb_typeof(v_param -> 'description') <> 'string' then
            p := p || format('parameters[%s].description: must be a string', v_i);
          end if;
          if v_param ? 'items' then
            p := p || kiwi_internal.schema_problems(v_param -> 'items', format('parameters[%s].items', v_i));
          end if;
          for v_key in select jsonb_object_keys(v_param) loop
            if not v_key = any (array['name', 'type', 'required', 'description', 'default', 'enum', 'items']) then
              p := p || format('parameters[%s].%s: unknown field (allowed: name, type, required, description, default, enum, items)',
                               v_i, v_key);
            end if;
          end loop;
        end loop;
      else
        p := p || 'parameters: must be a list of {name, type, ...} or a JSON Schema object'::text;
    end case;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.manifest_base_problems(jsonb) from public;
grant execute on function kiwi_internal.manifest_base_problems(jsonb) to anon, authenticated, service_role;

-- What publish and preview call: the limits first (a manifest over its size limit is not
-- read any further), then the base fields, the limits' other problems and the
-- directive's fields, then, when those are well formed, what its permissions cover.
create function kiwi_internal.manifest_problems(p_manifest jsonb) returns text[]
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
revoke execute on function kiwi_internal.manifest_problems(jsonb) from public;
grant execute on function kiwi_internal.manifest_problems(jsonb) to anon, authenticated, service_role;

-- The files of a version: the number of files first (a list over
-- registry_limits.files_per_version is not read further), then each file's fields by their
-- JSON types (registry_limits.file_field_types), its path against the limits and reserved
-- names (path_limit_problems), its media type, its size; then the total, no two paths one
-- name once normalised and case folded and no file that is also another's directory
-- (folded_path, 480_path_folding.sql), one entrypoint that agrees with the
-- manifest's.
create function kiwi_internal.files_problems(p_files jsonb, p_manifest jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p         text[] := '{}';
  v_file    jsonb;
  v_i       int := 0;
  v_key     text;
  v_paths   text[] := '{}';
  v_folded  text[] := '{}';   -- each path as a filesystem compares it (folded_path)
  v_at      int[] := '{}';    -- each path's position in the list of files
  v_same    int;
  v_entry   text[] := '{}';
  v_types   jsonb := kiwi_internal.registry_limit_json('file_field_types', '{}');
  v_limit   bigint;
  v_file_max bigint := kiwi_internal.registry_limit('file_bytes');
  v_size    bigint;
  v_total   bigint := 0;
  v_bad     text[];
  v_mistyped text[];
  v_clash   record;
  -- the file the manifest names as the one that runs: `entrypoint`, or the documents' config.entrypoint
  v_named   jsonb := coalesce(p_manifest -> 'entrypoint', p_manifest #> '{config,entrypoint}');
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
    else   -- one name once normalised and case folded (480_path_folding.sql)
      v_same := array_position(v_folded, kiwi_internal.folded_path(v_file ->> 'path'));
      if v_same is not null then
        p := p || format('files[%s].path: "%s" and "%s" (files[%s]) are one name once Unicode is normalised (NFC) and case ignored: a filesystem that ignores case or normalises names keeps only one',
                         v_i, v_file ->> 'path', v_paths[v_same], v_at[v_same]);
      end if;
    end if;
    v_paths := v_paths || (v_file ->> 'path');
    v_folded := v_folded || kiwi_internal.folded_path(v_file ->> 'path');
    v_at := v_at || v_i;
    if v_file ? 'media_type' and not kiwi_internal.is_media_type(v_file ->> 'media_type') then
      -- 490_media_type.sql
      p := p || format('files[%s].media_type: %s is not a media type such as "text/plain" (type/subtype, optional ; parameters, at most 255 characters)',
                       v_i, case when char_length(v_file ->> 'media_type') > 60
                                 then format('%s characters starting "%s…"', char_length(v_file ->> 'media_type'),
                                             left(v_file ->> 'media_type', 40))
                                 else format('"%s"', v_file ->> 'media_type') end);
    end if;
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
  -- a file cannot also be a directory of another file (compared as folded paths)
  for v_clash in
    select f.path, f.at, min(o.path) as other
      from unnest(v_paths, v_folded, v_at) f(path, fold, at)
      join unnest(v_paths, v_folded) o(path, fold) on left(o.fold, length(f.fold) + 1) = f.fold || '/'
     group by f.path, f.at order by f.path
  loop
    p := p || format('files[%s].path: "%s" is a file, but "%s" needs it to be a directory',
                     v_clash.at, v_clash.path, v_clash.other);
  end loop;
  if cardinality(v_entry) > 1 then
    p := p || format('files: only one entrypoint allowed, found %s', array_to_string(v_entry, ', '));
  end if;
  if jsonb_typeof(v_named) = 'string' then
    if not (v_named #>> '{}') = any (v_paths) then
      p := p || format('entrypoint: "%s" is not among the files (%s)', v_named #>> '{}',
                       coalesce(nullif(array_to_string(v_paths, ', '), ''), 'none given'));
    elsif cardinality(v_entry) = 1 and v_entry[1] <> (v_named #>> '{}') then
      p := p || format('entrypoint: "%s" disagrees with the file marked is_entrypoint ("%s")',
                       v_named #>> '{}', v_entry[1]);
    end if;
  end if;
  if (p_manifest ->> 'tool_type') = 'script' and cardinality(v_paths) = 0 then
    p := p || 'files: a script needs at least one file, its entrypoint'::text;
  elsif (p_manifest ->> 'tool_type') = 'script' and cardinality(v_entry) = 0
        and cardinality(v_paths) > 1 and v_named is null then
    p := p || 'entrypoint: a script with several files must say which one runs (entrypoint, config.entrypoint, or is_entrypoint on the file)'::text;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.files_problems(jsonb, jsonb) from public;
grant execute on function kiwi_internal.files_problems(jsonb, jsonb) to anon, authenticated, service_role;

-- Writes that choose a command. A primitive, runtime or mcp_server decides the command
-- every tool running on it runs: publishing bash_runtime 1.0.99 with `bash -c "echo
-- HIJACKED"` would make every Bash tool of every user print HIJACKED. Builtin and
-- official tools are the platform's, and the `public` namespace is where bare references
-- resolve. So publishing, yanking, unyanking, deprecating or deleting any of those needs
-- an admin (kiwi_internal.caller_is_admin(): service_role, or a login that bypasses RLS),
-- whoever else may write into the namespace. A publish may instead carry a person's
-- approval: one an admin approved for exactly this content (request_publish_approval and
-- spend_command_write_approval, 270_approvals.sql); yanking and deleting stay
-- admin-only. This is the one rule: publish (below) and the lifecycle RPCs (writable_tool,
-- 200_tool_lifecycle.sql) call it with what they know of the tool (the
-- manifest's and the existing row's type and flags). It takes no identity: the caller is
-- read from the session. Called only from security definer code, so no API role executes it.

-- Why a write of such a tool chooses a command, whoever asks (empty: it does not).
create function kiwi_internal.command_write_reasons(p_namespace text, p_tool_type text,
                                                    p_is_builtin boolean, p_is_official boolean)
  returns text[]
  language sql immutable
  set search_path = ''
as $$
  select array_remove(array[
    case when p_tool_type in ('primitive', 'runtime', 'mcp_server')
         then format('it is %s %s, which chooses the command of every tool that runs on it',
                     case when p_tool_type = 'mcp_server' then 'an' else 'a' end, p_tool_type) end,
    case when p_is_builtin then 'it is builtin' end,
    case when p_is_official then 'it is official' end,
    case when p_namespace = 'public' then 'it is in the public namespace' end], null)
$$;
revoke execute on function kiwi_internal.command_write_reasons(text, text, boolean, boolean)
  from public, anon, authenticated, service_role;

create function kiwi_internal.refuse_command_write(p_action text, p_ref text, p_namespace text, p_tool_type text,
                                                   p_is_builtin boolean, p_is_official boolean)
  returns void
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_why text[] := kiwi_internal.command_write_reasons(p_namespace, p_tool_type, p_is_builtin, p_is_official);
begin
  if cardinality(v_why) > 0 and not kiwi_internal.caller_is_admin() then
    raise exception 'only an admin may % tool "%": %', p_action, p_ref, array_to_string(v_why, '; ')
      using errcode = '42501',
            hint = case p_action
                     when 'publish' then 'an admin publishes it (kiwi --admin publish ...), or an admin approves '
                                         || 'this content for you (kiwi publish ... --request-approval)'
                     else format('an admin %ss it (kiwi --admin %s ...), or ask an admin', p_action, p_action) end;
  end if;
end
$$;
revoke execute on function kiwi_internal.refuse_command_write(text, text, text, text, boolean, boolean)
  from public, anon, authenticated, service_role;

-- What p_manifest publishes, and whether the caller may write there: the manifest and
-- files are valid, and then its config is held to its chain's contract (checked_config,
-- 150_config_contracts.sql; 22023 naming every bad field otherwise), the
-- namespace exists and the caller may publish into it. -> {namespace, tool_id, ref,
-- manifest (its config made canonical: what is stored and hashed), normalised (the old
-- spellings rewritten, "config.timeout_s -> config.timeout")}. The command rule is not
-- applied here: publish applies it, request_publish_approval asks for its exception.
create function kiwi_internal.publish_target(p_manifest jsonb, p_files jsonb) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_problems text[] := kiwi_internal.manifest_problems(p_manifest);
  v_checked  jsonb;
  v_ns       text;
  v_tool_id  text;
begin
  if cardinality(v_problems) = 0 then
    v_problems := kiwi_internal.files_problems(p_files, p_manifest);
  end if;
  if cardinality(v_problems) = 0 then
    v_checked := kiwi_internal.checked_config(p_manifest);
    v_problems := array(select jsonb_array_elements_text(v_checked -> 'problems'));
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid manifest: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was published';
  end if;
  v_tool_id := p_manifest ->> 'tool_id';
  if position('/' in v_tool_id) > 0 then
    v_ns := split_part(v_tool_id, '/', 1);
    v_tool_id := split_part(v_tool_id, '/', 2);
  else
    v_ns := coalesce(p_manifest ->> 'namespace', 'public');
  end if;
  if not exists (select 1 from public.namespaces n where n.namespace = v_ns) then
    raise exception 'namespace "%" does not exist', v_ns
      using errcode = 'PT404', hint = 'create it first: insert into namespaces (namespace, owner_id) values (...)';
  end if;
  if not kiwi_internal.can_publish_to(v_ns) then
    raise exception 'you cannot publish into namespace "%"', v_ns
      using errcode = '42501',
            hint = case when auth.uid() is null then 'sign in: anonymous callers cannot publish'
                        when v_ns = 'public' then 'an admin publishes it (kiwi --admin publish ...), or ask an admin'
                        else 'ask an owner of the namespace to add you as a member' end;
  end if;
  return jsonb_build_object('namespace', v_ns, 'tool_id', v_tool_id, 'ref', kiwi_internal.tool_ref(v_ns, v_tool_id),
                            'manifest', v_checked -> 'manifest', 'normalised', v_checked -> 'normalised');
end
$$;
revoke execute on function kiwi_internal.publish_target(jsonb, jsonb) from public, anon, authenticated, service_role;

-- The files of a version as publish stores them and plans carry them: hashed, sized,
-- the entrypoint marked (the manifest's entrypoint or config.entrypoint, else the one
-- flagged, else a lone file), the media type guessed when not given, sorted by path.
-- Publish (publish_contents) and preview_execution_plan (290_local_plans.sql) both take them from here.
create function kiwi_internal.planned_files(p_manifest jsonb, p_files jsonb) returns jsonb
  language sql stable
  set search_path = ''
as $$
  with entry as (
    select coalesce(p_manifest ->> 'entrypoint', p_manifest #>> '{config,entrypoint}',
                    (select f ->> 'path' from jsonb_array_elements(p_files) f
                      where (f ->> 'is_entrypoint')::boolean is true limit 1),
                    case when jsonb_array_length(p_files) = 1 then p_files #>> '{0,path}' end) as path
  )
  select coalesce(jsonb_agg(jsonb_build_object(
           'path', f ->> 'path',
           'sha256', coalesce(kiwi_internal.sha256_hex(f ->> 'content_text'), f ->> 'sha256'),
           'size_bytes', coalesce(octet_length(f ->> 'content_text'), (f ->> 'size_bytes')::bigint),
           'is_entrypoint', (f ->> 'path') is not distinct from e.path,
           'media_type', coalesce(f ->> 'media_type', kiwi_internal.guess_media_type(f ->> 'path')),
           'content_text', f ->> 'content_text',
           'storage_key', f ->> 'storage_key') order by f ->> 'path'), '[]'::jsonb)
    from jsonb_array_elements(p_files) f cross join entry e
$$;
revoke execute on function kiwi_internal.planned_files(jsonb, jsonb) from public;
grant execute on function kiwi_internal.planned_files(jsonb, jsonb) to anon, authenticated, service_role;

-- What p_ref's new version would hold: its executor (one the caller can see), its files
-- (planned_files) and the content_hash over manifest and files (the hash an approval of
-- this publish names). -> {executor, files, content_hash}.
create function kiwi_internal.publish_contents(p_manifest jsonb, p_files jsonb, p_ref text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_exec  text := kiwi_internal.normalize_ref(p_manifest ->> 'executor');
  v_files jsonb := kiwi_internal.planned_files(p_manifest, p_files);
begin
  if v_exec is not null and not exists (
       select 1 from public.tools t where t.ref = v_exec and kiwi_internal.can_read(t.visibility, t.namespace)) then
    raise exception 'executor "%" of tool "%" not found', v_exec, p_ref
      using errcode = 'PT404', hint = 'publish the executor first, or name one you can see';
  end if;
  return jsonb_build_object('executor', v_exec, 'files', v_files,
                            'content_hash', kiwi_internal.content_hash(p_manifest, v_files));
end
$$;
revoke execute on function kiwi_internal.publish_contents(jsonb, jsonb, text) from public, anon, authenticated, service_role;

-- The tools whose executor chain passes through p_ref (their latest versions run on it):
-- {dependents: [refs, the first 100 by ref], dependents_count}. Read as the owner, and
-- listing only tools the caller may read: admins read every tool, and a member publishing
-- an executor with an admin's approval learns nothing of other namespaces' private tools.
create function kiwi_internal.dependents_of(p_ref text) returns jsonb
  language sql stable
  set search_path = ''
as $$
  with recursive chain_above (ref, depth) as (
    select t.ref, 1 from public.tools t where t.executor_id = p_ref
    union
    select t.ref, c.depth + 1 from chain_above c join public.tools t on t.executor_id = c.ref where c.depth < 11
  ), refs as (
    select distinct c.ref from chain_above c join public.tools t on t.ref = c.ref
     where c.ref <> p_ref and kiwi_internal.can_read(t.visibility, t.namespace)
  )
  select jsonb_build_object(
    'dependents', coalesce((select jsonb_agg(r.ref order by r.ref)
                              from (select refs.ref from refs order by refs.ref limit 100) r), '[]'::jsonb),
    'dependents_count', (select count(*) from refs))
$$;
revoke execute on function kiwi_internal.dependents_of(text) from public, anon, authenticated, service_role;

-- The chain of a version just published: it must resolve (resolve_chains, as the caller
-- sees it), and end where its type requires (in the words preview_execution_plan uses).
create function kiwi_internal.published_chain(p_ref text, p_version text, p_tool_type text)
  returns kiwi_internal.chain_row[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_chain kiwi_internal.chain_row[];
  v_rule  public.tool_type_rules;
  v_error text[];
begin
  select array_agg(c order by c.depth) into v_chain
    from kiwi_internal.resolve_chains(array[p_ref], p_version) c;
  if v_chain[1].error is not null then
    raise exception '%', v_chain[1].error using errcode = v_chain[1].error_code;
  end if;
  select * into v_rule from public.tool_type_rules r where r.tool_type = p_tool_type;
  if v_rule.terminal_primitive is not null
     and v_chain[cardinality(v_chain)].tool_id <> v_rule.terminal_primitive then
    v_error := kiwi_internal.chain_error('wrong_primitive', p_ref,
                                         (select array_agg(c.tool_id order by c.depth) from unnest(v_chain) c),
                                         v_rule.terminal_primitive, p_tool_type);
    raise exception '%', v_error[1] using errcode = v_error[2];
  end if;
  return v_chain;
end
$$;
revoke execute on function kiwi_internal.published_chain(text, text, text) from public, anon, authenticated, service_role;

-- p_approval_id: an approval of this very publish (request_publish_approval), for a
-- caller the command rule would refuse. It must be the caller's own, approved by an
-- admin, unexpired, unused, for this tool and this content_hash; it is marked used in
-- this transaction. Given for a publish that needs none, it is refused (22023).

create or replace function kiwi_internal.publish(p_manifest jsonb, p_files jsonb, p_manifest_yaml text, p_approval_id uuid)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_admin    boolean := kiwi_internal.caller_is_admin();
  v_uid      uuid := auth.uid();
  v_target   jsonb;
  v_contents jsonb;
  v_ns       text;
  v_tool_id  text;
  v_ref      text;
  v_version  text := p_manifest ->> 'version';
  v_exec     text;
  v_files    jsonb;
  v_hash     text;
  v_tool     public.tools;
  v_existing public.tool_versions;
  v_chain    kiwi_internal.chain_row[];
  v_official boolean := (p_manifest ->> 'is_official')::boolean;
  v_builtin  boolean := (p_manifest ->> 'is_builtin')::boolean;
  v_approval jsonb := '{}';
  v_said     jsonb := '{}';   -- {normalised: [...]} when publish rewrote old spellings of config keys
  v_trust    text[] := '{}';  -- what the config widens or reads that its chain's admins did not allow
  v_out      jsonb;
begin
  p_files := coalesce(p_files, '[]'::jsonb);
  v_target := kiwi_internal.publish_target(p_manifest, p_files);   -- valid, and who may publish where
  p_manifest := v_target -> 'manifest';   -- its config made canonical: what is stored and hashed
  if jsonb_array_length(v_target -> 'normalised') > 0 then
    v_said := jsonb_build_object('normalised', v_target -> 'normalised');
  end if;
  v_ns := v_target ->> 'namespace';
  v_tool_id := v_target ->> 'tool_id';
  v_ref := v_target ->> 'ref';
  if p_approval_id is null then
    perform kiwi_internal.refuse_command_write('publish', v_ref, v_ns, p_manifest ->> 'tool_type', v_builtin, v_official);
  end if;
  v_contents := kiwi_internal.publish_contents(p_manifest, p_files, v_ref);   -- executor, files, content hash
  v_exec := v_contents ->> 'executor';
  v_files := v_contents -> 'files';
  v_hash := v_contents ->> 'content_hash';
  if not v_admin then
    v_trust := kiwi_internal.trust_problems(p_manifest -> 'config', kiwi_internal.executor_plan(v_exec), v_exec, v_ns,
                 array(select g.variable from public.namespace_secret_grants g where g.namespace = v_ns));
  end if;

  -- Concurrent publishes to one tool take turns from here. The advisory lock comes
  -- first because a row lock cannot cover a tool that does not exist yet: two
  -- speculative inserts of one new tool would otherwise deadlock on the unique index
  -- when the first one updates its row (tests/test_concurrent_publish.py).
  perform pg_advisory_xact_lock(hashtext('kiwi.publish'), hashtext(v_ref));
  -- tools, versions and bytes per namespace and user (520_quotas.sql)
  perform kiwi_internal.check_publish_quotas(v_ns, v_ref, v_version, p_manifest, v_files, p_manifest_yaml);
  select * into v_tool from public.tools t where t.namespace = v_ns and t.tool_id = v_tool_id for update;
  if not found then
    insert into public.tools (namespace, tool_id, tool_type, executor_id, name, visibility, owner_id)
    values (v_ns, v_tool_id, p_manifest ->> 'tool_type', v_exec,
            coalesce(p_manifest ->> 'name', v_tool_id),
            -- no visibility given: public in `public`, private in anyone's own namespace
            coalesce(p_manifest ->> 'visibility', case when v_ns = 'public' then 'public' else 'private' end), v_uid)
    on conflict (namespace, tool_id) do nothing;
    select * into v_tool from public.tools t where t.namespace = v_ns and t.tool_id = v_tool_id for update;
  end if;
  if v_tool.tool_type <> (p_manifest ->> 'tool_type') then
    raise exception 'tool "%" is a %, not a %', v_ref, v_tool.tool_type, p_manifest ->> 'tool_type'
      using errcode = 'PT409', hint = 'a tool keeps its type; publish a new tool for another type';
  end if;
  -- the tool as it stands (an official tool stays the platform's whatever the manifest says)
  if p_approval_id is null then
    perform kiwi_internal.refuse_command_write('publish', v_ref, v_ns, v_tool.tool_type,
                                               v_tool.is_builtin, v_tool.is_official);
    perform kiwi_internal.refuse_trust(v_trust);
  elsif v_admin or (cardinality(kiwi_internal.command_write_reasons(v_ns, v_tool.tool_type,
                                  v_builtin or v_tool.is_builtin, v_official or v_tool.is_official)) = 0
                    and cardinality(v_trust) = 0) then
    raise exception 'approval_id is only for writes that need one: publishing tool "%" needs no approval%', v_ref,
      case when v_admin then ' (you are an admin)' else '' end
      using errcode = '22023', hint = 'publish it without an approval id; nothing was published';
  else   -- an admin's approval of this very content stands in for the admin
    v_approval := jsonb_build_object('approval_id',
      (kiwi_internal.spend_command_write_approval(p_approval_id, v_ref, v_hash)).id);
  end if;

  -- the same version again: a no-op when identical, refused when different
  select * into v_existing from public.tool_versions v where v.tool_uuid = v_tool.id and v.version = v_version;
  if found then
    if v_existing.content_hash = v_hash then
      return jsonb_build_object(
        'tool_id', v_ref, 'namespace', v_ns, 'version', v_version, 'content_hash', v_hash,
        'is_latest', v_existing.is_latest, 'latest_version', v_tool.latest_version,
        'created', false, 'unchanged', true) || v_approval || v_said;
    end if;
    raise exception 'version % of tool "%" is already published with different content', v_version, v_ref
      using errcode = 'PT409',
            detail = format('published content_hash %s, this content_hash %s', v_existing.content_hash, v_hash),
            hint = 'published versions are immutable: publish this as a new version';
  end if;

  insert into public.tool_versions (tool_uuid, version, executor_id, manifest, manifest_yaml,
                                    content_hash, changelog, published_by, admin_published)
  values (v_tool.id, v_version, v_exec, p_manifest, p_manifest_yaml, v_hash,
          p_manifest ->> 'changelog', v_uid, v_admin or v_approval ? 'approval_id')
  returning * into v_existing;

  insert into public.tool_version_files (version_id, path, media_type, sha256, size_bytes,
                                         is_entrypoint, content_text, storage_key)
  select v_existing.id, f ->> 'path', f ->> 'media_type', f ->> 'sha256', (f ->> 'size_bytes')::bigint,
         (f ->> 'is_entrypoint')::boolean, f ->> 'content_text', f ->> 'storage_key'
    from jsonb_array_elements(v_files) f;

  if (v_admin or v_approval ? 'approval_id') and (v_official is not null or v_builtin is not null) then
    update public.tools t set is_official = coalesce(v_official, t.is_official),
                              is_builtin  = coalesce(v_builtin, t.is_builtin)
     where t.id = v_tool.id;
  end if;

  v_chain := kiwi_internal.published_chain(v_ref, v_version, v_tool.tool_type);

  select * into v_tool from public.tools t where t.id = v_tool.id;
  v_out := jsonb_build_object(
    'tool_id', v_ref, 'namespace', v_ns, 'version', v_version, 'content_hash', v_hash,
    'is_latest', v_tool.latest_version = v_version, 'latest_version', v_tool.latest_version,
    'created', true, 'unchanged', false, 'files', jsonb_array_length(v_files),
    'executor_chain', (select jsonb_agg(c.tool_id order by c.depth) from unnest(v_chain) c)) || v_approval || v_said;
  -- a new latest version of an executor changes what every tool on it runs: say which
  if v_tool.tool_type in ('primitive', 'runtime', 'mcp_server') and v_tool.latest_version = v_version then
    v_out := v_out || kiwi_internal.dependents_of(v_ref);
  end if;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) from public;
grant execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) to anon, authenticated, service_role;
revoke execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) from public;
grant execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) to anon, authenticated, service_role;

-- The public RPC. p_signature {content_hash, public_key, signature}, when given, is
-- written in the same transaction (kiwi_internal.add_signature): a signature that does
-- not cover the content published refuses the whole publish. p_approval_id stays the last
-- argument, so calls with 3 or 4 arguments by position keep their meaning.
-- add_signature is created by 280_signatures.sql, after this migration: a
-- plpgsql body resolves the names it calls when it runs, not when it is created (late
-- binding), so publish keeps its RPC here and signatures keep their table there.
create function public.publish_tool_version(p_manifest jsonb, p_files jsonb default '[]',
                                            p_manifest_yaml text default null,
                                            p_signature jsonb default null,
                                            p_approval_id uuid default null)
  returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_out jsonb := kiwi_internal.publish(p_manifest, p_files, p_manifest_yaml, p_approval_id);
begin
  -- a signature made over the manifest as written cannot cover the canonical one stored
  if p_signature is not null and v_out ? 'normalised'
     and (p_signature ->> 'content_hash') is distinct from (v_out ->> 'content_hash') then
    raise exception 'the signature covers the manifest as written, but publish rewrites its config (%): the version stored would not be the one signed',
      (select string_agg(n, ', ') from jsonb_array_elements_text(v_out -> 'normalised') n)
      using errcode = '22023', hint = 'write the canonical keys in the manifest, then sign and publish again; nothing was published';
  end if;
  if p_signature is not null then
    v_out := v_out || jsonb_build_object('signature',
      kiwi_internal.add_signature(v_out ->> 'tool_id', v_out ->> 'version', p_signature));
  end if;
  return v_out;
end
$$;
comment on function public.publish_tool_version(jsonb, jsonb, text, jsonb, uuid) is
  'Publish one version: validates (naming each bad field; its config against the config_schema of every element of its chain, old spellings of keys rewritten and listed in normalised), hashes, inserts and moves is_latest in one transaction. The identical version again is a no-op; the same version with other content is refused. p_signature {content_hash, public_key, signature} signs it in the same transaction. p_approval_id: an admin''s approval of this exact content (request_publish_approval), for a write only an admin may otherwise make (a runtime, primitive, MCP server, builtin or official tool, the public namespace).';
revoke execute on function public.publish_tool_version(jsonb, jsonb, text, jsonb, uuid) from public;
grant execute on function public.publish_tool_version(jsonb, jsonb, text, jsonb, uuid) to anon, authenticated, service_role;
