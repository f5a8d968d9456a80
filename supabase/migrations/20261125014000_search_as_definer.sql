-- search_tools without RLS in the way of its indexes. As a security invoker function it
-- searched under the policies of public.tools, and `@@` (like pg_trgm's and pgvector's
-- operators) is not LEAKPROOF: the planner may not probe the words' GIN index before the
-- policy's filter, so it scanned and filtered. At 100k tools one query mix took 12 ms as
-- the superuser but 58-106 ms as anon or a signed-in caller (400-1000 ms at 1M); the
-- benches measured as the superuser and never saw it.
--
-- So, as for the other hot paths (chains_compact, execution_plan), the work moves into
-- kiwi_internal.search_tools, security definer, which writes the tools' RLS out as a plain
-- condition: `visibility = 'public'` for anon, `visibility = 'public' or namespace = any
-- (my_namespaces())` for a signed-in caller, nothing for admins (service_role and roles
-- that bypass RLS: caller_is_admin()). Identity comes only from the session (role and JWT
-- claims), never from an argument. Every read of public.tools carries it: the listing, the
-- typo check, each tier's window, the most-used-first window (so whether that window is
-- full still counts only tools the caller may list), the lexical candidates and the hybrid
-- answer. The rows it returns are tools the caller may see, so their latest versions and
-- signatures (tool_versions and tool_version_signatures are readable with their tool) are
-- read as the owner without changing what is shown. The helpers it calls check the caller
-- themselves (similar_search_words, nearest_tools) or say nothing about any tool
-- (has_embeddings, search_popular_floor). public.search_tools stays the contract (same
-- arguments, columns and ranking, security invoker), a call to this function.

create function kiwi_internal.search_tools(p_query text, p_tool_type text, p_category text, p_limit int,
                                           p_embedding real[], p_model text)
  returns table (tool_id text, namespace text, name text, tool_type text, category text,
                 description text, executor_id text, latest_version text, rank real,
                 matched_by text, search_mode text, content_hash text, signatures jsonb)
  language plpgsql stable security definer
  set search_path = ''
  set plan_cache_mode = force_custom_plan
as $$
declare
  v_text       text := '';
  v_word       text;
  v_type       text := nullif(btrim(p_tool_type), '');
  v_category   text := lower(nullif(btrim(p_category), ''));
  v_mcp        text;
  v_namespace  text;
  v_limit      int := least(greatest(coalesce(p_limit, 20), 1), 200);
  v_stem       text;
  v_fixes      text[];
  v_doc_terms  text[] := '{}';  -- per query word: its stem as a prefix (or its corrections), for search_document
  v_name_terms text[] := '{}';  -- the same word as written, for name_vector
  v_doc_q      tsquery[];
  v_name_q     tsquery[];
  v_match      tsquery;         -- what a tool must match: all terms, all but one, or any (see below)
  v_try        tsquery;
  v_words      text[];
  v_n          int;
  -- who is asking, from the session only (the role and the JWT claims PostgREST set)
  v_admin      constant boolean := kiwi_internal.caller_is_admin();
  v_ns         constant text[] := case when v_admin or kiwi_internal.caller_role() = 'anon' then '{}'::text[]
                                       else kiwi_internal.my_namespaces() end;
  -- the modifiers, and the tools' RLS written out: anon lists public tools; a signed-in
  -- caller also its namespaces' (unlisted ones never: search_filter_sql); an admin, all
  v_filter     constant text := kiwi_internal.search_filter_sql()
                                || case when v_admin then ''
                                        when cardinality(v_ns) = 0 then $f$ and t.visibility = 'public'$f$
                                        else format($f$ and (t.visibility = 'public' or t.namespace = any (%L::text[]))$f$,
                                                    v_ns) end;
  v_vector     extensions.vector(256);
  v_mode       text := 'lexical: no query embedding given';
  v_lex        text;   -- the lexical candidates, ranked: (id, ref, tool_id, search_document, cheap, rank)
  v_cheap      text;   -- the rank without full text (see below), over tools t
  v_window     int := greatest(v_limit, 50) * 10;  -- how many candidates ts_rank_cd orders
  v_floor      bigint; -- the use (runs + downloads) of the most used tools, when the registry is large
  v_ids        uuid[]; -- the candidates among the most used, when there are enough of them
  v_source     text := 't.search_document @@ $6';  -- which tools are candidates
  v_best       text;   -- a tier's best window (see below)
  v_any        tsquery;
begin
  if length(p_query) > 2000 then  -- before any work on it
    raise exception 'search_tools: a query has at most 64 different words and 2000 characters (this one: % characters)',
      length(p_query)
      using errcode = '22023', hint = 'describe the tool you want in a sentence or two';
  end if;
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

  if v_text = '' then   -- a listing: most used first, along the popularity index
    return query execute format(kiwi_internal.search_signed_sql(),
      'select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id, t.latest_version,
              (t.run_count + t.download_count)::real as rank, null::text as matched_by,
              ''listing: most used first''::text as search_mode
         from public.tools t where true' || v_filter || '
        order by t.run_count + t.download_count desc, t.ref limit $6')
      using v_text, v_type, v_category, v_mcp, v_namespace, v_limit;
    return;
  end if;

  -- The query's vector, when its caller computed one: semantic ranking joins in.
  if p_embedding is not null then
    if coalesce(btrim(p_model), '') = '' then
      raise exception 'search_tools: p_model must name the model p_embedding was computed with'
        using errcode = '22023';
    end if;
    if array_ndims(p_embedding) <> 1 or cardinality(p_embedding) <> 256 or array_position(p_embedding, null) is not null then
      raise exception 'search_tools: p_embedding must be 256 numbers (got %)', coalesce(cardinality(p_embedding), 0)
        using errcode = '22023';
    end if;
    if exists (select 1 from unnest(p_embedding) x where x in ('NaN', 'Infinity', '-Infinity')) then
      raise exception 'search_tools: p_embedding must be finite numbers (it holds NaN or infinity)'
        using errcode = '22023';
    end if;
    if not exists (select 1 from unnest(p_embedding) x where x <> 0) then
      -- (a zero vector has no direction: cosine similarity with it is NaN, which sorts above all)
      raise exception 'search_tools: p_embedding is all zeros, which has no direction to search in'
        using errcode = '22023';
    end if;
    if kiwi_internal.has_embeddings(p_model) then
      v_vector := p_embedding::extensions.vector(256);
      v_mode := 'hybrid';
    else
      v_mode := format('lexical: no tool embeddings stored for model %s (kiwi embed stores them)', p_model);
    end if;
  end if;

  -- Each distinct word that is not an English stop word is one term: its stem as a
  -- prefix, or, when no tool the caller sees has it, its closest known spellings
  -- (similarity >= 0.3: `forcast` is read as forecast, never as format). Every term
  -- costs index probes, so a query is a sentence or two, not a document.
  v_words := array(select distinct w from unnest(string_to_array(kiwi_internal.search_words_of(v_text), ' ')) w
                    where w <> '');
  if cardinality(v_words) > 64 then
    raise exception 'search_tools: a query has at most 64 different words and 2000 characters (this one: % words)',
      cardinality(v_words)
      using errcode = '22023', hint = 'describe the tool you want in a sentence or two';
  end if;
  foreach v_word in array v_words loop
    v_stem := (select s.lexeme from unnest(to_tsvector('english', v_word)) s limit 1);
    continue when v_stem is null;
    -- (materialized: under exists' LIMIT 1 the planner would scan every tool for a word none has)
    if length(v_word) >= 4
       and not exists (with m as materialized (
                         select 1 from public.tools t
                          where t.search_document @@ to_tsquery('simple', quote_literal(v_stem) || ':*')
                            and t.visibility <> 'unlisted'
                            and (t.visibility = 'public' or v_admin or t.namespace = any (v_ns)))
                       select 1 from m) then
      v_fixes := array(select c from unnest(kiwi_internal.similar_search_words(v_word)) c
                        where extensions.similarity(c, v_word) >= 0.3);
      continue when cardinality(v_fixes) = 0;
      v_doc_terms := v_doc_terms || (select string_agg(quote_literal(s.lexeme), ' | ')
                                       from unnest(v_fixes) c, unnest(to_tsvector('english', c)) s);
      v_name_terms := v_name_terms || (select string_agg(quote_literal(c), ' | ') from unnest(v_fixes) c);
    else
      v_doc_terms := v_doc_terms || (quote_literal(v_stem) || ':*');
      v_name_terms := v_name_terms || (quote_literal(v_word) || ':*');
    end if;
  end loop;
  v_doc_q := array(select to_tsquery('simple', x) from unnest(v_doc_terms) x where x is not null);
  v_name_q := array(select to_tsquery('simple', x) from unnest(v_name_terms) x where x is not null);
  v_n := cardinality(v_doc_q);
  -- the rank without full text (see lexical rank below)
  v_cheap := format($f$
                   ((case when t.ref = $1 or t.tool_id = $1 then 100 else 0 end)
                    + 3 * (%s)
                    + (%s)::real / greatest(length(t.name_vector), 1)
                    + least(ln(1 + t.run_count + t.download_count) / 1000, 0.01))::real$f$,
    coalesce((select string_agg(format('(t.search_document @@ $8[%s])::int', i), ' + ')
                from generate_series(1, v_n) i), '0'),
    coalesce((select string_agg(format('(t.name_vector @@ $9[%s])::int', i), ' + ')
                from generate_series(1, v_n) i), '0'));
  -- a tier's best window by that rank, among the most used (%s: a condition, or true)
  v_best := format($f$
      select array_agg(c.id) from (
        select t.id from public.tools t
         where t.search_document @@ $6 and %%s %s
         order by %s desc, t.ref
         limit %s) c$f$, v_filter, v_cheap, v_window);

  -- Tools with more of the words always outrank those with fewer (see rank): when a
  -- page of tools has every word, only they are ranked; else, for three to eight words,
  -- when a page has all but one, only they are; else any word counts. A sentence of
  -- common words then ranks hundreds of tools, not a third of the registry.
  -- Each tier's words are looked up once (a prefix of a common word costs 5 to 15 ms in
  -- the index at 1M tools): the pass that counts a tier also keeps its best window.
  -- Many matches (a common word in a large registry: `email` is in 25k of 1M tools):
  -- ranking every one reads every one's row, about 1 us each, which alone passes 25 ms.
  -- So, when the last tier (any word) is reached in a large registry, its candidates are
  -- the best window among the most used twentieth (the popularity index and the words'
  -- index intersected before any row is read) when that many of the tools the caller
  -- may list are there; else, as before, every match is. Only the rows the caller's RLS
  -- lets through are counted, so whether search looks there first never depends on
  -- tools the caller cannot see (the planner's estimates would: its statistics cover
  -- every tool). A look that finds too few costs a second lookup of the words (25 ms for
  -- `type:python csv` at 1M), so it is not made when a modifier narrows the search (a
  -- window of a part of the registry is rarely among its most used), nor for the tiers
  -- with every word or all but one, which match far fewer tools. Only words, name
  -- coverage, popularity and full text order the window, so this can only pass over
  -- rarely used tools among thousands as good.
  v_match := null;
  if v_n > 0 then
    v_floor := kiwi_internal.search_popular_floor();
    v_any := (select string_agg('(' || q::text || ')', ' | ')::tsquery from unnest(v_doc_q) q);
    foreach v_try in array array[
        case when v_n > 1 then (select string_agg('(' || q::text || ')', ' & ')::tsquery from unnest(v_doc_q) q) end,
        case when v_n between 3 and 8 then
          (select string_agg('(' || (select string_agg('(' || q::text || ')', ' & ')
                                       from unnest(v_doc_q) with ordinality u(q, j) where j <> i) || ')', ' | ')::tsquery
             from generate_series(1, v_n) i) end,
        v_any] loop
      continue when v_try is null;
      if v_try = v_any then   -- the last tier: the most used first, else the lexical rank reads every match
        if v_floor is not null and coalesce(v_type, v_category, v_mcp, v_namespace) is null then
          execute format(v_best, '(t.run_count + t.download_count) >= ' || v_floor) into v_ids
            using v_text, v_type, v_category, v_mcp, v_namespace, v_try, v_limit, v_doc_q, v_name_q;
          if cardinality(v_ids) >= v_window then
            v_source := format('t.id = any (%L::uuid[])', v_ids);
          end if;
        end if;
        v_match := v_try;
        exit;
      end if;
      execute format(v_best, 'true') into v_ids
        using v_text, v_type, v_category, v_mcp, v_namespace, v_try, v_limit, v_doc_q, v_name_q;
      if cardinality(v_ids) >= v_limit then
        v_match := v_try;
        v_source := format('t.id = any (%L::uuid[])', v_ids);
        exit;
      end if;
    end loop;
  end if;

  -- lexical rank: the exact id (100), then 3 for each word the tool has, then how much of
  -- its id and name the words cover (0..1), popularity (0..0.01), and weighted full text
  -- (0..1). ts_rank_cd costs as much as the scan (a sentence of common words matches a
  -- third of a large registry), so it orders only the best candidates by the rest: ten
  -- times the page, or 500 (within which it still reorders tools that have as many words).
  v_lex := format($f$
    select y.*, (y.cheap + coalesce(ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', y.search_document, $6, 32), 0))::real as rank
      from (select t.id, t.ref, t.tool_id, t.search_document, %s as cheap
              from public.tools t
             where (t.ref = $1 or t.tool_id = $1 or %s) %s
             order by 5 desc, t.ref
             limit %s) y$f$,
    v_cheap, v_source, v_filter, v_window);

  if v_vector is null then
    return query execute format(kiwi_internal.search_signed_sql(), format($f$
      select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id, t.latest_version,
             l.rank, case when l.ref = $1 or l.tool_id = $1 then 'id' else 'words' end as matched_by, $10 as search_mode
        from (%s) l join public.tools t on t.id = l.id
       order by l.rank desc, t.ref
       limit $7$f$, v_lex))
      using v_text, v_type, v_category, v_mcp, v_namespace, v_match, v_limit, v_doc_q, v_name_q, v_mode;
    return;
  end if;

  -- Hybrid: each list's scores scaled to its best (words: the lexical rank without the
  -- exact-id bonus; meaning: cosine similarity), fused as 0.4 words + 0.6 meaning; the exact
  -- id first. Score fusion keeps how far apart tools are, which rank fusion forgets: on the
  -- relevance set (bench/search_bench.py) it finds more in the first five than reciprocal
  -- rank fusion did (0.87 against 0.80), and tools at least 0.1 similar to the query count,
  -- so a misspelt sentence still finds by meaning what its words miss.
  return query execute format(kiwi_internal.search_signed_sql(), format($f$
    with lex as (
      select l.id, (l.ref = $1 or l.tool_id = $1) as exact,
             l.rank - case when l.ref = $1 or l.tool_id = $1 then 100 else 0 end as score
        from (%s) l
       order by l.rank desc, l.ref
       limit $10),
    sem as (
      select n.id, n.similarity as score
        from kiwi_internal.nearest_tools($11, $12, $10, $13, $2, $3, $4, $5) n),
    fused as (
      select coalesce(l.id, s.id) as id, coalesce(l.exact, false) as exact,
             l.score / nullif((select max(score) from lex), 0) as lw,
             s.score / nullif((select max(score) from sem), 0) as sw
        from lex l full join sem s on s.id = l.id)
    select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id, t.latest_version,
           ((case when f.exact then 100 else 0 end) + $14 * coalesce(f.lw, 0) + $15 * coalesce(f.sw, 0))::real as rank,
           case when f.exact then 'id' when f.lw is not null and f.sw is not null then 'words+meaning'
                when f.lw is not null then 'words' else 'meaning' end as matched_by,
           'hybrid'::text as search_mode
      from fused f join public.tools t on t.id = f.id
     where true %s
     order by 10 desc, t.ref
     limit $7$f$, v_lex, v_filter))
    using v_text, v_type, v_category, v_mcp, v_namespace, v_match, v_limit, v_doc_q, v_name_q,
          greatest(v_limit, 50), p_model, v_vector, 0.1::real, 0.4::float8, 0.6::float8;
end
$$;
revoke execute on function kiwi_internal.search_tools(text, text, text, int, real[], text) from public;
-- public.search_tools (security invoker) calls it for every caller; it checks the caller itself.
grant execute on function kiwi_internal.search_tools(text, text, text, int, real[], text)
  to anon, authenticated, service_role;

create or replace function public.search_tools(p_query text, p_tool_type text default null,
                                               p_category text default null, p_limit int default 20,
                                               p_embedding real[] default null, p_model text default null)
  returns table (tool_id text, namespace text, name text, tool_type text, category text,
                 description text, executor_id text, latest_version text, rank real,
                 matched_by text, search_mode text, content_hash text, signatures jsonb)
  language sql stable
  set search_path = ''
as $$
  select * from kiwi_internal.search_tools(p_query, p_tool_type, p_category, p_limit, p_embedding, p_model)
$$;
comment on function public.search_tools(text, text, text, int, real[], text) is
  'Ranked search. Lexical: any of the query''s words (English stop words dropped, stemmed, as prefixes; a word no tool has is replaced by its closest known spellings), ranked by the exact id, then how many words match, how much of the name they cover, and weighted full text (name and id, tags, description, parameters); most used breaks ties. With p_embedding (the query''s 256-number vector) and p_model (the model that made it), the lexical ranking is fused with the tools nearest in meaning (each list''s scores scaled to its best, 0.4 words + 0.6 meaning); without, the answer is lexical and search_mode says why. matched_by: id, words, meaning or words+meaning. Modifiers in the query: type:T, category:C, mcp:SERVER (mcp:* any MCP tool), namespace:N. Empty query: most used first.';
revoke execute on function public.search_tools(text, text, text, int, real[], text) from public;
grant execute on function public.search_tools(text, text, text, int, real[], text) to anon, authenticated, service_role;
