-- record_run writes one row per run: what ran and how it ended, as the caller says,
-- and who asked, as the database knows it (never as the caller says). Bad records are
-- refused with SQLSTATE 22023, naming each bad field; nothing of them is stored. Tool
-- ids start with runs_test/ so that runs recorded by others do not get in the way.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(39);

create function tests.refusal(p_run jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_run(p_run);
  return 'recorded';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;
create function tests.run(p_id uuid) returns public.tool_runs
  language sql as $$ select * from public.tool_runs where id = p_id $$;
create temporary table ids (name text primary key, id uuid) on commit drop;
grant all on ids to authenticated, service_role;

-- what a run record holds, and what it does not
select columns_are('public', 'tool_runs',
  array['id', 'tool_id', 'version', 'content_hash', 'status', 'exit_code', 'duration_ms', 'error_summary',
        'executor_chain', 'primitive', 'params_sha256', 'params_size', 'source', 'warnings', 'sandbox', 'caller',
        'caller_role', 'started_at', 'finished_at', 'trace_id', 'payload'],
  'a run record keeps parameter values and outputs only in its payload, beside their hash and size');

-- a signed-in user records a full run
select tests.act_as_user('owner');
insert into ids
select 'full', public.record_run(jsonb_build_object(
  'tool_id', 'runs_test/full', 'version', '1.2.3', 'content_hash', repeat('ab', 32),
  'status', 'success', 'exit_code', 0, 'duration_ms', 1500.5,
  'executor_chain', jsonb_build_array('runs_test/full', 'bash_runtime', 'subprocess'),
  'primitive', 'subprocess', 'params_sha256', repeat('0f', 32), 'params_size', 17,
  'started_at', '2026-01-02T03:04:05Z', 'finished_at', '2026-01-02T03:04:06.5Z'));
select isnt((select id from ids where name = 'full'), null, 'record_run returns the new run''s id');
select tests.act_as_admin();
select results_eq(
  $$select tool_id, version, content_hash, status, exit_code, duration_ms, executor_chain, primitive,
           params_sha256, params_size, started_at, finished_at
      from tests.run((select id from ids where name = 'full'))$$,
  $$values ('runs_test/full', '1.2.3', repeat('ab', 32), 'success', 0, 1500.5::double precision,
            array['runs_test/full', 'bash_runtime', 'subprocess'], 'subprocess', repeat('0f', 32), 17,
            '2026-01-02T03:04:05Z'::timestamptz, '2026-01-02T03:04:06.5Z'::timestamptz)$$,
  'every field of the record is stored as given');
select results_eq(
  $$select caller, caller_role from tests.run((select id from ids where name = 'full'))$$,
  $$values (tests.owner_id()::text, 'authenticated')$$,
  'the database sets who asked: the signed-in user''s id and role');

-- who asked cannot be forged
select tests.act_as_user('stranger');
select throws_ok(
  $$select public.record_run('{"tool_id": "runs_test/forged", "status": "success", "caller": "00000000-0000-4000-8000-00000000000a"}')$$,
  '22023', null, 'a record that names its caller is refused');
select matches(tests.refusal('{"tool_id": "runs_test/forged", "status": "success", "caller": "someone"}'),
  'caller: unknown field', 'the refusal names the caller field');
select matches(tests.refusal('{"tool_id": "runs_test/forged", "status": "success", "caller_role": "service_role"}'),
  'caller_role: unknown field', 'caller_role cannot be given either');
select tests.act_as_admin();
select is((select count(*)::int from tool_runs where tool_id = 'runs_test/forged'), 0, 'a refused record stores nothing');

-- identities without a JWT subject
select tests.act_as_user('service_role');
insert into ids select 'service', public.record_run('{"tool_id": "runs_test/by_service", "status": "success"}');
select tests.act_as_admin();
insert into ids select 'direct', public.record_run('{"tool_id": "runs_test/direct", "status": "success"}');
select results_eq(
  $$select caller, caller_role from tests.run((select id from ids where name = 'service'))$$,
  $$values ('role:service_role', 'service_role')$$,
  'service_role without a subject is recorded as role:service_role');
select is((select caller || ' as ' || caller_role from tests.run((select id from ids where name = 'direct'))),
  format('role:%s as %s', session_user, session_user),
  'a direct connection is recorded as role: and its database user');
select is(kiwi_internal.caller_identity(), 'role:' || session_user::text, 'caller_identity() names the session''s role without a JWT');
select tests.act_as_user('member');
select is(kiwi_internal.caller_identity(), tests.member_id()::text, 'caller_identity() is the user id with a JWT subject');

-- anon does not record
select tests.act_as_user('anon');
select throws_ok($$select public.record_run('{"tool_id": "runs_test/anon", "status": "success"}')$$,
  '42501', 'permission denied for function record_run', 'anon cannot record runs');

-- refusals, each naming its field
select tests.act_as_user('owner');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "success", "exectuor_chain": []}'),
  'exectuor_chain: unknown field \(allowed: id, tool_id, version', 'a misspelt field is refused by name, listing the allowed ones');
select throws_ok($$select public.record_run('{"tool_id": "runs_test/x", "status": "success", "output": "secret"}')$$,
  '22023', null, 'an output cannot be recorded: refused with SQLSTATE 22023');
select matches(tests.refusal('{"status": "success"}'), 'tool_id: required', 'tool_id is required');
select matches(tests.refusal('{"tool_id": "  ", "status": "success"}'), 'tool_id: required', 'a blank tool_id is refused');
select matches(tests.refusal('{"tool_id": "runs_test/x"}'), 'status: required, one of success, error, timeout',
  'status is required');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "crashed"}'),
  'status: required, one of success, error, timeout \(got "crashed"\)', 'an unknown status is refused, quoting it');
select matches(tests.refusal('[]'), 'run: must be a JSON object', 'a record must be an object');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "error", "exit_code": 1.5}'),
  'exit_code: must be an integer', 'exit_code must be an integer');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "error", "duration_ms": -1}'),
  'duration_ms: must be a number of milliseconds from 0 to 1e12 \(about 31 years\)', 'a negative duration is refused');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "error", "started_at": "last tuesday"}'),
  'started_at: must be a timestamp', 'started_at must be a timestamp');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "error", "started_at": "2026-01-01T00:00:10Z", "finished_at": "2026-01-01T00:00:00Z"}'),
  'finished_at: .* is before started_at', 'a run cannot finish before it starts');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "error", "executor_chain": "a -> b"}'),
  'executor_chain: must be a list', 'executor_chain must be a list of references');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "fine", "params_size": -3, "exit_code": "1"}'),
  'status: .*exit_code: must be an integer.*params_size: must be a whole number',
  'every bad field is named in one refusal');

-- the parameters' hash
select matches(tests.refusal(jsonb_build_object('tool_id', 'runs_test/x', 'status', 'success', 'params_sha256', 'abc123')),
  'params_sha256: must be a sha256 in lower-case hex \(64 characters\)', 'a short params_sha256 is refused');
select matches(tests.refusal(jsonb_build_object('tool_id', 'runs_test/x', 'status', 'success', 'params_sha256', repeat('AB', 32))),
  'params_sha256: must be a sha256 in lower-case hex', 'an upper-case params_sha256 is refused');
select matches(tests.refusal(jsonb_build_object('tool_id', 'runs_test/x', 'status', 'success', 'params_sha256', repeat('g', 64))),
  'params_sha256: must be a sha256 in lower-case hex', 'a params_sha256 that is not hex is refused');
select matches(tests.refusal(jsonb_build_object('tool_id', 'runs_test/x', 'status', 'success', 'content_hash', 'sha256:' || repeat('a', 64))),
  'content_hash: must be a sha256 in lower-case hex', 'content_hash is checked the same way');

-- where the tool came from: the registry, or a local space's tool.yaml shadowing it
insert into ids select 'local', public.record_run('{"tool_id": "runs_test/local", "status": "success", "source": "project"}');
select tests.act_as_admin();
select is((select source from tests.run((select id from ids where name = 'local'))), 'project',
  'a run of a project space''s tool is recorded as source project');
select is((select source from tests.run((select id from ids where name = 'full'))), 'registry',
  'a record that does not say is from the registry');
select tests.act_as_user('owner');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "success", "source": "elsewhere"}'),
  'source: one of registry, project, user \(got "elsewhere"\)', 'an unknown source is refused, naming the field');
select matches(tests.refusal('{"tool_id": "runs_test/x", "status": "success", "source": 1}'),
  'source: one of registry, project, user', 'a source that is not a string is refused');

-- error_summary is kept bounded, loudly
insert into ids
select 'long', public.record_run(jsonb_build_object('tool_id', 'runs_test/long', 'status', 'error',
                                                     'error_summary', repeat('x', 5000)));
select tests.act_as_admin();
select results_eq(
  $$select char_length(error_summary), right(error_summary, 1), left(error_summary, 1999) = repeat('x', 1999)
      from tests.run((select id from ids where name = 'long'))$$,
  $$values (2000, '…', true)$$,
  'a long error_summary is cut to 2000 characters, ending in …');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role, error_summary)
                   values ('runs_test/x', 'error', 'me', 'postgres', repeat('x', 2001))$$,
  '23514', null, 'the table itself refuses a longer error_summary');

-- times follow from each other, and references are stored normalised
insert into ids
select 'derived', public.record_run('{"tool_id": "public/hello_world", "status": "timeout", "duration_ms": 2500,
                                      "started_at": "2026-01-01T00:00:00Z"}');
insert into ids
select 'computed', public.record_run('{"tool_id": "runs_test/computed", "status": "success",
                                       "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01.25Z"}');
insert into ids
select 'started', public.record_run(jsonb_build_object('tool_id', 'runs_test/started', 'status', 'error',
                                                        'started_at', now() - interval '1 hour'));
select results_eq(
  $$select duration_ms, finished_at from tests.run((select id from ids where name = 'started'))$$,
  $$values (null::double precision, now())$$,
  'without finished_at the run finished when it was recorded, and no duration is made up');
select results_eq(
  $$select tool_id, finished_at from tests.run((select id from ids where name = 'derived'))$$,
  $$values ('hello_world', '2026-01-01T00:00:02.5Z'::timestamptz)$$,
  'finished_at follows from started_at and duration_ms; public/hello_world is stored as hello_world');
select is((select duration_ms from tests.run((select id from ids where name = 'computed'))), 1250::double precision,
  'duration_ms follows from started_at and finished_at');

select * from finish();
rollback;
