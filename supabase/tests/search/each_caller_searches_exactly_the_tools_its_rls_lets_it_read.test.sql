-- search_tools does its work as security definer (kiwi_internal.search_tools), with the
-- tools' RLS written out as a plain condition so that the words' indexes stay usable. What
-- each caller finds must still be exactly what the same search finds under RLS: for anon,
-- a signed-in stranger, members of namespaces with private tools, service_role and postgres,
-- over listings, words, tiers, typos, exact ids, modifiers and meaning. The reference is the
-- same function with its own filter switched off (v_admin true), run as security invoker,
-- so RLS alone decides what it reads. And another tenant's private tools never appear for
-- a stranger nor change the order or the page of what a stranger sees.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(91);
select tests.make_acme();

create function tests.globex_id() returns uuid language sql immutable as $$ select '00000000-0000-4000-8000-00000000000d'::uuid $$;
-- the callers of this file: _setup's, and globex's owner and postgres
create function tests.act_as_caller(p_who text) returns void
  language plpgsql as $$
begin
  case p_who
    when 'globex' then perform tests.act_as('authenticated', tests.globex_id());
    when 'postgres' then perform tests.act_as_admin();
    else perform tests.act_as_user(p_who);
  end case;
end $$;
create function tests.vec(i int, j int default null, w real default 0) returns real[]
  language sql immutable as $$
  select array_agg(case when k = i then 1 when k = j then w else 0 end::real order by k)
    from generate_series(1, 256) k
$$;
-- every tool's text a vector (superuser): private widgets point at the query, public ones near it
create function tests.embed_all() returns void
  language sql as $$
  insert into kiwi_internal.search_embeddings (model, text_hash, embedding)
  select distinct on (t.search_text_hash) 'm1', t.search_text_hash,
         tests.vec(case when t.ref like '%widget%' then 1 else 3 end, 2,
                   case when t.visibility = 'private' then 0 else 0.5 + length(t.ref) / 100.0 end)::extensions.vector(256)
    from public.tools t
   where t.search_text_hash is not null
     and not exists (select 1 from kiwi_internal.search_embeddings e where e.model = 'm1' and e.text_hash = t.search_text_hash)
$$;
create function tests.publish_script(p_ref text, p_visibility text, p_description text) returns void
  language sql as $$
  select public.publish_tool_version(
    jsonb_build_object('tool_id', p_ref, 'tool_type', 'script', 'executor', 'bash_runtime', 'version', '1.0.0',
                       'visibility', p_visibility, 'description', p_description),
    '[{"path": "a.sh", "content_text": "echo"}]');
$$;

-- the reference: kiwi_internal.search_tools as security invoker with its own filter off
do $$
declare
  v_def text := pg_get_functiondef('kiwi_internal.search_tools(text, text, text, int, real[], text)'::regprocedure);
begin
  v_def := replace(v_def, 'FUNCTION kiwi_internal.search_tools(', 'FUNCTION tests.search_tools_rls(');
  v_def := replace(v_def, 'SECURITY DEFINER', '');
  v_def := replace(v_def, 'v_admin      constant boolean := kiwi_internal.caller_is_admin();',
                          'v_admin      constant boolean := true;');
  execute v_def;
end $$;
-- the reference runs as each caller: let them read the words' counts as search_tools does
grant select on kiwi_internal.search_term_counts to anon, authenticated, service_role;
-- and the vectors, which the hybrid answer reads in its own statement (RLS on the tools they
-- join decides which tools the reference finds by meaning)
grant select on kiwi_internal.search_embeddings to anon, authenticated;
grant select (search_text_hash) on public.tools to anon;
create policy "the reference reads the vectors" on kiwi_internal.search_embeddings for select
  to anon, authenticated using (true);

-- the queries (number, query, page, vector): searched by every caller
create table tests.queries (n int primary key, q text, lim int, vec real[]);
insert into tests.queries values
  (1, '', 20, null), (2, '', 3, null), (3, 'widget', 3, null), (4, 'widget', 20, null),
  (5, 'widget gadget report', 3, null), (6, 'widget gadget report', 20, null), (7, 'sprockeron', 5, null),
  (8, 'globex/secret_widget', 5, null), (9, 'namespace:globex widget', 5, null), (10, 'type:script widget', 3, null),
  (11, 'widget', 3, tests.vec(1)), (12, 'gadget', 20, tests.vec(1)), (13, 'acme', 20, null);
-- one query's answer from either function, with every column a caller sees
create function tests.answer(p_fn text, p_n int) returns table (tool_id text, rank real, matched_by text,
    search_mode text, content_hash text, signatures text)
  language plpgsql as $$
declare
  r tests.queries;
begin
  select * into r from tests.queries where n = p_n;
  return query execute format(
    'select s.tool_id, s.rank, s.matched_by, s.search_mode, s.content_hash, s.signatures::text
       from %s($1, null, null, $2, $3, $4) s', p_fn)
    using r.q, r.lim, r.vec, case when r.vec is not null then 'm1' end;
end $$;
-- whether `who` finds, for query n, what the reference finds under RLS (same rows, same order)
create function tests.same_as_rls(p_who text, p_n int) returns text
  language plpgsql as $$
declare
  v_out text;
begin
  perform tests.act_as_caller(p_who);
  v_out := results_eq(format('select * from tests.answer(%L, %s)', 'public.search_tools', p_n),
                      format('select * from tests.answer(%L, %s)', 'tests.search_tools_rls', p_n),
                      format('%s: query %s (%L, page %s%s) finds what RLS lets it read, in the same order',
                             p_who, p_n, (select q from tests.queries where n = p_n), (select lim from tests.queries where n = p_n),
                             case when (select vec from tests.queries where n = p_n) is not null then ', with a vector' else '' end));
  perform tests.act_as_admin();
  return v_out;
end $$;
-- a pgTAP assertion (its SQL text) made as `who`
create function tests.as_caller(p_who text, p_assertion text) returns text
  language plpgsql as $$
declare
  v_out text;
begin
  perform tests.act_as_caller(p_who);
  execute 'select ' || p_assertion into v_out;
  perform tests.act_as_admin();
  return v_out;
end $$;
grant select on all tables in schema tests to anon, authenticated, service_role;
grant execute on all functions in schema tests to anon, authenticated, service_role;

select ok(not (select p.prosecdef from pg_proc p where p.oid = 'tests.search_tools_rls'::regproc)
          and (select p.prosrc from pg_proc p where p.oid = 'tests.search_tools_rls'::regproc)
              like '%v_admin      constant boolean := true;%',
  'the reference is the search as security invoker with its own filter off');
select ok((select p.prosecdef from pg_proc p where p.oid = 'kiwi_internal.search_tools'::regproc)
          and not (select p.prosecdef from pg_proc p where p.oid = 'public.search_tools'::regproc),
  'the work is security definer behind a security invoker public function');

-- public tools only, at first
select tests.publish_script('widget_report', 'public', 'Reports on widgets');
select tests.publish_script('gadget_widget', 'public', 'A widget for gadgets');
select tests.publish_script('blue_widget', 'public', 'A blue widget');
select tests.publish_script('report_gadget', 'public', 'Gadget report and widget');
select tests.publish_script('plain_counter', 'public', 'Counts things');
select tests.embed_all();

-- what anon and a stranger find before any other tenant has private tools
create table tests.before (who text, n int, i int, tool_id text, rank real, matched_by text, search_mode text,
                           content_hash text, signatures text);
grant insert, select on tests.before to anon, authenticated;
select tests.act_as_user('anon');
insert into tests.before select 'anon', q.n, a.i, a.tool_id, a.rank, a.matched_by, a.search_mode, a.content_hash, a.signatures
  from tests.queries q, tests.answer('public.search_tools', q.n) with ordinality a(tool_id, rank, matched_by, search_mode, content_hash, signatures, i);
select tests.act_as_user('stranger');
insert into tests.before select 'stranger', q.n, a.i, a.tool_id, a.rank, a.matched_by, a.search_mode, a.content_hash, a.signatures
  from tests.queries q, tests.answer('public.search_tools', q.n) with ordinality a(tool_id, rank, matched_by, search_mode, content_hash, signatures, i);
select tests.act_as_admin();

-- another tenant's private tools, better matches than any public one; an unlisted one; acme's private one
insert into public.namespaces (namespace, display_name, owner_id) values ('globex', 'Globex', tests.globex_id());
select tests.publish_script('globex/widget', 'private', 'widget widget gadget report');
select tests.publish_script('globex/secret_widget', 'private', 'The widget gadget report');
select tests.publish_script('globex/sprocketron_widget', 'private', 'Sprocketron widget');
select tests.publish_script('globex/hidden_widget', 'unlisted', 'widget gadget report');
select tests.publish_script('acme/widget_gadget', 'private', 'widget gadget report for acme');
select tests.embed_all();

select tests.act_as_caller('globex');
select is((select tool_id from public.search_tools('widget', null, null, 3) limit 1), 'globex/widget',
  'globex''s owner finds its private widget first (so it would take a stranger''s first place)');
select ok(exists (select 1 from public.search_tools('sprockeron') where tool_id = 'globex/sprocketron_widget'),
  'globex''s owner has its private word corrected');
select tests.act_as_admin();

-- every caller, every query: what RLS lets it read, in the same order
select tests.same_as_rls(c.who, q.n)
  from unnest(array['anon', 'stranger', 'member', 'globex', 'service_role', 'postgres']) with ordinality c(who, k),
       tests.queries q
 order by c.k, q.n;

-- the listing is every tool the caller may read under RLS, never an unlisted one
select tests.as_caller(c.who, format('set_eq(%L, %L, %L)',
    $$select tool_id from public.search_tools('', null, null, 200)$$,
    $$select ref from public.tools where visibility <> 'unlisted' and latest_version is not null$$,
    c.who || ': the listing is exactly the listable tools RLS lets it read'))
  from unnest(array['anon', 'stranger', 'member', 'globex', 'service_role']) with ordinality c(who, k)
 order by c.k;

-- a stranger (and anon) never sees another tenant's private tools, and they change nothing it sees
select tests.as_caller(c.who, format('is_empty(%L, %L)',
    $$select a.tool_id from tests.queries q, tests.answer('public.search_tools', q.n) a
       where a.tool_id in ('globex/widget', 'globex/secret_widget', 'globex/sprocketron_widget',
                           'globex/hidden_widget', 'acme/widget_gadget', 'acme/private_tool')$$,
    c.who || ': no search shows another tenant''s private tool'))
  from unnest(array['anon', 'stranger']) with ordinality c(who, k)
 order by c.k;
select tests.as_caller(c.who, format('results_eq(%L, %L, %L)',
    $$select q.n, a.i, a.tool_id, a.rank, a.matched_by, a.search_mode, a.content_hash, a.signatures
        from tests.queries q, tests.answer('public.search_tools', q.n)
             with ordinality a(tool_id, rank, matched_by, search_mode, content_hash, signatures, i)
       order by q.n, a.i$$,
    format($$select n, i::bigint, tool_id, rank, matched_by, search_mode, content_hash, signatures
               from tests.before where who = %L order by n, i$$, c.who),
    c.who || ': every answer (rows, ranks, order, page) is what it was before globex had private tools'))
  from unnest(array['anon', 'stranger']) with ordinality c(who, k)
 order by c.k;

select * from finish();
rollback;
