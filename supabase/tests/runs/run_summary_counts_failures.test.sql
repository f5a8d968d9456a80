-- run_summary, per tool over the last 7 days: runs by status, failure_rate (errors and
-- timeouts over runs, rounded, 0..1), median and 95th percentile duration, the last run
-- and the last error. Checked against a known set of runs; tool ids start with
-- runs_test/ so that runs recorded by others do not get in the way.
begin;
\ir ../_setup.sql
select plan(12);

create function tests.record(p_tool text, p_status text, p_duration double precision, p_ago interval,
                             p_error text default null) returns uuid
  language sql as $$
  select public.record_run(jsonb_strip_nulls(jsonb_build_object(
    'tool_id', p_tool, 'status', p_status, 'duration_ms', p_duration,
    'started_at', now() - p_ago, 'error_summary', p_error)))
$$;

-- alpha: 10 runs in the last 7 days (7 successes, 2 errors, 1 timeout; 10 to 100 ms),
-- and an error 8 days ago that no longer counts
select count(tests.record('runs_test/alpha', s, d, make_interval(mins => m), e))
  from (values ('success', 10, 100, null), ('success', 20, 90, null), ('error', 30, 80, 'first error'),
               ('success', 40, 70, null), ('timeout', 50, 60, 'timed out after 50 ms'), ('success', 60, 50, null),
               ('success', 70, 40, null), ('error', 80, 30, 'latest error'), ('success', 90, 20, null),
               ('success', 100, 10, null)) as v(s, d, m, e);
select tests.record('runs_test/alpha', 'error', 5000, interval '8 days', 'an old error');
-- beta: 3 successes, one without a duration
select count(tests.record('runs_test/beta', 'success', d, make_interval(hours => h)))
  from (values (1::double precision, 3), (2, 2), (null, 1)) as v(d, h);
-- gamma: 1 error in 3 runs, the error before the last success
select count(tests.record('runs_test/gamma', s, 5, make_interval(days => dd), e))
  from (values ('success', 6, null), ('error', 5, 'gamma broke'), ('success', 4, null)) as v(s, dd, e);
-- delta: only timeouts
select count(tests.record('runs_test/delta', 'timeout', 30000, make_interval(mins => m), 'timed out after 30 s'))
  from (values (5), (1)) as v(m);
-- epsilon: ran only 8 days ago
select tests.record('runs_test/epsilon', 'success', 1, interval '8 days');

select results_eq(
  $$select tool_id, runs, successes, errors, timeouts, failure_rate from run_summary
     where tool_id like 'runs_test/%' order by tool_id$$,
  $$values ('runs_test/alpha', 10::bigint, 7::bigint, 2::bigint, 1::bigint, 0.300),
           ('runs_test/beta', 3::bigint, 3::bigint, 0::bigint, 0::bigint, 0.000),
           ('runs_test/delta', 2::bigint, 0::bigint, 0::bigint, 2::bigint, 1.000),
           ('runs_test/gamma', 3::bigint, 2::bigint, 1::bigint, 0::bigint, 0.333)$$,
  'runs are counted by status and failure_rate is errors and timeouts over runs');
select is((select failure_rate from run_summary where tool_id = 'runs_test/alpha'), 0.3,
  'three failures in ten runs are a failure_rate of 0.3');
select is((select failure_rate from run_summary where tool_id = 'runs_test/gamma'), 0.333,
  'failure_rate is rounded to three decimals');
select is_empty($$select tool_id from run_summary where failure_rate not between 0 and 1$$,
  'failure_rate is always between 0 and 1');
select is_empty($$select tool_id from run_summary where tool_id = 'runs_test/epsilon'$$,
  'a tool that ran only before the last 7 days is not summarised');
select is((select runs from run_summary where tool_id = 'runs_test/alpha'), 10::bigint,
  'runs older than 7 days are not counted');
select results_eq(
  $$select p50_duration_ms, p95_duration_ms from run_summary where tool_id = 'runs_test/alpha'$$,
  $$values (55.0, 95.5)$$,
  'p50 and p95 interpolate between the durations (10 to 100 ms: 55 and 95.5)');
select results_eq(
  $$select p50_duration_ms, p95_duration_ms from run_summary where tool_id = 'runs_test/beta'$$,
  $$values (1.5, 2.0)$$,
  'runs without a duration do not count towards the percentiles');
select results_eq(
  $$select tool_id, last_run_at, last_error from run_summary where tool_id like 'runs_test/%' order by tool_id$$,
  $$values ('runs_test/alpha', now() - interval '10 minutes', 'latest error'),
           ('runs_test/beta', now() - interval '1 hour', null),
           ('runs_test/delta', now() - interval '1 minute', 'timed out after 30 s'),
           ('runs_test/gamma', now() - interval '4 days', 'gamma broke')$$,
  'last_run_at is the newest run and last_error the newest failure''s summary, even after a later success');
select results_eq(
  $$select tool_id, status, duration_ms from recent_runs where tool_id like 'runs_test/%' limit 3$$,
  $$values ('runs_test/delta', 'timeout', 30000.0), ('runs_test/delta', 'timeout', 30000.0), ('runs_test/alpha', 'success', 100.0)$$,
  'recent_runs lists the newest runs first');
select matches(obj_description('public.run_summary'::regclass, 'pg_class'), 'last 7 days',
  'run_summary says in its comment that it covers the last 7 days');
select is((select count(*)::int from recent_runs where tool_id like 'runs_test/%'), 20,
  'recent_runs is not limited to 7 days');

select * from finish();
rollback;
