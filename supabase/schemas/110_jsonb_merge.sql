-- Config merging for execution plans: objects merge recursively, arrays and scalars
-- are replaced, the patch (the child) wins. plpgsql so that plans stay cached, and
-- most merges (no object on both sides) run no query at all.
--
-- Except where an element of the chain says otherwise: a list whose schema in an element's
-- config_schema carries "x-merge": "append" (a key reached through properties from the
-- top, 150_config_contracts.sql) is appended to by every element above that
-- one, never replaced: the elements above add their items after those below, and a value
-- that is no list adds nothing. An object holding such a list is not replaced by a value
-- that is no object either. So a runtime's validation.rules (subprocess marks them) hold
-- for every tool on it, whatever the tool writes. The marks are read from each element's
-- own config_schema and only ever added to going up the chain: no element can unmark what
-- one below it marked, and an element's own mark binds only those above it.

-- p_append: the marks in force, as append_marks gives them (null: none, "append": this
-- value is such a list, an object: the marks of its keys).
create function kiwi_internal.jsonb_deep_merge(p_base jsonb, p_patch jsonb, p_append jsonb default null)
  returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
begin
  if p_patch is null then
    return p_base;
  end if;
  if jsonb_typeof(p_append) = 'string' then     -- an append-only list
    return case when jsonb_typeof(p_base) is distinct from 'array' then p_patch
                when jsonb_typeof(p_patch) = 'array' then p_base || p_patch
                else p_base end;
  elsif jsonb_typeof(p_append) = 'object' and jsonb_typeof(p_base) = 'object' then
    if jsonb_typeof(p_patch) <> 'object' then
      return p_base;                             -- it may hold one: not replaced
    elsif p_patch ?| array(select jsonb_object_keys(p_append)) then
      -- a marked key in the patch: merge key by key, each with its marks
      return p_base || p_patch || coalesce((
        select jsonb_object_agg(e.key, kiwi_internal.jsonb_deep_merge(p_base -> e.key, e.value, p_append -> e.key))
          from jsonb_each(p_patch) e
         where p_append ? e.key
            or (jsonb_typeof(e.value) = 'object' and jsonb_typeof(p_base -> e.key) = 'object')), '{}'::jsonb);
    end if;
    -- no marked key in the patch: merged as if unmarked (as is a base that is no object:
    -- it holds nothing to keep)
  end if;
  if p_base is null or jsonb_typeof(p_base) <> 'object' or jsonb_typeof(p_patch) <> 'object' then
    return p_patch;
  end if;
  -- No nested object in the patch: a shallow merge is the deep merge (no query at all).
  if not jsonb_path_exists(p_patch, '$.* ? (@.type() == "object")') then
    return p_base || p_patch;
  end if;
  -- Otherwise recurse only into keys that are objects on both sides.
  return p_base || p_patch || coalesce((
    select jsonb_object_agg(e.key, kiwi_internal.jsonb_deep_merge(p_base -> e.key, e.value))
      from jsonb_each(p_patch) e
     where jsonb_typeof(e.value) = 'object' and jsonb_typeof(p_base -> e.key) = 'object'), '{}'::jsonb);
end
$$;
revoke execute on function kiwi_internal.jsonb_deep_merge(jsonb, jsonb, jsonb) from public;
grant execute on function kiwi_internal.jsonb_deep_merge(jsonb, jsonb, jsonb) to anon, authenticated, service_role;

-- The marks of a config_schema (its lists marked "x-merge": "append", by their keys' paths
-- through properties) added to p_marks: {"validation": {"rules": "append"}}. A mark is
-- never taken away: a list already marked stays so, whatever this schema says.
create function kiwi_internal.append_marks(p_schema jsonb, p_marks jsonb default null) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
declare
  v_out   jsonb := p_marks;
  v_key   text;
  v_value jsonb;
  v_mark  jsonb;
begin
  if jsonb_typeof(p_marks) not in ('string', 'object') then
    v_out := null;                              -- JSON null: no marks
  end if;
  if v_out = '"append"' or jsonb_typeof(p_schema) is distinct from 'object' then
    return v_out;
  elsif p_schema ->> 'x-merge' = 'append' then
    return '"append"';
  elsif jsonb_typeof(p_schema -> 'properties') is distinct from 'object' then
    return v_out;
  end if;
  -- only into the keys that are marked or hold a mark further down
  for v_key, v_value in select e.key, e.value from jsonb_each(p_schema -> 'properties') e
                         where e.value ? 'x-merge'
                            or (jsonb_typeof(e.value -> 'properties') = 'object'
                                and jsonb_path_exists(e.value -> 'properties', 'lax $.**."x-merge"')) loop
    v_mark := kiwi_internal.append_marks(v_value, v_out -> v_key);
    if v_mark is not null then
      v_out := coalesce(v_out, '{}'::jsonb) || jsonb_build_object(v_key, v_mark);
    end if;
  end loop;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.append_marks(jsonb, jsonb) from public;
grant execute on function kiwi_internal.append_marks(jsonb, jsonb) to anon, authenticated, service_role;

-- Folds configs in the order given: pass them from the primitive up to the tool, each with
-- its element's config_schema (p_schemas, same order; null: no marks), whose marks bind
-- the configs after it.
-- A function rather than an aggregate, because an aggregate cannot pin its search_path.
create function kiwi_internal.jsonb_deep_merge_all(p_values jsonb[], p_schemas jsonb[] default null)
  returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
declare
  v_out   jsonb;
  v_marks jsonb;
begin
  for i in 1 .. coalesce(cardinality(p_values), 0) loop
    v_out := kiwi_internal.jsonb_deep_merge(v_out, p_values[i], v_marks);
    if i < cardinality(p_values) then   -- the last element's marks would bind nothing
      v_marks := kiwi_internal.append_marks(p_schemas[i], v_marks);
    end if;
  end loop;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.jsonb_deep_merge_all(jsonb[], jsonb[]) from public;
-- Called by compute_plan (security definer) only.
grant execute on function kiwi_internal.jsonb_deep_merge_all(jsonb[], jsonb[]) to service_role;
