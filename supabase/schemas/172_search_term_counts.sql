-- How many public tools hold each word of the search documents: BM25's document
-- frequency, for the idf that weighs a query's words (170_search.sql). Counting a word's
-- tools at query time costs one lookup of the words' index per word (6 to 15 ms for a
-- common word at 100k tools, before any ranking); this table answers in a btree probe.
--
-- Only tools anyone may list count (public, with a version): the counts say nothing
-- about a private or unlisted tool, so every caller reads the same statistics and none
-- learns a private word's frequency. A word only private tools hold counts 0, the
-- rarest, which is what it is among what the caller can compare it with.
--
-- Beside it, how many tools of any kind hold the word (any_tools): never a statistic for a
-- caller who cannot list every tool (only an admin's search reads it as one), else only
-- the list of the words that exist, so that search_tools turns a word's prefix into the
-- words that start with it (`creat` into creat, creation, creator) with one btree range
-- instead of a prefix scan of the GIN index, which costs five to eight times as much as
-- looking up the same words whole. It is read only inside search_tools, whose answer is
-- still filtered by the caller's RLS.
--
-- Kept by a row trigger on public.tools (a write adds its new document's words and takes
-- its old one's away, in word order, so concurrent publishes never deadlock), and
-- recounted whole by recount_search_terms() after a load that bypassed triggers.
create table kiwi_internal.search_term_counts (
  lexeme    text collate "C" primary key,
  tools     int not null,          -- public tools with a version (BM25's document frequency)
  any_tools int not null default 0 -- tools of any visibility (which words exist)
);
comment on table kiwi_internal.search_term_counts is
  'Document frequency of each search_document lexeme among public tools with a version (BM25 idf), and among all tools (any_tools: which lexemes exist, to expand prefixes).';
alter table kiwi_internal.search_term_counts enable row level security;
-- read by search_tools and written by the trigger, both as the owner: no API role reaches it
revoke all on table kiwi_internal.search_term_counts from public, anon, authenticated, service_role;
-- (the counts are of public tools only: were a role granted reading, every row could be its)
create policy "counts of public tools' words"
  on kiwi_internal.search_term_counts for select to anon, authenticated, service_role using (true);

-- Adds a document's words (p_new) and takes another's away (p_old), in lexeme order; a
-- word in both moves nothing. p_new_public, p_old_public: whether each document counts
-- among the public tools too.
create function kiwi_internal.count_search_terms(p_new tsvector, p_old tsvector,
                                                 p_new_public boolean, p_old_public boolean) returns void
  language sql volatile
  set search_path = ''
as $$
  insert into kiwi_internal.search_term_counts as c (lexeme, tools, any_tools)
  select d.lexeme, sum(d.sign * d.public::int)::int, sum(d.sign)::int
    from (select l as lexeme, 1 as sign, p_new_public as public from unnest(tsvector_to_array(coalesce(p_new, ''))) l
          union all
          select l, -1, p_old_public from unnest(tsvector_to_array(coalesce(p_old, ''))) l) d
   group by d.lexeme
  having sum(d.sign * d.public::int) <> 0 or sum(d.sign) <> 0
   order by d.lexeme
  on conflict (lexeme) do update set tools = c.tools + excluded.tools, any_tools = c.any_tools + excluded.any_tools
$$;
revoke execute on function kiwi_internal.count_search_terms(tsvector, tsvector, boolean, boolean)
  from public, anon, authenticated, service_role;

create function kiwi_internal.tools_count_search_terms() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.count_search_terms(
    case when tg_op <> 'DELETE' then new.search_document end,
    case when tg_op <> 'INSERT' then old.search_document end,
    tg_op <> 'DELETE' and new.visibility = 'public' and new.latest_version is not null,
    tg_op <> 'INSERT' and old.visibility = 'public' and old.latest_version is not null);
  return null;
end
$$;
revoke execute on function kiwi_internal.tools_count_search_terms() from public, anon, authenticated, service_role;
create trigger tools_count_search_terms_insert
  after insert on public.tools
  for each row when (new.search_document is not null)
  execute function kiwi_internal.tools_count_search_terms();
-- (a run's count or a download moves no word: only what changes the counted documents fires)
create trigger tools_count_search_terms_update
  after update on public.tools
  for each row when ((old.visibility = 'public' and old.latest_version is not null)
                     is distinct from (new.visibility = 'public' and new.latest_version is not null)
                     or old.search_document is distinct from new.search_document)
  execute function kiwi_internal.tools_count_search_terms();
create trigger tools_count_search_terms_delete
  after delete on public.tools
  for each row when (old.search_document is not null)
  execute function kiwi_internal.tools_count_search_terms();

-- Every count anew, from the tools as they are: after a bulk load that ran without
-- triggers (session_replication_role = replica), or to repair.
create function kiwi_internal.recount_search_terms() returns bigint
  language sql volatile security definer
  set search_path = ''
as $$
  delete from kiwi_internal.search_term_counts;
  insert into kiwi_internal.search_term_counts (lexeme, tools, any_tools)
  select l, count(*) filter (where t.visibility = 'public' and t.latest_version is not null), count(*)
    from public.tools t, unnest(tsvector_to_array(t.search_document)) l
   group by l;
  select count(*) from kiwi_internal.search_term_counts;
$$;
revoke execute on function kiwi_internal.recount_search_terms() from public, anon, authenticated;
grant execute on function kiwi_internal.recount_search_terms() to service_role;
