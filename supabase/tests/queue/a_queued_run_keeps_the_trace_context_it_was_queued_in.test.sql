-- A queued run keeps the W3C trace context it was queued in, for the worker's spans to
-- continue; anything else in that field is refused by name, and nothing is queued.
begin;
\ir ../_setup.sql
select plan(3);
select tests.make_acme();
select tests.act_as_user('member');
select is(enqueue_run('{"tool_id": "acme/public_tool", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}') ->> 'traceparent',
  '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'the queued run keeps its trace context');
select throws_ok($$select enqueue_run('{"tool_id": "acme/public_tool", "traceparent": "00-xyz-01"}')$$,
  '22023', 'enqueue_run: traceparent must be a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>)',
  'a malformed one is refused by name');
select is((select count(*)::int from queued_runs where caller = tests.member_id()::text), 1, 'and nothing more was queued');
select * from finish();
rollback;
