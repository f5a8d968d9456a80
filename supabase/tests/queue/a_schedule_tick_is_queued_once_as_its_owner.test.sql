-- queue_tick queues each due tick once, as the schedule's owner, however many times it is
-- called; owners see and change only their own schedules.
begin;
\ir ../_setup.sql
select plan(9);
select tests.make_acme();

select tests.act_as_user('owner');
select lives_ok($$select add_schedule('{"name": "nightly", "cron": "0 3 * * *", "tool_id": "acme/private_tool", "params": {"a": 1}}')$$,
  'an owner schedules a tool they can read');
select throws_ok($$select add_schedule('{"name": "nightly", "cron": "0 3 * * *", "tool_id": "acme/private_tool"}')$$,
  'PT409', null, 'names are unique per owner');
select throws_like($$select add_schedule('{"name": "bad", "cron": "0 25 * * *", "tool_id": "acme/private_tool"}')$$,
  '%hour%', 'a bad cron expression is refused by field');
select tests.act_as_user('stranger');
select throws_ok($$select add_schedule('{"name": "x", "cron": "0 3 * * *", "tool_id": "acme/private_tool"}')$$,
  'PT404', null, 'nobody schedules a tool they cannot read');
select is((select count(*)::int from schedules), 0, 'another user sees no schedule of others');
select throws_ok($$select remove_schedule('nightly')$$, 'PT404', null, 'nor removes one');

-- the tick is due: two callers, one run
select tests.act_as_admin();
update schedules set next_run_at = now() - interval '1 second' where name = 'nightly';
delete from pgmq.q_kiwi_runs;
select tests.act_as_user('service_role');
select queue_tick();
select queue_tick();
select is((select count(*)::int from queued_runs where schedule_id = (select id from schedules where name = 'nightly')), 1,
  'a due tick is queued once however often queue_tick is called');
select is((select caller from queued_runs where schedule_id = (select id from schedules where name = 'nightly')),
          tests.owner_id()::text, 'as the schedule''s owner');
select ok((select next_run_at > now() from schedules where name = 'nightly'), 'the schedule moves to its next tick');

select * from finish();
rollback;
