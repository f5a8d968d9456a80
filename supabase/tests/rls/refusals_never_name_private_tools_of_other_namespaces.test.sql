-- Errors are part of what a caller can read. A refusal may name the tools that caused
-- it, but a private tool must stay invisible to non-members there too: removing a
-- runtime that someone else's private script executes on is refused, without telling
-- the remover that script's name. (Runtimes choose the command their tools run, so only
-- an admin publishes or removes one; an admin reads every tool, and so is told every
-- name.)
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(7);
select tests.make_acme();

-- an admin publishes a public runtime into acme; the stranger builds on it in their own
-- namespace, once publicly and once privately.
select tests.act_as_user('service_role');
select is(publish_tool_version('{"tool_id": "acme/rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "public"}') ->> 'created',
  'true', 'an admin publishes a public runtime into acme');
select tests.act_as_user('stranger');
insert into namespaces (namespace, owner_id) values ('stranger_co', tests.stranger_id());
select is(publish_tool_version(
            '{"tool_id": "stranger_co/secret_plan", "tool_type": "script", "executor": "acme/rt", "version": "1.0.0", "visibility": "private"}',
            '[{"path": "main.sh", "content_text": "echo secret"}]') ->> 'created',
  'true', 'a stranger publishes a private script, in their own namespace, on acme''s public runtime');
select is(publish_tool_version(
            '{"tool_id": "stranger_co/open_plan", "tool_type": "script", "executor": "acme/rt", "version": "1.0.0", "visibility": "public"}',
            '[{"path": "main.sh", "content_text": "echo open"}]') ->> 'created',
  'true', 'and a public one');

select tests.act_as_user('owner');
select is((select count(*)::int from tools where ref like 'stranger_co/%'), 1,
  'the owner of acme sees only the stranger''s public script');
select unalike(tests.error_of($$select delete_tool('acme/rt')$$), '%stranger_co/secret_plan%',
  'the owner''s refusal (only an admin removes a runtime) does not name the private tool');

select tests.act_as_user('service_role');
select throws_ok($$select delete_tool('acme/rt')$$, '23503', null,
  'an admin cannot delete acme/rt while other tools execute on it');
select alike(tests.error_of($$select delete_tool('acme/rt')$$), '%stranger_co/open_plan%',
  'the refusal names the tools that execute on acme/rt');

select * from finish();
rollback;
