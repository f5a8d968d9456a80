begin;
\ir ../_setup.sql
select plan(13);
select tests.make_acme();

-- unknown tool
select throws_ok($$ select * from resolve_executor_chain('no_such_tool') $$,
  'PT404', 'tool "no_such_tool" not found', 'an unknown tool raises, naming it');

-- missing executor, as the caller sees it: a public tool on a private runtime
-- a public tool on a private runtime, as older registries took it (an admin writes it now)
set local kiwi.allow_less_visible_executor = on;
select public.publish_tool_version('{"tool_id": "acme/open_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.publish('acme/on_open', 'runtime', 'acme/open_runtime');
select tests.act_as_user('stranger');
select throws_ok($$ select * from resolve_executor_chain('acme/on_open') $$,
  'PT404', 'executor "acme/open_runtime" of tool "acme/on_open" not found (chain: acme/on_open)',
  'an executor the caller cannot see is missing, and the error names both tools');
select tests.act_as_admin();

-- a dangling executor left by a bad restore
select tests.force_tool('orphan', 'script', 'ghost_runtime');
select throws_ok($$ select * from resolve_executor_chain('orphan') $$,
  'PT404', 'executor "ghost_runtime" of tool "orphan" not found (chain: orphan)',
  'a dangling executor raises, naming the tool and the executor');

-- a cycle
select tests.force_tool('loop_a', 'runtime', 'loop_b');
select tests.force_tool('loop_b', 'runtime', 'loop_a');
select tests.force_tool('on_loop', 'script', 'loop_a');
select throws_ok($$ select * from resolve_executor_chain('on_loop') $$,
  'PT422', 'executor cycle: on_loop -> loop_a -> loop_b -> loop_a',
  'a cycle raises, naming every tool on it');
select throws_ok($$ select * from resolve_executor_chain('loop_a') $$,
  'PT422', 'executor cycle: loop_a -> loop_b -> loop_a', 'a cycle is found from any of its members');

-- deeper than 10: r1 .. r10 are legal; a script on r10 has a chain of depth 11
select tests.publish('r1', 'runtime', 'subprocess');
select tests.publish('r' || i, 'runtime', 'r' || (i - 1)) from generate_series(2, 10) i;
select is((select max(depth) from resolve_executor_chain('r10')), 10, 'a chain of depth 10 resolves');
select throws_like($$ select tests.publish('too_deep_published', 'script', 'r10') $$,
  'executor chain of "too_deep_published" is deeper than 10: %', 'publishing a tool whose chain would be deeper than 10 is refused');
select tests.force_tool('too_deep', 'script', 'r10');
select throws_like($$ select * from resolve_executor_chain('too_deep') $$,
  'executor chain of "too_deep" is deeper than 10: too_deep -> r10 -> r9 -> %',
  'a chain deeper than 10 raises, naming the tool and the chain');
select throws_ok($$ select * from resolve_executor_chain('too_deep') $$, 'PT422', null,
  'depth errors carry SQLSTATE PT422');

-- a chain that does not end in a primitive
select tests.force_tool('stray_runtime', 'runtime', null);
select tests.force_tool('on_stray', 'script', 'stray_runtime');
select throws_ok($$ select * from resolve_executor_chain('on_stray') $$,
  'PT422', 'executor chain of "on_stray" ends at "stray_runtime", a runtime, not at a primitive (chain: on_stray -> stray_runtime)',
  'a chain that does not end in a primitive raises, naming where it ends');

-- every version yanked
select tests.publish('acme/gone', 'runtime', 'subprocess');
select yank_tool_version('acme/gone', '1.0.0', 'broken');
select throws_ok($$ select * from resolve_executor_chain('acme/gone') $$,
  'PT404', 'tool "acme/gone" has no installable version: every version is yanked',
  'a tool whose versions are all yanked cannot be resolved, and says why');

-- the execution plan raises the same errors
select throws_ok($$ select resolve_execution_plan('on_loop') $$,
  'PT422', 'executor cycle: on_loop -> loop_a -> loop_b -> loop_a', 'resolve_execution_plan raises the chain error too');
select throws_ok($$ select resolve_execution_plan('hello_world', '9.9.9') $$,
  'PT404', 'version 9.9.9 of tool "hello_world" not found', 'an unknown pinned version raises, naming tool and version');

select * from finish();
rollback;
