-- What a thread spent, in money: record_thread_usage prices its tokens from model_prices (data
-- an admin changes, anyone reads) and keeps the row in the caller's name, for the caller alone.
begin;
\ir ../_setup.sql
select plan(10);

select tests.act_as('anon');
select is((select public.model_price('claude-haiku-4-5') ->> 'output_usd_per_mtok'), '5',
  'anyone reads a seeded model''s price');
select is(public.model_price('no-such-model'), null, 'a model without a price has none');
select throws_ok($$select public.record_thread_usage('{"session_id": "s", "thread": "t", "model": "m",
  "input_tokens": 1, "output_tokens": 1, "tool_calls": 0, "status": "success"}')$$,
  '42501', null, 'anonymous callers cannot record thread usage');

select tests.act_as('authenticated', tests.owner_id());
select throws_ok($$update public.model_prices set output_usd_per_mtok = 0 where model = 'gpt-4o'$$,
  '42501', null, 'a signed-in user cannot change a price');
select is((public.record_thread_usage('{"session_id": "thread-cost-1", "parent_session": "agent-1",
  "thread": "research@1.0.0", "model": "claude-sonnet-4-5", "input_tokens": 1000000, "output_tokens": 200000,
  "tool_calls": 2, "status": "success"}') ->> 'cost_usd')::numeric, 6.0::numeric,
  '1M input tokens at $3 and 200k output tokens at $15 cost $6');
select is((public.record_thread_usage('{"session_id": "thread-cost-2", "thread": "t", "model": "unpriced",
  "input_tokens": 5, "output_tokens": 5, "tool_calls": 0, "status": "error"}') ->> 'cost_usd'), null,
  'a model without a price is recorded with no cost');
select throws_ok($$select public.record_thread_usage('{"session_id": "thread-cost-3", "thread": "t",
  "model": "m", "input_tokens": -1, "output_tokens": 0, "tool_calls": 0, "status": "success"}')$$,
  '22023', null, 'negative tokens are refused');
select results_eq($$select caller, parent_session from public.thread_usage where session_id = 'thread-cost-1'$$,
  $$values (tests.owner_id()::text, 'agent-1'::text)$$, 'the row is the caller''s, with the session that started it');

select tests.act_as('authenticated', tests.stranger_id());
select is_empty($$select 1 from public.thread_usage where session_id like 'thread-cost-%'$$,
  'another user reads none of it');

select tests.act_as_admin();
update public.model_prices set output_usd_per_mtok = 30 where model = 'claude-sonnet-4-5';
select tests.act_as('authenticated', tests.owner_id());
select is((public.record_thread_usage('{"session_id": "thread-cost-4", "thread": "t", "model": "claude-sonnet-4-5",
  "input_tokens": 0, "output_tokens": 100000, "tool_calls": 0, "status": "success"}') ->> 'cost_usd')::numeric,
  3.0::numeric, 'a price an admin changed applies to the next thread');

select * from finish();
rollback;
