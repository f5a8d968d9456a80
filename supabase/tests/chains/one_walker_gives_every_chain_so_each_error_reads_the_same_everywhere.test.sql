-- One walker, kiwi_internal.walk_chains, follows every executor chain the registry
-- reads: resolve_chains (resolve_executor_chain(s), publish, attestations) and
-- compute_plan (execution plans, live and cached). So a chain, and each way it can
-- fail, reads the same through every function that reports it; and preview_execution_plan,
-- which puts an unpublished tool on top of its executor's walked chain, refuses with the
-- words the walker uses once that tool is written.
begin;
\ir ../_setup.sql
select plan(16);
select tests.make_acme();

select ok((select bool_and(p.prosrc ~ 'kiwi_internal\.walk_chains\(')
             from pg_proc p
            where p.oid in ('kiwi_internal.resolve_chains(text[], text)'::regprocedure,
                            'kiwi_internal.compute_plan(uuid, boolean, text[])'::regprocedure)),
          'resolve_chains and compute_plan both walk through walk_chains');
select ok(not has_function_privilege('anon', 'kiwi_internal.walk_chains(kiwi_internal.chain_row[], boolean, text[])', 'execute')
          and not has_function_privilege('authenticated', 'kiwi_internal.walk_chains(kiwi_internal.chain_row[], boolean, text[])', 'execute')
          and not has_function_privilege('service_role', 'kiwi_internal.walk_chains(kiwi_internal.chain_row[], boolean, text[])', 'execute'),
          'the walker trusts the visibility it is handed, so no API role may call it');

-- broken data of every kind, planted as a bad restore would leave it
select tests.publish('w1', 'runtime', 'subprocess');
select tests.publish('w' || i, 'runtime', 'w' || (i - 1)) from generate_series(2, 10) i;
select tests.force_tool('w_deep', 'script', 'w10');
select tests.force_tool('w_loop_a', 'runtime', 'w_loop_b');
select tests.force_tool('w_loop_b', 'runtime', 'w_loop_a');
select tests.force_tool('w_on_loop', 'script', 'w_loop_a');
select tests.force_tool('w_orphan', 'script', 'w_ghost');
select tests.force_tool('w_stray', 'runtime', null);
select tests.force_tool('w_on_stray', 'script', 'w_stray');

-- compute_plan and resolve_chains: the same chain, or the same error, for every tool
select is(
  (select array_agg(t.ref order by t.ref)
     from public.tools t join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
     cross join lateral kiwi_internal.compute_plan(v.id, true, '{}') b
    where (select coalesce(array_agg(c.tool_id order by c.depth) filter (where c.error is null),
                           array[max(c.error), max(c.error_code)])
             from kiwi_internal.resolve_chains(array[t.ref]) c)
          is distinct from
          coalesce((select array_agg(e ->> 'tool_id') from jsonb_array_elements(b.plan -> 'chain') e), b.error)),
  null,
  'compute_plan and resolve_chains give every tool the same chain, or the same error and code');

-- each error reads the same through the chain, the batch and the plan
create function tests.error_of(p_sql text) returns text language plpgsql as $$
begin
  execute p_sql;
  return null;
exception when others then
  return sqlstate || ' ' || sqlerrm;
end $$;

select is(tests.error_of($$ select * from resolve_executor_chain('w_on_loop') $$),
          'PT422 executor cycle: w_on_loop -> w_loop_a -> w_loop_b -> w_loop_a', 'a cycle, through the chain');
select is(tests.error_of($$ select resolve_execution_plan('w_on_loop') $$),
          tests.error_of($$ select * from resolve_executor_chain('w_on_loop') $$), 'the same cycle, through the plan');
select is(tests.error_of($$ select * from resolve_executor_chain('w_deep') $$),
          'PT422 executor chain of "w_deep" is deeper than 10: w_deep -> w10 -> w9 -> w8 -> w7 -> w6 -> w5 -> w4 -> w3 -> w2 -> w1 -> subprocess',
          'too deep, through the chain');
select is(tests.error_of($$ select resolve_execution_plan('w_deep') $$),
          tests.error_of($$ select * from resolve_executor_chain('w_deep') $$), 'the same depth error, through the plan');
select is(tests.error_of($$ select resolve_execution_plan('w_orphan') $$),
          tests.error_of($$ select * from resolve_executor_chain('w_orphan') $$), 'the same dangling executor, through the plan');
select is(tests.error_of($$ select resolve_execution_plan('w_on_stray') $$),
          tests.error_of($$ select * from resolve_executor_chain('w_on_stray') $$), 'the same chain without a primitive, through the plan');
select is((select array_agg(c.error order by c.requested_tool_id)
             from resolve_executor_chains_batch(array['w_on_loop', 'w_deep', 'w_orphan', 'w_on_stray']) c),
          (select array_agg(substr(tests.error_of(format('select * from resolve_executor_chain(%L)', r)), 7) order by r)
             from unnest(array['w_on_loop', 'w_deep', 'w_orphan', 'w_on_stray']) r),
          'the batch reports each error in the same words');

-- as a caller who cannot see a link: the private runtime is missing for both
-- a public tool on a private runtime, as older registries took it (an admin writes it now)
set local kiwi.allow_less_visible_executor = on;
select public.publish_tool_version('{"tool_id": "acme/w_private_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.publish('acme/w_on_private', 'runtime', 'acme/w_private_rt');
select tests.act_as_user('stranger');
select is(tests.error_of($$ select resolve_execution_plan('acme/w_on_private') $$),
          'PT404 executor "acme/w_private_rt" of tool "acme/w_on_private" not found (chain: acme/w_on_private)',
          'a link the caller cannot see is missing from the plan ...');
select is(tests.error_of($$ select * from resolve_executor_chain('acme/w_on_private') $$),
          tests.error_of($$ select resolve_execution_plan('acme/w_on_private') $$), '... and from the chain, in the same words');
select tests.act_as_admin();

-- preview: an unpublished tool on top of its executor's chain is refused as the walker
-- refuses it once written
select is(tests.error_of($$ select preview_execution_plan('{"tool_id": "w_new", "tool_type": "runtime", "executor": "w10", "version": "1.0.0"}') $$),
          'PT422 executor chain of "w_new" is deeper than 10: w_new -> w10 -> w9 -> w8 -> w7 -> w6 -> w5 -> w4 -> w3 -> w2 -> w1 -> subprocess',
          'a preview on top of a chain of depth 10 is too deep ...');
select tests.force_tool('w_new', 'runtime', 'w10');
select is(tests.error_of($$ select * from resolve_executor_chain('w_new') $$),
          'PT422 executor chain of "w_new" is deeper than 10: w_new -> w10 -> w9 -> w8 -> w7 -> w6 -> w5 -> w4 -> w3 -> w2 -> w1 -> subprocess',
          '... in the words the walker uses once it is written');
select is(tests.error_of($$ select preview_execution_plan('{"tool_id": "w1", "tool_type": "runtime", "executor": "w3", "version": "2.0.0"}') $$),
          'PT422 executor cycle: w1 -> w3 -> w2 -> w1',
          'a preview whose executor''s chain comes back to it is a cycle ...');
set local session_replication_role = replica;
update public.tool_versions set executor_id = 'w3' where tool_uuid = (select id from public.tools where ref = 'w1');
set local session_replication_role = origin;
select is(tests.error_of($$ select * from resolve_executor_chain('w1') $$),
          'PT422 executor cycle: w1 -> w3 -> w2 -> w1',
          '... in the words the walker uses once it is written');

select * from finish();
rollback;
