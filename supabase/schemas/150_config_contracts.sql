-- Config contracts: which config a tool may carry is data in the registry, not code in the
-- runner. Each element of a chain may declare, in its manifest, the JSON Schema of the
-- config it understands (manifest.config_schema); a tool type may declare the keys the
-- runner reads for every tool of that type (tool_type_rules.config_schema: an mcp_server's
-- transport, an mcp_tool's tool). A tool's contract is its chain's: those schemas
-- deep-merged from the primitive up to the tool itself (jsonb_deep_merge: properties and
-- aliases add up; where two elements say different things about one key, the nearer wins).
-- Publish and preview_execution_plan (checked_config, called by publish_target and
-- preview_execution_plan) then
--   1. normalise the tool's own config: a key the contract declares as an old spelling
--      (x-aliases) is rewritten to the canonical key, and the answer says so
--      ("config.timeout_s -> config.timeout");
--   2. validate the merged config (the chain's below, the tool's over it) against the
--      contract: an unknown key is refused by name with the closest known one (pg_trgm
--      similarity), a wrong type, value or missing key by its path.
-- A chain none of whose elements declares a contract is not checked. Adding a config key
-- to a runtime is publishing the runtime with the key in its config_schema.
--
-- The schema language is a subset of JSON Schema, the keywords contract_problems lists:
-- type (a name or a list of names), enum, minimum, maximum, exclusiveMinimum, items,
-- properties, additionalProperties (false, or the schema of every other key), required;
-- description, title and default are notes. A keyword outside the subset is refused, so a
-- contract never says something the validator would ignore.
--
-- x-aliases, on the schema of an object: old key -> how it becomes canonical:
--   "new"                                 renamed
--   {to: "a.b", add: n, wrap: true}       moved to a (dotted) path, n added, put in a list
--   {values: {value: {key: value, ...}}}  replaced by the keys its value names
--   {spread: {key: alias, ...}}           an object whose keys each become keys here
--   {append: "key", item: {...}, spread: {...}, each: true}
--                                         appended as one item (each: one per element of a
--                                         list) to the list at key: item's keys, then the
--                                         old value's keys through spread
-- A key of the old value that its spread does not name is refused by name.
--
-- x-merge: "append", on the schema of a list (type: array) reached from the top through
-- properties: every element above the one that says it appends its items to the list
-- instead of replacing it (110_jsonb_merge.sql): subprocess marks
-- validation.rules, so no tool drops its runtime's rules.

-- JSON types in words, for messages: "a whole number", "true or false", ...
create function kiwi_internal.json_type_words(p_types text[]) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select string_agg(case t when 'object' then 'an object' when 'array' then 'a list'
                           when 'string' then 'a string' when 'number' then 'a number'
                           when 'integer' then 'a whole number' when 'boolean' then 'true or false'
                           else t end, ' or ' order by n)
    from unnest(p_types) with ordinality as u(t, n)
$$;
revoke execute on function kiwi_internal.json_type_words(text[]) from public;
grant execute on function kiwi_internal.json_type_words(text[]) to anon, authenticated, service_role;

-- A value as a message shows it: scalars as JSON (cut at 60 characters), the rest by type.
create function kiwi_internal.json_shown(p_value jsonb) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case jsonb_typeof(p_value) when 'object' then 'an object' when 'array' then 'a list'
              else left(p_value::text, 60) end
$$;
revoke execute on function kiwi_internal.json_shown(jsonb) from public;
grant execute on function kiwi_internal.json_shown(jsonb) to anon, authenticated, service_role;

-- How an unknown key is named: the closest key the schema declares (an old spelling counts,
-- shown as what it becomes), else the keys it declares.
create function kiwi_internal.unknown_key(p_path text, p_key text, p_schema jsonb) returns text
  language sql stable parallel safe
  set search_path = ''
as $$
  with known as (
    select k as name, k as shown, true as canonical
      from jsonb_object_keys(case when jsonb_typeof(p_schema -> 'properties') = 'object'
                                  then p_schema -> 'properties' else '{}' end) k
    union all
    select a.key, coalesce(case when jsonb_typeof(a.value) = 'string' then a.value #>> '{}' end,
                           a.value ->> 'to', a.value ->> 'append', a.key), false
      from jsonb_each(case when jsonb_typeof(p_schema -> 'x-aliases') = 'object'
                           then p_schema -> 'x-aliases' else '{}' end) a
  ), best as (
    select k.shown, extensions.similarity(p_key, k.name) as score
      from known k order by 2 desc, k.name limit 1
  )
  select format('%s.%s: unknown key%s', p_path, p_key,
    case when (select b.score from best b) >= 0.25
           then format(' (did you mean %s?)', (select b.shown from best b))
         when exists (select 1 from known k where k.canonical)
           then format(' (known: %s)', (select string_agg(k.name, ', ' order by k.name) from known k where k.canonical))
         else ' (no key is declared here)' end)
$$;
revoke execute on function kiwi_internal.unknown_key(text, text, jsonb) from public;
grant execute on function kiwi_internal.unknown_key(text, text, jsonb) to anon, authenticated, service_role;

-- The problems of an alias spec (see the header), named by its path in the contract.
create function kiwi_internal.alias_problems(p_spec jsonb, p_path text, p_depth int default 0) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_key   text;
  v_value jsonb;
  v_kinds int;
  v_name  constant text := '^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$';
begin
  if p_depth > 8 then
    return array[format('%s: aliases nest deeper than 8 levels', p_path)];
  elsif jsonb_typeof(p_spec) = 'string' then
    return case when (p_spec #>> '{}') ~ v_name then p
                else array[format('%s: "%s" is not a key name', p_path, p_spec #>> '{}')] end;
  elsif jsonb_typeof(p_spec) is distinct from 'object' then
    return array[format('%s: must be the canonical key (a string) or an object {to | values | spread | append, ...}', p_path)];
  end if;
  for v_key in select jsonb_object_keys(p_spec) loop
    if not v_key = any (array['to', 'add', 'wrap', 'values', 'spread', 'append', 'item', 'each']) then
      p := p || format('%s.%s: unknown field (allowed: to, add, wrap, values, spread, append, item, each)', p_path, v_key);
    end if;
  end loop;
  v_kinds := (p_spec ? 'to')::int + (p_spec ? 'values')::int + (p_spec ? 'append')::int
             + (p_spec ? 'spread' and not p_spec ? 'append')::int;
  if v_kinds <> 1 then
    p := p || format('%s: give exactly one of to, values, spread or append', p_path);
  end if;
  foreach v_key in array array['to', 'append'] loop
    if p_spec ? v_key and coalesce(p_spec ->> v_key, '') !~ v_name then
      p := p || format('%s.%s: must be a key name (a.b for a nested key)', p_path, v_key);
    end if;
  end loop;
  if p_spec ? 'add' and (not p_spec ? 'to' or jsonb_typeof(p_spec -> 'add') <> 'number') then
    p := p || format('%s.add: a number, beside to', p_path);
  end if;
  if p_spec ? 'wrap' and (not p_spec ? 'to' or jsonb_typeof(p_spec -> 'wrap') <> 'boolean') then
    p := p || format('%s.wrap: true or false, beside to', p_path);
  end if;
  if p_spec ? 'item' and (not p_spec ? 'append' or jsonb_typeof(p_spec -> 'item') <> 'object') then
    p := p || format('%s.item: an object, beside append', p_path);
  end if;
  if p_spec ? 'each' and (not p_spec ? 'append' or jsonb_typeof(p_spec -> 'each') <> 'boolean') then
    p := p || format('%s.each: true or false, beside append', p_path);
  end if;
  if p_spec ? 'values' and (jsonb_typeof(p_spec -> 'values') <> 'object'
       or exists (select 1 from jsonb_each(p_spec -> 'values') e where jsonb_typeof(e.value) <> 'object')) then
    p := p || format('%s.values: an object {old value: {key: value, ...}}', p_path);
  end if;
  if p_spec ? 'spread' then
    if jsonb_typeof(p_spec -> 'spread') <> 'object' then
      p := p || format('%s.spread: an object {old key: alias, ...}', p_path);
    else
      for v_key, v_value in select * from jsonb_each(p_spec -> 'spread') loop
        p := p || kiwi_internal.alias_problems(v_value, format('%s.spread.%s', p_path, v_key), p_depth + 1);
      end loop;
    end if;
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.alias_problems(jsonb, text, int) from public;
grant execute on function kiwi_internal.alias_problems(jsonb, text, int) to anon, authenticated, service_role;

-- The problems of a contract (a manifest's config_schema, p_path 'config_schema'): only
-- the keywords of the subset, each of its form. Called by manifest_base_problems.
create function kiwi_internal.contract_problems(p_schema jsonb, p_path text, p_depth int default 0) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_key   text;
  v_value jsonb;
  v_types constant text[] := array['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'];
  v_words constant text[] := array['type', 'enum', 'minimum', 'maximum', 'exclusiveMinimum', 'items', 'properties',
                                   'additionalProperties', 'required', 'description', 'title', 'default', 'x-aliases',
                                   'x-merge'];
begin
  if p_depth > 16 then
    return array[format('%s: nested deeper than 16 levels', p_path)];
  elsif p_depth > 0 and jsonb_typeof(p_schema) = 'boolean' then
    return p;   -- true: anything; false: nothing
  elsif jsonb_typeof(p_schema) is distinct from 'object' then
    return array[format('%s: must be a JSON Schema (an object)', p_path)];
  end if;
  if p_depth = 0 and coalesce(p_schema ->> 'type', 'object') <> 'object' then
    p := p || format('%s.type: a config is an object', p_path);
  end if;
  for v_key, v_value in select * from jsonb_each(p_schema) loop
    if not v_key = any (v_words) then
      p := p || format('%s.%s: not a keyword config contracts support (%s)', p_path, v_key, array_to_string(v_words, ', '));
      continue;
    end if;
    case v_key
      when 'type' then
        if not ((jsonb_typeof(v_value) = 'string' and (v_value #>> '{}') = any (v_types))
                or (jsonb_typeof(v_value) = 'array' and jsonb_array_length(v_value) > 0
                    and not exists (select 1 from jsonb_array_elements(v_value) t
                                     where jsonb_typeof(t) <> 'string' or not (t #>> '{}') = any (v_types)))) then
          p := p || format('%s.type: one of %s, or a list of them', p_path, array_to_string(v_types, ', '));
        end if;
      when 'enum' then
        if jsonb_typeof(v_value) <> 'array' or jsonb_array_length(v_value) = 0 then
          p := p || format('%s.enum: a list of the values allowed', p_path);
        end if;
      when 'minimum', 'maximum', 'exclusiveMinimum' then
        if jsonb_typeof(v_value) <> 'number' then
          p := p || format('%s.%s: must be a number', p_path, v_key);
        end if;
      when 'items', 'additionalProperties' then
        p := p || kiwi_internal.contract_problems(v_value, p_path || '.' || v_key, p_depth + 1);
        if jsonb_path_exists(v_value, 'lax $.**."x-merge"') then
          p := p || format('%s.%s: x-merge marks a key reached through properties only, not inside %s',
                           p_path, v_key, v_key);
        end if;
      when 'properties' then
        if jsonb_typeof(v_value) <> 'object' then
          p := p || format('%s.properties: an object {key: schema, ...}', p_path);
        else
          p := p || coalesce((select array_agg(x order by e.key, n)
                                from jsonb_each(v_value) e,
                                     unnest(kiwi_internal.contract_problems(e.value, format('%s.properties.%s', p_path, e.key),
                                                                            p_depth + 1)) with ordinality u(x, n)), '{}');
        end if;
      when 'required' then
        if jsonb_typeof(v_value) <> 'array'
           or exists (select 1 from jsonb_array_elements(v_value) r where jsonb_typeof(r) <> 'string') then
          p := p || format('%s.required: a list of key names', p_path);
        end if;
      when 'description', 'title' then
        if jsonb_typeof(v_value) <> 'string' then
          p := p || format('%s.%s: must be a string', p_path, v_key);
        end if;
      when 'x-merge' then
        if v_value is distinct from '"append"' then
          p := p || format('%s.x-merge: "append" (the one way a list merges other than replaced)', p_path);
        elsif p_schema -> 'type' is distinct from '"array"' then
          p := p || format('%s.x-merge: marks a list: give type: array beside it', p_path);
        end if;
      when 'x-aliases' then
        if jsonb_typeof(v_value) <> 'object' then
          p := p || format('%s.x-aliases: an object {old key: alias, ...}', p_path);
        else
          p := p || coalesce((select array_agg(x order by e.key, n)
                                from jsonb_each(v_value) e,
                                     unnest(kiwi_internal.alias_problems(e.value, format('%s.x-aliases.%s', p_path, e.key)))
                                       with ordinality u(x, n)), '{}');
        end if;
      else   -- default: any value
    end case;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.contract_problems(jsonb, text, int) from public;
grant execute on function kiwi_internal.contract_problems(jsonb, text, int) to anon, authenticated, service_role;

-- The problems of a config value against a contract, each named by its path (p_path:
-- 'config' at the top).
create function kiwi_internal.config_problems(p_value jsonb, p_schema jsonb, p_path text) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_type  text := jsonb_typeof(p_value);
  v_types text[];
  v_num   numeric;
  v_key   text;
  v_child jsonb;
begin
  if p_schema is null or jsonb_typeof(p_schema) <> 'object' then
    return case when p_schema = 'false'::jsonb then array[format('%s: not allowed here', p_path)] else p end;
  end if;
  if p_schema ? 'type' then
    v_types := case when jsonb_typeof(p_schema -> 'type') = 'array'
                    then array(select jsonb_array_elements_text(p_schema -> 'type'))
                    else array[p_schema ->> 'type'] end;
    if not (v_type = any (v_types)
            or (v_type = 'number' and 'integer' = any (v_types) and (p_value::text)::numeric % 1 = 0)) then
      return array[format('%s: must be %s, not %s', p_path, kiwi_internal.json_type_words(v_types),
                          kiwi_internal.json_shown(p_value))];
    end if;
  end if;
  if jsonb_typeof(p_schema -> 'enum') = 'array'
     and not exists (select 1 from jsonb_array_elements(p_schema -> 'enum') e where e = p_value) then
    p := p || format('%s: %s is not one of %s', p_path, kiwi_internal.json_shown(p_value),
                     (select string_agg(e #>> '{}', ', ') from jsonb_array_elements(p_schema -> 'enum') e));
  end if;
  if v_type = 'number' then
    v_num := (p_value::text)::numeric;
    if jsonb_typeof(p_schema -> 'minimum') = 'number' and v_num < (p_schema ->> 'minimum')::numeric then
      p := p || format('%s: must be at least %s, not %s', p_path, p_schema ->> 'minimum', p_value);
    end if;
    if jsonb_typeof(p_schema -> 'exclusiveMinimum') = 'number' and v_num <= (p_schema ->> 'exclusiveMinimum')::numeric then
      p := p || format('%s: must be more than %s, not %s', p_path, p_schema ->> 'exclusiveMinimum', p_value);
    end if;
    if jsonb_typeof(p_schema -> 'maximum') = 'number' and v_num > (p_schema ->> 'maximum')::numeric then
      p := p || format('%s: must be at most %s, not %s', p_path, p_schema ->> 'maximum', p_value);
    end if;
  elsif v_type = 'object' then
    if jsonb_typeof(p_schema -> 'required') = 'array' then
      p := p || coalesce((select array_agg(format('%s.%s: required', p_path, r) order by n)
                            from jsonb_array_elements_text(p_schema -> 'required') with ordinality as q(r, n)
                           where not p_value ? r), '{}');
    end if;
    for v_key in select jsonb_object_keys(p_value) loop
      v_child := p_schema #> array['properties', v_key];
      if v_child is null and p_schema -> 'additionalProperties' = 'false'::jsonb then
        p := p || kiwi_internal.unknown_key(p_path, v_key, p_schema);
      elsif v_child is null and jsonb_typeof(p_schema -> 'additionalProperties') = 'object' then
        p := p || kiwi_internal.config_problems(p_value -> v_key, p_schema -> 'additionalProperties', p_path || '.' || v_key);
      elsif v_child is not null then
        p := p || kiwi_internal.config_problems(p_value -> v_key, v_child, p_path || '.' || v_key);
      end if;
    end loop;
  elsif v_type = 'array' and p_schema ? 'items' then
    p := p || coalesce((select array_agg(x order by i, n)
                          from jsonb_array_elements(p_value) with ordinality as e(item, i),
                               unnest(kiwi_internal.config_problems(e.item, p_schema -> 'items',
                                                                    format('%s[%s]', p_path, e.i))) with ordinality u(x, n)),
                       '{}');
  end if;
  return p;
end
$$;
revoke execute on function kiwi_internal.config_problems(jsonb, jsonb, text) from public;
grant execute on function kiwi_internal.config_problems(jsonb, jsonb, text) to anon, authenticated, service_role;

-- p_target with p_value at the dotted path p_path (objects made on the way).
create function kiwi_internal.jsonb_put(p_target jsonb, p_path text[], p_value jsonb) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
begin
  if cardinality(p_path) = 1 then
    return p_target || jsonb_build_object(p_path[1], p_value);
  end if;
  return p_target || jsonb_build_object(p_path[1], kiwi_internal.jsonb_put(
    case when jsonb_typeof(p_target -> p_path[1]) = 'object' then p_target -> p_path[1] else '{}'::jsonb end,
    p_path[2:], p_value));
end
$$;
revoke execute on function kiwi_internal.jsonb_put(jsonb, text[], jsonb) from public;
grant execute on function kiwi_internal.jsonb_put(jsonb, text[], jsonb) to anon, authenticated, service_role;

-- One old spelling made canonical: p_value (the old key's value, at p_path) written into
-- p_target (the object that held it, without it) as p_spec says (see the header).
-- -> {target, wrote: [keys written into target], problems: [...]}. A key written that
-- the object already has is a conflict, named; appending to a list that is there is not.
create function kiwi_internal.config_alias(p_target jsonb, p_spec jsonb, p_value jsonb, p_path text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_spec   jsonb := case when jsonb_typeof(p_spec) = 'string' then jsonb_build_object('to', p_spec) else p_spec end;
  v_target jsonb := p_target;
  v_wrote  text[] := '{}';
  p        text[] := '{}';
  v_list   jsonb;
  v_item   jsonb;
  v_elem   jsonb;
  v_i      int;
  v_r      jsonb;
  v_key    text;
  v_value  jsonb;
begin
  if v_spec ? 'append' then
    v_key := v_spec ->> 'append';
    if (v_spec ->> 'each')::boolean is true and jsonb_typeof(p_value) <> 'array' then
      return jsonb_build_object('target', v_target, 'wrote', '[]'::jsonb,
                                'problems', jsonb_build_array(format('%s: must be a list', p_path)));
    end if;
    v_list := case when v_target ? v_key then v_target -> v_key else '[]'::jsonb end;
    if jsonb_typeof(v_list) <> 'array' then
      return jsonb_build_object('target', v_target, 'wrote', '[]'::jsonb, 'problems',
        jsonb_build_array(format('%s: becomes items of %s, which is not a list here', p_path, v_key)));
    end if;
    v_i := 0;
    for v_elem in select e from jsonb_array_elements(case when (v_spec ->> 'each')::boolean is true then p_value
                                                           else jsonb_build_array(p_value) end) e loop
      v_i := v_i + 1;
      v_item := coalesce(v_spec -> 'item', '{}'::jsonb);
      if jsonb_typeof(v_elem) <> 'object' then
        p := p || format('%s: must be an object', case when (v_spec ->> 'each')::boolean is true
                                                       then format('%s[%s]', p_path, v_i) else p_path end);
        continue;
      elsif v_spec ? 'spread' then
        v_r := kiwi_internal.config_spread(v_item, v_spec -> 'spread',  v_elem,
                                           case when (v_spec ->> 'each')::boolean is true
                                                then format('%s[%s]', p_path, v_i) else p_path end);
        v_item := v_r -> 'target';
        p := p || array(select jsonb_array_elements_text(v_r -> 'problems'));
      else
        v_item := v_item || v_elem;
      end if;
      v_list := v_list || jsonb_build_array(v_item);
    end loop;
    v_target := v_target || jsonb_build_object(v_key, v_list);
    v_wrote := array[v_key];
  elsif v_spec ? 'spread' then
    return kiwi_internal.config_spread(v_target, v_spec -> 'spread', p_value, p_path);
  elsif v_spec ? 'values' then
    v_value := case when jsonb_typeof(p_value) in ('string', 'number', 'boolean')
                    then v_spec #> array['values', p_value #>> '{}'] end;
    if v_value is null then
      p := p || format('%s: %s is not one of %s', p_path, kiwi_internal.json_shown(p_value),
                       (select string_agg(k, ', ' order by k) from jsonb_object_keys(v_spec -> 'values') k));
    else
      for v_key in select jsonb_object_keys(v_value) loop
        if v_target ? v_key then
          p := p || format('%s: becomes %s, which is given too: keep one', p_path, v_key);
        end if;
        v_wrote := v_wrote || v_key;
      end loop;
      v_target := v_target || v_value;
    end if;
  else
    v_value := p_value;
    if v_spec ? 'add' then
      if jsonb_typeof(p_value) <> 'number' then
        return jsonb_build_object('target', v_target, 'wrote', '[]'::jsonb, 'problems',
          jsonb_build_array(format('%s: must be a number, not %s', p_path, kiwi_internal.json_shown(p_value))));
      end if;
      v_value := to_jsonb((p_value::text)::numeric + (v_spec ->> 'add')::numeric);
    end if;
    if (v_spec ->> 'wrap')::boolean is true then
      v_value := jsonb_build_array(v_value);
    end if;
    if v_target #> string_to_array(v_spec ->> 'to', '.') is not null then
      p := p || format('%s: an old spelling of %s, which is given too: keep one', p_path, v_spec ->> 'to');
    end if;
    v_target := kiwi_internal.jsonb_put(v_target, string_to_array(v_spec ->> 'to', '.'), v_value);
    v_wrote := array[v_spec ->> 'to'];
  end if;
  return jsonb_build_object('target', v_target, 'wrote', to_jsonb(v_wrote), 'problems', to_jsonb(p));
end
$$;
revoke execute on function kiwi_internal.config_alias(jsonb, jsonb, jsonb, text) from public;
grant execute on function kiwi_internal.config_alias(jsonb, jsonb, jsonb, text) to anon, authenticated, service_role;

-- The keys of p_value (an object, at p_path) made canonical into p_target, each by its
-- alias in p_map; a key p_map does not name is refused.
create function kiwi_internal.config_spread(p_target jsonb, p_map jsonb, p_value jsonb, p_path text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_target jsonb := p_target;
  v_wrote  jsonb := '[]';
  p        text[] := '{}';
  v_key    text;
  v_value  jsonb;
  v_r      jsonb;
begin
  if jsonb_typeof(p_value) <> 'object' then
    return jsonb_build_object('target', v_target, 'wrote', v_wrote, 'problems', jsonb_build_array(
      format('%s: must be an object {%s}', p_path, (select string_agg(k, ', ' order by k) from jsonb_object_keys(p_map) k))));
  end if;
  for v_key, v_value in select * from jsonb_each(p_value) loop
    if not p_map ? v_key then
      p := p || kiwi_internal.unknown_key(p_path, v_key, jsonb_build_object('properties', p_map));
      continue;
    end if;
    v_r := kiwi_internal.config_alias(v_target, p_map -> v_key, v_value, p_path || '.' || v_key);
    v_target := v_r -> 'target';
    v_wrote := v_wrote || (v_r -> 'wrote');
    p := p || array(select jsonb_array_elements_text(v_r -> 'problems'));
  end loop;
  return jsonb_build_object('target', v_target, 'wrote', v_wrote, 'problems', to_jsonb(p));
end
$$;
revoke execute on function kiwi_internal.config_spread(jsonb, jsonb, jsonb, text) from public;
grant execute on function kiwi_internal.config_spread(jsonb, jsonb, jsonb, text) to anon, authenticated, service_role;

-- p_value made canonical by the aliases of p_schema, at every level the schema describes.
-- -> {value, normalised: ["config.timeout_s -> config.timeout", ...], problems: [...]}.
create function kiwi_internal.config_normalise(p_value jsonb, p_schema jsonb, p_path text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_out   jsonb := p_value;
  v_norm  jsonb := '[]';
  p       jsonb := '[]';
  v_key   text;
  v_value jsonb;
  v_child jsonb;
  v_r     jsonb;
  v_items jsonb := '[]';
begin
  if jsonb_typeof(p_schema) <> 'object' or position('"x-aliases"' in p_schema::text) = 0 then
    return jsonb_build_object('value', p_value, 'normalised', v_norm, 'problems', p);
  end if;
  if jsonb_typeof(p_value) = 'object' then
    if jsonb_typeof(p_schema -> 'x-aliases') = 'object' then
      for v_key, v_value in select * from jsonb_each(p_value) loop
        continue when not (p_schema -> 'x-aliases') ? v_key or p_schema #> array['properties', v_key] is not null;
        v_r := kiwi_internal.config_alias(v_out - v_key, p_schema #> array['x-aliases', v_key], v_value,
                                          p_path || '.' || v_key);
        p := p || (v_r -> 'problems');
        if jsonb_array_length(v_r -> 'problems') = 0 then
          v_out := v_r -> 'target';
          v_norm := v_norm || to_jsonb(format('%s.%s -> %s', p_path, v_key,
                      coalesce((select string_agg(p_path || '.' || w, ', ' order by n)
                                  from jsonb_array_elements_text(v_r -> 'wrote') with ordinality as x(w, n)),
                               'nothing')));
        end if;
      end loop;
    end if;
    for v_key, v_value in select * from jsonb_each(v_out) loop
      v_child := coalesce(p_schema #> array['properties', v_key],
                          case when jsonb_typeof(p_schema -> 'additionalProperties') = 'object'
                               then p_schema -> 'additionalProperties' end);
      continue when v_child is null;
      v_r := kiwi_internal.config_normalise(v_value, v_child, p_path || '.' || v_key);
      v_out := v_out || jsonb_build_object(v_key, v_r -> 'value');
      v_norm := v_norm || (v_r -> 'normalised');
      p := p || (v_r -> 'problems');
    end loop;
  elsif jsonb_typeof(p_value) = 'array' and jsonb_typeof(p_schema -> 'items') = 'object' then
    for v_value, v_key in select e.item, e.i::text from jsonb_array_elements(p_value) with ordinality as e(item, i) loop
      v_r := kiwi_internal.config_normalise(v_value, p_schema -> 'items', format('%s[%s]', p_path, v_key));
      v_items := v_items || jsonb_build_array(v_r -> 'value');
      v_norm := v_norm || (v_r -> 'normalised');
      p := p || (v_r -> 'problems');
    end loop;
    v_out := v_items;
  end if;
  return jsonb_build_object('value', v_out, 'normalised', v_norm, 'problems', p);
end
$$;
revoke execute on function kiwi_internal.config_normalise(jsonb, jsonb, text) from public;
grant execute on function kiwi_internal.config_normalise(jsonb, jsonb, text) to anon, authenticated, service_role;

-- A manifest's config held to its chain's contract (see the header), as the caller sees
-- the chain. -> {manifest: with its config made canonical, normalised: [...],
-- problems: [...], append: the marks of the executor's chain (append_marks), under which
-- the tool's config merges onto its executor's in its plan}. The config held to the
-- contract is the tool's written over its chain's, every list replaced: a list the chain
-- marks "x-merge": "append" is checked as the tool writes it (its items named by their own
-- positions, a value that is no list refused), the chain's items having been checked when
-- their elements were published. An executor that cannot be found or whose chain does not
-- resolve is not checked here: publish and preview refuse it in their own words.
create function kiwi_internal.checked_config(p_manifest jsonb) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_exec     text := kiwi_internal.normalize_ref(p_manifest ->> 'executor');
  v_link     kiwi_internal.chain_row;
  v_schemas  jsonb[] := '{}';   -- primitive first, two per element: its type's, its own
  v_configs  jsonb[] := '{}';   -- primitive first
  v_owns     jsonb[] := '{}';   -- primitive first: each element's own config_schema
  v_marks    jsonb;             -- the executor chain's append marks
  v_contract jsonb;
  v_below    jsonb;
  v_schema   jsonb;
  v_r        jsonb;
  v_problems text[];
  v_none     constant jsonb := '[]';
begin
  if v_exec is not null then
    for v_link in select * from kiwi_internal.resolve_chains(array[v_exec]) c order by c.depth loop
      if v_link.error is not null then
        return jsonb_build_object('manifest', p_manifest, 'normalised', v_none, 'problems', v_none);
      end if;
      v_schemas := array[(select r.config_schema from public.tool_type_rules r where r.tool_type = v_link.tool_type),
                         v_link.manifest -> 'config_schema'] || v_schemas;
      v_configs := array_prepend(v_link.manifest -> 'config', v_configs);
      v_owns := array_prepend(v_link.manifest -> 'config_schema', v_owns);
    end loop;
  end if;
  foreach v_schema in array v_owns loop
    v_marks := kiwi_internal.append_marks(v_schema, v_marks);
  end loop;
  v_schemas := v_schemas
               || (select r.config_schema from public.tool_type_rules r where r.tool_type = p_manifest ->> 'tool_type')
               || (p_manifest -> 'config_schema');
  foreach v_schema in array v_schemas loop
    v_contract := kiwi_internal.jsonb_deep_merge(v_contract, v_schema);
  end loop;
  if v_contract is null then   -- no contract; still no timeout over a day (470_max_timeout.sql)
    return jsonb_build_object('manifest', p_manifest, 'normalised', v_none, 'append', v_marks,
                              'problems', to_jsonb(kiwi_internal.timeout_problems(p_manifest -> 'config', 'config')));
  end if;
  v_r := kiwi_internal.config_normalise(coalesce(p_manifest -> 'config', '{}'), v_contract, 'config');
  v_problems := array(select jsonb_array_elements_text(v_r -> 'problems'));
  if cardinality(v_problems) = 0 then
    foreach v_schema in array v_configs loop
      v_below := kiwi_internal.jsonb_deep_merge(v_below, v_schema);
    end loop;
    v_problems := kiwi_internal.config_problems(kiwi_internal.jsonb_deep_merge(coalesce(v_below, '{}'), v_r -> 'value'),
                                                v_contract, 'config');
  end if;
  v_problems := v_problems || kiwi_internal.timeout_problems(v_r -> 'value', 'config');
  return jsonb_build_object(
    'manifest', case when p_manifest ? 'config' then p_manifest || jsonb_build_object('config', v_r -> 'value')
                     else p_manifest end,
    'normalised', v_r -> 'normalised',
    'problems', to_jsonb(v_problems),
    'append', v_marks);
end
$$;
revoke execute on function kiwi_internal.checked_config(jsonb) from public;
grant execute on function kiwi_internal.checked_config(jsonb) to anon, authenticated, service_role;

-- The keys the runner reads for every tool of a type, whatever its chain: how an MCP
-- server is reached and kept (runner/mcp_client/servers.py), which upstream tool an mcp_tool is
-- and how its calls are retried (runner/handlers/mcp_tool.py), the paths its calls touch
-- (runner/policy/permissions.py). Keys of the commands and requests themselves are the
-- primitives' (supabase/seed/subprocess, supabase/seed/http_client).
--
-- An mcp_server's `auth` block is read by runner/mcp_client/oauth/config.py: a remote server
-- that asks users to sign in says `auth: {type: oauth, ...}`, and its tokens are kept per user
-- (350_mcp_oauth_tokens.sql). This rule is merged over the http_client primitive's contract
-- (whose auth types are bearer, basic and api_key), so its keys add up and `oauth` joins the
-- types. Secrets are ${VAR}s (the runner refuses anything else); this only names the keys.
update public.tool_type_rules set config_schema = $json${
  "type": "object",
  "properties": {
    "transport": {"enum": ["stdio", "streamable_http", "streamable-http", "http", "sse", "websocket", "ws"],
                  "description": "stdio (command, args, env), or streamable_http, sse or websocket (url, headers; a websocket url is ws:// or wss://); default: stdio when there is a command"},
    "tool_fs": {"type": "object",
                "description": "per upstream tool, which parameters are paths it reads or writes: {tool: {read: [param], write: [param]}}",
                "additionalProperties": {"type": "object", "additionalProperties": false,
                                         "properties": {"read": {"type": "array", "items": {"type": "string"}},
                                                        "write": {"type": "array", "items": {"type": "string"}}}}},
    "startup_timeout": {"type": "number", "exclusiveMinimum": 0, "description": "seconds to wait for the server to start"},
    "idle_shutdown_s": {"type": "number", "exclusiveMinimum": 0, "description": "seconds unused before the server is stopped"},
    "proxy": {"type": "boolean", "description": "false: agents get its tools' schemas and its connection and call it themselves, outside the gate and audit (a directive's tool context, load with item_type mcp); default true: through Kiwi"},
    "auth": {
      "type": "object",
      "description": "remote servers: {type: oauth, grant: authorization_code|client_credentials, scopes, client_id, client_secret: ${VAR}, ...} (kiwi mcp login SERVER signs a user in)",
      "properties": {
        "type": {"enum": ["bearer", "basic", "api_key", "oauth"]},
        "grant": {"enum": ["authorization_code", "client_credentials"]},
        "scopes": {"type": "array", "items": {"type": "string"}},
        "client_id": {"type": "string"},
        "client_secret": {"type": "string", "description": "a ${VAR} reference, never the secret"},
        "client_metadata_url": {"type": "string", "description": "an https URL client ID (client ID metadata document)"},
        "issuer": {"type": "string", "description": "the only authorization server to trust"},
        "token_endpoint_auth_method": {"enum": ["client_secret_basic", "client_secret_post", "none"]},
        "redirect_port": {"type": "integer", "minimum": 0, "maximum": 65535},
        "client_name": {"type": "string"},
        "private_key": {"type": "string", "description": "client_credentials with private_key_jwt: a ${VAR} holding the PEM"},
        "signing_algorithm": {"type": "string"}
      }
    }
  },
  "x-aliases": {"startup_timeout_s": "startup_timeout"}
}$json$::jsonb
 where tool_type = 'mcp_server';

update public.tool_type_rules set config_schema = $json${
  "type": "object",
  "properties": {
    "tool": {"type": "string", "description": "the upstream tool's name (default: the part of the id after <server>.)"},
    "annotations": {"type": "object", "description": "the upstream tool's hints (readOnlyHint, idempotentHint, ...)"},
    "idempotent": {"type": "boolean", "description": "whether a call cut off mid-flight may be sent again"},
    "retries": {"type": "integer", "minimum": 0, "description": "extra attempts of a call that may be repeated"}
  },
  "x-aliases": {"mcp_tool_name": "tool"}
}$json$::jsonb
 where tool_type = 'mcp_tool';

-- A knowledge entry runs nothing: its config says what it is and where it came from, as the
-- design documents write it (entry_type, source_type, source_url). The runner returns the
-- source with the text (runner/harness/run.py, runner/mcp_server/meta/load.py); publish also
-- checks that source_url is an http(s) URL (manifest_base_problems, 160_publish.sql).
update public.tool_type_rules set config_schema = $json${
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "entry_type": {"type": "string", "description": "what kind of entry it is: pattern, guide, reference, ..."},
    "source_type": {"type": "string", "description": "what kind of source it was taken from: docs, article, paper, ..."},
    "source_url": {"type": "string", "description": "where it was taken from: an http or https URL"}
  }
}$json$::jsonb
 where tool_type = 'knowledge';
