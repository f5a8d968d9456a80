-- A plan says whether its version is deprecated (with the message) or yanked (with the
-- reason), so the runner can warn: a deprecated version still runs; a yanked one is never
-- what an unpinned request resolves to, only what its exact version names. Deprecating
-- the latest version rebuilds its cached plan at once (there is no new latest version to
-- do it), so the cache never serves a plan that misses it.
begin;
\ir ../_setup.sql
select plan(16);

create function tests.cached(p_ref text) returns jsonb language sql as $$
  select plan from kiwi_internal.plan_cache where tool_ref = p_ref $$;

select tests.publish('life_script', 'script', 'bash_runtime', '1.0.0');
select tests.publish('life_script', 'script', 'bash_runtime', '1.1.0');
set constraints all immediate;
set constraints all deferred;

select is(resolve_execution_plan('life_script') - array['tool_id', 'version', 'tool_type', 'content_hash',
            'executor_id', 'primitive', 'chain', 'config', 'allowed_variables', 'parameters', 'outputs',
            'manifest', 'files'],
          '{"deprecated": false, "deprecation_message": null, "yanked": false, "yanked_reason": null}'::jsonb,
          'a plan carries its version''s lifecycle: neither deprecated nor yanked once published');
select is(tests.cached('life_script') ->> 'version', '1.1.0', 'the latest version''s plan is cached');

-- deprecating the latest version
select is((deprecate_tool_version('life_script', '1.1.0', 'use life_script_next') ->> 'is_deprecated')::boolean,
          true, 'deprecate_tool_version marks the version');
select is(tests.cached('life_script') ->> 'deprecation_message', 'use life_script_next',
          'its cached plan is rebuilt at once, with the message');
select is((resolve_execution_plan('life_script') ->> 'deprecated')::boolean, true,
          'so the plan served (from the cache) is deprecated');
select is(resolve_execution_plan('life_script') ->> 'version', '1.1.0', 'and it is still the latest: it still runs');
select is((select count(*)::int from kiwi_internal.plan_cache pc
            where pc.plan is distinct from (kiwi_internal.compute_plan(pc.version_uuid, true, '{}')).plan),
          0, 'every cached plan still equals a fresh computation');
select is((resolve_execution_plan('life_script', '1.0.0') ->> 'deprecated')::boolean, false,
          'another version is not deprecated with it');
select is(resolve_execution_plan('life_script', '1.1.0') ->> 'deprecation_message', 'use life_script_next',
          'the version pinned exactly carries the message too');

-- yanking it
select yank_tool_version('life_script', '1.1.0', 'breaks on empty input');
select is(resolve_execution_plan('life_script') ->> 'version', '1.0.0',
          'unpinned, a yanked version is never resolved: the latest is the one before it');
select is((resolve_execution_plan('life_script') ->> 'yanked')::boolean, false, 'and that one is not yanked');
select is(resolve_execution_plan('life_script', '1.1.0') - array['tool_id', 'version', 'tool_type', 'content_hash',
            'executor_id', 'primitive', 'chain', 'config', 'allowed_variables', 'parameters', 'outputs',
            'manifest', 'files'],
          '{"deprecated": true, "deprecation_message": "use life_script_next", "yanked": true,
            "yanked_reason": "breaks on empty input"}'::jsonb,
          'pinned exactly, the yanked version resolves, saying it is yanked and why (and still deprecated)');
set constraints all immediate;
set constraints all deferred;
select is(tests.cached('life_script') ->> 'version', '1.0.0', 'the cache holds the new latest');

-- every version yanked: only pins resolve
select yank_tool_version('life_script', '1.0.0', null);
select throws_ok($$ select resolve_execution_plan('life_script') $$, 'PT404',
                 'tool "life_script" has no installable version: every version is yanked',
                 'with every version yanked, an unpinned request finds nothing');
select is((resolve_execution_plan('life_script', '1.0.0') ->> 'yanked')::boolean, true,
          'yet each still resolves by its exact version');

-- unyanking restores it
select unyank_tool_version('life_script', '1.0.0');
select is(resolve_execution_plan('life_script') -> 'yanked', 'false'::jsonb, 'an unyanked version is latest again, not yanked');

select * from finish();
rollback;
