-- kiwi_internal.chains_compact answers a batch whose every id is cached, current, visible
-- and asked once in one statement (380_chain_batch.sql), and hands
-- anything else to kiwi_internal.chains_compact_general. Which of the two answered is read
-- from this transaction's function call counts; either way the answer is the walker's.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(26);
select tests.make_acme();
set local track_functions = 'all';

-- 'one statement' or 'general': which path answered p_tool_ids (and the answer is the walker's,
-- else 'differs from the walker').
create function tests.compact_path(p_tool_ids text[]) returns text
  language plpgsql volatile as $$
declare
  v_before bigint := coalesce(pg_stat_get_xact_function_calls(
                       'kiwi_internal.chains_compact_general(text[])'::regprocedure), 0);
  v_same boolean := public.resolve_executor_chains_compact(p_tool_ids)::jsonb = tests.walked_compact(p_tool_ids);
begin
  if not v_same then
    return 'differs from the walker';
  end if;
  return case when coalesce(pg_stat_get_xact_function_calls(
                              'kiwi_internal.chains_compact_general(text[])'::regprocedure), 0) = v_before
              then 'one statement' else 'general' end;
end $$;
grant execute on function tests.compact_path(text[]) to anon, authenticated, service_role;

select tests.publish('p_rt', 'runtime', 'subprocess');
select tests.publish('p_script', 'script', 'p_rt');
-- a public tool on a private runtime, as older registries took it (an admin writes it now)
set local kiwi.allow_less_visible_executor = on;
select public.publish_tool_version('{"tool_id": "acme/hidden_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.publish('acme/open_script', 'script', 'acme/hidden_rt');
set constraints all immediate;
set constraints all deferred;
create temporary table all_cached on commit drop as
  select array_agg(pc.tool_ref order by pc.tool_ref) as ids from kiwi_internal.plan_cache pc;
grant select on all_cached to anon, authenticated, service_role;

-- every id cached, current and visible, each once: one statement
select is(tests.compact_path((select ids from all_cached)), 'one statement',
          'every cached tool at once, as the admin: one statement, the walker''s answer');
select is(tests.compact_path(array['p_script']), 'one statement', 'one id');
select is(tests.compact_path(array['p_script', 'p_rt', 'subprocess']), 'one statement',
          'ids that are also links of each other''s chains');
select is((select count(*)::int from json_object_keys(
             public.resolve_executor_chains_compact(array['p_script', 'p_rt', 'subprocess']) -> 'elements')),
          3, 'and each of those elements is named once');
select is(tests.compact_path(array['subprocess', 'p_rt', 'p_script']), 'one statement', 'in any order');
select is((public.resolve_executor_chains_compact(array['subprocess', 'p_script']) -> 'tools' -> 1 ->> 'requested'),
          'p_script', 'which the answer keeps');
select is(tests.compact_path('{}'), 'one statement', 'an empty batch');
select is(public.resolve_executor_chains_compact('{}')::jsonb, '{"tools": [], "elements": {}}'::jsonb,
          'answers empty lists');

-- the stored element is what is sent (a planted manifest shows through)
create temporary table hello_plan on commit drop as
  select plan from kiwi_internal.plan_cache where tool_ref = 'hello_world';
update kiwi_internal.plan_cache set plan = jsonb_set(plan, '{manifest,description}', '"planted"')
 where tool_ref = 'hello_world';
select is(public.resolve_executor_chains_compact(array['hello_world', 'p_script']) #>> '{elements,hello_world@1.0.0,manifest,description}',
          'planted', 'the one statement sends the cached element');
update kiwi_internal.plan_cache set plan = (select plan from hello_plan) where tool_ref = 'hello_world';
-- and so is the stored entry (set from the plan's chain with the element: a planted version
-- in it shows through)
update kiwi_internal.plan_cache set plan = jsonb_set(plan, '{chain,0,version}', '"planted"')
 where tool_ref = 'hello_world';
select is(public.resolve_executor_chains_compact(array['hello_world', 'p_script']) #>> '{tools,0,chain,0}',
          'hello_world@planted', 'the one statement sends the cached entry');
update kiwi_internal.plan_cache set plan = (select plan from hello_plan) where tool_ref = 'hello_world';

-- anything else: the general path, still the walker's answer
select is(tests.compact_path(null), 'general', 'no array');
select is(tests.compact_path(array['p_script', 'p_script']), 'general', 'a repeated id');
select is(tests.compact_path(array['p_script', null]), 'general', 'a null id');
select is(tests.compact_path(array['p_script', 'no_such_tool']), 'general', 'an unknown id');
select is(tests.compact_path(array['p_script', 'public/hello_world']), 'general', 'an id spelled otherwise than its ref');
-- a runtime's new version, and a cached chain still through its old one (a rebuild that
-- raced the publish, planted)
create temporary table script_row on commit drop as
  select * from kiwi_internal.plan_cache where tool_ref = 'p_script';
select tests.publish('p_rt', 'runtime', 'subprocess', '2.0.0');
set constraints all immediate;
set constraints all deferred;
delete from kiwi_internal.plan_cache where tool_ref = 'p_script';
insert into kiwi_internal.plan_cache select * from script_row;
select is((select chain_keys[2] from kiwi_internal.plan_cache where tool_ref = 'p_script'), 'p_rt@1.0.0',
          'given a cached chain through a runtime''s superseded version');
select is(tests.compact_path(array['hello_world', 'p_script']), 'general', 'a stale link below one of the ids');
select is(public.resolve_executor_chains_compact(array['hello_world', 'p_script']) #>> '{tools,1,chain,1}',
          'p_rt@2.0.0', 'which is walked to the runtime''s latest version');
select kiwi_internal.rebuild_plans(array(select id from public.tools where ref = 'p_script'));
select is(tests.compact_path(array['hello_world', 'p_script']), 'one statement', 'and served at once after the rebuild');

-- callers: a private link is served in one statement only to those who may see it
select tests.act_as_user('member');
select is(tests.compact_path(array['acme/open_script', 'acme/private_tool', 'hello_world']), 'one statement',
          'a member, through acme''s private runtime and to its private tool: one statement');
select tests.act_as_user('stranger');
select is(tests.compact_path(array['acme/open_script', 'hello_world']), 'general',
          'a stranger, through the private runtime: the general path');
select is(public.resolve_executor_chains_compact(array['acme/open_script']) -> 'tools' -> 0 ->> 'error_code' is not null,
          true, 'which reports the chain as the walker does, with its error');
select is(tests.compact_path(array['acme/private_tool']), 'general', 'a stranger asking for a private tool');
select tests.act_as_user('anon');
select is(tests.compact_path(array['acme/unlisted_tool', 'acme/public_tool', 'hello_world']), 'one statement',
          'anon, unlisted and public tools: one statement');
select tests.act_as_user('service_role');
select is(tests.compact_path((select ids from all_cached)), 'one statement', 'the service role, every cached tool');
select tests.act_as_admin();

-- the cached entries follow every write above (publish, rebuild, a planted row rewritten)
select is((select count(*)::int from kiwi_internal.plan_cache pc
            where pc.entry::text is distinct from kiwi_internal.plan_entry(pc.tool_ref, pc.chain_keys)::text),
          0, 'every cached entry is its ref and chain');

select * from finish();
rollback;
