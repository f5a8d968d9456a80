-- A run record keeps the OpenTelemetry trace id of the run when telemetry was on: 32
-- lower-case hex digits, not all zero (W3C trace context), or nothing. Anything else is refused
-- naming the field, by record_run and record_runs alike, and the column's constraint holds
-- even past them.
begin;
\ir ../_setup.sql
select plan(11);

create function tests.refusal(p_run jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_run(p_run);
  return 'recorded';
exception when invalid_parameter_value or check_violation then
  return sqlerrm;
end $$;
create function tests.base() returns jsonb language sql as $$
  select '{"tool_id": "runs_test/traced", "status": "success"}'::jsonb $$;

select tests.act_as_user('owner');
create temporary table traced on commit drop as
  select public.record_run(tests.base() || '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}') as id;
select tests.act_as_admin();
select is((select r.trace_id from public.tool_runs r where r.id = (select id from traced)),
          '4bf92f3577b34da6a3ce929d0e0e4736', 'the trace id is stored as given');
select is((select r.trace_id from public.tool_runs r
            where r.id = public.record_run(tests.base() || '{"trace_id": null}')), null,
          'a run without a trace (null or absent) stores none');

select tests.act_as_user('owner');
select matches(tests.refusal(tests.base() || '{"trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736"}'),
               'trace_id: must be a trace id', 'upper-case hex is refused, naming the field');
select matches(tests.refusal(tests.base() || '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e473"}'),
               'trace_id: must be a trace id', 'so are 31 digits');
select matches(tests.refusal(tests.base() || '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e47360"}'),
               'trace_id: must be a trace id', 'and 33');
select matches(tests.refusal(tests.base() || jsonb_build_object('trace_id', repeat('0', 32))),
               'trace_id: must be a trace id', 'and the invalid all-zero id');
select matches(tests.refusal(tests.base() || '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e473g"}'),
               'trace_id: must be a trace id', 'and a letter that is not hex');
select matches(tests.refusal(tests.base() || '{"trace_id": 12345}'),
               'trace_id: must be a trace id', 'and a number');
select throws_ok($$ select public.record_runs(jsonb_build_array(tests.base(), tests.base() || '{"trace_id": "x"}')) $$,
                 '22023', null, 'a batch holding a bad one is refused whole');

-- the column holds its rule whoever writes it
select tests.act_as_admin();
select throws_ok($$ insert into public.tool_runs (tool_id, status, caller, caller_role, trace_id)
                    values ('runs_test/traced', 'success', 'role:postgres', 'postgres', 'not-a-trace') $$,
                 '23514', null, 'the column refuses a value that is not a trace id');
select throws_ok(format($$ insert into public.tool_runs (tool_id, status, caller, caller_role, trace_id)
                           values ('runs_test/traced', 'success', 'role:postgres', 'postgres', %L) $$,
                        repeat('0', 32)),
                 '23514', null, 'and the all-zero id');

select * from finish();
rollback;
