-- An approval policy's pattern names tools, a namespace's private ones among them, so it
-- is read only by those who may see what it names: admins; members of the namespace the
-- pattern belongs to (the part before its first /); everyone signed in when it names no
-- namespace (github.*). A namespace glob (*/deploy) belongs to nobody's namespace: admins
-- only. The policy still applies to every caller: the gate reads it as its owner, and
-- approval_required answers for a tool the caller may read whoever may read the policy.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
delete from public.approvals;
delete from public.approval_policies;
select plan(11);
select tests.make_acme();

insert into approval_policies (pattern, ttl_seconds)
values ('acme/private_*', 600), ('acme/public_*', 600), ('github.*', 600), ('*/deploy', 600);

select tests.act_as_user('stranger');
select results_eq($$select pattern from approval_policies order by pattern$$, $$values ('github.*')$$,
  'a stranger reads only the policy that names no namespace');
select is(approval_required('acme/private_tool') ->> 'required', 'false',
  'approval_required tells a stranger nothing about a private tool''s policy');
select is(approval_required('acme/public_tool') ->> 'policy', 'acme/public_*',
  'but names the policy of a tool the stranger may read, as the gate will');
select is(check_call(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'kind',
  'approval_pending', 'and the policy holds the stranger''s call, unread or not');

select tests.act_as_user('member');
select results_eq($$select pattern from approval_policies order by pattern$$,
  $$values ('acme/private_*'), ('acme/public_*'), ('github.*')$$,
  'a member of acme reads acme''s policies and the public one');
select is(approval_required('acme/private_tool') ->> 'policy', 'acme/private_*',
  'and is told the policy of acme''s private tool');

select tests.act_as_user('owner');
select is((select count(*)::int from approval_policies where pattern like 'acme/%'), 2, 'so is its owner');

select tests.act_as_user('service_role');
select is((select count(*)::int from approval_policies), 4, 'admins read every policy');
select tests.act_as_admin();
select is((select count(*)::int from approval_policies), 4, 'the dashboard too');

select tests.act_as_user('stranger');
select is((select count(*)::int from approval_policies where pattern = '*/deploy'), 0,
  'a namespace glob belongs to no namespace: a stranger does not read it');
select tests.act_as_user('member');
select is((select count(*)::int from approval_policies where pattern = '*/deploy'), 0, 'nor does a member');

select * from finish();
rollback;
