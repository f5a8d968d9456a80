-- search_tools: ranked search for queries written as sentences. A tool is found when it
-- has ANY of the query's words (English stop words dropped, words stemmed, each a prefix,
-- so `create pull request` finds what creates pull requests). A word no tool the caller
-- sees has is replaced by its closest known spellings (the fewest edits, one or two, among
-- the registry's vocabulary: `forcast` -> forecast, never `format` or `picture` -> `pick`).
-- Ranked by, in order of weight: the exact id (or namespace/id); the share of the query's
-- words it has (a whole word counting more than a longer word it starts; for a long request,
-- less in a long document, as BM25 weighs it); the share of its id and name those words cover; weighted full text
-- (ts_rank_cd: id and name A, tags B, description and category C, parameter names and
-- descriptions D); the most used breaks ties. The query may carry modifiers:
--   type:T        tool type T, or tools running on runtime T / T_runtime (type:bash)
--   category:C    category or subcategory C
--   mcp:S         only MCP tools, those served by MCP server S or S_mcp: a reference
--                 (namespace/S, public/S), or a bare name, which also finds a server of that
--                 name in any namespace the caller sees (acme/S); mcp:* every MCP tool
--   namespace:N   tools of namespace N
-- An empty query lists by popularity. Unlisted tools never appear; RLS keeps private
-- tools to their namespace's members (search_tools is security invoker).
--
-- Speed (bench/registry_bench.py): the OR of the words is served by the GIN index on
-- tools.search_document; only the tools that match are ranked. Typos are matched
-- against the small vocabulary (kiwi_internal.search_words), never against every tool.

-- The ranked document: English (stemmed, stop words dropped), weighted by field. It
-- includes the latest version's parameters, which tools does not mirror, so it is kept
-- here by its own trigger, after tools_before_write, whenever a field it reads changes
-- (the column public.tools.search_document).

-- The words of a manifest's parameters: names and descriptions, in either form (a list
-- of {name, description}, or a JSON Schema with properties).
create function kiwi_internal.parameters_search_text(p_parameters jsonb) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select coalesce(string_agg(kiwi_internal.search_words_of(k) || ' ' || coalesce(d, ''), ' '), '')
    from (select p ->> 'name' as k, p ->> 'description' as d
            from jsonb_array_elements(case jsonb_typeof(p_parameters) when 'array' then p_parameters else '[]' end) p
           where jsonb_typeof(p) = 'object'
          union all
          select e.key, e.value ->> 'description'
            from jsonb_each(case when jsonb_typeof(p_parameters -> 'properties') = 'object'
                                 then p_parameters -> 'properties' else '{}' end) e
           where jsonb_typeof(e.value) = 'object') x
$$;
revoke execute on function kiwi_internal.parameters_search_text(jsonb) from public;
grant execute on function kiwi_internal.parameters_search_text(jsonb) to service_role;

create function kiwi_internal.tool_search_document(
  p_tool_id text, p_name text, p_tags text[], p_description text, p_category text, p_subcategory text,
  p_parameters jsonb) returns tsvector
  language sql immutable parallel safe
  set search_path = ''
as $$
  select setweight(to_tsvector('english', kiwi_internal.search_words_of(p_tool_id || ' ' || coalesce(p_name, ''))), 'A')
      || setweight(to_tsvector('english', kiwi_internal.search_words_of(array_to_string(coalesce(p_tags, '{}'), ' '))), 'B')
      || setweight(to_tsvector('english', coalesce(p_description, '') || ' '
                                          || kiwi_internal.search_words_of(concat_ws(' ', p_category, p_subcategory))), 'C')
      || setweight(to_tsvector('english', kiwi_internal.parameters_search_text(p_parameters)), 'D')
$$;
revoke execute on function kiwi_internal.tool_search_document(text, text, text[], text, text, text, jsonb) from public;
grant execute on function kiwi_internal.tool_search_document(text, text, text[], text, text, text, jsonb) to service_role;

-- The text a tool's embedding is computed from (semantic search: 180_search_embeddings.sql): its id
-- and name as words, description, tags, and its latest version's parameter names. Not
-- the parameters' descriptions, nor the category: a model that averages its words'
-- vectors is pulled away from what the tool does by them (measured on the relevance set,
-- bench/search_bench.py: semantic recall@5 0.81 without, 0.76 with). Kept beside its
-- sha256, which keys the embedding, so a text that did not change is never embedded again.
-- (the columns public.tools.search_text and search_text_hash)
create index tools_search_text_hash_idx on public.tools (search_text_hash);

create function kiwi_internal.tool_search_text(
  p_tool_id text, p_name text, p_tags text[], p_description text, p_parameters jsonb) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select btrim(regexp_replace(concat_ws('. ',
           nullif(btrim(kiwi_internal.search_words_of(p_tool_id)
                        || case when lower(coalesce(p_name, '')) = lower(p_tool_id) then ''
                                else ' ' || kiwi_internal.search_words_of(p_name) end), ''),
           nullif(rtrim(btrim(coalesce(p_description, '')), '.'), ''),
           nullif(btrim(kiwi_internal.search_words_of(array_to_string(coalesce(p_tags, '{}'), ' '))), ''),
           nullif(btrim(kiwi_internal.search_words_of(
             (select string_agg(k, ' ' order by n.i, k collate "C")  -- a list in its order; properties by name
                from (select p ->> 'name' as k, i
                        from jsonb_array_elements(case jsonb_typeof(p_parameters) when 'array' then p_parameters else '[]' end)
                             with ordinality a(p, i)
                       where jsonb_typeof(p) = 'object'
                      union all
                      select e.key, 0
                        from jsonb_each(case when jsonb_typeof(p_parameters -> 'properties') = 'object'
                                             then p_parameters -> 'properties' else '{}' end) e) n))), '')),
         '\s+', ' ', 'g'))
$$;
revoke execute on function kiwi_internal.tool_search_text(text, text, text[], text, jsonb) from public;
grant execute on function kiwi_internal.tool_search_text(text, text, text[], text, jsonb) to service_role;

-- Security definer to read the latest version's manifest whoever writes the tool; it
-- only sets the row's own document.
create function kiwi_internal.tools_search_document() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_parameters jsonb;
begin
  if tg_op = 'INSERT'
     or (new.name, new.description, new.tags, new.category, new.subcategory, new.latest_version)
        is distinct from (old.name, old.description, old.tags, old.category, old.subcategory, old.latest_version) then
    v_parameters := (select v.manifest -> 'parameters' from public.tool_versions v
                      where v.tool_uuid = new.id and v.version = new.latest_version);
    new.search_document := kiwi_internal.tool_search_document(
      new.tool_id, new.name, new.tags, new.description, new.category, new.subcategory, v_parameters);
    new.search_text := kiwi_internal.tool_search_text(new.tool_id, new.name, new.tags, new.description, v_parameters);
    new.search_text_hash := kiwi_internal.sha256_hex(new.search_text);
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.tools_search_document() from public;
-- fires after tools_before_write (triggers fire in name order)
create trigger tools_search_document
  before insert or update on public.tools
  for each row execute function kiwi_internal.tools_search_document();

create index tools_search_document_idx on public.tools using gin (search_document);
create index tools_search_vector_idx on public.tools using gin (search_vector);
create index tools_name_vector_idx on public.tools using gin (name_vector);
create index tools_tool_id_idx on public.tools (tool_id);   -- the exact tier, across namespaces
create index search_words_trgm_idx on kiwi_internal.search_words using gin (word extensions.gin_trgm_ops);

-- How many single-letter edits (a letter added, dropped or changed, two neighbours swapped)
-- turn one word into another: the optimal string alignment distance. Typos are edits;
-- trigrams alone also call `picture` close to `pick` and `dentist` close to `deno`.
create function kiwi_internal.edit_distance(p_a text, p_b text) returns int
  language plpgsql immutable strict parallel safe
  set search_path = ''
as $$
declare
  la int := length(p_a);
  lb int := length(p_b);
  w  int := length(p_b) + 1;  -- d[i][j] is d[i * w + j + 1]
  d  int[];
  v  int;
begin
  if la = 0 or lb = 0 then
    return greatest(la, lb);
  end if;
  d := array_fill(0, array[(la + 1) * w]);
  for i in 0 .. la loop d[i * w + 1] := i; end loop;
  for j in 0 .. lb loop d[j + 1] := j; end loop;
  for i in 1 .. la loop
    for j in 1 .. lb loop
      v := least(d[(i - 1) * w + j + 1] + 1, d[i * w + j] + 1,
                 d[(i - 1) * w + j] + case when substr(p_a, i, 1) = substr(p_b, j, 1) then 0 else 1 end);
      if i > 1 and j > 1 and substr(p_a, i, 1) = substr(p_b, j - 1, 1) and substr(p_a, i - 1, 1) = substr(p_b, j, 1) then
        v := least(v, d[(i - 2) * w + j - 1] + 1);
      end if;
      d[i * w + j + 1] := v;
    end loop;
  end loop;
  return d[la * w + lb + 1];
end
$$;
-- only similar_search_words (security definer) calls it
revoke execute on function kiwi_internal.edit_distance(text, text) from public, anon, authenticated, service_role;

-- Up to two known words a (misspelt) word may be a typo of: among the ten closest in the
-- vocabulary by trigrams, those fewest edits away, and at most one (two for a word of
-- eight letters or more: edit_distance), that occur in the search document of a tool the
-- caller may find (a public tool; a private one of the caller's namespaces; any for
-- admins; never an unlisted one), so that typo tolerance never reveals a word of a tool
-- the caller cannot list. Security definer to read the vocabulary, which is private;
-- it reads the caller from the session (caller_is_admin, my_namespaces), never from
-- an argument.
create function kiwi_internal.similar_search_words(p_word text) returns text[]
  language plpgsql stable security definer
  set search_path = ''
  set pg_trgm.similarity_threshold = 0.2
  set plan_cache_mode = force_custom_plan  -- its word decides the trigram index's plan
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
begin
  return (
    select coalesce(array_agg(w.word order by w.score desc, w.word), '{}')
      from (select c.word, c.score, c.edits, min(c.edits) over () as fewest
              from (select n.word, n.score, kiwi_internal.edit_distance(n.word, p_word) as edits
                      from (select s.word, extensions.similarity(s.word, p_word) as score
                              from kiwi_internal.search_words s
                             where s.word operator(extensions.%) p_word
                             order by score desc, s.word
                             limit 10) n) c
             where c.edits <= case when length(p_word) >= 8 then 2 else 1 end
               and exists (select 1 from public.tools t
                            where t.search_vector @@ to_tsquery('simple', quote_literal(c.word))
                              and (t.visibility = 'public'
                                   or (t.visibility = 'private' and (v_admin or t.namespace = any (v_ns)))))
             order by c.edits, c.score desc, c.word
             limit 2) w
     where w.edits = w.fewest);  -- `forcast` is forecast (one edit), not also format (two)
end
$$;
revoke execute on function kiwi_internal.similar_search_words(text) from public;
-- search_tools (security invoker) calls it for every caller; it checks the caller itself.
grant execute on function kiwi_internal.similar_search_words(text) to anon, authenticated, service_role;

-- The modifiers' filter, shared by search_tools and semantic search's nearest_tools
-- (180_search_embeddings.sql): a WHERE fragment over tools t, with $2 type, $3 category, $4 MCP
-- server, $5 namespace.
create function kiwi_internal.search_filter_sql() returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select $f$
     and t.visibility <> 'unlisted'
     and t.latest_version is not null
     and ($2 is null or t.tool_type = $2 or t.executor_id in ($2, $2 || '_runtime'))
     and ($3 is null or lower(t.category) = $3 or lower(t.subcategory) = $3)
     and ($4 is null
          or (t.tool_type = 'mcp_tool'
              and ($4 = '*' or t.executor_id in ($4, $4 || '_mcp')
                   or (strpos($4, '/') = 0 and split_part(t.executor_id, '/', 2) in ($4, $4 || '_mcp')))))
     and ($5 is null or t.namespace = $5)$f$
$$;
revoke execute on function kiwi_internal.search_filter_sql() from public;
grant execute on function kiwi_internal.search_filter_sql() to anon, authenticated, service_role;

-- Search's rows with their latest version's content hash and signatures, so that a
-- search and the signature states it shows are one query (the caller judges them against
-- its own trusted keys). %s: a query of (id, ref, namespace, name, tool_type, category,
-- description, executor_id, latest_version, rank, matched_by, search_mode), a page at most.
create function kiwi_internal.search_signed_sql() returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select $f$
    select x.ref, x.namespace, x.name, x.tool_type, x.category, x.description, x.executor_id, x.latest_version,
           x.rank, x.matched_by, x.search_mode, v.content_hash, kiwi_internal.signatures_of(v.id)
      from (%s) x
      left join public.tool_versions v on v.tool_uuid = x.id and v.is_latest
     order by x.rank desc, x.ref$f$
$$;
revoke execute on function kiwi_internal.search_signed_sql() from public;
grant execute on function kiwi_internal.search_signed_sql() to anon, authenticated, service_role;

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
    name_vector   = kiwi_internal.tool_name_vector(t.tool_id, t.name),
    search_document = kiwi_internal.tool_search_document(
      t.tool_id, t.name, t.tags, t.description, t.category, t.subcategory, p.parameters),
    search_text = kiwi_internal.tool_search_text(t.tool_id, t.name, t.tags, t.description, p.parameters),
    search_text_hash = kiwi_internal.sha256_hex(
      kiwi_internal.tool_search_text(t.tool_id, t.name, t.tags, t.description, p.parameters))
    from (select t2.id, (select v.manifest -> 'parameters' from public.tool_versions v
                          where v.tool_uuid = t2.id and v.version = t2.latest_version) as parameters
            from public.tools t2) p
   where p.id = t.id;
  get diagnostics v_count = row_count;
  perform kiwi_internal.remember_search_words(
    string_agg(kiwi_internal.tool_vocabulary(t.tool_id, t.name, t.tags, t.category, t.subcategory), ' '))
    from public.tools t;
  return v_count;
end
$$;
revoke execute on function kiwi_internal.rebuild_search() from public;
grant execute on function kiwi_internal.rebuild_search() to service_role;
-- search_tools for common words in a large registry (issue 18: search <= 25 ms at 1M
-- tools). A word such as `email` matches 25k of 1M tools; ranking them all read each
-- one's row (about 1 us apiece on this machine), so one common word cost 79 ms. When a
-- registry is large, the candidates of a query with many matches are taken from its most
-- used twentieth first: the popularity index and the words' index are intersected before
-- any row is read, and only when that leaves a full ranking window (100) of tools the
-- caller may list are they the candidates; otherwise every match is, as before. The
-- ranking itself is unchanged (170_search.sql): exact id, words, name
-- coverage, popularity, full text.

-- The least use (runs + downloads) of the most used twentieth of the tools, from the
-- statistics of the popularity index; null while the registry is small (under 50,000
-- tools), or has no statistics yet, and search then ranks every match. Security definer
-- to read pg_stats of an index; it returns one number about the whole registry (no tool,
-- no namespace), and a stale one only makes search slower or faster, never different in
-- what it may show.
create function kiwi_internal.search_popular_floor() returns bigint
  language sql stable security definer
  set search_path = ''
as $$
  -- the most common values with their shares, and the histogram of the rest (each bucket
  -- an equal share, at its upper bound); from the most used down, the first value where
  -- the shares reach a twentieth
  with st as (
    select (case 1 when s.stakind1 then s.stavalues1 when s.stakind2 then s.stavalues2
                   when s.stakind3 then s.stavalues3 end)::text::bigint[] as mcv,
           case 1 when s.stakind1 then s.stanumbers1 when s.stakind2 then s.stanumbers2
                  when s.stakind3 then s.stanumbers3 end as mcf,
           (case 2 when s.stakind1 then s.stavalues1 when s.stakind2 then s.stavalues2
                   when s.stakind3 then s.stavalues3 end)::text::bigint[] as hb
      from pg_catalog.pg_statistic s
     where s.starelid = 'public.tools_popularity_idx'::regclass and s.staattnum = 1
     limit 1),
  points as (
    select m.v, m.f::float8 as f from st, unnest(st.mcv, st.mcf) m(v, f)
    union all
    select h.v, (1 - coalesce((select sum(x) from unnest(st.mcf) x), 0)) / (cardinality(st.hb) - 1)
      from st, unnest(st.hb) with ordinality h(v, i)
     where h.i > 1),
  reach as (select p.v, sum(p.f) over (order by p.v desc) as share from points p)
  select case when c.reltuples >= 50000 then (select max(r.v) from reach r where r.share >= 0.05) end
    from pg_catalog.pg_class c
   where c.oid = 'public.tools'::regclass
$$;
revoke execute on function kiwi_internal.search_popular_floor() from public;
-- search_tools (security invoker) calls it for every caller.
grant execute on function kiwi_internal.search_popular_floor() to anon, authenticated, service_role;
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
-- themselves (similar_search_words) or say nothing about any tool
-- (has_embeddings, search_popular_floor); the nearest vectors are read in the answer's
-- own statement under the same condition (nearest_sql). public.search_tools stays the contract (same
-- arguments, columns and ranking, security invoker), a call to this function.

-- The weights of search's signals, defined here and nowhere else: a hybrid rank is
-- words x (lexical score scaled to the best) + meaning x (similarity scaled to the best) +
-- quality x tools.quality_score (655_quality_score.sql), the exact id above all; a lexical
-- rank adds quality x quality_score to its words, coverage and full text (where it weighs
-- more than use and less than one more word matched), and a listing breaks ties of use by it.
-- The lexical side: per_word per word the tool has (per_word_fused when the rank is fused
-- with meaning: its spread by words matched is what the fusion scales), each by its idf over the mean idf (the idf from
-- the public tools' counts, 172_search_term_counts.sql) + terms x (each word's idf x the weight
-- of the best field it is in, over the query's idf: 0..1, so a rare word outweighs common ones)
-- + name coverage (0..1) + quality; the fields: id and name, tags, description and
-- category, parameters. The fusion scales each list between its best and floor x its
-- worst (lexical_floor, meaning_floor: 0 scales to the best alone). Tuned on the relevance
-- set (bench/search_bench.py, which prints a reference BM25 beside words, meaning and hybrid).
-- Words only, 3 per word let a long description sharing many common words of a sentence
-- outrank a short tool named by its rare one: per_word 0.75 (and terms 3, from 4) took words
-- only from recall@5 0.731, MRR 0.606 to 0.761, 0.618 (BM25 0.739, 0.619); 0.3 failed
-- test_lexical_ranking's long request; BM25's length normalisation, of the whole document or
-- of ts_rank_cd, made it worse (0.71). The fused rank keeps 3 (per_word_fused): at 0.3 hybrid
-- fell from 0.896, 0.730 to 0.866, 0.682. The description field 0.7 (from 0.5; both ranks):
-- words only MRR 0.618 -> 0.622 (BM25 0.619; recall@5 0.761 unchanged), hybrid 0.896, 0.729
-- -> 0.896, 0.730; 0.6 and 0.8 did less. Tuned on every query: on the even-numbered half
-- words only went 0.614 -> 0.623, on the odd one 0.623 -> 0.622.
-- Long requests (a sentence or three, as people describe a task): a long description shares
-- many of their common words by chance, and on requests of 25 to 50 words (bench/relevance/
-- long_queries.yaml) words only found the right tool in the first five for 0.57 of them, against
-- 0.79 for BM25. So the words' part of the rank is scaled by BM25's document length factor,
-- (k1 + 1) / (1 + k1 x (1 - b + b x words of the tool / length_pivot)), length_pivot the
-- distinct words of a typical tool's document (the relevance set's mean is 32), and b grows
-- with the request: 0 up to length_from terms (each word of a short request is meant, and a
-- long tool that has them all is no accident: at b 0.75 for every request, words only fell
-- from 0.761 to 0.709 on the short ones), length_b from length_full terms, linear between. And a
-- word the request repeats (or two words of one stem: stored, store) is one term weighing
-- BM25's query frequency, qtf x (query_k3 + 1) / (query_k3 + qtf). Long requests then: words
-- only recall@5 0.571 -> 0.762, MRR 0.365 -> 0.569 (BM25 0.786, 0.558), hybrid 0.810, 0.619
-- -> 0.810, 0.639; short ones: words 0.761, 0.622 -> 0.754, 0.632, hybrid 0.896, 0.730 ->
-- 0.896, 0.728. b 0.75 did less on long requests (0.690, 0.483), as did stronger query
-- frequency (linear: MRR 0.581 but recall@5 0.738) and the idf of a stem's exact word.
-- Then BM25's term frequency (search_tf_weighted): for a long request each word's part is
-- weighed by how often the tool says it, tf (k1 + 1) / (tf + k1 x norm) in all, read in the
-- window of tools ranked in full (the light rank that chooses the window counts each word once:
-- reading the positions costs a pass over the tool's document). With it length_b 0.5 -> 0.85
-- (tuned on the relevance set: at 0.75 words only MRR on long requests was 0.557, at 0.6-0.7
-- recall@5 0.738-0.762). Long requests: words only 0.762, 0.569 -> 0.810, 0.593 (BM25 0.786,
-- 0.558), hybrid 0.810, 0.639 -> 0.857, 0.646; short ones (those of five terms or more): words
-- only 0.754, 0.632 -> 0.769, 0.656, hybrid 0.896, 0.728 -> 0.881, 0.727. At 100k tools the
-- long requests took as long as before (median 54 / 56 and 63 / 61 ms, new / old, in turn);
-- a call per term instead of one pass per tool cost 12-20 ms more.
create function kiwi_internal.search_weights(out words float8, out meaning float8, out quality float8,
                                             out terms float8, out name_field float8, out tags_field float8,
                                             out text_field float8, out parameters_field float8,
                                             out lexical_floor float8, out meaning_floor float8, out per_word float8,
                                             out per_word_fused float8, out length_b float8, out length_k1 float8,
                                             out length_pivot float8, out length_from float8, out length_full float8,
                                             out query_k3 float8)
  language sql immutable parallel safe
  set search_path = ''
as $$
  select 0.4::float8, 0.6::float8, 0.1::float8, 3::float8, 1::float8, 0.7::float8, 0.7::float8, 0.3::float8,
         0.5::float8, 0::float8, 0.75::float8, 3::float8, 0.85::float8, 1.5::float8, 32::float8, 4::float8,
         8::float8, 8::float8
$$;
revoke execute on function kiwi_internal.search_weights() from public;
grant execute on function kiwi_internal.search_weights() to anon, authenticated, service_role;

-- A term (a tsquery's text: 'stem':* or 'a' | 'b') restricted to one weight of search_document.
create function kiwi_internal.weighted_tsquery(p_term text, p_weight text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select regexp_replace(replace(p_term, ':*', ':*' || p_weight), '''(\s|$)', ''':' || p_weight || '\1', 'g')
$$;
revoke execute on function kiwi_internal.weighted_tsquery(text, text) from public;
grant execute on function kiwi_internal.weighted_tsquery(text, text) to anon, authenticated, service_role;

-- The words' part of a long request's rank with BM25's term frequency: each term's part (its
-- weight in p_parts, 0 where the tool lacks it) by tf (k1 + 1) / (tf + k1 x norm) over the
-- length factor search_tools applies already ((k1 + 1) / (1 + k1 x norm), norm = 1 - b + b x
-- words / pivot), so that together they are BM25's own. tf is how often the document says the
-- term: every position of a lexeme it matches, term i's lexemes being p_lexemes[p_bounds[i] + 1
-- .. p_bounds[i + 1]], or any starting with p_prefixes[i]. A term said once (or a document
-- without positions) keeps its part as it is. The document is read once for all the terms (a
-- call for each term cost about 20 us a term and tool).
create function kiwi_internal.search_tf_weighted(p_document tsvector, p_parts float8[], p_lexemes text[],
                                                 p_bounds int[], p_prefixes text[], p_k1 float8, p_b float8,
                                                 p_pivot float8) returns float8
  language sql immutable parallel safe
  set search_path = ''
as $$
  with said as materialized (
    select u.lexeme, cardinality(u.positions) as n from unnest(p_document) u where u.positions is not null
  )
  select coalesce(sum(p_parts[i] * case when f.tf > 1 then f.tf * (p_k1 * l.norm + 1) / (f.tf + p_k1 * l.norm)
                                        else 1 end), 0)
    from (select 1 - p_b + p_b * length(p_document) / p_pivot as norm) l,
         generate_subscripts(p_parts, 1) i
    cross join lateral (
      select coalesce(sum(d.n), 0)::float8 as tf
        from said d
       where d.lexeme = any (p_lexemes[p_bounds[i] + 1 : p_bounds[i + 1]])
          or starts_with(d.lexeme, p_prefixes[i])) f
   where p_parts[i] > 0
$$;
revoke execute on function kiwi_internal.search_tf_weighted(tsvector, float8[], text[], int[], text[], float8, float8, float8)
  from public;
grant execute on function kiwi_internal.search_tf_weighted(tsvector, float8[], text[], int[], text[], float8, float8, float8)
  to anon, authenticated, service_role;

-- Its statements that read tables for the answer are dynamic (EXECUTE), planned for their
-- words on every call; its static ones (a word's counts, the words a prefix starts) keep
-- their plans for the session, as plpgsql does: planning them anew on every call
-- (plan_cache_mode force_custom_plan) cost about a millisecond a search at 100k tools.
create function kiwi_internal.search_tools(p_query text, p_tool_type text, p_category text, p_limit int,
                                           p_embedding real[], p_model text)
  returns table (tool_id text, namespace text, name text, tool_type text, category text,
                 description text, executor_id text, latest_version text, rank real,
                 matched_by text, search_mode text, content_hash text, signatures jsonb)
  language plpgsql stable security definer
  set search_path = ''
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
  v_exact      text[] := '{}';  -- the same word as a whole stem (a correction is whole already)
  v_tf_lexemes text[] := '{}';  -- every term's lexemes, one after another (search_tf_weighted)
  v_tf_bounds  int[] := '{0}';  -- where each term's lexemes end in v_tf_lexemes
  v_tf_prefix  text[] := '{}';  -- per term: the prefix it matches instead (null: its lexemes)
  v_words_each text[];          -- per term: its part of the rank (its idf, whole or as a prefix)
  v_exact_light text;           -- their sum, each word counted once (the light rank's)
  v_exact_sql  text;            -- the same, in a long request each by how often the tool says it
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
  v_light      text;   -- the same without the words' fields
  v_window     int := greatest(v_limit, 50) * 2;  -- how many candidates ts_rank_cd orders
  v_floor      bigint; -- the use (runs + downloads) of the most used tools, when the registry is large
  v_ids        uuid[]; -- the candidates among the most used, when there are enough of them
  v_prev       uuid[]; -- the best window of the tier before (fewer than a page: they have more words)
  v_source     text := 't.search_document @@ $6';  -- which tools are candidates
  v_best       text;   -- a tier's best window (see below)
  v_any        tsquery;
  v_most       tsquery;        -- the tier of all words but one
  v_most_sql   text;           -- its condition, as two lookups each led by a rare word (see below)
  v_rare       int;            -- the rarest term (the highest idf)
  v_weights    constant record := kiwi_internal.search_weights();
  v_idf        float8[] := '{}'; -- per term: its inverse document frequency (BM25's)
  v_df         bigint;
  v_df_any     bigint;         -- the same among tools of any visibility (which words exist)
  v_df_sum     bigint := 0;    -- the terms' public tools summed: at least as many as match any term
  v_df_all     bigint := 0;    -- the same among tools of any visibility
  v_few        boolean;        -- the words are in too few tools the caller may list to fill a window of the most used
  v_total      float8;         -- how many tools there are (the planner's count, else the public ones counted)
  v_words_sql  text;           -- the terms' weighted share, 0..1 (see below)
  v_fix        text;
  v_lexemes    text[];         -- the words tools have that start with a stem (search_term_counts); a typo: its fixes' stems
  v_sem        text;           -- the meaning side of a hybrid answer: (id, score)
  v_stems      text[] := '{}'; -- per term: the stem it was made from (a repeated stem adds to its term)
  v_qtf        float8[] := '{}'; -- per term: how many of the request's words it stands for
  v_at         int;
  v_seen       text[] := '{}'; -- every stem looked up: a word repeated is looked up (and corrected) once
  v_b          float8;         -- the length factor's b for this request (search_weights: length_*)
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

  if v_text = '' then   -- a listing: most used first (along the popularity index), then the best quality
    return query execute format(kiwi_internal.search_signed_sql(),
      'select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id, t.latest_version,
              (t.run_count + t.download_count + ' || v_weights.quality || ' * t.quality_score)::real as rank,
              null::text as matched_by, ''listing: most used first''::text as search_mode
         from public.tools t where true' || v_filter || '
        order by t.run_count + t.download_count desc, t.quality_score desc, t.ref limit $6')
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

  -- Each distinct stem of a word that is not an English stop word is one term: the stem as a
  -- prefix, or, when no tool the caller sees has it, its closest known spellings
  -- (similar_search_words: `forcast` is read as forecast, never as format); a word said
  -- again adds to its term's weight (query_k3). Every term costs index probes, so a query
  -- is a sentence or two, not a document.
  v_words := array(select w from unnest(string_to_array(kiwi_internal.search_words_of(v_text), ' ')) w
                    where w <> '');
  if (select count(distinct w) from unnest(v_words) w) > 64 then
    raise exception 'search_tools: a query has at most 64 different words and 2000 characters (this one: % words)',
      (select count(distinct w) from unnest(v_words) w)
      using errcode = '22023', hint = 'describe the tool you want in a sentence or two';
  end if;
  v_total := (select greatest(c.reltuples, 0) from pg_catalog.pg_class c where c.oid = 'public.tools'::regclass);
  if v_total < 1 then  -- never analyzed: the tools the counts count (the same for every caller)
    v_total := (select count(*) from public.tools t where t.visibility = 'public' and t.latest_version is not null);
  end if;
  foreach v_word in array v_words loop
    v_stem := (select s.lexeme from unnest(to_tsvector('english', v_word)) s limit 1);
    continue when v_stem is null;
    v_at := array_position(v_stems, v_stem);
    if v_at is not null then  -- a word (or a stem) said again: its term weighs more
      v_qtf[v_at] := v_qtf[v_at] + 1;
      continue;
    end if;
    continue when v_stem = any (v_seen);  -- said again, and it found no term the first time
    v_seen := v_seen || v_stem;
    -- BM25's document frequency of the stem as a prefix: its lexemes' public tools summed (a
    -- tool with two of them counts twice: an upper bound, which only makes a prefix weigh a
    -- little less); and the prefix as the words that start with it (at most 32 of them; else,
    -- or when the counts know none, as after a load that bypassed triggers, the prefix itself):
    -- the GIN index looks whole words up five to eight times faster than a prefix. One range
    -- of the counts' index answers both.
    select coalesce(sum(greatest(c.tools, 0)), 0), coalesce(sum(greatest(c.any_tools, 0)), 0),
           (array_agg(c.lexeme order by c.lexeme) filter (where c.any_tools > 0))[1:33]
      into v_df, v_df_any, v_lexemes
      from kiwi_internal.search_term_counts c
     where c.lexeme >= v_stem collate "C" and c.lexeme < (v_stem || chr(1114111)) collate "C";
    -- (a word no public tool has may still be in one of the caller's own: only a word no
    -- tool the caller may list has is corrected)
    -- (counted, not `exists`: for a first match the planner would scan the whole table,
    -- 90 ms at 100k tools when there is none; no public tool has the word, so few match)
    if length(v_word) >= 4 and v_df = 0
       and (select count(*) from public.tools t
             where t.search_document @@ to_tsquery('simple', quote_literal(v_stem) || ':*')
               and t.visibility <> 'unlisted' and t.latest_version is not null
               and (t.visibility = 'public' or v_admin or t.namespace = any (v_ns))) = 0 then
      v_fixes := kiwi_internal.similar_search_words(v_word);
      continue when cardinality(v_fixes) = 0;
      v_lexemes := array(select s.lexeme from unnest(v_fixes) c, unnest(to_tsvector('english', c)) s);
      continue when cardinality(v_lexemes) = 0;
      v_fix := (select string_agg(quote_literal(l), ' | ') from unnest(v_lexemes) l);
      v_doc_terms := v_doc_terms || v_fix;
      v_exact := v_exact || v_fix;
      v_tf_lexemes := v_tf_lexemes || v_lexemes;
      v_tf_prefix := v_tf_prefix || null::text;
      v_name_terms := v_name_terms || (select string_agg(quote_literal(c), ' | ') from unnest(v_fixes) c);
      select coalesce(sum(greatest(c.tools, 0)), 0), coalesce(sum(greatest(c.any_tools, 0)), 0)
        into v_df, v_df_any
        from kiwi_internal.search_term_counts c
       where c.lexeme = any (v_lexemes);
    else
      if cardinality(v_lexemes) between 1 and 32 then
        v_doc_terms := v_doc_terms || (select string_agg(quote_literal(l), ' | ') from unnest(v_lexemes) l);
        v_tf_lexemes := v_tf_lexemes || v_lexemes;
        v_tf_prefix := v_tf_prefix || null::text;
      else
        v_doc_terms := v_doc_terms || (quote_literal(v_stem) || ':*');
        v_tf_prefix := v_tf_prefix || v_stem;
      end if;
      v_exact := v_exact || quote_literal(v_stem);
      v_name_terms := v_name_terms || (quote_literal(v_word) || ':*');
    end if;
    v_tf_bounds := v_tf_bounds || cardinality(v_tf_lexemes);
    v_df_sum := v_df_sum + v_df;
    v_df_all := v_df_all + v_df_any;
    -- BM25's idf over the public tools' counts (172_search_term_counts.sql): a word in most tools weighs little
    v_idf := v_idf || ln(1 + (greatest(v_total, v_df) - v_df + 0.5) / (v_df + 0.5));
    v_stems := v_stems || v_stem;
    v_qtf := v_qtf || 1::float8;
  end loop;
  -- each term's weight: its idf by BM25's query frequency
  v_idf := array(select v_idf[i] * v_qtf[i] * (v_weights.query_k3 + 1) / (v_weights.query_k3 + v_qtf[i])
                   from generate_series(1, cardinality(v_idf)) i);
  v_doc_q := array(select to_tsquery('simple', x) from unnest(v_doc_terms) x where x is not null);
  v_name_q := array(select to_tsquery('simple', x) from unnest(v_name_terms) x where x is not null);
  v_n := cardinality(v_doc_q);
  -- The terms a tool has, each by its idf and the best field it is in (search_field_weight),
  -- over the idf of all the query's terms: 0..1, so a rare word outweighs common ones.
  v_words_sql := coalesce((select string_agg(format(
      '%s::float8 * (case when t.search_document @@ %L::tsquery then %s::float8 when t.search_document @@ %L::tsquery'
      ' then %s::float8 when t.search_document @@ %L::tsquery then %s::float8 when t.search_document @@ $8[%s]'
      ' then %s::float8 else 0 end)',
      round((v_idf[i] / s.total)::numeric, 6),
      kiwi_internal.weighted_tsquery(v_doc_terms[i], 'A'), f.a, kiwi_internal.weighted_tsquery(v_doc_terms[i], 'B'), f.b,
      kiwi_internal.weighted_tsquery(v_doc_terms[i], 'C'), f.c, i, f.d), ' + ')
    from generate_series(1, v_n) i,
         (select sum(x) as total from unnest(v_idf) x) s,
         (select v_weights.name_field as a, v_weights.tags_field as b, v_weights.text_field as c,
                 v_weights.parameters_field as d) f), '0');
  -- the rank without full text (see lexical rank below); the light rank leaves out the
  -- words' fields too (its first argument: the field part, or 0), so that a tier's window is chosen by
  -- one probe of each word per tool and only the window pays for the fields. In float8
  -- throughout (its constants typed, quality_score cast): numeric arithmetic on every
  -- matching tool cost a third of the rank's time (1,400 tools for `markdown` at 100k)
  v_b := v_weights.length_b * least(greatest((v_n - v_weights.length_from)
                                              / (v_weights.length_full - v_weights.length_from), 0), 1);
  -- (a word counts whole when the tool has it as typed, half when only a longer word
  -- starts with it: `cat` is not `category`; the second argument: each word's part, and in
  -- the window of a long request (b above 0) each by how often the tool says it, BM25's term
  -- frequency)
  v_words_each := array(select format('%s::float8 * ((t.search_document @@ $8[%s])::int + (t.search_document @@ %L::tsquery)::int)',
                                      round((v_idf[i] * v_n / s.total / 2)::numeric, 6), i, v_exact[i])
                           from generate_series(1, v_n) i, (select sum(x) as total from unnest(v_idf) x) s
                          order by i);
  v_exact_light := coalesce(nullif(array_to_string(v_words_each, ' + '), ''), '0');
  v_exact_sql := case when v_b = 0 then v_exact_light
                      else format('kiwi_internal.search_tf_weighted(t.search_document, array[%s]::float8[], %L::text[], %L::int[], %L::text[], %s, %s, %s)',
                                  array_to_string(v_words_each, ', '), v_tf_lexemes, v_tf_bounds, v_tf_prefix,
                                  v_weights.length_k1, v_b, v_weights.length_pivot) end;
  v_cheap := format($f$
                   ((case when t.ref = $1 or t.tool_id = $1 then 100 else 0 end)
                    + %s * (%s::float8 * (%%2$s) + %s::float8 * (%%1$s))
                    + (%s)::real / greatest(length(t.name_vector), 1)
                    + least(ln((1 + t.run_count + t.download_count)::float8) / 1000, 0.01::float8)
                    + %s::float8 * t.quality_score::float8)::real$f$,
    -- BM25's length factor (1 for a short request: b 0)
    case when v_b = 0 then '1::float8'
         else format('(%s::float8 / (1 + %s::float8 * (1 - %s::float8 + %s::float8 * length(t.search_document) / %s::float8)))',
                     v_weights.length_k1 + 1, v_weights.length_k1, v_b, v_b, v_weights.length_pivot) end,
    case when v_vector is null then v_weights.per_word else v_weights.per_word_fused end,
    v_weights.terms,
    coalesce((select string_agg(format('(t.name_vector @@ $9[%s])::int', i), ' + ')
                from generate_series(1, v_n) i), '0'),
    v_weights.quality);
  -- the light rank counts each word once: reading how often a tool says it costs a look at
  -- its whole document, paid by the window's tools only
  v_light := format(v_cheap, '0', v_exact_light);
  v_cheap := format(v_cheap, v_words_sql, v_exact_sql);
  -- a tier's best window by that rank (%s: which tools, the tier's words and, for the
  -- last tier, among the most used)
  v_best := format($f$
      select array_agg(c.id) from (
        select t.id from public.tools t
         where %%s %s
         order by %s desc, t.ref
         limit %s) c$f$, v_filter, v_light, v_window);

  -- Tools with more of the words are preferred (see rank): when a
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
  -- may list are there (with the few of the tier before, which have more of the words);
  -- else, as before, every match is. Only the rows the caller's RLS
  -- lets through are counted, so whether search looks there first never depends on
  -- tools the caller cannot see (the planner's estimates would: its statistics cover
  -- every tool). A look that finds too few costs a second lookup of the words (25 ms for
  -- `type:python csv` at 1M), so it is not made when a modifier narrows the search (a
  -- window of a part of the registry is rarely among its most used), nor for the tiers
  -- with every word or all but one, which match far fewer tools. Only words, name
  -- coverage, popularity and full text order the window, so this can only pass over
  -- rarely used tools among thousands as good. The look is not made either when the
  -- counts say the words are in fewer than twenty windows' worth of tools (a twentieth
  -- of them, the most used share when use is unrelated to the words, would not fill a window:
  -- `markdown` at 100k tools, in 1,260): every match is ranked at once. The counts read
  -- are of tools the caller may list (public ones; for a member, with every tool of its
  -- namespaces; for an admin, all), so the choice says nothing of another namespace's
  -- tools; empty counts, after a load that bypassed triggers, say nothing, and the look is made.
  -- The tier of all words but one, as one tsquery (an OR of ANDs), makes the words' index
  -- walk every tool with either of the two rarest words, checking the whole query on each
  -- (4 to 13 ms for four common words at 100k tools). The same tools are those with the
  -- rarest word and all but one of the others, and those with every other word: two
  -- lookups, each led by its own rarest word (the idf says which, from the public counts,
  -- the same for every caller), read together as a bitmap OR, at a third to a half of the cost.
  v_match := null;
  if v_n > 0 then
    v_any := (select string_agg('(' || q::text || ')', ' | ')::tsquery from unnest(v_doc_q) q);
    if v_n between 3 and 8 then
      v_most := (select string_agg('(' || (select string_agg('(' || q::text || ')', ' & ')
                                             from unnest(v_doc_q) with ordinality u(q, j) where j <> i) || ')', ' | ')::tsquery
                   from generate_series(1, v_n) i);
      v_rare := (select i from generate_series(1, v_n) i order by v_idf[i] desc, i limit 1);
      v_most_sql := format('(t.search_document @@ %L::tsquery or t.search_document @@ %L::tsquery)',
        (select '(' || v_doc_q[v_rare]::text || ') & ('
                || string_agg('(' || (select string_agg('(' || q::text || ')', ' & ')
                                        from unnest(v_doc_q) with ordinality u(q, j) where j <> i and j <> v_rare) || ')', ' | ')
                || ')'
           from generate_series(1, v_n) i where i <> v_rare),
        (select string_agg('(' || q::text || ')', ' & ') from unnest(v_doc_q) with ordinality u(q, j) where j <> v_rare));
    end if;
    foreach v_try in array array[
        case when v_n > 1 then (select string_agg('(' || q::text || ')', ' & ')::tsquery from unnest(v_doc_q) q) end,
        v_most,
        v_any] loop
      continue when v_try is null;
      if v_try = v_any then   -- the last tier: the most used first, else the lexical rank reads every match
        -- (see above: the counts of tools the caller may list)
        v_few := case when v_admin then v_df_all between 1 and 20 * v_window - 1
                      else v_df_sum between 1 and 20 * v_window - 1
                           and (cardinality(v_ns) = 0
                                or v_df_sum + (select count(*) from (select from public.tools t where t.namespace = any (v_ns)
                                                                      limit 20 * v_window) o) < 20 * v_window) end;
        -- (the floor is read only here: reading it from the statistics costs 1.5 to 7 ms)
        if coalesce(v_type, v_category, v_mcp, v_namespace) is null and not v_few then
          v_floor := kiwi_internal.search_popular_floor();
        end if;
        if v_floor is not null then
          execute format(v_best, 't.search_document @@ $6 and (t.run_count + t.download_count) >= ' || v_floor) into v_ids
            using v_text, v_type, v_category, v_mcp, v_namespace, v_try, v_limit, v_doc_q, v_name_q;
          if cardinality(v_ids) >= v_window then  -- with the tier before's few, which have more words
            v_source := format('t.id = any (%L::uuid[])', v_ids || coalesce(v_prev, '{}'));
          end if;
        end if;
        v_match := v_try;
        exit;
      end if;
      execute format(v_best, case when v_try = v_most then v_most_sql else 't.search_document @@ $6' end) into v_ids
        using v_text, v_type, v_category, v_mcp, v_namespace, v_try, v_limit, v_doc_q, v_name_q;
      if cardinality(v_ids) >= v_limit then
        v_match := v_try;
        v_source := format('t.id = any (%L::uuid[])', v_ids);
        exit;
      end if;
      v_prev := v_ids;
    end loop;
  end if;

  -- lexical rank: the exact id (100), then per_word for each word the tool has, then how much of
  -- its id and name the words cover (0..1), popularity (0..0.01), quality (0..0.1:
  -- search_weights), and weighted full text (0..1). The words' fields and ts_rank_cd cost
  -- tens of microseconds a tool (a sentence of common words matches a third of a large
  -- registry), so only a window of the candidates is ranked with them: twice the page,
  -- or 100, chosen by the light rank (on the relevance set, a window of 100 ranks as 500
  -- did, and at 100k tools it costs a fifth). ts_rank_cd reads the words as any of them (a tier's
  -- query of all but one word costs twice as much per tool, for the same ranking).
  v_lex := format($f$
    select y.*, (y.cheap + coalesce(ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', y.search_document, %L::tsquery, 32), 0))::real as rank
      from (select t.id, t.ref, t.tool_id, t.search_document, %s as cheap
              from (select t.id, t.ref, t.tool_id, t.search_document, t.name_vector, t.run_count,
                           t.download_count, t.quality_score
                      from public.tools t
                     where (t.ref = $1 or t.tool_id = $1 or %s) %s
                     order by %s desc, t.ref
                     limit %s) t) y$f$,
    v_any, v_cheap, v_source, v_filter, v_light, v_window);

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

  -- Hybrid: each list's scores scaled between its best and floor x its worst (words: the
  -- lexical rank without the exact-id bonus, floor 0.5; meaning: cosine similarity, floor
  -- 0), fused as 0.4 words + 0.6 meaning, plus 0.1
  -- quality (search_weights); the exact id first. Score fusion keeps how far apart tools are, which rank fusion forgets: on the
  -- relevance set (bench/search_bench.py) it finds more in the first five than reciprocal
  -- rank fusion did (0.87 against 0.80), and tools at least 0.1 similar to the query count,
  -- so a misspelt sentence still finds by meaning what its words miss.
  -- The meaning side: the tools nearest the query's vector (pgvector's HNSW index), in the
  -- same statement. A modifier (type:python) keeps a share of the tools, and the index is
  -- walked until enough of that share are found: at 100k tools, 600 vectors and their tools
  -- for `type:python csv` (most of its time). So when a modifier is given and the words fill
  -- the lexical list (greatest(page, 50) tools that match the words and the modifier), the
  -- meaning side is those tools' own similarity, read by key; else the index is walked.
  v_sem := format('select n.id, n.similarity as score from (%s) n',
                  kiwi_internal.nearest_sql('$11', '$12', '$10', '$13', v_filter));
  if coalesce(v_type, v_category, v_mcp, v_namespace) is not null then
    v_sem := format($f$
      select l.id, (1 - (e.embedding operator(extensions.<=>) $12))::real as score
        from lex l
        join public.tools t on t.id = l.id
        join kiwi_internal.search_embeddings e on e.model = $11 and e.text_hash = t.search_text_hash
       where (select count(*) from lex) >= $10 and 1 - (e.embedding operator(extensions.<=>) $12) >= $13 %s
      union all
      select s.id, s.score from (%s) s where (select count(*) from lex) < $10$f$, v_filter, v_sem);
  end if;
  perform kiwi_internal.search_hnsw();
  return query execute format(kiwi_internal.search_signed_sql(), format($f$
    with lex as (
      select l.id, (l.ref = $1 or l.tool_id = $1) as exact,
             l.rank - case when l.ref = $1 or l.tool_id = $1 then 100 else 0 end as score
        from (%s) l
       order by l.rank desc, l.ref
       limit $10),
    sem as (%s),
    fused as (
      select coalesce(l.id, s.id) as id, coalesce(l.exact, false) as exact,
             (l.score - lm.lo) / nullif(lm.hi - lm.lo, 0) as lw,
             (s.score - sm.lo) / nullif(sm.hi - sm.lo, 0) as sw
        from lex l full join sem s on s.id = l.id
       cross join (select min(score) * %s as lo, max(score) as hi from lex) lm
       cross join (select min(score) * %s as lo, max(score) as hi from sem) sm)
    select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.description, t.executor_id, t.latest_version,
           ((case when f.exact then 100 else 0 end) + $14 * coalesce(f.lw, 0) + $15 * coalesce(f.sw, 0)
            + $16 * t.quality_score)::real as rank,
           case when f.exact then 'id' when f.lw is not null and f.sw is not null then 'words+meaning'
                when f.lw is not null then 'words' else 'meaning' end as matched_by,
           'hybrid'::text as search_mode
      from fused f
     -- each candidate's row by its key (offset 0 keeps the planner from hashing every tool)
     cross join lateral (select t.id, t.ref, t.namespace, t.name, t.tool_type, t.category, t.subcategory,
                                t.description, t.executor_id, t.latest_version, t.visibility, t.quality_score
                           from public.tools t where t.id = f.id offset 0) t
     where true %s
     order by 10 desc, t.ref
     limit $7$f$, v_lex, v_sem,
    v_weights.lexical_floor, v_weights.meaning_floor, v_filter))
    using v_text, v_type, v_category, v_mcp, v_namespace, v_match, v_limit, v_doc_q, v_name_q,
          greatest(v_limit, 50), p_model, v_vector, 0.1::real, v_weights.words, v_weights.meaning, v_weights.quality;
end
$$;
revoke execute on function kiwi_internal.search_tools(text, text, text, int, real[], text) from public;
-- public.search_tools (security invoker) calls it for every caller; it checks the caller itself.
grant execute on function kiwi_internal.search_tools(text, text, text, int, real[], text)
  to anon, authenticated, service_role;

-- The contract: the same arguments, columns and ranking, security invoker, a call to
-- kiwi_internal.search_tools above.
create function public.search_tools(p_query text, p_tool_type text default null,
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
  'Ranked search. Lexical: any of the query''s words (English stop words dropped, stemmed, as prefixes; a word no tool has is replaced by its closest known spellings), ranked by the exact id, then the words that match (each weighed by its idf and by the field it is in), how much of the name they cover, and weighted full text (name and id, tags, description, parameters), with the tool''s quality_score as a small signal (0.1 of it); most used breaks ties. With p_embedding (the query''s 256-number vector) and p_model (the model that made it), the lexical ranking is fused with the tools nearest in meaning (each list''s scores scaled between its best and a floor, 0.4 words + 0.6 meaning + 0.1 quality_score: kiwi_internal.search_weights); without, the answer is lexical and search_mode says why. matched_by: id, words, meaning or words+meaning. Modifiers in the query: type:T, category:C, mcp:SERVER (mcp:* any MCP tool), namespace:N. Empty query: most used first, then best quality_score.';
revoke execute on function public.search_tools(text, text, text, int, real[], text) from public;
grant execute on function public.search_tools(text, text, text, int, real[], text) to anon, authenticated, service_role;
