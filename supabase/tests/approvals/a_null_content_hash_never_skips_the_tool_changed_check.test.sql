-- An approval that recorded the content it approved (content_hash) is used only by a call
-- of that content. Leaving the content_hash out (null, through use_approval or the gate)
-- used to skip the check; now it is refused, saying which content_hash to give, and the
-- approval stays unused. An approval that recorded no content_hash has nothing to compare.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(8);
select tests.make_acme();

insert into approval_policies (pattern, ttl_seconds) values ('acme/*', 600);
create temporary table t (name text primary key, id uuid);
grant all on t to authenticated, service_role;

select tests.act_as_user('member');
insert into t select 'c', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64),
                                                               'content_hash', repeat('c', 64))) ->> 'id')::uuid;
insert into t select 'n', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('b', 64)))
                           ->> 'id')::uuid;
select tests.act_as_user('owner');
select decide_approval(id, true) from t;

select tests.act_as_user('member');
select throws_ok($$select use_approval((select id from t where name = 'c'), 'acme/public_tool', repeat('a', 64), null)$$,
  'PT409', format('approval %s cannot be used: it approved content_hash %s, and the call gives none: give the content_hash of the version called',
                  (select id from t where name = 'c'), repeat('c', 64)),
  'use_approval with a null content_hash is refused, naming the content it approved');
select throws_like($$select use_approval((select id from t where name = 'c'), 'acme/public_tool', repeat('a', 64))$$,
  '%gives none%', 'so is leaving the argument out');
select is((select answer ->> 'kind' from (select public.check_call(jsonb_build_object(
             'tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64),
             'approval_id', (select id from t where name = 'c'))) as answer) x),
  'approval_refused', 'the gate refuses a call that brings the approval without a content_hash');
select is((select status from approvals where id = (select id from t where name = 'c')), 'approved',
  'and the approval stays unused');
select throws_like($$select use_approval((select id from t where name = 'c'), 'acme/public_tool', repeat('a', 64), repeat('d', 64))$$,
  '%tool changed%', 'another content_hash is refused as before');
select is(use_approval((select id from t where name = 'c'), 'acme/public_tool', repeat('a', 64), repeat('c', 64)) ->> 'status',
  'used', 'the approved content uses it');
select is(use_approval((select id from t where name = 'n'), 'acme/public_tool', repeat('b', 64)) ->> 'status',
  'used', 'an approval that recorded no content_hash has nothing to compare: a call without one uses it');

select tests.act_as_admin();
select is((select count(*)::int from approvals where id in (select id from t) and status = 'used'), 2,
  'each approval was used once');

select * from finish();
rollback;
