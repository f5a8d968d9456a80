-- tools.quality_score: 0.5 x the smoothed success rate of the tool's registry runs, 0.25 x
-- whether its latest version is signed, 0.25 x its use (log-scaled), kept by the registry as
-- runs are recorded and versions signed; search ranks a more reliable tool above an equal one.
begin;
\ir ../_setup.sql
select plan(14);

select tests.publish('qs_alpha_reporter', 'script', 'bash_runtime');
select tests.publish('qs_zulu_reporter', 'script', 'bash_runtime');

select is((select quality_score from tools where ref = 'qs_zulu_reporter'), 0.25,
  'a tool never run nor signed: half of the success share (0.5 x 0.5)');

create function pg_temp.runs(p_tool text, p_status text, p_n int, p_source text default 'registry') returns void
  language sql as $$
  insert into tool_runs (tool_id, status, caller, caller_role, source)
  select p_tool, p_status, 'role:service_role', 'service_role', p_source from generate_series(1, p_n)
$$;

select pg_temp.runs('qs_zulu_reporter', 'success', 20);
select is((select quality_score from tools where ref = 'qs_zulu_reporter'),
  round(0.5 * 21 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'twenty successful runs raise it');
select pg_temp.runs('qs_alpha_reporter', 'error', 18);
select pg_temp.runs('qs_alpha_reporter', 'success', 2);
select is((select quality_score from tools where ref = 'qs_alpha_reporter'),
  round(0.5 * 3 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'runs that mostly fail lower it');
select pg_temp.runs('qs_alpha_reporter', 'success', 50, 'project');
select is((select quality_score from tools where ref = 'qs_alpha_reporter'),
  round(0.5 * 3 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'runs of a local space''s copy do not count');

-- one run at a time, as workers record them: the score follows every run that moves it
select tests.publish('one_by_one_scorer', 'script', 'bash_runtime');
create temp table qs_steps (n int, score numeric, expected numeric);
do $$
begin
  for i in 1..120 loop
    perform pg_temp.runs('one_by_one_scorer', case when i % 3 = 0 or i between 50 and 70 then 'error' else 'success' end, 1);
    insert into qs_steps
    select i, t.quality_score,
           round(0.5 * (count(*) filter (where r.status = 'success') + 1) / (count(*) + 2.0)
                 + 0.25 * ln(1 + count(*)::numeric) / ln(1001::numeric), 2)
      from tools t join tool_runs r on r.tool_id = t.ref
     where t.ref = 'one_by_one_scorer'
     group by t.quality_score;
  end loop;
end
$$;
select is((select array_agg(n order by n) from qs_steps where score <> expected), null,
  'recorded one by one, runs keep the score equal to the formula after every run');
select cmp_ok((select count(distinct score)::int from qs_steps), '>', 10, 'and the score moved along the way');

-- a signature of the latest version adds a quarter
insert into tool_version_signatures (version_id, content_hash, public_key, signature)
select v.id, v.content_hash, repeat('A', 43) || '=', repeat('B', 86) || '=='
  from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'qs_zulu_reporter';
select is((select quality_score from tools where ref = 'qs_zulu_reporter'),
  round(0.5 * 21 / 22.0 + 0.25 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'a signed latest version adds 0.25');
select tests.publish('qs_zulu_reporter', 'script', 'bash_runtime', '1.1.0');
select is((select quality_score from tools where ref = 'qs_zulu_reporter'),
  round(0.5 * 21 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'a new, unsigned latest version loses it again');

-- readable by whoever sees the tool, written by nobody but the registry
select tests.act_as_user('anon');
select is((select quality_score from tools where ref = 'qs_alpha_reporter'),
  round(0.5 * 3 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'anon reads a public tool''s score');
select tests.act_as_user('service_role');
update tools set quality_score = 1 where ref = 'qs_alpha_reporter';
select is((select quality_score from tools where ref = 'qs_alpha_reporter'),
  round(0.5 * 3 / 22.0 + 0.25 * ln(21::numeric) / ln(1001::numeric), 2), 'a score set by hand is recomputed from what the registry knows');
select tests.act_as_admin();

-- search: the same words, the more reliable tool first
update tools set description = 'summarises nightly reports' where ref in ('qs_alpha_reporter', 'qs_zulu_reporter');
select is((select array_agg(tool_id order by rank desc, tool_id)
             from search_tools('nightly reports') where tool_id like 'qs\_%'),
          array['qs_zulu_reporter', 'qs_alpha_reporter'], 'lexical search ranks the reliable tool first');
select is((select (w).quality from (select kiwi_internal.search_weights() as w) x), 0.1::float8,
  'its weight is search_weights''s, beside words and meaning');
select is((select array_agg(s.tool_id order by s.n)
             from search_tools('', null, null, 200) with ordinality
                  as s(tool_id, namespace, name, tool_type, category, description, executor_id, latest_version,
                       rank, matched_by, search_mode, content_hash, signatures, n)
            where s.tool_id like 'qs\_%'),
          array['qs_zulu_reporter', 'qs_alpha_reporter'], 'a listing breaks ties of use by quality');

select is((select c.quality_score from tool_catalog c where c.tool_id = 'qs_alpha_reporter'),
  (select t.quality_score from tools t where t.ref = 'qs_alpha_reporter'),
  'the dashboard''s catalog shows each tool''s quality score');

select * from finish();
rollback;
