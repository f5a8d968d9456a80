-- Limits count only calls that run. A dry run runs nothing, so it takes nothing from a
-- limit, through check_call or admit_call: a signed-in stranger who asks a thousand times
-- leaves the owner's shared bucket as it was. A dry run is still answered as the run
-- would be: refused, saying when to retry, once the limit has no room left.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
delete from public.approvals;
delete from kiwi_internal.rate_limit_counters;
select plan(8);
select tests.make_acme();

insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'acme/public_tool', 2, 3600);
create function tests.ask(p_dry boolean, p_via text default 'check_call') returns jsonb language sql as $$
  select case p_via
    when 'check_call' then public.check_call(jsonb_build_object(
      'tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64), 'dry_run', p_dry))
    else public.admit_call(jsonb_build_object(
      'tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64), 'dry_run', p_dry)) end
$$;
grant execute on function tests.ask(boolean, text) to anon, authenticated, service_role;
create function tests.taken() returns int language sql security definer as $$
  select coalesce(sum(c.calls), 0)::int from kiwi_internal.rate_limit_counters c
    join public.rate_limits l on l.id = c.limit_id where l.key = 'acme/public_tool'
$$;
grant execute on function tests.taken() to anon, authenticated, service_role;
create temporary table answers (n int, answer jsonb);
grant all on answers to anon, authenticated, service_role;

-- a stranger asks many times, both ways
select tests.act_as_user('stranger');
insert into answers select n, tests.ask(true, case when n % 2 = 0 then 'check_call' else 'admit_call' end)
  from generate_series(1, 20) n;
select is((select count(*)::int from answers where (answer ->> 'allowed')::boolean), 20,
  'every dry run is answered as the run would be: allowed');
select is(tests.taken(), 0, 'and twenty dry runs took nothing from the shared bucket');

-- so the owner still has the whole limit
select tests.act_as_user('owner');
select is(tests.ask(false) ->> 'allowed', 'true', 'the owner runs the tool ...');
select is(tests.ask(false, 'admit_call') ->> 'allowed', 'true', '... twice: the limit is whole');
select is(tests.taken(), 2, 'the two runs are counted');

-- a dry run of a call with no room left says so, and still takes nothing
select tests.act_as_user('stranger');
select is(tests.ask(true) ->> 'kind', 'rate_limited', 'a dry run once the limit is used up is refused as the run would be');
select ok((tests.ask(true) ->> 'retry_after_s')::numeric > 0, 'saying when to retry');
select is(tests.taken(), 2, 'and takes nothing');

select * from finish();
rollback;
