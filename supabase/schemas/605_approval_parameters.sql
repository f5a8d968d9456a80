-- What a person deciding an approval sees of the call: its parameters, as the database can
-- vouch for them, so what is shown is what runs.
--
-- * A queued run (an MCP task, `kiwi queue`) waiting on the approval: the run's own inputs
--   (queued_run_inputs), which are what the worker runs.
-- * A direct call: the requester's runner attaches the parameters right after the approval is
--   filed (attach_approval_parameters). They are kept only when their canonical JSON hashes
--   to the approval's params_sha256 (the digest the approval is bound to, and that use_approval
--   checks): anything else could show one call and run another.
--
-- Whoever may read the approval sees them: its requester, an owner of the tool's namespace,
-- an admin. Parameters hold what callers typed, never the runner's secrets (${VAR}s are
-- expanded in the registry's strings only).

create table kiwi_internal.approval_inputs (
  approval_id uuid primary key references public.approvals (id) on delete cascade,
  params      jsonb not null constraint approval_inputs_params_size check (octet_length(params::text) <= 65536)
);
comment on table kiwi_internal.approval_inputs is
  'The parameters of a direct call waiting for approval, attached by its requester and checked against the approval''s params_sha256; read only through approval_parameters.';
alter table kiwi_internal.approval_inputs enable row level security;
revoke all on table kiwi_internal.approval_inputs from public, anon, authenticated, service_role;
create policy "no API role reads or writes approval inputs"
  on kiwi_internal.approval_inputs for all to anon, authenticated, service_role
  using (false) with check (false);

-- The digest is checked with the registry's canonical JSON (060_content_hash.sql), which is
-- the runner's params_digest text for parameters of strings, integers, booleans and nesting;
-- a float written otherwise (1.0, 1e-07) gives another hash, and those parameters are simply
-- not shown.

create function kiwi_internal.attach_approval_parameters(p_id uuid, p_params jsonb) returns boolean
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.approvals;
begin
  if jsonb_typeof(p_params) is distinct from 'object' or octet_length(p_params::text) > 65536 then
    return false;
  end if;
  select * into v_row from public.approvals a
   where a.id = p_id and a.requested_by = kiwi_internal.caller_identity()  -- the requester's own, only
     and kiwi_internal.approval_status(a.status, a.expires_at) = 'pending';
  if not found then
    return false;
  end if;
  if encode(sha256(convert_to(kiwi_internal.canonical_json(p_params), 'UTF8')), 'hex')
     is distinct from v_row.params_sha256 then
    return false;
  end if;
  insert into kiwi_internal.approval_inputs (approval_id, params) values (p_id, p_params)
  on conflict (approval_id) do nothing;
  return true;
end
$$;
revoke execute on function kiwi_internal.attach_approval_parameters(uuid, jsonb) from public;
-- identity from the request's claims (caller_identity): only the requester attaches
grant execute on function kiwi_internal.attach_approval_parameters(uuid, jsonb) to authenticated, service_role;

create function public.attach_approval_parameters(p_id uuid, p_params jsonb) returns boolean
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.attach_approval_parameters(p_id, p_params)
$$;
comment on function public.attach_approval_parameters(uuid, jsonb) is
  'Attach a direct call''s parameters to the pending approval you requested, for those who decide it to see: kept only when they hash to its params_sha256 (true), else ignored (false).';
revoke execute on function public.attach_approval_parameters(uuid, jsonb) from public;
grant execute on function public.attach_approval_parameters(uuid, jsonb) to authenticated, service_role;

create function kiwi_internal.approval_parameters(p_ids text[]) returns table (id uuid, params jsonb)
  language sql stable security definer
  set search_path = ''
as $$
  select a.id, p.params
    from public.approvals a
   cross join lateral (select coalesce(
           (select i.params from public.queued_runs q join kiwi_internal.queued_run_inputs i on i.run_id = q.id
             where q.approval_id = a.id and q.status = 'waiting_approval' limit 1),
           (select d.params from kiwi_internal.approval_inputs d where d.approval_id = a.id)) as params) p
   where a.id::text = any (p_ids)
     and p.params is not null  -- both sources hold params not null: none means neither has the call
     and (kiwi_internal.caller_is_admin()
          or a.requested_by = kiwi_internal.caller_identity()
          or a.namespace = any (kiwi_internal.my_namespaces(true)))
$$;
revoke execute on function kiwi_internal.approval_parameters(text[]) from public;
-- identity from the request's claims (caller_identity, my_namespaces), never from arguments
grant execute on function kiwi_internal.approval_parameters(text[]) to authenticated, service_role;

create function public.approval_parameters(p_ids text[]) returns table (id uuid, params jsonb)
  language sql stable
  set search_path = ''
as $$
  select p.id, p.params from kiwi_internal.approval_parameters(p_ids) as p
$$;
comment on function public.approval_parameters(text[]) is
  'The parameters of the calls waiting on these approvals, for the approvals you may read (as requester, namespace owner or admin): a queued run''s inputs, or a direct call''s as its requester attached them (attach_approval_parameters).';
revoke execute on function public.approval_parameters(text[]) from public;
grant execute on function public.approval_parameters(text[]) to authenticated, service_role;

-- Kept while someone may still decide: gone once the approval is used or denied (an expired
-- one goes with its approval).
create function kiwi_internal.approval_inputs_done() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  delete from kiwi_internal.approval_inputs d where d.approval_id = new.id;
  return null;
end
$$;
revoke execute on function kiwi_internal.approval_inputs_done() from public;
create trigger approval_inputs_done
  after update of status on public.approvals
  for each row when (new.status in ('used', 'denied'))
  execute function kiwi_internal.approval_inputs_done();
