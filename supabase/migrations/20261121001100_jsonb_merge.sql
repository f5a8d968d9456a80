-- Config merging for execution plans: objects merge recursively, arrays and scalars
-- are replaced, the patch (the child) wins. plpgsql so that plans stay cached, and
-- most merges (no object on both sides) run no query at all.

create function kiwi_internal.jsonb_deep_merge(p_base jsonb, p_patch jsonb) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
begin
  if p_patch is null then
    return p_base;
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
revoke execute on function kiwi_internal.jsonb_deep_merge(jsonb, jsonb) from public;
grant execute on function kiwi_internal.jsonb_deep_merge(jsonb, jsonb) to anon, authenticated, service_role;

-- Folds configs in the order given: pass them from the primitive up to the tool.
-- A function rather than an aggregate, because an aggregate cannot pin its search_path.
create function kiwi_internal.jsonb_deep_merge_all(p_values jsonb[]) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
declare
  v_value jsonb;
  v_out   jsonb;
begin
  foreach v_value in array coalesce(p_values, '{}') loop
    v_out := kiwi_internal.jsonb_deep_merge(v_out, v_value);
  end loop;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.jsonb_deep_merge_all(jsonb[]) from public;
-- Called by compute_plan (security definer) only.
grant execute on function kiwi_internal.jsonb_deep_merge_all(jsonb[]) to service_role;
