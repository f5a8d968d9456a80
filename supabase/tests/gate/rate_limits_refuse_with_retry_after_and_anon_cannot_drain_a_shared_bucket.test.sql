-- Rate limits through the gate. Signed-in callers of a tool they may read share the
-- tool-wide bucket; anonymous callers count in a bucket of their own ('role:anon'), so
-- that twelve anonymous calls of word_count (a limit of 12 an hour) lock it for anonymous
-- callers only, never for a signed-in user. A refused call says when to retry and takes
-- nothing; a call of a tool the caller cannot read is counted in the caller's own bucket.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
-- counted from empty: other tests share the database (this transaction is rolled back)
delete from public.approvals;
delete from kiwi_internal.rate_limit_counters;
select plan(16);
select tests.make_acme();

insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'word_count', 12, 3600);
create function tests.call(p_tool text) returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('tool_id', p_tool, 'params_sha256', repeat('a', 64)))
$$;
grant execute on function tests.call(text) to anon, authenticated, service_role;
create temporary table answers (n int, who text, answer jsonb);
grant all on answers to anon, authenticated, service_role;

-- anon: twelve calls allowed, the thirteenth refused, saying when to retry
select tests.act_as_user('anon');
insert into answers select n, 'anon', tests.call('word_count') from generate_series(1, 13) n;
select is((select count(*)::int from answers where who = 'anon' and (answer ->> 'allowed')::boolean), 12,
  'anonymous callers make twelve calls of word_count');
select is((select answer ->> 'kind' from answers where who = 'anon' and n = 13), 'rate_limited',
  'the thirteenth is refused as rate limited');
select ok((select (answer ->> 'retry_after_s')::numeric > 0 and (answer ->> 'retry_after_s')::numeric <= 3600
             from answers where who = 'anon' and n = 13),
  'the refusal says when to retry: before the window ends');
select is((select answer #>> '{limit,key}' from answers where who = 'anon' and n = 13), 'word_count',
  'the refusal names the limit');
select matches((select answer ->> 'reason' from answers where who = 'anon' and n = 13),
  '^rate limit: tool word_count allows 12 call\(s\) per 3600 s; retry in', 'the reason reads as a sentence');
select ok((select answer ? 'limits' from answers where who = 'anon' and n = 13), 'and lists the limits');

-- ... which does not lock word_count for signed-in users
select tests.act_as_user('member');
select is(tests.call('word_count') ->> 'allowed', 'true',
  'a signed-in user still calls word_count after anon used up its bucket');
select tests.act_as_admin();
select results_eq($$select c.subject, c.calls from kiwi_internal.rate_limit_counters c
                     join rate_limits l on l.id = c.limit_id where l.key = 'word_count' order by 1$$,
  $$values ('role:anon word_count', 12), ('word_count', 1)$$,
  'anon counted in its own bucket, the signed-in call in the shared one; the refused call took nothing');

-- signed-in users share the tool-wide bucket
select tests.act_as_user('stranger');
insert into answers select n, 'stranger', tests.call('word_count') from generate_series(1, 12) n;
select is((select count(*)::int from answers where who = 'stranger' and (answer ->> 'allowed')::boolean), 11,
  'signed-in users share the tool-wide bucket: the stranger gets the 11 calls the member left');
select is((select answer ->> 'kind' from answers where who = 'stranger' and n = 12), 'rate_limited',
  'and is then refused');

-- take_rate_limit counts only in the caller's own buckets
select is(take_rate_limit('word_count') ->> 'allowed', 'true',
  'take_rate_limit counts the stranger''s call in the stranger''s own bucket, not the full shared one');
select tests.act_as_admin();
select is((select c.calls from kiwi_internal.rate_limit_counters c join rate_limits l on l.id = c.limit_id
            where l.key = 'word_count' and c.subject = tests.stranger_id() || ' word_count'), 1,
  'the bucket of take_rate_limit is keyed to the caller');

-- a tool the caller cannot read: its own bucket, nothing of the tool's users
insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'acme/private_tool', 1, 3600);
select tests.act_as_user('stranger');
select is(tests.call('acme/private_tool') ->> 'allowed', 'true',
  'a stranger naming acme''s private tool is counted (no approval policy covers it) ...');
select is(tests.call('acme/private_tool') ->> 'allowed', 'false', '... in a bucket of the stranger''s own');
select tests.act_as_user('member');
select is(tests.call('acme/private_tool') ->> 'allowed', 'true',
  'so a member of acme still calls the private tool: the stranger drained nothing of theirs');
select tests.act_as_admin();
select results_eq($$select c.subject, c.calls from kiwi_internal.rate_limit_counters c
                     join rate_limits l on l.id = c.limit_id where l.key = 'acme/private_tool' order by c.subject like '% %', 1$$,
  $$values ('acme/private_tool', 1), (tests.stranger_id() || ' acme/private_tool', 1)$$,
  'the member''s call in the shared bucket, the stranger''s in its own');

select * from finish();
rollback;
