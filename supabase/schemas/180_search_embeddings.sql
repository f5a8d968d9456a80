-- Semantic search's vectors. Each tool's searchable text (tools.search_text, kept by the
-- search document's trigger: 170_search.sql) is embedded once per model and content:
-- the vector is keyed by (model, sha256 of the text), so an unchanged text is never
-- embedded twice and tools with the same text share one vector. Vectors are computed
-- outside the database (the CLI, the MCP server: runner/search/) and stored here;
-- search_tools takes the query's vector from its caller and fuses the nearest tools
-- with its lexical ranking.
--
-- Every model stores 256 dimensions (the local model has 256; an OpenAI-compatible
-- provider is asked for 256), so one HNSW index serves whichever model is in use.
--
-- Who writes: the members of a tool's namespace (what they publish), service_role for
-- any tool. A member's vector for a text is kept once stored (the first one stays);
-- service_role's replaces it. The table is private: callers
-- reach it only through these functions, which read the caller from the session.

create table kiwi_internal.search_embeddings (
  model      text not null constraint model_length check (length(model) between 1 and 200),
  text_hash  text not null constraint text_hash_hex check (text_hash ~ '^[0-9a-f]{64}$'),
  embedding  extensions.vector(256) not null,
  created_at timestamptz not null default now(),
  primary key (model, text_hash)
);
comment on table kiwi_internal.search_embeddings is
  'Embeddings of tools'' searchable texts, keyed by model and the text''s sha256 (tools.search_text_hash).';
alter table kiwi_internal.search_embeddings enable row level security;
revoke all on table kiwi_internal.search_embeddings from public, anon, authenticated;
grant all on table kiwi_internal.search_embeddings to service_role;
create policy "service_role manages embeddings; others reach them through functions"
  on kiwi_internal.search_embeddings for all to service_role using (true) with check (true);

create index search_embeddings_hnsw_idx on kiwi_internal.search_embeddings
  using hnsw (embedding extensions.vector_cosine_ops);

-- Texts that have no vector for the model yet, among the tools the caller may embed;
-- each text once, in hash order after p_after. Call until it returns nothing. With p_all
-- (service_role only), every text whether embedded or not: `kiwi --admin embed --refresh`
-- pages through them and replaces each vector.
create function kiwi_internal.pending_search_texts(p_model text, p_limit int, p_after text, p_all boolean)
  returns table (text_hash text, search_text text)
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
begin
  if coalesce(btrim(p_model), '') = '' then
    raise exception 'pending_search_texts: p_model names the embedding model, and is required'
      using errcode = '22023';
  end if;
  if coalesce(p_all, false) and not v_admin then
    raise exception 'pending_search_texts: p_all (every text, embedded or not) is for service_role'
      using errcode = '42501',
            hint = 'a namespace''s members keep the first vector they stored; an admin refreshes (kiwi --admin embed --refresh)';
  end if;
  return query
    select distinct on (t.search_text_hash) t.search_text_hash, t.search_text
      from public.tools t
     where t.search_text_hash is not null
       and t.latest_version is not null
       and t.visibility <> 'unlisted'
       and (v_admin or t.namespace = any (v_ns))
       and (p_after is null or t.search_text_hash > p_after)
       and (coalesce(p_all, false)
            or not exists (select 1 from kiwi_internal.search_embeddings e
                            where e.model = p_model and e.text_hash = t.search_text_hash))
     order by t.search_text_hash
     limit least(greatest(coalesce(p_limit, 256), 1), 1000);
end
$$;
revoke execute on function kiwi_internal.pending_search_texts(text, int, text, boolean) from public;
grant execute on function kiwi_internal.pending_search_texts(text, int, text, boolean) to authenticated, service_role;

create function public.pending_search_texts(p_model text, p_limit int default 256, p_after text default null,
                                            p_all boolean default false)
  returns table (text_hash text, search_text text)
  language sql stable
  set search_path = ''
as $$
  select * from kiwi_internal.pending_search_texts(p_model, p_limit, p_after, p_all)
$$;
comment on function public.pending_search_texts(text, int, text, boolean) is
  'Searchable texts of the tools the caller may embed (its namespaces; all for service_role) that have no vector for p_model yet, each once (by sha256), in hash order after p_after. Embed them and store_search_embeddings; repeat until none. p_all (service_role): every text, to refresh the vectors.';
revoke execute on function public.pending_search_texts(text, int, text, boolean) from public;
grant execute on function public.pending_search_texts(text, int, text, boolean) to authenticated, service_role;

-- Stores vectors: p_items is [{"text_hash": hex, "embedding": [256 numbers]}, ...].
-- A hash of no tool the caller may embed, or a vector of another size, refuses the
-- whole call (nothing stored). Returns how many vectors were written.
create function kiwi_internal.store_search_embeddings(p_model text, p_items jsonb) returns int
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_admin  boolean := kiwi_internal.caller_is_admin();
  v_ns     text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
  v_item   jsonb;
  v_hash   text;
  v_count  int;
begin
  if coalesce(btrim(p_model), '') = '' or length(p_model) > 200 then
    raise exception 'store_search_embeddings: p_model must name the embedding model (1 to 200 characters)'
      using errcode = '22023';
  end if;
  if jsonb_typeof(p_items) is distinct from 'array' then
    raise exception 'store_search_embeddings: p_items must be an array of {text_hash, embedding}'
      using errcode = '22023';
  end if;
  if jsonb_array_length(p_items) > 1000 then
    raise exception 'store_search_embeddings: at most 1000 items a call (got %)', jsonb_array_length(p_items)
      using errcode = '22023';
  end if;
  -- every item checked before anything is stored, in one pass each (a batch is 1000 items)
  select i into v_item from jsonb_array_elements(p_items) i
   where jsonb_typeof(i) <> 'object' or coalesce(i ->> 'text_hash', '') !~ '^[0-9a-f]{64}$' limit 1;
  if found then
    raise exception 'store_search_embeddings: each item needs text_hash, a sha256 in lowercase hex (got %)',
      left(v_item::text, 100) using errcode = '22023';
  end if;
  select i ->> 'text_hash' into v_hash from jsonb_array_elements(p_items) i
   where jsonb_typeof(i -> 'embedding') is distinct from 'array' or jsonb_array_length(i -> 'embedding') <> 256
      or exists (select 1 from jsonb_array_elements(i -> 'embedding') x where jsonb_typeof(x) <> 'number')
   limit 1;
  if found then
    raise exception 'store_search_embeddings: the embedding of % must be 256 numbers', v_hash using errcode = '22023';
  end if;
  select i ->> 'text_hash' into v_hash from jsonb_array_elements(p_items) i
   where not exists (select 1 from jsonb_array_elements(i -> 'embedding') x where (x #>> '{}')::float8 <> 0)
   limit 1;
  if found then
    raise exception 'store_search_embeddings: the embedding of % is all zeros (it has no direction)', v_hash
      using errcode = '22023';
  end if;
  select h into v_hash
    from (select distinct i ->> 'text_hash' as h from jsonb_array_elements(p_items) i) d
   where not exists (select 1 from public.tools t
                      where t.search_text_hash = d.h and (v_admin or t.namespace = any (v_ns)))
   limit 1;
  if found then
    raise exception 'store_search_embeddings: % is the text of no tool you may embed', v_hash using errcode = '42501';
  end if;

  insert into kiwi_internal.search_embeddings as e (model, text_hash, embedding)
  select p_model, i ->> 'text_hash', (i ->> 'embedding')::extensions.vector(256)
    from (select distinct on (x ->> 'text_hash') x as i from jsonb_array_elements(p_items) x) d
  on conflict (model, text_hash) do update set embedding = excluded.embedding, created_at = now()
   where v_admin;
  get diagnostics v_count = row_count;
  return v_count;
end
$$;
revoke execute on function kiwi_internal.store_search_embeddings(text, jsonb) from public;
grant execute on function kiwi_internal.store_search_embeddings(text, jsonb) to authenticated, service_role;

create function public.store_search_embeddings(p_model text, p_items jsonb) returns int
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.store_search_embeddings(p_model, p_items)
$$;
comment on function public.store_search_embeddings(text, jsonb) is
  'Stores embeddings [{text_hash, embedding: 256 numbers}] for p_model, for texts of tools the caller may embed. A stored vector stays, except that service_role replaces it. Returns how many were written.';
revoke execute on function public.store_search_embeddings(text, jsonb) from public;
grant execute on function public.store_search_embeddings(text, jsonb) to authenticated, service_role;

-- Whether any vector of the model is stored (search_tools says so when none is).
create function kiwi_internal.has_embeddings(p_model text) returns boolean
  language sql stable security definer
  set search_path = ''
as $$
  select exists (select 1 from kiwi_internal.search_embeddings e where e.model = p_model)
$$;
revoke execute on function kiwi_internal.has_embeddings(text) from public;
grant execute on function kiwi_internal.has_embeddings(text) to anon, authenticated, service_role;

-- Semantic search's HNSW scan, for the rest of the transaction: it keeps walking the graph
-- until enough tools pass the filters (pgvector >= 0.8; an older one scans as it does).
create function kiwi_internal.search_hnsw() returns void
  language plpgsql volatile
  set search_path = ''
as $$
begin
  perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  perform set_config('hnsw.ef_search', '100', true);
exception when others then
  null;  -- an older pgvector: the default scan
end
$$;
revoke execute on function kiwi_internal.search_hnsw() from public;
grant execute on function kiwi_internal.search_hnsw() to anon, authenticated, service_role;

-- The nearest tools' query, shared by nearest_tools and search_tools' hybrid answer (which
-- runs it inline, in the statement that fuses: no second function call, no second plan):
-- (id, similarity) of the p_limit tools nearest the vector, at least p_min similar, among
-- the tools that pass p_filter (a WHERE fragment over tools t: the modifiers and the
-- caller's visibility). The arguments are the placeholders ($n) of the model, the vector,
-- the limit and the least similarity. The caller sets hnsw.iterative_scan (search_hnsw).
create function kiwi_internal.nearest_sql(p_model text, p_vector text, p_limit text, p_min text, p_filter text)
  returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select format($f$
    select n.id, n.similarity::real as similarity from (
      select t.id, 1 - (e.embedding operator(extensions.<=>) %2$s) as similarity
        from kiwi_internal.search_embeddings e
        join public.tools t on t.search_text_hash = e.text_hash
       where e.model = %1$s %5$s
       order by e.embedding operator(extensions.<=>) %2$s
       limit %3$s) n
     where n.similarity >= %4$s$f$, p_model, p_vector, p_limit, p_min, p_filter)
$$;
revoke execute on function kiwi_internal.nearest_sql(text, text, text, text, text) from public;
grant execute on function kiwi_internal.nearest_sql(text, text, text, text, text) to anon, authenticated, service_role;

-- The tools nearest the query's vector, most similar first, among those the caller may
-- find (public; a private one of the caller's namespaces; any for admins; never an
-- unlisted one) and that pass search_tools' filter (the same text: search_filter_sql).
-- Security definer to read the vectors; it reads the caller from the session.
create function kiwi_internal.nearest_tools(
  p_model text, p_embedding extensions.vector(256), p_limit int, p_min_similarity real,
  p_type text, p_category text, p_mcp text, p_namespace text)
  returns table (id uuid, similarity real)
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
begin
  perform kiwi_internal.search_hnsw();
  return query execute kiwi_internal.nearest_sql('$6', '$7', '$8', '$11',
      ' and (t.visibility = ''public'' or (t.visibility = ''private'' and ($9 or t.namespace = any ($10))))'
      || kiwi_internal.search_filter_sql())
    using null::text, p_type, p_category, p_mcp, p_namespace, p_model, p_embedding,
          least(greatest(coalesce(p_limit, 50), 1), 500), v_admin, v_ns, coalesce(p_min_similarity, 0);
end
$$;revoke execute on function kiwi_internal.nearest_tools(text, extensions.vector, int, real, text, text, text, text)
  from public;
-- search_tools (security invoker) calls it for every caller; it checks the caller itself.
grant execute on function kiwi_internal.nearest_tools(text, extensions.vector, int, real, text, text, text, text)
  to anon, authenticated, service_role;

-- Which of the given tools (refs, as search_tools answers them) have no vector for the
-- model: search found them by words only. Among the tools the caller may find (as
-- nearest_tools reads them), so it tells nothing of another namespace's private tools.
-- `kiwi search` and the MCP server's `search` say how many there were.
create function kiwi_internal.unembedded_tools(p_model text, p_refs text[]) returns setof text
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_admin boolean := kiwi_internal.caller_is_admin();
  v_ns    text[] := case when v_admin then '{}'::text[] else kiwi_internal.my_namespaces() end;
begin
  return query
    select t.ref
      from public.tools t
     where t.ref = any ((coalesce(p_refs, '{}'::text[]))[1:500])
       and (t.visibility = 'public' or (t.visibility = 'private' and (v_admin or t.namespace = any (v_ns))))
       and not exists (select 1 from kiwi_internal.search_embeddings e
                        where e.model = p_model and e.text_hash = t.search_text_hash)
     order by t.ref;
end
$$;
revoke execute on function kiwi_internal.unembedded_tools(text, text[]) from public;
grant execute on function kiwi_internal.unembedded_tools(text, text[]) to anon, authenticated, service_role;

create function public.unembedded_tools(p_model text, p_refs text[]) returns setof text
  language sql stable
  set search_path = ''
as $$
  select kiwi_internal.unembedded_tools(p_model, p_refs)
$$;
comment on function public.unembedded_tools(text, text[]) is
  'Of the tools p_refs names (at most 500) that the caller may find, those with no vector for p_model: a search finds them by their words only, until they are embedded.';
revoke execute on function public.unembedded_tools(text, text[]) from public;
grant execute on function public.unembedded_tools(text, text[]) to anon, authenticated, service_role;

-- Stale vectors, deleted (service_role only): those of a text no tool has any more (its
-- tool changed its text or was deleted), and those of a model not in p_models that has
-- stored nothing for p_idle (a model no longer in use; a model in use stores a vector for
-- each new text). The background embedder of `kiwi serve` and `kiwi worker`, and
-- `kiwi --admin embed`, call it with the model they use. Returns how many were deleted.
create function kiwi_internal.prune_search_embeddings(p_models text[], p_idle interval) returns int
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_count int;
begin
  if not kiwi_internal.caller_is_admin() then
    raise exception 'prune_search_embeddings is for service_role'
      using errcode = '42501', hint = 'kiwi --admin embed prunes; so does a kiwi serve or kiwi worker';
  end if;
  with idle as (
    select e.model from kiwi_internal.search_embeddings e
     where not (e.model = any (coalesce(p_models, '{}'::text[])))
     group by e.model
    having max(e.created_at) < now() - coalesce(p_idle, interval '30 days'))
  delete from kiwi_internal.search_embeddings e
   where e.model in (select model from idle)
      or not exists (select 1 from public.tools t where t.search_text_hash = e.text_hash);
  get diagnostics v_count = row_count;
  return v_count;
end
$$;
revoke execute on function kiwi_internal.prune_search_embeddings(text[], interval) from public;
grant execute on function kiwi_internal.prune_search_embeddings(text[], interval) to service_role;

create function public.prune_search_embeddings(p_models text[] default null,
                                               p_idle interval default interval '30 days') returns int
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.prune_search_embeddings(p_models, p_idle)
$$;
comment on function public.prune_search_embeddings(text[], interval) is
  'service_role: deletes the vectors of texts no tool has any more, and those of models not in p_models that stored nothing for p_idle (default 30 days). Returns how many were deleted.';
revoke execute on function public.prune_search_embeddings(text[], interval) from public;
grant execute on function public.prune_search_embeddings(text[], interval) to service_role;
