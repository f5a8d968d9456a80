-- A run record keeps the run's warnings (running a deprecated version, a yanked one pinned,
-- an unsigned link ...): a list of at most 16 strings of at most 1000 characters each.
-- Anything else is refused naming the field, by record_run and record_runs alike.
begin;
\ir ../_setup.sql
select plan(8);

create function tests.refusal(p_run jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_run(p_run);
  return 'recorded';
exception when invalid_parameter_value or check_violation then
  return sqlerrm;
end $$;
create function tests.base() returns jsonb language sql as $$
  select '{"tool_id": "runs_test/warned", "status": "success"}'::jsonb $$;

select tests.act_as_user('owner');
create temporary table warned on commit drop as
  select public.record_run(tests.base() || '{"warnings": ["runs_test/warned@1.0.0 is deprecated: use v2"]}') as id;
select tests.act_as_admin();
select is((select r.warnings from public.tool_runs r where r.id = (select id from warned)),
          array['runs_test/warned@1.0.0 is deprecated: use v2'], 'the warnings are stored as given');
select is((select r.warnings from public.tool_runs r
            where r.id = public.record_run(tests.base())), null, 'a run without warnings stores none');

select tests.act_as_user('owner');
select matches(tests.refusal(tests.base() || '{"warnings": "deprecated"}'), 'warnings: must be a list',
               'a warning that is not in a list is refused, naming the field');
select matches(tests.refusal(tests.base() || '{"warnings": [1]}'), 'warnings: must be a list of at most 16 strings',
               'so is a warning that is not a string');
select matches(tests.refusal(tests.base() || jsonb_build_object('warnings', jsonb_build_array(repeat('w', 1001)))),
               'warnings: .* at most 1000 characters', 'and one longer than 1000 characters');
select matches(tests.refusal(tests.base() || jsonb_build_object('warnings',
                 (select jsonb_agg('w' || n) from generate_series(1, 17) n))),
               'warnings: must be a list of at most 16', 'and more than 16 of them');
select is(tests.refusal(tests.base() || jsonb_build_object('warnings', jsonb_build_array(repeat('w', 1000)))),
          'recorded', '1000 characters are fine');
select throws_ok($$ select public.record_runs(jsonb_build_array(tests.base(), tests.base() || '{"warnings": [[]]}')) $$,
                 '22023', null, 'a batch holding a bad one is refused whole');

select * from finish();
rollback;
