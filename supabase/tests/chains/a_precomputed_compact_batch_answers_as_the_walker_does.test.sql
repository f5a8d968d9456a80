-- resolve_executor_chains_compact serves chains from the plan cache
-- (380_chain_batch.sql) and walks only what the cache cannot
-- answer. Whatever the cache holds (current, stale, planted, missing), for every caller,
-- its answer is the walker's: tests.walked_compact is the compact batch as it was built
-- before the cache served it (380_chain_batch.sql), over resolve_chains.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(29);
select tests.make_acme();

create function tests.compact_is_walked(p_tool_ids text[]) returns boolean
  language sql stable as $$
  select public.resolve_executor_chains_compact(p_tool_ids)::jsonb = tests.walked_compact(p_tool_ids)
$$;
grant execute on function tests.compact_is_walked(text[]) to anon, authenticated, service_role;
create function tests.every_id() returns text[] language sql stable as $$
  select array_agg(ref order by ref) || array['no_such_tool', null, '', '   ', 'public/hello_world', 'hello_world']
    from public.tools $$;
grant execute on function tests.every_id() to anon, authenticated, service_role;

-- the stored columns the batch sends are the plan's, for every cached plan
select is((select count(*)::int from kiwi_internal.plan_cache pc
            where pc.chain_keys is distinct from kiwi_internal.plan_chain_keys(pc.plan)
               or pc.element::text is distinct from kiwi_internal.plan_element(pc.plan)::text
               or pc.chain_keys is null or pc.element is null),
          0, 'every cached plan carries its chain keys and its element, as its plan says');
select is((select count(*)::int from kiwi_internal.plan_cache pc
            where cardinality(pc.chain_keys) <> cardinality(pc.chain_versions)),
          0, 'one key per link of the cached chain');

-- a chain of every shape: good, repeated, unknown, blank, and broken in every way
select tests.force_tool('p_loop_a', 'runtime', 'p_loop_b');
select tests.force_tool('p_loop_b', 'runtime', 'p_loop_a');
select tests.force_tool('p_on_loop', 'script', 'p_loop_a');
select tests.force_tool('p_orphan', 'script', 'p_ghost');
select tests.publish('p1', 'runtime', 'subprocess');
select tests.publish('p' || i, 'runtime', 'p' || (i - 1)) from generate_series(2, 10) i;
select tests.force_tool('p_deep', 'script', 'p10');
select tests.force_tool('p_stray', 'runtime', null);
select tests.force_tool('p_on_stray', 'script', 'p_stray');
set constraints all immediate;
set constraints all deferred;
select ok(tests.compact_is_walked(tests.every_id()),
          'over the whole registry, unknown, blank, prefixed and repeated ids and every broken chain: the walker''s answer');
select is(public.resolve_executor_chains_compact('{}')::jsonb, '{"tools": [], "elements": {}}'::jsonb,
          'an empty batch answers empty lists');
select is(public.resolve_executor_chains_compact(null)::jsonb, '{"tools": [], "elements": {}}'::jsonb,
          'so does none');
select is((select t ->> 'error_code' from json_array_elements(
             public.resolve_executor_chains_compact(array['hello_world', 'p_on_loop']) -> 'tools') t
            where t ->> 'requested' = 'p_on_loop'),
          'PT422', 'a broken chain carries its code');

-- the cache is what answers while it is current: a planted plan shows through ...
create temporary table hello_plan on commit drop as
  select plan from kiwi_internal.plan_cache where tool_ref = 'hello_world';
update kiwi_internal.plan_cache set plan = jsonb_set(plan, '{manifest,description}', '"planted"')
 where tool_ref = 'hello_world';
select is(public.resolve_executor_chains_compact(array['hello_world']) #>> '{elements,hello_world@1.0.0,manifest,description}',
          'planted', 'a current cached chain is served from the cache (a planted manifest shows)');
select is((select count(*)::int from kiwi_internal.plan_cache
            where tool_ref = 'hello_world' and element ->> 'manifest' like '%planted%'),
          1, 'the element follows the plan when the plan is rewritten');
update kiwi_internal.plan_cache set plan = (select plan from hello_plan) where tool_ref = 'hello_world';
-- ... and a stale one never does: a rebuild that raced another commit kept an old runtime
select tests.publish('p_rt', 'runtime', 'subprocess', '1.0.0');
select tests.publish('p_script', 'script', 'p_rt');
set constraints all immediate;
set constraints all deferred;
create temporary table stale_row on commit drop as
  select * from kiwi_internal.plan_cache where tool_ref in ('p_script', 'p_rt');
update stale_row set plan = jsonb_set(plan, '{manifest,description}', '"stale"');
select tests.publish('p_rt', 'runtime', 'subprocess', '2.0.0');
set constraints all immediate;
set constraints all deferred;
delete from kiwi_internal.plan_cache where tool_ref in ('p_script', 'p_rt');
insert into kiwi_internal.plan_cache select * from stale_row;
select is((select chain_keys from kiwi_internal.plan_cache where tool_ref = 'p_script'),
          array['p_script@1.0.0', 'p_rt@1.0.0', 'subprocess@1.0.0'], 'given a cached chain through a superseded runtime (planted)');
select is((public.resolve_executor_chains_compact(array['p_script']) #> '{tools,0,chain}')::jsonb,
          '["p_script@1.0.0", "p_rt@2.0.0", "subprocess@1.0.0"]'::jsonb,
          'the chain served runs through the runtime''s latest version');
select ok(tests.compact_is_walked(array['p_script', 'p_rt', 'p_script']), 'as the walker says');
select is(public.resolve_executor_chains_compact(array['p_script']) #>> '{elements,p_script@1.0.0,manifest,description}',
          null, 'and no element of the stale row is sent');
-- the root itself superseded under its cached row
select tests.publish('p_script', 'script', 'p_rt', '1.1.0');
set constraints all immediate;
set constraints all deferred;
delete from kiwi_internal.plan_cache where tool_ref in ('p_script', 'p_rt');
insert into kiwi_internal.plan_cache select * from stale_row;
select is(public.resolve_executor_chains_compact(array['p_script']) #>> '{tools,0,chain,0}',
          'p_script@1.1.0', 'a cached root that is no longer latest is not served');
select ok(tests.compact_is_walked(array['p_script', 'p_rt']), 'as the walker says');
delete from kiwi_internal.plan_cache where tool_ref in ('p_script', 'p_rt');
select kiwi_internal.rebuild_plans(array(select id from public.tools where ref in ('p_script', 'p_rt')));

-- lifecycle: yanked versions leave the chain, a deprecated one stays, all yanked is an error
select yank_tool_version('p_rt', '2.0.0', 'bad');
select is(public.resolve_executor_chains_compact(array['p_script']) #>> '{tools,0,chain,1}',
          'p_rt@1.0.0', 'yanking a runtime''s latest moves the chain back at once');
set constraints all immediate;
set constraints all deferred;
select is(public.resolve_executor_chains_compact(array['p_script']) #>> '{tools,0,chain,1}',
          'p_rt@1.0.0', 'and after the cache is rebuilt');
select public.deprecate_tool_version('p_script', '1.1.0', 'use something else');
set constraints all immediate;
set constraints all deferred;
select ok(tests.compact_is_walked(array['p_script']), 'a deprecated latest version is served as the walker serves it');
select yank_tool_version('p_script', '1.0.0', 'bad');
select yank_tool_version('p_script', '1.1.0', 'bad');
select is(public.resolve_executor_chains_compact(array['p_script', 'hello_world']) #>> '{tools,0,error}',
          'tool "p_script" has no installable version: every version is yanked', 'every version yanked: the walker''s error');
set constraints all immediate;
set constraints all deferred;
select ok(tests.compact_is_walked(array['p_script', 'hello_world', 'p_rt']), 'and after the cache is rebuilt');

-- other tenants' private tools, as each caller sees them
-- a public tool on a private runtime, as older registries took it (an admin writes it now)
set local kiwi.allow_less_visible_executor = on;
select public.publish_tool_version('{"tool_id": "acme/hidden_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.publish('acme/open_script', 'script', 'acme/hidden_rt');
set constraints all immediate;
set constraints all deferred;
create temporary table tenant_ids on commit drop as
  select array['acme/private_tool', 'acme/open_script', 'acme/unlisted_tool', 'acme/public_tool', 'acme/hidden_rt',
               'hello_world', 'acme/private_tool'] as ids;
grant select on tenant_ids to anon, authenticated, service_role;
select tests.act_as_user('stranger');
select ok(tests.compact_is_walked((select ids from tenant_ids)), 'a stranger: the walker''s answer');
select is((select count(*)::int from json_object_keys(public.resolve_executor_chains_compact((select ids from tenant_ids)) -> 'elements') k
            where k like 'acme/private_tool@%' or k like 'acme/hidden_rt@%'),
          0, 'a stranger is sent no element of acme''s private tools, not even through a public script');
select tests.act_as_user('anon');
select ok(tests.compact_is_walked((select ids from tenant_ids)), 'anon: the walker''s answer');
select tests.act_as_user('member');
select ok(tests.compact_is_walked((select ids from tenant_ids)), 'a member: the walker''s answer');
select is(public.resolve_executor_chains_compact(array['acme/open_script']) #>> '{tools,0,chain,1}',
          'acme/hidden_rt@1.0.0', 'a member gets the chain through acme''s private runtime');
select tests.act_as_admin();
-- a runtime made private after its chains were cached, and a cached row that missed it
-- (a rebuild that raced the change, planted)
select tests.publish('acme/open_rt', 'runtime', 'subprocess');
select tests.publish('acme/on_open_rt', 'script', 'acme/open_rt');
set constraints all immediate;
set constraints all deferred;
create temporary table open_row on commit drop as
  select * from kiwi_internal.plan_cache where tool_ref = 'acme/on_open_rt';
update public.tools set visibility = 'private' where ref = 'acme/open_rt';
set constraints all immediate;
set constraints all deferred;
delete from kiwi_internal.plan_cache where tool_ref = 'acme/on_open_rt';
insert into kiwi_internal.plan_cache select * from open_row;
select is((select restricted_ns from kiwi_internal.plan_cache where tool_ref = 'acme/on_open_rt'), '{}'::text[],
          'given a cached chain that still takes the runtime for public (planted)');
select tests.act_as_user('stranger');
select is((select count(*)::int from json_object_keys(
             public.resolve_executor_chains_compact(array['acme/on_open_rt', 'acme/open_rt']) -> 'elements') k
            where k like 'acme/open_rt@%'),
          0, 'a runtime made private is hidden from strangers whatever was cached');
select ok(tests.compact_is_walked(array['acme/on_open_rt', 'acme/open_rt']), 'as the walker hides it');
select tests.act_as_user('member');
select is(public.resolve_executor_chains_compact(array['acme/on_open_rt']) #>> '{tools,0,chain,1}',
          'acme/open_rt@1.0.0', 'and a member still gets it');
select tests.act_as_user('service_role');
select ok(tests.compact_is_walked(tests.every_id()), 'the service role: the walker''s answer over the whole registry');
select tests.act_as_admin();

select * from finish();
rollback;
