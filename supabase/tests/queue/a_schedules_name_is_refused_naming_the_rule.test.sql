-- A schedule's name is 1 to 100 characters, not blank, with no control characters: any other
-- is refused (22023) saying that rule, not as a raw check-constraint violation.
begin;
\ir ../_setup.sql
select plan(4);
select tests.act_as_user('owner');
select throws_ok($$select add_schedule('{"name": "", "cron": "* * * * *", "tool_id": "hello_world"}')$$, '22023',
  'a schedule''s name must be 1 to 100 characters, not blank, with no control characters (got "")',
  'an empty name is refused naming the rule');
select throws_ok($$select add_schedule('{"name": "   ", "cron": "* * * * *", "tool_id": "hello_world"}')$$, '22023',
  null, 'a blank one too');
select throws_ok(format($$select add_schedule('{"name": "%s", "cron": "* * * * *", "tool_id": "hello_world"}')$$, repeat('n', 101)),
  '22023', null, 'and one over 100 characters');
select throws_ok($$select add_schedule('{"name": "a\tb", "cron": "* * * * *", "tool_id": "hello_world"}')$$, '22023',
  'a schedule''s name must be 1 to 100 characters, not blank, with no control characters (got "a?b")',
  'and one with a control character, shown without it');
select * from finish();
rollback;
