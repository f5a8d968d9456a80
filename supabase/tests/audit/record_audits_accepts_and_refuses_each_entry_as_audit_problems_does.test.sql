-- record_audits screens a batch in one statement and works out an entry's problems only when
-- the screen fails it: each entry below, good or bad, must be written or refused exactly as
-- audit_problems says, with its message.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql

create temporary table cases (n int generated always as identity, entry jsonb) on commit drop;
insert into cases (entry) values
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed"}'),
  ('{"session_id": "s", "tool_id": "public/t", "decision": "allowed", "action": "dry_run", "outcome": "success",
     "id": "ABCDEF01-2222-4333-8444-555555555555", "run_id": null, "directive": "d", "server": "srv",
     "version": "1.0.0", "content_hash": "0000000000000000000000000000000000000000000000000000000000000000",
     "params_sha256": null, "params_size": 16, "duration_ms": 1.5, "retry_after_s": 0, "at": "2026-11-29T10:00:00Z"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "refused", "reason": "no", "outcome": null}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "refused", "reason": "no", "outcome": "success"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "refused", "reason": " "}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "refused"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "maybe"}'),
  ('{"session_id": "s", "tool_id": "t"}'),
  ('{"session_id": "s", "tool_id": "public/", "decision": "allowed"}'),
  ('{"session_id": "s", "tool_id": "t\u0001", "decision": "allowed"}'),
  ('{"session_id": " ", "tool_id": "t", "decision": "allowed"}'),
  ('{"session_id": 7, "tool_id": "t", "decision": "allowed"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "extra": 1}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "action": "launch"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "action": 1}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "outcome": "fine"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "id": "not-a-uuid"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "run_id": 5}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "version": 1}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "content_hash": "ABC"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "duration_ms": -1}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "duration_ms": "1"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "retry_after_s": 1e16}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "params_size": 1.5}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "params_size": 2147483648}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "at": "yesterday-ish"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "at": "2026-02-30T00:00:00Z"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "at": "infinity"}'),
  ('{"session_id": "s", "tool_id": "t", "decision": "allowed", "at": 5}'),
  ('[1]'),
  ('"text"'),
  ('null');
insert into cases (entry) values
  (jsonb_build_object('session_id', 's', 'tool_id', repeat('x', 301), 'decision', 'allowed')),
  (jsonb_build_object('session_id', repeat('s', 201), 'tool_id', 't', 'decision', 'allowed')),
  (jsonb_build_object('session_id', 's', 'tool_id', 't', 'decision', 'allowed', 'version', repeat('v', 129))),
  (jsonb_build_object('session_id', 's', 'tool_id', 't', 'decision', 'refused', 'reason', repeat('r', 2001)));
-- the hashes: 64 lower-case hex digits exactly (the screen checks them as a length and a class)
insert into cases (entry)
select jsonb_build_object('session_id', 's', 'tool_id', 't', 'decision', 'allowed', f, v)
  from unnest(array['content_hash', 'params_sha256']) as f,
       unnest(array[repeat('a', 63), repeat('a', 65), repeat('A', 64), repeat('a', 63) || 'g',
                    repeat('a', 63) || E'\n', repeat('0123456789abcdef', 4)]) as v;
-- the uuids: 8-4-4-4-12 hex digits, either case (the screen checks the layout, then casts)
insert into cases (entry)
select jsonb_build_object('session_id', 's', 'tool_id', 't', 'decision', 'allowed', f, v)
  from unnest(array['id', 'run_id']) as f,
       unnest(array['{abcdef01-2222-4333-8444-555555555555}', 'abcdef01222243338444555555555555',
                    'abcdef0-12222-4333-8444-555555555555', 'abcdef01-2222-4333-8444-55555555555g',
                    'abcdef01-2222-4333-8444-5555-5555555', 'ABCDEF01-2222-4333-8444-5555555555aa']) as v;

alter table cases add column expected text;
update cases set expected = (select case when cardinality(p) = 0 then null
                                         else 'invalid audit entry: ' || array_to_string(p, '; ') end
                               from kiwi_internal.audit_problems(entry) as p);
grant select on cases to authenticated;
select plan((select count(*)::int * 2 from cases));
select tests.act_as_user('owner');

-- each entry alone, and each after a good one in the same batch
select is(tests.error_of(format('select public.record_audits(%L)', jsonb_build_array(c.entry))),
          c.expected,
          format('entry %s alone: as audit_problems says', c.n))
  from cases as c order by c.n;
select is(tests.error_of(format('select public.record_audits(%L)', jsonb_build_array(
            '{"session_id": "s", "tool_id": "t", "decision": "allowed"}'::jsonb,
            case when c.entry ? 'id' and c.expected is null then c.entry - 'id' else c.entry end))),  -- written once
          c.expected,
          format('entry %s after a good one: as audit_problems says', c.n))
  from cases as c order by c.n;

select * from finish();
rollback;
