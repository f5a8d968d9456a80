-- search_tools: weighted full-text (id and name > tags > description > category) with
-- prefix matching, plus trigram similarity for typos and partial ids. The query may
-- carry modifiers:
--   type:T        tool type T, or tools running on runtime T / T_runtime (type:bash)
--   category:C    category or subcategory C
--   mcp:S         tools served by MCP server S / S_mcp
--   namespace:N   tools of namespace N
-- An empty query lists by popularity. Unlisted tools never appear; RLS keeps private
-- tools to their namespace's members.

create index tools_search_vector_idx on public.tools using gin (search_vector);
create index tools_tool_id_trgm_idx on public.tools using gin (tool_id extensions.gin_trgm_ops);
create index tools_name_trgm_idx on public.tools using gin (name extensions.gin_trgm_ops);

create function public.search_tools(p_query text, p_tool_type text default null,
                                    p_category text default null, p_limit int default 20)
  returns table (tool_id text, namespace text, name text, tool_type text, category text,
                 description text, executor_id text, latest_version text, rank real)
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_text      text := '';
  v_word      text;
  v_type      text := nullif(btrim(p_tool_type), '');
  v_category  text := lower(nullif(btrim(p_category), ''));
  v_mcp       text;
  v_namespace text;
  v_tsquery   tsquery;
  v_limit     int := least(greatest(coalesce(p_limit, 20), 1), 200);
begin
  foreach v_word in array regexp_split_to_array(btrim(coalesce(p_query, '')), '\s+') loop
    if v_word ~* '^type:.' then
      v_type := substr(v_word, 6);
    elsif v_word ~* '^category:.' then
      v_category := lower(substr(v_word, 10));
    elsif v_word ~* '^mcp:.' then
      v_mcp := substr(v_word, 5);
    elsif v_word ~* '^namespace:.' then
      v_namespace := lower(substr(v_word, 11));
    elsif v_word <> '' then
      v_text := btrim(v_text || ' ' || v_word);
    end if;
  end loop;

  if v_text = '' then
    return query
    select t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id,
           t.latest_version, (t.run_count + t.download_count)::real
      from public.tools t
     where t.visibility <> 'unlisted'
       and t.latest_version is not null
       and (v_type is null or t.tool_type = v_type or t.executor_id in (v_type, v_type || '_runtime'))
       and (v_category is null or lower(t.category) = v_category or lower(t.subcategory) = v_category)
       and (v_mcp is null or (t.tool_type = 'mcp_tool' and t.executor_id in (v_mcp, v_mcp || '_mcp')))
       and (v_namespace is null or t.namespace = v_namespace)
     order by t.run_count + t.download_count desc, t.ref
     limit v_limit;
    return;
  end if;

  -- Every word, as a prefix, must match (words split as the index splits them).
  select to_tsquery('simple', string_agg(quote_literal(w) || ':*', ' & '))
    into v_tsquery
    from unnest(regexp_split_to_array(
           lower(regexp_replace(v_text, '([a-z])([A-Z])', '\1 \2', 'g')), '[^[:alnum:]]+')) w
   where w <> '';

  return query
  select t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id,
         t.latest_version,
         (case when t.ref = v_text or t.tool_id = v_text then 10
               when lower(t.name) = lower(v_text) then 5
               else 0 end
          + coalesce(ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', t.search_vector, v_tsquery), 0) * 2
          + extensions.similarity(t.tool_id, v_text)
          + extensions.word_similarity(v_text, t.tool_id) * 0.5
          + ln(1 + t.run_count + t.download_count) * 0.01)::real as rank
    from public.tools t
   where (t.search_vector @@ v_tsquery
          or t.tool_id operator(extensions.%) v_text
          or v_text operator(extensions.<%) t.tool_id
          or t.name operator(extensions.%) v_text)
     and t.visibility <> 'unlisted'
     and t.latest_version is not null
     and (v_type is null or t.tool_type = v_type or t.executor_id in (v_type, v_type || '_runtime'))
     and (v_category is null or lower(t.category) = v_category or lower(t.subcategory) = v_category)
     and (v_mcp is null or (t.tool_type = 'mcp_tool' and t.executor_id in (v_mcp, v_mcp || '_mcp')))
     and (v_namespace is null or t.namespace = v_namespace)
   order by rank desc, t.ref
   limit v_limit;
end
$$;
comment on function public.search_tools(text, text, text, int) is
  'Ranked search over id, name, tags, description and category, tolerant of typos. Modifiers in the query: type:T, category:C, mcp:SERVER, namespace:N. Empty query: most used first.';
revoke execute on function public.search_tools(text, text, text, int) from public;
grant execute on function public.search_tools(text, text, text, int) to anon, authenticated, service_role;
