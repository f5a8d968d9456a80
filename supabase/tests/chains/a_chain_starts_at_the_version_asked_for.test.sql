-- resolve_executor_chain(tool, version): the chain of that version, not the latest's (kiwi
-- show tool@1.0.0 showed the latest version in its chain). Without a version, the latest.
begin;
\ir ../_setup.sql
select plan(5);

select tests.publish('chain_rt_a', 'runtime', 'subprocess', '1.0.0');
select tests.publish('chain_rt_b', 'runtime', 'subprocess', '1.0.0');
select tests.publish('chain_versioned', 'script', 'chain_rt_a', '1.0.0');
select tests.publish('chain_versioned', 'script', 'chain_rt_b', '1.1.0');

select results_eq($$ select depth, tool_id, version from resolve_executor_chain('chain_versioned') $$,
  $$ values (0, 'chain_versioned', '1.1.0'), (1, 'chain_rt_b', '1.0.0'), (2, 'subprocess', '1.0.0') $$,
  'without a version: the latest version''s chain');
select results_eq($$ select depth, tool_id, version from resolve_executor_chain('chain_versioned', '1.0.0') $$,
  $$ values (0, 'chain_versioned', '1.0.0'), (1, 'chain_rt_a', '1.0.0'), (2, 'subprocess', '1.0.0') $$,
  'with one: that version first, down its own executor');
select is((select manifest ->> 'version' from resolve_executor_chain('chain_versioned', '1.0.0') where depth = 0),
          '1.0.0', 'its manifest is that version''s');
select throws_ok($$ select * from resolve_executor_chain('chain_versioned', '9.9.9') $$, 'PT404',
                 'version 9.9.9 of tool "chain_versioned" not found', 'a version that does not exist is named');
select yank_tool_version('chain_versioned', '1.0.0', 'gone');
select is((select version from resolve_executor_chain('public/chain_versioned', '1.0.0') where depth = 0), '1.0.0',
          'a yanked version still resolves by its exact version');

select * from finish();
rollback;
