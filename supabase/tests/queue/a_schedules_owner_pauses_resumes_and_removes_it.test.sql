-- A schedule's owner pauses, resumes and removes it, by name or id; nobody else finds it.
-- (Pausing and removing used to fail on every schedule: my_schedule locked the row FOR UPDATE
-- in a stable function, 0A000. And the name was cast to uuid inside the query, which the
-- planner may do before the test that it is one: `remove_schedule('nightly')` was a raw cast
-- error, as was any 36 hex digits and dashes that is not a uuid.)
begin;
\ir ../_setup.sql
select plan(7);

select tests.publish('sched_owned_tool', 'script', 'bash_runtime');
select tests.act_as_user('owner');
create temporary table t as
  select (add_schedule('{"name": "nightly", "cron": "0 3 * * *", "tool_id": "sched_owned_tool"}') ->> 'id')::uuid as id;
grant select on t to authenticated;

select is((set_schedule_enabled('nightly', false) ->> 'enabled')::boolean, false, 'its owner pauses it by name');
select is((set_schedule_enabled((select id::text from t), true) ->> 'enabled')::boolean, true,
  'and resumes it by id');
select throws_like($$select remove_schedule('------------------------------------')$$,
  '%schedule ------------------------------------ not found%', 'a run of 36 dashes is a name, not an id');

select tests.act_as_user('stranger');
select throws_like($$select remove_schedule('nightly')$$, '%not found%', 'another user finds no schedule by its name');
select throws_like($$select remove_schedule((select id::text from t))$$, '%not found%', 'nor by its id');

select tests.act_as_user('owner');
select is(remove_schedule('nightly') ->> 'name', 'nightly', 'its owner removes it');
select is((select count(*)::int from schedules where id = (select id from t)), 0, 'and it is gone');

select * from finish();
rollback;
