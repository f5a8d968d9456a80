-- Latest versions' plans are precomputed (kiwi_internal.plan_cache). A change to any
-- tool of a chain drops the cached plans through it at once and rebuilds them at
-- commit; here `set constraints all immediate` stands in for the commit.
begin;
\ir ../_setup.sql
select plan(18);
select tests.make_acme();

create function tests.cached(p_ref text) returns jsonb language sql as $$
  select plan from kiwi_internal.plan_cache where tool_ref = p_ref $$;

select is((select count(*)::int from kiwi_internal.plan_cache pc join tool_versions v on v.id = pc.version_uuid where not v.is_latest),
          0, 'only latest versions are cached');
select is((select count(*)::int from kiwi_internal.plan_cache pc
            where pc.plan is distinct from (kiwi_internal.compute_plan(pc.version_uuid, true, '{}')).plan),
          0, 'every cached plan equals a fresh computation');

select tests.publish('cache_rt', 'runtime', 'subprocess', '1.0.0', '{"env": {"LEVEL": "one"}}');
select tests.publish('cache_script', 'script', 'cache_rt', '1.0.0', '{"timeout": 7}');
select is(tests.cached('cache_script'), null, 'a new tool is not cached before commit');
select is(resolve_execution_plan('cache_script') #>> '{config,env,LEVEL}', 'one', 'but its plan is computed live');
set constraints all immediate;
set constraints all deferred;
select is(tests.cached('cache_script') #>> '{config,env,LEVEL}', 'one', 'at commit its plan is cached');

-- a new runtime version changes the script's plan
select tests.publish('cache_rt', 'runtime', 'subprocess', '2.0.0', '{"env": {"LEVEL": "two"}}');
select is(tests.cached('cache_script'), null, 'a new version of its runtime drops the script''s cached plan at once');
select is(resolve_execution_plan('cache_script') #>> '{config,env,LEVEL}', 'two',
          'so the same transaction already sees the new runtime');
set constraints all immediate;
set constraints all deferred;
select is(tests.cached('cache_script') #>> '{config,env,LEVEL}', 'two', 'and the rebuilt cache has it');
select is(resolve_execution_plan('cache_script') #> '{chain,1,version}', '"2.0.0"'::jsonb,
          'the plan''s chain names the runtime''s new version');

-- yanking moves it back
select yank_tool_version('cache_rt', '2.0.0', 'bad');
select is(resolve_execution_plan('cache_script') #>> '{config,env,LEVEL}', 'one', 'yanking the runtime''s latest moves plans back');
set constraints all immediate;
set constraints all deferred;
select is(tests.cached('cache_script') #>> '{config,env,LEVEL}', 'one', 'in the cache too');

-- a rebuild that raced another commit can leave a plan built from a superseded
-- version; such a row is never served
create temporary table stale_row on commit drop as
  select * from kiwi_internal.plan_cache where tool_ref = 'cache_script';
select tests.publish('cache_rt', 'runtime', 'subprocess', '3.0.0', '{"env": {"LEVEL": "three"}}');
insert into kiwi_internal.plan_cache select * from stale_row;
select is(tests.cached('cache_script') #>> '{config,env,LEVEL}', 'one', 'given a stale cached plan (planted)');
select is(resolve_execution_plan('cache_script') #>> '{config,env,LEVEL}', 'three',
          'the plan served is built from the versions that are latest now');
select yank_tool_version('cache_rt', '3.0.0', 'back to one for the rest');
set constraints all immediate;
set constraints all deferred;

-- a pinned older version is computed live, and differs
select tests.publish('cache_script', 'script', 'cache_rt', '1.1.0', '{"timeout": 9}');
select is((resolve_execution_plan('cache_script', '1.0.0') -> 'config' ->> 'timeout')::int, 7,
          'a pinned older version gets its own plan, not the cached latest');

-- a cached plan through a private runtime is still refused to those who cannot see it
-- a public tool on a private runtime, as older registries took it (an admin writes it now)
set local kiwi.allow_less_visible_executor = on;
select public.publish_tool_version('{"tool_id": "acme/hidden_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.publish('acme/open_script', 'script', 'acme/hidden_rt');
set constraints all immediate;
set constraints all deferred;
select is(tests.cached('acme/open_script') ->> 'tool_id', 'acme/open_script', 'a public script on a private runtime is cached');
select tests.act_as_user('stranger');
select throws_ok($$ select resolve_execution_plan('acme/open_script') $$, 'PT404',
  'executor "acme/hidden_rt" of tool "acme/open_script" not found (chain: acme/open_script)',
  'a stranger is refused as if nothing were cached');
select tests.act_as_user('member');
select is(resolve_execution_plan('acme/open_script') ->> 'primitive', 'subprocess', 'a member gets the cached plan');
select tests.act_as_user('stranger');
select throws_ok($$ select resolve_execution_plan('acme/private_tool') $$, 'PT404',
  'tool "acme/private_tool" not found', 'a cached private tool stays hidden from strangers');
select tests.act_as_admin();

select * from finish();
rollback;
