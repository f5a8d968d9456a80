-- A run record keeps the sandbox profile the run had (what it could reach): a JSON object of
-- at most 4096 bytes as text, or nothing. Anything else is refused naming the field, by
-- record_run and record_runs alike, and the column's constraint holds even past them.
begin;
\ir ../_setup.sql
select plan(10);

create function tests.refusal(p_run jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_run(p_run);
  return 'recorded';
exception when invalid_parameter_value or check_violation then
  return sqlerrm;
end $$;
create function tests.base() returns jsonb language sql as $$
  select '{"tool_id": "runs_test/sandboxed", "status": "success"}'::jsonb $$;
-- an object whose JSON text is exactly p_bytes long: {"p": "xxx..."} is 9 bytes and the x's
create function tests.profile_of(p_bytes int) returns jsonb language sql as $$
  select jsonb_build_object('p', repeat('x', p_bytes - 9)) $$;

select is(octet_length(tests.profile_of(4096)::text), 4096, 'the fixture measures what it says');

select tests.act_as_user('owner');
create temporary table sandboxed on commit drop as
  select public.record_run(tests.base() || jsonb_build_object('sandbox',
           '{"network": "none", "filesystem": {"read": ["/work"], "write": []}, "memory_mb": 512}'::jsonb)) as id;
select tests.act_as_admin();
select is((select r.sandbox from public.tool_runs r where r.id = (select id from sandboxed)),
          '{"network": "none", "filesystem": {"read": ["/work"], "write": []}, "memory_mb": 512}'::jsonb,
          'the sandbox profile is stored as given');
select is((select r.sandbox from public.tool_runs r
            where r.id = public.record_run(tests.base() || '{"sandbox": null}')), null,
          'a run without a sandbox profile (null or absent) stores none');

select tests.act_as_user('owner');
select matches(tests.refusal(tests.base() || '{"sandbox": "none"}'), 'sandbox: must be a JSON object',
               'a sandbox profile that is not an object is refused, naming the field');
select matches(tests.refusal(tests.base() || '{"sandbox": [{"network": "none"}]}'), 'sandbox: must be a JSON object',
               'so is a list');
select matches(tests.refusal(tests.base() || jsonb_build_object('sandbox', tests.profile_of(4097))),
               'sandbox: .* at most 4096 bytes', 'and one longer than 4096 bytes as text');
select is(tests.refusal(tests.base() || jsonb_build_object('sandbox', tests.profile_of(4096))),
          'recorded', '4096 bytes are fine');
select throws_ok($$ select public.record_runs(jsonb_build_array(tests.base(), tests.base() || '{"sandbox": 1}')) $$,
                 '22023', null, 'a batch holding a bad one is refused whole');

-- the column holds its bounds whoever writes it
select tests.act_as_admin();
select throws_ok($$ insert into public.tool_runs (tool_id, status, caller, caller_role, sandbox)
                    values ('runs_test/sandboxed', 'success', 'role:postgres', 'postgres', '"none"') $$,
                 '23514', null, 'the column refuses a value that is not an object');
select throws_ok(format($$ insert into public.tool_runs (tool_id, status, caller, caller_role, sandbox)
                           values ('runs_test/sandboxed', 'success', 'role:postgres', 'postgres', %L) $$,
                        tests.profile_of(4097)),
                 '23514', null, 'and one longer than 4096 bytes');

select * from finish();
rollback;
