-- Who reads an approval policy. A pattern names tools (acme/deploy_*), and naming a
-- namespace's private tools must not tell everyone they exist, so a policy is read by:
--   * admins, all of them;
--   * the members of the namespace its pattern names: the part before the first '/'
--     (acme/deploy_* belongs to acme);
--   * every signed-in user when the pattern names no namespace (github.*, word_count, *):
--     such a pattern is about the public namespace, or about every namespace at once.
-- A pattern whose namespace part is itself a glob (*/deploy, ac*/x) belongs to no namespace
-- anyone is a member of: only admins read it. Write a policy about private tools under
-- their namespace (acme/secret_*), not as a bare glob (*secret*), which everyone reads.
--
-- What a policy does is unchanged: the gate (check_call) and request_approval read every
-- policy as their owner, so a policy applies to a call whether or not the caller may read
-- it, and the caller then learns the pattern that holds the call (the answer names it) only
-- for a tool it may read. approval_required answers the same way: for a tool the caller may
-- read, the policy that applies to it; otherwise only one the caller may read.

-- The namespace a pattern belongs to: the part before the first '/', else public.
create function kiwi_internal.approval_policy_namespace(p_pattern text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case when strpos(p_pattern, '/') > 0 then split_part(p_pattern, '/', 1) else 'public' end
$$;
revoke execute on function kiwi_internal.approval_policy_namespace(text) from public;
-- Called by the read policy below (evaluated as the reader) and by approval_required.
grant execute on function kiwi_internal.approval_policy_namespace(text) to authenticated, service_role;

-- The read policy replaces the one 270_approvals.sql once had (everyone read all).
create policy "admins and members of a pattern's namespace read policies"
  on public.approval_policies for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin())
         or kiwi_internal.approval_policy_namespace(pattern) = 'public'
         or kiwi_internal.approval_policy_namespace(pattern) = any ((select kiwi_internal.my_namespaces())::text[]));

-- Whether calls of p_tool_id need approval, as the gate will decide for this caller: for a
-- tool the caller may read, the policy that applies (read as the owner, whoever may read
-- the policy row); for any other name, only a policy the caller may read (a private tool's
-- policy says nothing to a stranger, as the tool itself says nothing).
create function kiwi_internal.approval_required(p_tool_id text) returns jsonb
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_ref    text := kiwi_internal.normalize_ref(p_tool_id);
  v_tool   public.tools := kiwi_internal.readable_tool(p_tool_id);
  v_policy public.approval_policies := kiwi_internal.approval_policy_for(v_ref);
begin
  if v_policy.id is not null and v_tool.id is null
     and not (kiwi_internal.caller_is_admin()
              or kiwi_internal.approval_policy_namespace(v_policy.pattern) = 'public'
              or kiwi_internal.approval_policy_namespace(v_policy.pattern) = any (kiwi_internal.my_namespaces())) then
    v_policy := null;
  end if;
  if v_policy.id is null then
    return jsonb_build_object('required', false, 'tool_id', v_ref);
  end if;
  return jsonb_build_object('required', true, 'tool_id', v_ref, 'policy', v_policy.pattern,
                            'policy_id', v_policy.id, 'ttl_seconds', v_policy.ttl_seconds);
end
$$;
revoke execute on function kiwi_internal.approval_required(text) from public, anon;
-- Takes the caller from the session only (readable_tool, caller_is_admin, my_namespaces).
grant execute on function kiwi_internal.approval_required(text) to authenticated, service_role;
