-- What a person deciding an approval sees of the call: the parameters of the queued run (an
-- MCP task, `kiwi queue`) that waits on it, as the database holds them (queued_run_inputs),
-- so what is shown is what runs. A direct call's parameters never leave its caller's runner:
-- its approval shows their sha256 and size alone. Whoever may read the approval may see them:
-- its requester, an owner of the tool's namespace, an admin.

create function kiwi_internal.approval_parameters(p_ids text[]) returns table (id uuid, params jsonb)
  language sql stable security definer
  set search_path = ''
as $$
  select a.id, i.params
    from public.approvals a
    join public.queued_runs q on q.approval_id = a.id and q.status = 'waiting_approval'
    join kiwi_internal.queued_run_inputs i on i.run_id = q.id
   where a.id::text = any (p_ids)
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
  'The parameters of the queued runs waiting on these approvals, for the approvals you may read (as requester, namespace owner or admin); a direct call''s approval has none here (its parameters stay with its caller: see params_sha256).';
revoke execute on function public.approval_parameters(text[]) from public;
grant execute on function public.approval_parameters(text[]) to authenticated, service_role;
