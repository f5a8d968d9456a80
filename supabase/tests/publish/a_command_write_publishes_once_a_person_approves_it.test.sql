-- A command write publishes once a person approves it. A member of acme may not publish a
-- runtime into acme (it would choose the command of every tool running on it), but may ask
-- for an approval of exactly that content. Only an admin decides it: not the namespace's
-- owner. The member then publishes with the approval id, once: the approval is used, a
-- second publish with it is refused, and so is a publish of other content, which publishes
-- nothing; a denied, expired or someone else's approval publishes nothing either. anon
-- cannot ask; an ordinary publish needs no approval, and takes none.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(29);
select tests.make_acme();

create temporary table t (name text primary key, id uuid, doc jsonb);
grant all on t to anon, authenticated, service_role;
-- the runtime the member wants, and its content hash as publish computes it
create function tests.runtime(p_version text, p_command text default 'python3') returns jsonb language sql as $$
  select jsonb_build_object('tool_id', 'acme/py_runtime', 'tool_type', 'runtime', 'executor', 'subprocess',
                            'version', p_version, 'visibility', 'public', 'config', jsonb_build_object('command', p_command, 'args', '["{entrypoint}"]'::jsonb))
$$;
grant execute on function tests.runtime(text, text) to anon, authenticated, service_role;

select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(tests.runtime('1.0.0'))$$, '42501',
  'only an admin may publish tool "acme/py_runtime": it is a runtime, which chooses the command of every tool that runs on it',
  'the member''s plain publish of a runtime into its own namespace is refused');
insert into t select 'req', (a ->> 'id')::uuid, a
  from request_publish_approval(tests.runtime('1.0.0'), '[]', 'member-session') as a;
select is((select doc ->> 'status' from t where name = 'req'), 'pending', 'the member asks for an approval: it is pending');
select is((select array[doc ->> 'tool_id', doc ->> 'namespace', doc ->> 'version', doc ->> 'policy'] from t where name = 'req'),
  array['acme/py_runtime', 'acme', '1.0.0', 'command write'], 'for the target, its namespace and version, under the command-write rule');
select is((select doc ->> 'content_hash' from t where name = 'req'),
  kiwi_internal.content_hash(tests.runtime('1.0.0'), '[]'), 'naming the content hash the publish will have');
select is((select doc ->> 'params_sha256' from t where name = 'req'), (select doc ->> 'content_hash' from t where name = 'req'),
  'params_sha256 is that content hash too');
select is((select doc ->> 'requested_by' from t where name = 'req'), tests.member_id()::text, 'the database records who asked');
select ok((select (doc ->> 'expires_at')::timestamptz - (doc ->> 'requested_at')::timestamptz = interval '3600 s' from t where name = 'req'),
  'it expires in an hour');
select is((select doc ->> 'decide' from t where name = 'req'),
  format('kiwi --admin approve %s   (or: kiwi --admin deny %s)', (select id from t where name = 'req'), (select id from t where name = 'req')),
  'it says how an admin decides it');
select alike((select doc ->> 'why' from t where name = 'req'), 'it is a runtime%', 'and why it needs one');
select throws_like($$select publish_tool_version(tests.runtime('1.0.0'), '[]', null, null, (select id from t where name = 'req'))$$,
  '%cannot be used: it is still pending%', 'a pending approval publishes nothing');

select tests.act_as_user('owner');
select throws_like($$select decide_approval((select id from t where name = 'req'), true)$$,
  '%only an admin decides approval%', 'the owner of the namespace cannot approve a command write');
select is((select approve from pending_approvals where id = (select id from t where name = 'req')),
  format('kiwi --admin approve %s', (select id from t where name = 'req')), 'the owner sees it waiting for an admin');

select tests.act_as_user('service_role');
select is(decide_approval((select id from t where name = 'req'), true, 'reviewed') ->> 'status', 'approved', 'an admin approves it');

select tests.act_as_user('member');
select throws_like($$select publish_tool_version(tests.runtime('1.0.0', 'sh'), '[]', null, null, (select id from t where name = 'req'))$$,
  '%cannot be used: it approved other content%', 'a publish of other content with the approval is refused');
select is((select count(*)::int from tools where ref = 'acme/py_runtime'), 0, 'and publishes nothing');
insert into t select 'pub', null, publish_tool_version(tests.runtime('1.0.0'), '[]', null, null, (select id from t where name = 'req'));
select is((select array[doc ->> 'tool_id', doc ->> 'version', doc ->> 'approval_id'] from t where name = 'pub'),
  array['acme/py_runtime', '1.0.0', (select id::text from t where name = 'req')], 'the member publishes it with the approval id');
select is((select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'acme/py_runtime'),
  kiwi_internal.content_hash(tests.runtime('1.0.0'), '[]'), 'the registry holds exactly the approved content');
select is((select status from approvals where id = (select id from t where name = 'req')), 'used', 'the approval is now used');
select throws_like($$select publish_tool_version(tests.runtime('1.1.0'), '[]', null, null, (select id from t where name = 'req'))$$,
  '%cannot be used: it was already used%', 'a second publish, of another version, with the same approval is refused');
select throws_ok($$select publish_tool_version(tests.runtime('1.1.0'))$$, '42501', null,
  'the next version needs an admin (or a new approval) again');

-- denied, expired, or someone else's: refused, saying why
insert into t select 'denied', (request_publish_approval(tests.runtime('2.0.0')) ->> 'id')::uuid, null;
insert into t select 'expired', (request_publish_approval(tests.runtime('3.0.0')) ->> 'id')::uuid, null;
select tests.act_as_user('service_role');
select decide_approval((select id from t where name = 'denied'), false, 'not this week');
select decide_approval((select id from t where name = 'expired'), true);
select tests.act_as_admin();
update approvals set requested_at = now() - interval '2 hours', expires_at = now() - interval '1 hour'
 where id = (select id from t where name = 'expired');
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version(tests.runtime('2.0.0'), '[]', null, null, (select id from t where name = 'denied'))$$,
  'PT404', null, 'only the requester uses an approval: not even the namespace''s owner');
select tests.act_as_user('member');
select throws_like($$select publish_tool_version(tests.runtime('2.0.0'), '[]', null, null, (select id from t where name = 'denied'))$$,
  '%cannot be used: it was denied: not this week%', 'a denied approval is refused, with the admin''s reason');
select throws_like($$select publish_tool_version(tests.runtime('3.0.0'), '[]', null, null, (select id from t where name = 'expired'))$$,
  '%cannot be used: it expired at%', 'an expired one too');
select is((select array_agg(v.version order by v.version) from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'acme/py_runtime'), array['1.0.0'], 'none of them published anything');

-- a stranger's private tool that runs on acme's runtime is none of the member's business
select tests.act_as_admin();
insert into namespaces (namespace, owner_id) values ('other', tests.stranger_id());
select tests.act_as_user('stranger');
select publish_tool_version('{"tool_id": "other/secret_tool", "tool_type": "script", "executor": "acme/py_runtime",
                              "version": "1.0.0", "visibility": "private"}', '[{"path": "a.py", "content_text": "print(1)"}]');
select tests.act_as_user('member');
insert into t select 'next', (request_publish_approval(tests.runtime('1.2.0')) ->> 'id')::uuid, null;
select tests.act_as_user('service_role');
select decide_approval((select id from t where name = 'next'), true);
select tests.act_as_user('member');
select is((select array[a -> 'dependents', a -> 'dependents_count']
             from publish_tool_version(tests.runtime('1.2.0'), '[]', null, null, (select id from t where name = 'next')) a),
  array['[]'::jsonb, '0'::jsonb], 'an approved executor lists only the dependents its publisher may read');

select throws_ok($$select request_publish_approval('{"tool_id": "acme/plain", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                                                   '[{"path": "a.sh", "content_text": "echo"}]')$$,
  'PT409', 'publishing acme/plain@1.0.0 needs no approval: publish it', 'an ordinary publish needs no approval');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/plain", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                                               '[{"path": "a.sh", "content_text": "echo"}]', null, null, (select id from t where name = 'req'))$$,
  '22023', null, 'and an approval id given to one is refused, not ignored');

select tests.act_as_user('stranger');
select throws_ok($$select request_publish_approval(tests.runtime('2.0.0'))$$, '42501',
  'you cannot publish into namespace "acme"', 'an approval lifts only the command rule: strangers still cannot publish into acme');

select tests.act_as_user('anon');
select throws_ok($$select request_publish_approval(tests.runtime('2.0.0'))$$, '42501',
  'anonymous callers cannot request approvals', 'anon cannot ask');

select * from finish();
rollback;
