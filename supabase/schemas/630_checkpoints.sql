-- Checkpoints of runs that mutate state. A tool whose config says `mutates_state: true`,
-- run inside a directive's context, is preceded by a checkpoint: the runner runs the
-- checkpoint tool (git_checkpoint: a commit of the working tree, kept under
-- refs/kiwi/checkpoints/) through the same gate and sandbox as any tool, and records here
-- what it took, against the id of the run that followed. `kiwi rollback RUN` (MCP: execute
-- action=rollback) reads the row back and runs the checkpoint tool again to restore it.
--
-- A row names a run and the caller whose run it was. Callers read their own rows (admins
-- read all); rollback_checkpoint answers only the caller's own, so nobody restores a
-- checkpoint of someone else's run, whatever they may read. Rows are written by
-- record_checkpoint and change only when restored (restored_at); anon has no access:
-- anonymous runs keep no records.

create table public.run_checkpoints (
  id              uuid primary key default gen_random_uuid(),
  run_id          uuid not null,
  context_id      uuid,
  directive       text constraint run_checkpoints_directive_length check (char_length(directive) <= 300),
  tool_id         text not null
                  constraint run_checkpoints_tool_id_length check (char_length(tool_id) between 1 and 300),
  checkpoint_tool text not null
                  constraint run_checkpoints_checkpoint_tool_length check (char_length(checkpoint_tool) between 1 and 300),
  worktree        text not null
                  constraint run_checkpoints_worktree_format
                  check (char_length(worktree) between 1 and 4096 and worktree !~ '[[:cntrl:]]'),
  checkpoint      text not null
                  constraint run_checkpoints_checkpoint_format
                  check (char_length(checkpoint) between 1 and 200 and checkpoint !~ '[[:cntrl:]]'),
  caller          text not null,
  created_at      timestamptz not null default clock_timestamp(),
  restored_at     timestamptz,
  constraint run_checkpoints_caller_run_key unique (caller, run_id)
);
comment on table public.run_checkpoints is
  'A checkpoint taken before a run that mutates state (config.mutates_state) inside a directive, and what restores it: kiwi rollback RUN. Callers read their own, admins all; written by record_checkpoint.';
comment on column public.run_checkpoints.run_id is 'The run the checkpoint was taken before (public.tool_runs.id; not a foreign key: its record is written behind the run).';
comment on column public.run_checkpoints.context_id is 'The directive''s execution context the run was made in: rolling back the context restores its first checkpoint.';
comment on column public.run_checkpoints.checkpoint_tool is 'The tool that took the checkpoint, as ref@version; the same one restores it.';
comment on column public.run_checkpoints.worktree is 'The working tree checkpointed, as a path on the runner''s host.';
comment on column public.run_checkpoints.checkpoint is 'What the checkpoint tool answered it took (git_checkpoint: a commit id).';
comment on column public.run_checkpoints.caller is 'Set by the database (kiwi_internal.caller_identity()): whose run it was.';

alter table public.run_checkpoints enable row level security;
revoke all on table public.run_checkpoints from public, anon, authenticated, service_role;
grant select, insert on table public.run_checkpoints to authenticated, service_role;
grant update (restored_at) on table public.run_checkpoints to authenticated, service_role;

create index run_checkpoints_context_id_idx on public.run_checkpoints (context_id) where context_id is not null;

create policy "callers read their own checkpoints, admins all"
  on public.run_checkpoints for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "callers record checkpoints of their own runs"
  on public.run_checkpoints for insert to authenticated, service_role
  with check (caller = (select kiwi_internal.caller_identity()));
create policy "callers mark their own checkpoints restored"
  on public.run_checkpoints for update to authenticated, service_role
  using (caller = (select kiwi_internal.caller_identity()))
  with check (caller = (select kiwi_internal.caller_identity()));

-- Record a checkpoint: p_checkpoint {run_id, context_id, directive, tool_id, checkpoint_tool,
-- worktree, checkpoint} -> the row. The caller is the database's to say.
create function public.record_checkpoint(p_checkpoint jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row public.run_checkpoints;
begin
  if jsonb_typeof(p_checkpoint) is distinct from 'object' then
    raise exception 'a checkpoint is a JSON object' using errcode = '22023';
  end if;
  insert into public.run_checkpoints (run_id, context_id, directive, tool_id, checkpoint_tool, worktree, checkpoint, caller)
  values ((p_checkpoint ->> 'run_id')::uuid, (p_checkpoint ->> 'context_id')::uuid, p_checkpoint ->> 'directive',
          p_checkpoint ->> 'tool_id', p_checkpoint ->> 'checkpoint_tool', p_checkpoint ->> 'worktree',
          p_checkpoint ->> 'checkpoint', kiwi_internal.caller_identity())
  returning * into v_row;
  return to_jsonb(v_row);
end
$$;
comment on function public.record_checkpoint(jsonb) is
  'Record the checkpoint taken before a run that mutates state, as the caller''s.';
revoke execute on function public.record_checkpoint(jsonb) from public;
grant execute on function public.record_checkpoint(jsonb) to authenticated, service_role;

-- The checkpoint `kiwi rollback p_id` restores: the caller's own checkpoint of run p_id, or
-- the first one taken in the execution context p_id (a directive's run answers with it).
-- Someone else's run has none, whoever asks: admins read every row, but restore only theirs.
create function public.rollback_checkpoint(p_id uuid) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_found jsonb;
begin
  select to_jsonb(c) into v_found
    from public.run_checkpoints c
   where (c.run_id = p_id or c.context_id = p_id)
     and c.caller = kiwi_internal.caller_identity()
   order by (c.run_id = p_id) desc, c.created_at, c.id
   limit 1;
  if v_found is null then
    raise exception 'no checkpoint of run or context % among your runs', p_id using errcode = 'PT404',
      hint = 'a checkpoint is taken before a tool with config.mutates_state runs inside a directive; '
             'only the caller whose run it was can roll it back';
  end if;
  return v_found;
end
$$;
comment on function public.rollback_checkpoint(uuid) is
  'The caller''s own checkpoint of a run (or the first of an execution context) that kiwi rollback restores.';
revoke execute on function public.rollback_checkpoint(uuid) from public;
grant execute on function public.rollback_checkpoint(uuid) to authenticated, service_role;

-- Mark the caller's checkpoint p_id restored (now) -> the row.
create function public.checkpoint_restored(p_id uuid) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row public.run_checkpoints;
begin
  update public.run_checkpoints c set restored_at = clock_timestamp()
   where c.id = p_id and c.caller = kiwi_internal.caller_identity()
  returning * into v_row;
  if v_row.id is null then
    raise exception 'no checkpoint % among your runs', p_id using errcode = 'PT404';
  end if;
  return to_jsonb(v_row);
end
$$;
comment on function public.checkpoint_restored(uuid) is 'Mark the caller''s checkpoint restored.';
revoke execute on function public.checkpoint_restored(uuid) from public;
grant execute on function public.checkpoint_restored(uuid) to authenticated, service_role;
