-- MCP servers tell their connected agents when the registry changes (tools, prompts and
-- resources `list_changed`, `resources/updated`). Every change an agent could see (a
-- publish, a yank or deprecation, a new latest version, a changed name, description,
-- visibility or namespace, a deleted tool) notifies the channel `kiwi_registry`, delivered
-- at commit; runner/mcp_server/registry_events.py listens, debounces and fans out.
--
-- The payload names no tool: {"kind", "namespace", "visibility", "id"}, where kind is
-- tool | directive | knowledge, and id (the tool's uuid) is sent for knowledge only, so
-- that a subscription to one entry can be matched; a server resolved the subscribed URI to
-- that uuid as the subscriber. Any login can LISTEN on any channel, so a private tool's
-- reference never travels here. Payloads that are equal within a transaction are delivered
-- once, so a statement over many tools of one namespace sends one notification per kind.

create function kiwi_internal.registry_change(p_tool_type text, p_namespace text, p_visibility text, p_id uuid)
  returns text
  language sql immutable
  set search_path = ''
as $$
  select jsonb_build_object(
    'kind', case p_tool_type when 'directive' then 'directive' when 'knowledge' then 'knowledge' else 'tool' end,
    'namespace', p_namespace,
    'visibility', p_visibility,
    'id', case when p_tool_type = 'knowledge' then p_id end)::text
$$;
revoke execute on function kiwi_internal.registry_change(text, text, text, uuid) from public;

create function kiwi_internal.notify_registry_changed() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_tool public.tools;
begin
  if tg_table_name = 'tool_versions' then
    select * into v_tool from public.tools t where t.id = new.tool_uuid;
    if found then
      perform pg_notify('kiwi_registry',
        kiwi_internal.registry_change(v_tool.tool_type, v_tool.namespace, v_tool.visibility, v_tool.id));
    end if;
    return null;
  end if;
  if tg_op in ('UPDATE', 'DELETE') then  -- who could see it before
    perform pg_notify('kiwi_registry',
      kiwi_internal.registry_change(old.tool_type, old.namespace, old.visibility, old.id));
  end if;
  if tg_op in ('INSERT', 'UPDATE') then  -- who can see it now
    perform pg_notify('kiwi_registry',
      kiwi_internal.registry_change(new.tool_type, new.namespace, new.visibility, new.id));
  end if;
  return null;
end
$$;
revoke execute on function kiwi_internal.notify_registry_changed() from public;

create trigger tools_registry_changed
  after insert or delete on public.tools
  for each row execute function kiwi_internal.notify_registry_changed();

-- not run_count, download_count or the search columns: a run is no change to the registry
create trigger tools_registry_changed_update
  after update of namespace, tool_id, tool_type, name, description, visibility, latest_version on public.tools
  for each row
  when ((old.namespace, old.tool_id, old.tool_type, old.name, old.description, old.visibility, old.latest_version)
        is distinct from
        (new.namespace, new.tool_id, new.tool_type, new.name, new.description, new.visibility, new.latest_version))
  execute function kiwi_internal.notify_registry_changed();

create trigger tool_versions_registry_changed_insert
  after insert on public.tool_versions
  for each row execute function kiwi_internal.notify_registry_changed();

create trigger tool_versions_registry_changed_update
  after update of is_deprecated, deprecation_message, is_yanked, yanked_reason on public.tool_versions
  for each row
  when ((old.is_deprecated, old.deprecation_message, old.is_yanked, old.yanked_reason)
        is distinct from (new.is_deprecated, new.deprecation_message, new.is_yanked, new.yanked_reason))
  execute function kiwi_internal.notify_registry_changed();
