-- Config merging for execution plans: objects merge recursively, arrays and scalars
-- are replaced, the patch (the child) wins. plpgsql so that plans stay cached.

create function kiwi_internal.jsonb_deep_merge(p_base jsonb, p_patch jsonb) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
declare
  v_key   text;
  v_value jsonb;
  v_out   jsonb;
begin
  if p_patch is null then
    return p_base;
  end if;
  if p_base is null or jsonb_typeof(p_base) <> 'object' or jsonb_typeof(p_patch) <> 'object' then
    return p_patch;
  end if;
  v_out := p_base;
  for v_key, v_value in select e.key, e.value from jsonb_each(p_patch) e loop
    if jsonb_typeof(v_value) = 'object' and jsonb_typeof(v_out -> v_key) = 'object' then
      v_out := jsonb_set(v_out, array[v_key], kiwi_internal.jsonb_deep_merge(v_out -> v_key, v_value));
    else
      v_out := v_out || jsonb_build_object(v_key, v_value);
    end if;
  end loop;
  return v_out;
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
grant execute on function kiwi_internal.jsonb_deep_merge_all(jsonb[]) to anon, authenticated, service_role;
