-- A checkpoint belongs to the caller whose run it was: they record it (the database names
-- them), read it back and mark it restored; anyone else finds none to roll back, even an
-- admin, who reads every row; anon holds nothing.
begin;
\ir ../_setup.sql
select plan(12);

create function tests.refusal(p_sql text) returns text
  language plpgsql as $$
begin
  execute p_sql;
  return 'allowed';
exception when others then
  return sqlstate || ': ' || sqlerrm;
end $$;
grant execute on function tests.refusal(text) to anon, authenticated, service_role;

select tests.act_as_user('owner');
create temporary table mine on commit drop as
  select public.record_checkpoint(jsonb_build_object(
    'run_id', '11111111-1111-4111-8111-111111111111', 'context_id', '22222222-2222-4222-8222-222222222222',
    'directive', 'acme/tidy@1.0.0', 'tool_id', 'acme/scribble', 'checkpoint_tool', 'git_checkpoint@1.0.0',
    'worktree', '/srv/project', 'checkpoint', repeat('a', 40))) as row;
grant select on mine to authenticated, service_role;

select is((select row ->> 'caller' from mine), tests.owner_id()::text, 'the database names the caller');
select is((public.rollback_checkpoint('11111111-1111-4111-8111-111111111111') ->> 'checkpoint'), repeat('a', 40),
          'the caller finds the checkpoint of their run');
select is((public.rollback_checkpoint('22222222-2222-4222-8222-222222222222') ->> 'run_id'),
          '11111111-1111-4111-8111-111111111111', 'and of the directive''s context (its first checkpoint)');
select isnt((public.checkpoint_restored((select (row ->> 'id')::uuid from mine)) ->> 'restored_at'), null,
            'the caller marks it restored');
select matches(tests.refusal($$insert into public.run_checkpoints (run_id, tool_id, checkpoint_tool, worktree, checkpoint, caller)
                               values (gen_random_uuid(), 't', 'g', '/x', 'c', '$$ || tests.member_id() || $$')$$),
               '^42501', 'nobody records a checkpoint as someone else');

select tests.act_as_user('member');
select is((select count(*)::int from public.run_checkpoints), 0, 'another user reads none of them');
select matches(tests.refusal($$select public.rollback_checkpoint('11111111-1111-4111-8111-111111111111')$$),
               '^PT404: no checkpoint of run or context', 'nor finds one to roll back');
select matches(tests.refusal($$select public.checkpoint_restored('$$ || (select row ->> 'id' from mine) || $$')$$),
               '^PT404', 'nor marks one restored');
select tests.act_as_user('anon');
select matches(tests.refusal($$select public.rollback_checkpoint('11111111-1111-4111-8111-111111111111')$$),
               '^42501', 'anon may not even ask');

select tests.act_as_user('service_role');
select is((select count(*)::int from public.run_checkpoints where run_id = '11111111-1111-4111-8111-111111111111'), 1,
          'an admin reads every checkpoint');
select matches(tests.refusal($$select public.rollback_checkpoint('11111111-1111-4111-8111-111111111111')$$),
               '^PT404', 'but rolls back only their own');
select matches(tests.refusal($$update public.run_checkpoints set worktree = '/etc'$$), '^42501',
               'a checkpoint''s fields never change, only restored_at');

select * from finish();
rollback;
