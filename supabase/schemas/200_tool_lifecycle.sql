-- After publishing, a version may only be deprecated or yanked (and un-yanked); a tool
-- may be removed when nothing executes on it. Members of the tool's namespace and
-- admins may do so; primitives, runtimes, MCP servers, official and builtin tools and
-- anything in the public namespace only admins (kiwi_internal.refuse_command_write, the
-- rule publish applies too). A deprecated version still runs, warning with its message; a
-- yanked one runs only when asked for by its exact version (a pin), warning too: the plan
-- carries both (compute_plan, 130_execution_plan.sql).

-- The tool p_action (yank, unyank, deprecate, delete) may change, or the refusal.
create function kiwi_internal.writable_tool(p_tool_id text, p_action text) returns public.tools
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_tool public.tools;
begin
  select * into v_tool from public.tools t where t.ref = kiwi_internal.normalize_ref(p_tool_id);
  if not found or not kiwi_internal.can_read(v_tool.visibility, v_tool.namespace) then
    raise exception 'tool "%" not found', p_tool_id using errcode = 'PT404';
  end if;
  if not kiwi_internal.can_publish_to(v_tool.namespace) then
    raise exception 'you cannot change tool "%"', v_tool.ref
      using errcode = '42501',
            hint = case when v_tool.namespace = 'public'
                        then format('an admin %ss it (kiwi --admin %s ...), or ask an admin', p_action, p_action)
                        else 'only members of its namespace (and admins) can' end;
  end if;
  perform kiwi_internal.refuse_command_write(p_action, v_tool.ref, v_tool.namespace, v_tool.tool_type,
                                             v_tool.is_builtin, v_tool.is_official);
  return v_tool;
end
$$;
revoke execute on function kiwi_internal.writable_tool(text, text) from public;

create function kiwi_internal.set_version_status(p_tool_id text, p_version text, p_action text, p_message text)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_tool public.tools := kiwi_internal.writable_tool(p_tool_id, p_action);
  v_row  public.tool_versions;
begin
  update public.tool_versions v set
    is_yanked           = case p_action when 'yank' then true when 'unyank' then false else v.is_yanked end,
    yanked_reason       = case p_action when 'yank' then p_message when 'unyank' then null else v.yanked_reason end,
    yanked_at           = case p_action when 'yank' then now() when 'unyank' then null else v.yanked_at end,
    is_deprecated       = case p_action when 'deprecate' then true else v.is_deprecated end,
    deprecation_message = case p_action when 'deprecate' then p_message else v.deprecation_message end
   where v.tool_uuid = v_tool.id and v.version = p_version
  returning * into v_row;
  if not found then
    raise exception 'version % of tool "%" not found', p_version, v_tool.ref using errcode = 'PT404';
  end if;
  -- A plan carries its version's status (compute_plan: deprecated, yanked), for the runner's
  -- warnings: the cached plan of this version, if any, is rebuilt, and runners holding plans
  -- in memory drop them (the channel of 220_plan_notifications.sql), whether or
  -- not the latest version moved.
  if exists (select 1 from kiwi_internal.plan_cache pc where pc.version_uuid = v_row.id) then
    update kiwi_internal.plan_cache pc set plan = b.plan, built_at = now()
      from kiwi_internal.compute_plan(v_row.id, true, '{}') b
     where pc.version_uuid = v_row.id and b.error is null;
  end if;
  perform pg_notify('kiwi_plans', '');
  select * into v_tool from public.tools t where t.id = v_tool.id;
  return jsonb_build_object('tool_id', v_tool.ref, 'version', v_row.version,
                            'is_yanked', v_row.is_yanked, 'is_deprecated', v_row.is_deprecated,
                            'latest_version', v_tool.latest_version);
end
$$;
revoke execute on function kiwi_internal.set_version_status(text, text, text, text) from public;
-- Checks the caller itself (writable_tool); anon never may, and has no grant.
grant execute on function kiwi_internal.set_version_status(text, text, text, text) to authenticated, service_role;

create function public.yank_tool_version(p_tool_id text, p_version text, p_reason text default null)
  returns jsonb language plpgsql volatile set search_path = ''
as $$ begin return kiwi_internal.set_version_status(p_tool_id, p_version, 'yank', p_reason); end $$;
comment on function public.yank_tool_version(text, text, text) is
  'Withdraw a version: it stays readable by exact version but is never latest.';
revoke execute on function public.yank_tool_version(text, text, text) from public;
grant execute on function public.yank_tool_version(text, text, text) to authenticated, service_role;

create function public.unyank_tool_version(p_tool_id text, p_version text)
  returns jsonb language plpgsql volatile set search_path = ''
as $$ begin return kiwi_internal.set_version_status(p_tool_id, p_version, 'unyank', null); end $$;
revoke execute on function public.unyank_tool_version(text, text) from public;
grant execute on function public.unyank_tool_version(text, text) to authenticated, service_role;

create function public.deprecate_tool_version(p_tool_id text, p_version text, p_message text default null)
  returns jsonb language plpgsql volatile set search_path = ''
as $$ begin return kiwi_internal.set_version_status(p_tool_id, p_version, 'deprecate', p_message); end $$;
revoke execute on function public.deprecate_tool_version(text, text, text) from public;
grant execute on function public.deprecate_tool_version(text, text, text) to authenticated, service_role;

create function kiwi_internal.delete_tool(p_tool_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_tool public.tools := kiwi_internal.writable_tool(p_tool_id, 'delete');
  v_versions int;
begin
  select count(*) into v_versions from public.tool_versions v where v.tool_uuid = v_tool.id;
  delete from public.tools t where t.id = v_tool.id;   -- refused, naming them, if others execute on it
  return jsonb_build_object('tool_id', v_tool.ref, 'deleted', true, 'versions', v_versions);
end
$$;
revoke execute on function kiwi_internal.delete_tool(text) from public;
-- Checks the caller itself (writable_tool); anon never may, and has no grant.
grant execute on function kiwi_internal.delete_tool(text) to authenticated, service_role;

create function public.delete_tool(p_tool_id text)
  returns jsonb language plpgsql volatile set search_path = ''
as $$ begin return kiwi_internal.delete_tool(p_tool_id); end $$;
comment on function public.delete_tool(text) is 'Remove a tool and all its versions; refused while other tools execute on it.';
revoke execute on function public.delete_tool(text) from public;
grant execute on function public.delete_tool(text) to authenticated, service_role;
