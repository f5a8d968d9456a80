-- A manifest's `parameters` and `outputs` are JSON Schemas the runner compiles with
-- jsonschema-rs (runner/core/params.py: always Draft 2020-12; runner/core/outputs.py: the draft
-- its `$schema` names, else 2020-12), no remote `$ref` fetched, patterns on a linear-time
-- engine (runner/core/linear_regex.py). A schema it cannot compile was published and only
-- refused when the tool ran. SQL runs no meta-schema, so schema_problems checks what is
-- checkable, the way jsonschema-rs's meta-validation refuses it, each problem named by its
-- path (manifest_base_problems, 160_publish.sql, calls it for both):
--
--   a schema is an object or true/false; nested at most 32 levels
--   type         one of the seven type names, or a non-empty list of distinct ones
--   properties, patternProperties, $defs, definitions, dependentSchemas   an object of schemas
--   items        a schema (a list of schemas too, under an outputs `$schema` of draft 4 to 2019-09)
--   prefixItems, allOf, anyOf, oneOf      a non-empty list of schemas
--   additionalProperties, additionalItems, not, if, then, else, contains, propertyNames,
--   unevaluatedProperties, unevaluatedItems, contentSchema                a schema
--   required     a list of distinct strings; enum, examples a list; dependentRequired an
--                object of lists of strings
--   minimum, maximum, exclusiveMinimum, exclusiveMaximum   a number (the exclusive ones may be
--                true/false under draft 4); multipleOf a number above 0
--   minLength, maxLength, minItems, maxItems, minProperties, maxProperties, minContains,
--   maxContains  a whole number >= 0; uniqueItems true/false
--   $id, $anchor, $dynamicAnchor, $comment, title, description, format, pattern   a string;
--                $schema of outputs one jsonschema-rs knows (draft 4, 6, 7, 2019-09, 2020-12)
--   $ref, $dynamicRef, $recursiveRef   a reference inside the schema: starts with '#'
--   pattern and the names of patternProperties   no construct only a backtracking engine has
--                (lookaround, atomic groups, backreferences), in the runner's words
--                (NO_BACKTRACKING, runner/core/linear_regex.py)
-- Other keywords are annotations to JSON Schema and are not read.

-- The first construct of p_pattern that only a backtracking engine matches, as written
-- ("(?=", "\1", ...); null when none. Escapes are read pairwise (`\\1` is a backslash and
-- a 1), and what stands in a [...] class is not a group.
create function kiwi_internal.backtracking_construct(p_pattern text) returns text
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select coalesce(
    (select '\' || m[1] from regexp_matches(p_pattern, '\\(k<|k\{|k''|[1-9]|.)', 'g') m
      where m[1] ~ '^(k.|[1-9])$' limit 1),
    substring(regexp_replace(regexp_replace(p_pattern, '\\.', '', 'g'), '\[\^?\]?[^]]*\]', '', 'g')
              from '\(\?(?:=|!|<=|<!|>|P=)'))
$$;
revoke execute on function kiwi_internal.backtracking_construct(text) from public;
grant execute on function kiwi_internal.backtracking_construct(text) to anon, authenticated, service_role;

-- The problem of one pattern at p_path (a string is checked by the caller), or null.
create function kiwi_internal.pattern_problem(p_pattern text, p_path text) returns text
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select format('%s: %s uses %s: patterns must be regular expressions that need no backtracking: no lookaround ((?=, (?!, (?<=, (?<!) and no backreferences (\1)',
                p_path, left(to_jsonb(p_pattern)::text, 80), kiwi_internal.backtracking_construct(p_pattern))
   where kiwi_internal.backtracking_construct(p_pattern) is not null
$$;
revoke execute on function kiwi_internal.pattern_problem(text, text) from public;
grant execute on function kiwi_internal.pattern_problem(text, text) to anon, authenticated, service_role;

-- The problems of schema p_schema at p_path (see the header). p_draft: the draft the runner
-- compiles it with ('2020-12', or for outputs the one its root `$schema` names: '4', '6',
-- '7', '2019-09'); p_outputs: it is an outputs schema (its `$schema` must be one the
-- runner knows).
create function kiwi_internal.schema_problems(p_schema jsonb, p_path text, p_draft text default '2020-12',
                                              p_outputs boolean default false, p_depth int default 0)
  returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p        text[] := '{}';
  v_key    text;
  v_value  jsonb;
  v_kind   text;
  v_i      int;
  v_item   jsonb;
  v_types  constant text[] := array['null', 'boolean', 'object', 'array', 'number', 'string', 'integer'];
  v_where  text;
begin
  if jsonb_typeof(p_schema) = 'boolean' then
    return p;
  elsif jsonb_typeof(p_schema) is distinct from 'object' then
    return array[format('%s: must be a JSON Schema (an object, or true or false), not %s', p_path,
                        kiwi_internal.json_shown(p_schema))];
  elsif p_depth > 32 then
    return array[format('%s: nested deeper than 32 levels', p_path)];
  end if;
  if p_depth = 0 and p_outputs and p_schema ? '$schema' then
    if (p_schema ->> '$schema') !~ '^https?://json-schema\.org/(draft-0[467]/schema|draft/(2019-09|2020-12)/schema|schema)#?$' then
      p := p || format('%s.$schema: %s is not a JSON Schema draft the runner knows (draft-04, -06, -07, 2019-09, 2020-12)',
                       p_path, kiwi_internal.json_shown(p_schema -> '$schema'));
    end if;
    p_draft := coalesce(substring(p_schema ->> '$schema' from 'draft-0([467])/'),
                        substring(p_schema ->> '$schema' from 'draft/(2019-09)/'), '2020-12');
  end if;
  for v_key, v_value in select * from jsonb_each(p_schema) order by 1 loop
    v_where := p_path || '.' || v_key;
    v_kind := jsonb_typeof(v_value);
    case
      when v_key = 'type' then
        if not ((v_kind = 'string' and (v_value #>> '{}') = any (v_types))
                or (v_kind = 'array' and jsonb_array_length(v_value) > 0
                    and not exists (select 1 from jsonb_array_elements(v_value) t
                                     where jsonb_typeof(t) <> 'string' or not (t #>> '{}') = any (v_types))
                    and (select count(distinct t) = count(*) from jsonb_array_elements(v_value) t))) then
          p := p || format('%s: one of %s, or a list of distinct ones', v_where, array_to_string(v_types, ', '));
        end if;
      when v_key in ('properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas') then
        if v_kind <> 'object' then
          p := p || format('%s: must be an object {name: schema, ...}', v_where);
        else
          for v_item in select jsonb_build_object('k', e.key, 'v', e.value) from jsonb_each(v_value) e order by e.key loop
            if v_key = 'patternProperties' then
              p := p || array_remove(array[kiwi_internal.pattern_problem(v_item ->> 'k',
                                                 format('%s[%s]', v_where, to_jsonb(v_item ->> 'k')))], null);
            end if;
            p := p || kiwi_internal.schema_problems(v_item -> 'v', v_where || '.' || (v_item ->> 'k'), p_draft, p_outputs, p_depth + 1);
          end loop;
        end if;
      when v_key = 'items' and v_kind = 'array' and p_draft in ('4', '6', '7', '2019-09') then
        v_i := 0;
        for v_item in select e from jsonb_array_elements(v_value) e loop
          v_i := v_i + 1;
          p := p || kiwi_internal.schema_problems(v_item, format('%s[%s]', v_where, v_i), p_draft, p_outputs, p_depth + 1);
        end loop;
      when v_key in ('prefixItems', 'allOf', 'anyOf', 'oneOf') then
        if v_kind <> 'array' or jsonb_array_length(v_value) = 0 then
          p := p || format('%s: must be a non-empty list of schemas', v_where);
        else
          v_i := 0;
          for v_item in select e from jsonb_array_elements(v_value) e loop
            v_i := v_i + 1;
            p := p || kiwi_internal.schema_problems(v_item, format('%s[%s]', v_where, v_i), p_draft, p_outputs, p_depth + 1);
          end loop;
        end if;
      when v_key in ('items', 'additionalProperties', 'additionalItems', 'not', 'if', 'then', 'else', 'contains',
                     'propertyNames', 'unevaluatedProperties', 'unevaluatedItems', 'contentSchema') then
        p := p || kiwi_internal.schema_problems(v_value, v_where, p_draft, p_outputs, p_depth + 1);
      when v_key = 'required' then
        if v_kind <> 'array'
           or exists (select 1 from jsonb_array_elements(v_value) r where jsonb_typeof(r) <> 'string')
           or (select count(distinct r) <> count(*) from jsonb_array_elements(v_value) r) then
          p := p || format('%s: must be a list of distinct property names', v_where);
        end if;
      when v_key in ('enum', 'examples') then
        if v_kind <> 'array' then
          p := p || format('%s: must be a list', v_where);
        end if;
      when v_key = 'dependentRequired' then
        if v_kind <> 'object' or exists (
             select 1 from jsonb_each(v_value) e
              where jsonb_typeof(e.value) <> 'array'
                 or exists (select 1 from jsonb_array_elements(e.value) r where jsonb_typeof(r) <> 'string')) then
          p := p || format('%s: must be an object {name: [names], ...}', v_where);
        end if;
      when v_key in ('minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum') then
        if not (v_kind = 'number' or (v_kind = 'boolean' and p_draft = '4' and v_key like 'exclusive%')) then
          p := p || format('%s: must be a number', v_where);
        end if;
      when v_key = 'multipleOf' then
        if v_kind <> 'number' or (v_value::text)::numeric <= 0 then
          p := p || format('%s: must be a number above 0', v_where);
        end if;
      when v_key in ('minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
                     'minContains', 'maxContains') then
        if v_kind <> 'number' or (v_value::text)::numeric < 0 or (v_value::text)::numeric % 1 <> 0 then
          p := p || format('%s: must be a whole number >= 0', v_where);
        end if;
      when v_key = 'uniqueItems' then
        if v_kind <> 'boolean' then
          p := p || format('%s: must be true or false', v_where);
        end if;
      when v_key in ('$ref', '$dynamicRef', '$recursiveRef') then
        if v_kind <> 'string' or left(v_value #>> '{}', 1) <> '#' then
          p := p || format('%s: %s is not a reference inside the schema: it must start with # (remote references are not followed)',
                           v_where, kiwi_internal.json_shown(v_value));
        end if;
      when v_key in ('$id', '$anchor', '$dynamicAnchor', '$comment', 'title', 'description', 'format', '$schema') then
        if v_kind <> 'string' then
          p := p || format('%s: must be a string', v_where);
        end if;
      when v_key = 'pattern' then
        if v_kind <> 'string' then
          p := p || format('%s: must be a string (a regular expression)', v_where);
        else
          p := p || array_remove(array[kiwi_internal.pattern_problem(v_value #>> '{}', v_where)], null);
        end if;
      else   -- an annotation, not read
    end case;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.schema_problems(jsonb, text, text, boolean, int) from public;
grant execute on function kiwi_internal.schema_problems(jsonb, text, text, boolean, int) to anon, authenticated, service_role;

-- The problems of a manifest's outputs: a schema (schema_problems), or a list of
-- {name, type, ...} read as runner/core/outputs.py reads it (each entry an object with a
-- name; its type, description, enum, items, properties and format a schema's).
create function kiwi_internal.outputs_problems(p_outputs jsonb) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  p       text[] := '{}';
  v_entry jsonb;
  v_i     int := 0;
begin
  if jsonb_typeof(p_outputs) = 'object' then
    return kiwi_internal.schema_problems(p_outputs, 'outputs', '2020-12', true);
  elsif jsonb_typeof(p_outputs) <> 'array' then
    return p;   -- manifest_base_problems says what outputs must be
  end if;
  for v_entry in select e from jsonb_array_elements(p_outputs) e loop
    v_i := v_i + 1;
    if jsonb_typeof(v_entry) <> 'object' or jsonb_typeof(v_entry -> 'name') is distinct from 'string'
       or (v_entry ->> 'name') = '' then
      p := p || format('outputs[%s]: must be an object with a name (e.g. {name: count, type: integer})', v_i);
    else
      p := p || kiwi_internal.schema_problems(
                  (select coalesce(jsonb_object_agg(e.key, e.value), '{}') from jsonb_each(v_entry) e
                    where e.key in ('type', 'description', 'enum', 'items', 'properties', 'format')),
                  format('outputs[%s]', v_i), '2020-12', true);
    end if;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.outputs_problems(jsonb) from public;
grant execute on function kiwi_internal.outputs_problems(jsonb) to anon, authenticated, service_role;
