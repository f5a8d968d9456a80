-- search_tools: ranked search that reads as a person would rank, in tiers:
--   1. the exact id (or namespace/id);
--   2. every word of the query, as a prefix, in the id or name;
--   3. every word anywhere: tags, description, category;
--   4, 5. only to fill the page: the same two tiers with each word corrected against
--      the registry's vocabulary (typos: `helo wrld`, `fromat_bytes`, `kubernets`).
-- Within a tier, the most used first. The query may carry modifiers:
--   type:T        tool type T, or tools running on runtime T / T_runtime (type:bash)
--   category:C    category or subcategory C
--   mcp:S         only MCP tools, those served by MCP server S or S_mcp: a reference
--                 (namespace/S, public/S), or a bare name, which also finds a server of that
--                 name in any namespace the caller sees (acme/S); mcp:* every MCP tool
--   namespace:N   tools of namespace N
-- An empty query lists by popularity. Unlisted tools never appear; RLS keeps private
-- tools to their namespace's members.
--
-- Speed (bench/registry_bench.py): each tier is one query planned for its actual
-- words (plan_cache_mode = force_custom_plan), so a common word walks the popularity
-- index and stops at a page, while a rare one uses the GIN index; typos are matched
-- against the small vocabulary (kiwi_internal.search_words), never against every tool.

create index tools_search_vector_idx on public.tools using gin (search_vector);
create index tools_name_vector_idx on public.tools using gin (name_vector);
create index tools_tool_id_idx on public.tools (tool_id);   -- the exact tier, across namespaces
create index search_words_trgm_idx on kiwi_internal.search_words using gin (word extensions.gin_trgm_ops);

-- Up to two known words close to a (misspelt) word, closest first: among the ten
-- closest in the vocabulary, those that occur in the search document of a tool the
-- caller may find (a public tool; a private one of the caller's namespaces; any for
-- admins; never an unlisted one), so that typo tolerance never reveals a word of a tool
-- the caller cannot list. Security definer to read the vocabulary, which is private;
-- it reads the caller from the session (caller_is_admin, my_namespaces), never from
-- an argument.
create function kiwi_internal.similar_search_words(p_word text) returns text[]
  language plpgsql stable security definer
  set search_path = ''
  set pg_trgm.similarity_threshold = 0.2
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
begin
  return (
    select coalesce(array_agg(w.word order by w.score desc, w.word), '{}')
      from (select c.word, c.score
              from (select s.word, extensions.similarity(s.word, p_word) as score
                      from kiwi_internal.search_words s
                     where s.word operator(extensions.%) p_word
                     order by score desc, s.word
                     limit 10) c
             where exists (select 1 from public.tools t
                            where t.search_vector @@ to_tsquery('simple', quote_literal(c.word))
                              and (t.visibility = 'public'
                                   or (t.visibility = 'private' and (v_admin or t.namespace = any (v_ns)))))
             order by c.score desc, c.word
             limit 2) w);
end
$$;
revoke execute on function kiwi_internal.similar_search_words(text) from public;
-- search_tools (security invoker) calls it for every caller; it checks the caller itself.
grant execute on function kiwi_internal.similar_search_words(text) to anon, authenticated, service_role;

create function public.search_tools(p_query text, p_tool_type text default null,
                                    p_category text default null, p_limit int default 20)
  returns table (tool_id text, namespace text, name text, tool_type text, category text,
                 description text, executor_id text, latest_version text, rank real)
  language plpgsql stable
  set search_path = ''
  set plan_cache_mode = force_custom_plan
as $$
declare
  v_text      text := '';
  v_word      text;
  v_type      text := nullif(btrim(p_tool_type), '');
  v_category  text := lower(nullif(btrim(p_category), ''));
  v_mcp       text;
  v_namespace text;
  v_limit     int := least(greatest(coalesce(p_limit, 20), 1), 200);
  v_words     text[];
  v_query     tsquery;
  v_terms     text[];
  v_seen      text[] := '{}';
  v_tier      int;
  v_row       record;
begin
  foreach v_word in array regexp_split_to_array(btrim(coalesce(p_query, '')), '\s+') loop
    if v_word ~* '^type:.' then
      v_type := substr(v_word, 6);
    elsif v_word ~* '^category:.' then
      v_category := lower(substr(v_word, 10));
    elsif v_word ~* '^mcp:.' then
      v_mcp := kiwi_internal.normalize_ref(lower(substr(v_word, 5)));
    elsif v_word ~* '^namespace:.' then
      v_namespace := lower(substr(v_word, 11));
    elsif v_word <> '' then
      v_text := btrim(v_text || ' ' || v_word);
    end if;
  end loop;

  v_words := array(select w from unnest(string_to_array(kiwi_internal.search_words_of(v_text), ' ')) w
                    where w <> '');
  if cardinality(v_words) > 0 then
    v_query := to_tsquery('simple', (select string_agg(quote_literal(w) || ':*', ' & ') from unnest(v_words) w));
  end if;

  -- tier 0 alone for an empty query (everything, most used first); tiers 1-5 otherwise
  for v_tier in (case when v_text = '' then 0 else 1 end)..(case when v_text = '' then 0 else 5 end) loop
    exit when cardinality(v_seen) >= v_limit;
    if v_tier > 1 and v_query is null then
      exit;
    end if;
    if v_tier = 4 then
      -- each word or its closest known spellings; give up if no word has any
      v_terms := array(
        select '(' || array_to_string(array[quote_literal(w) || ':*']
                                       || array(select quote_literal(c) from unnest(kiwi_internal.similar_search_words(w)) c),
                                       ' | ') || ')'
          from unnest(v_words) w);
      exit when not exists (select 1 from unnest(v_words) w where cardinality(kiwi_internal.similar_search_words(w)) > 0);
      v_query := to_tsquery('simple', array_to_string(v_terms, ' & '));
    end if;
    for v_row in
      select t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id,
             t.latest_version, t.run_count + t.download_count as popularity
        from public.tools t
       where case v_tier
               when 0 then true
               when 1 then t.ref = v_text or t.tool_id = v_text
               when 2 then t.name_vector @@ v_query
               when 3 then t.search_vector @@ v_query
               when 4 then t.name_vector @@ v_query
               else t.search_vector @@ v_query
             end
         and not t.ref = any (v_seen)
         and t.visibility <> 'unlisted'
         and t.latest_version is not null
         and (v_type is null or t.tool_type = v_type or t.executor_id in (v_type, v_type || '_runtime'))
         and (v_category is null or lower(t.category) = v_category or lower(t.subcategory) = v_category)
         and (v_mcp is null
              or (t.tool_type = 'mcp_tool'
                  and (v_mcp = '*' or t.executor_id in (v_mcp, v_mcp || '_mcp')
                       or (strpos(v_mcp, '/') = 0 and split_part(t.executor_id, '/', 2) in (v_mcp, v_mcp || '_mcp')))))
         and (v_namespace is null or t.namespace = v_namespace)
       order by t.run_count + t.download_count desc, t.ref
       limit v_limit - cardinality(v_seen)
    loop
      v_seen := v_seen || v_row.ref;
      tool_id := v_row.ref; namespace := v_row.namespace; name := v_row.name; tool_type := v_row.tool_type;
      category := v_row.category; description := v_row.description; executor_id := v_row.executor_id;
      latest_version := v_row.latest_version;
      rank := case when v_tier = 0 then v_row.popularity
                   else (6 - v_tier) + least(ln(1 + v_row.popularity) / 100, 0.99) end;
      return next;
    end loop;
  end loop;
end
$$;
comment on function public.search_tools(text, text, text, int) is
  'Ranked search: exact id, then every word in id or name, then anywhere, then the same with typos corrected; most used first within each. Modifiers in the query: type:T, category:C, mcp:SERVER (mcp:* any MCP tool), namespace:N. Empty query: most used first.';
revoke execute on function public.search_tools(text, text, text, int) from public;
grant execute on function public.search_tools(text, text, text, int) to anon, authenticated, service_role;

-- After a bulk load that bypassed triggers: recompute every tool's search document and
-- the vocabulary. Returns the number of tools indexed.
create function kiwi_internal.rebuild_search() returns int
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_count int;
begin
  update public.tools t set
    search_vector = kiwi_internal.tool_search_vector(t.tool_id, t.name, t.tags, t.description, t.category, t.subcategory),
    name_vector   = kiwi_internal.tool_name_vector(t.tool_id, t.name);
  get diagnostics v_count = row_count;
  perform kiwi_internal.remember_search_words(
    string_agg(kiwi_internal.tool_vocabulary(t.tool_id, t.name, t.tags, t.category, t.subcategory), ' '))
    from public.tools t;
  return v_count;
end
$$;
revoke execute on function kiwi_internal.rebuild_search() from public;
grant execute on function kiwi_internal.rebuild_search() to service_role;
