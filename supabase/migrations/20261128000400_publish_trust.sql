-- Publish holds a non-admin's config to what its executor chain's admins allowed: a config
-- that widens the sandbox (20261128000300_sandbox_narrowing.sql), sets the sandbox of
-- environment steps, or reads a variable of the runner's environment neither its chain's
-- admin-published elements read nor its namespace was granted
-- (20261128000200_secret_grants.sql) is refused (42501), naming each field and value, unless
-- an admin's approval of this very content is spent on it (request_publish_approval lists
-- them as the reasons an approval is needed). An admin's version, or one published with an
-- approval, is admin_published (20261128000100_admin_published.sql): it may widen, and
-- what it reads is read by every tool above it. The same check refuses a non-admin's
-- preview_execution_plan (20261128000500_preview_trust.sql).
--
-- kiwi_internal.publish and kiwi_internal.request_publish_approval are replaced here
-- (20261121001400_publish.sql, 20261121002400_approvals.sql): the same bodies, with the
-- check, the approval it allows, and admin_published recorded.

-- The plan of executor p_exec as the caller sees it; null when there is none or its chain
-- does not resolve (publish and preview refuse that in their own words).
create function kiwi_internal.executor_plan(p_exec text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  if p_exec is null then
    return null;
  end if;
  return kiwi_internal.execution_plan(p_exec);
exception when others then
  return null;
end
$$;
revoke execute on function kiwi_internal.executor_plan(text) from public;
grant execute on function kiwi_internal.executor_plan(text) to anon, authenticated, service_role;

-- What p_config (a non-admin's, for namespace p_namespace, on executor p_exec whose plan is
-- p_exec_plan) widens or reads beyond its chain and p_grants (the namespace's grants), one
-- message each. Empty: nothing.
create function kiwi_internal.trust_problems(p_config jsonb, p_exec_plan jsonb, p_exec text, p_namespace text,
                                             p_grants text[])
  returns text[]
  language sql immutable
  set search_path = ''
as $$
  select kiwi_internal.sandbox_problems(p_config -> 'sandbox', p_exec_plan #> '{config,sandbox}', 'config.sandbox', p_exec)
         || case when p_config #> '{environment,sandbox}' is not null
                 then array['config.environment.sandbox: only an admin-published runtime sets the sandbox of environment steps; only an admin may widen a sandbox']
                 else '{}'::text[] end
         || kiwi_internal.variable_problems(p_config,
              array(select jsonb_array_elements_text(kiwi_internal.json_list(p_exec_plan -> 'allowed_variables'))),
              p_grants, p_namespace)
$$;
revoke execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) from public;
grant execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) to anon, authenticated, service_role;

-- Refuse p_problems (trust_problems), if any, in one error.
create function kiwi_internal.refuse_trust(p_problems text[]) returns void
  language plpgsql immutable
  set search_path = ''
as $$
begin
  if cardinality(p_problems) > 0 then
    raise exception '%', array_to_string(p_problems, '; ')
      using errcode = '42501', detail = to_jsonb(p_problems)::text,
            hint = case when array_to_string(p_problems, ' ') like '%grant_secret%'
                        then 'an admin grants the variable to the namespace (select grant_secret(namespace, variable)) or publishes the tool (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)'
                        else 'an admin publishes it (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)' end;
  end if;
end
$$;
revoke execute on function kiwi_internal.refuse_trust(text[]) from public;
grant execute on function kiwi_internal.refuse_trust(text[]) to anon, authenticated, service_role;

create or replace function kiwi_internal.publish(p_manifest jsonb, p_files jsonb, p_manifest_yaml text, p_approval_id uuid)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_admin    boolean := kiwi_internal.caller_is_admin();
  v_uid      uuid := auth.uid();
  v_target   jsonb;
  v_contents jsonb;
  v_ns       text;
  v_tool_id  text;
  v_ref      text;
  v_version  text := p_manifest ->> 'version';
  v_exec     text;
  v_files    jsonb;
  v_hash     text;
  v_tool     public.tools;
  v_existing public.tool_versions;
  v_chain    kiwi_internal.chain_row[];
  v_official boolean := (p_manifest ->> 'is_official')::boolean;
  v_builtin  boolean := (p_manifest ->> 'is_builtin')::boolean;
  v_approval jsonb := '{}';
  v_said     jsonb := '{}';   -- {normalised: [...]} when publish rewrote old spellings of config keys
  v_trust    text[] := '{}';  -- what the config widens or reads that its chain's admins did not allow
  v_out      jsonb;
begin
  p_files := coalesce(p_files, '[]'::jsonb);
  v_target := kiwi_internal.publish_target(p_manifest, p_files);   -- valid, and who may publish where
  p_manifest := v_target -> 'manifest';   -- its config made canonical: what is stored and hashed
  if jsonb_array_length(v_target -> 'normalised') > 0 then
    v_said := jsonb_build_object('normalised', v_target -> 'normalised');
  end if;
  v_ns := v_target ->> 'namespace';
  v_tool_id := v_target ->> 'tool_id';
  v_ref := v_target ->> 'ref';
  if p_approval_id is null then
    perform kiwi_internal.refuse_command_write('publish', v_ref, v_ns, p_manifest ->> 'tool_type', v_builtin, v_official);
  end if;
  v_contents := kiwi_internal.publish_contents(p_manifest, p_files, v_ref);   -- executor, files, content hash
  v_exec := v_contents ->> 'executor';
  v_files := v_contents -> 'files';
  v_hash := v_contents ->> 'content_hash';
  if not v_admin then
    v_trust := kiwi_internal.trust_problems(p_manifest -> 'config', kiwi_internal.executor_plan(v_exec), v_exec, v_ns,
                 array(select g.variable from public.namespace_secret_grants g where g.namespace = v_ns));
  end if;

  -- Concurrent publishes to one tool take turns from here. The advisory lock comes
  -- first because a row lock cannot cover a tool that does not exist yet: two
  -- speculative inserts of one new tool would otherwise deadlock on the unique index
  -- when the first one updates its row (tests/test_concurrent_publish.py).
  perform pg_advisory_xact_lock(hashtext('kiwi.publish'), hashtext(v_ref));
  -- tools, versions and bytes per namespace and user (20261128030600_quotas.sql)
  perform kiwi_internal.check_publish_quotas(v_ns, v_ref, v_version, p_manifest, v_files, p_manifest_yaml);
  select * into v_tool from public.tools t where t.namespace = v_ns and t.tool_id = v_tool_id for update;
  if not found then
    insert into public.tools (namespace, tool_id, tool_type, executor_id, name, visibility, owner_id)
    values (v_ns, v_tool_id, p_manifest ->> 'tool_type', v_exec,
            coalesce(p_manifest ->> 'name', v_tool_id),
            -- no visibility given: public in `public`, private in anyone's own namespace
            coalesce(p_manifest ->> 'visibility', case when v_ns = 'public' then 'public' else 'private' end), v_uid)
    on conflict (namespace, tool_id) do nothing;
    select * into v_tool from public.tools t where t.namespace = v_ns and t.tool_id = v_tool_id for update;
  end if;
  if v_tool.tool_type <> (p_manifest ->> 'tool_type') then
    raise exception 'tool "%" is a %, not a %', v_ref, v_tool.tool_type, p_manifest ->> 'tool_type'
      using errcode = 'PT409', hint = 'a tool keeps its type; publish a new tool for another type';
  end if;
  -- the tool as it stands (an official tool stays the platform's whatever the manifest says)
  if p_approval_id is null then
    perform kiwi_internal.refuse_command_write('publish', v_ref, v_ns, v_tool.tool_type,
                                               v_tool.is_builtin, v_tool.is_official);
    perform kiwi_internal.refuse_trust(v_trust);
  elsif v_admin or (cardinality(kiwi_internal.command_write_reasons(v_ns, v_tool.tool_type,
                                  v_builtin or v_tool.is_builtin, v_official or v_tool.is_official)) = 0
                    and cardinality(v_trust) = 0) then
    raise exception 'approval_id is only for writes that need one: publishing tool "%" needs no approval%', v_ref,
      case when v_admin then ' (you are an admin)' else '' end
      using errcode = '22023', hint = 'publish it without an approval id; nothing was published';
  else   -- an admin's approval of this very content stands in for the admin
    v_approval := jsonb_build_object('approval_id',
      (kiwi_internal.spend_command_write_approval(p_approval_id, v_ref, v_hash)).id);
  end if;

  -- the same version again: a no-op when identical, refused when different
  select * into v_existing from public.tool_versions v where v.tool_uuid = v_tool.id and v.version = v_version;
  if found then
    if v_existing.content_hash = v_hash then
      return jsonb_build_object(
        'tool_id', v_ref, 'namespace', v_ns, 'version', v_version, 'content_hash', v_hash,
        'is_latest', v_existing.is_latest, 'latest_version', v_tool.latest_version,
        'created', false, 'unchanged', true) || v_approval || v_said;
    end if;
    raise exception 'version % of tool "%" is already published with different content', v_version, v_ref
      using errcode = 'PT409',
            detail = format('published content_hash %s, this content_hash %s', v_existing.content_hash, v_hash),
            hint = 'published versions are immutable: publish this as a new version';
  end if;

  insert into public.tool_versions (tool_uuid, version, executor_id, manifest, manifest_yaml,
                                    content_hash, changelog, published_by, admin_published)
  values (v_tool.id, v_version, v_exec, p_manifest, p_manifest_yaml, v_hash,
          p_manifest ->> 'changelog', v_uid, v_admin or v_approval ? 'approval_id')
  returning * into v_existing;

  insert into public.tool_version_files (version_id, path, media_type, sha256, size_bytes,
                                         is_entrypoint, content_text, storage_key)
  select v_existing.id, f ->> 'path', f ->> 'media_type', f ->> 'sha256', (f ->> 'size_bytes')::bigint,
         (f ->> 'is_entrypoint')::boolean, f ->> 'content_text', f ->> 'storage_key'
    from jsonb_array_elements(v_files) f;

  if (v_admin or v_approval ? 'approval_id') and (v_official is not null or v_builtin is not null) then
    update public.tools t set is_official = coalesce(v_official, t.is_official),
                              is_builtin  = coalesce(v_builtin, t.is_builtin)
     where t.id = v_tool.id;
  end if;

  v_chain := kiwi_internal.published_chain(v_ref, v_version, v_tool.tool_type);

  select * into v_tool from public.tools t where t.id = v_tool.id;
  v_out := jsonb_build_object(
    'tool_id', v_ref, 'namespace', v_ns, 'version', v_version, 'content_hash', v_hash,
    'is_latest', v_tool.latest_version = v_version, 'latest_version', v_tool.latest_version,
    'created', true, 'unchanged', false, 'files', jsonb_array_length(v_files),
    'executor_chain', (select jsonb_agg(c.tool_id order by c.depth) from unnest(v_chain) c)) || v_approval || v_said;
  -- a new latest version of an executor changes what every tool on it runs: say which
  if v_tool.tool_type in ('primitive', 'runtime', 'mcp_server') and v_tool.latest_version = v_version then
    v_out := v_out || kiwi_internal.dependents_of(v_ref);
  end if;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) from public;
grant execute on function kiwi_internal.publish(jsonb, jsonb, text, uuid) to anon, authenticated, service_role;

create or replace function kiwi_internal.request_publish_approval(p_manifest jsonb, p_files jsonb, p_session text)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_target   jsonb;
  v_hash     text;
  v_ref      text;
  v_why      text[];
  v_request  jsonb;
  v_problems text[];
  v_tool     public.tools;
  v_policy   public.approval_policies;
  v_exec     text;
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot request approvals' using errcode = '42501', hint = 'sign in';
  end if;
  p_files := coalesce(p_files, '[]'::jsonb);
  v_target := kiwi_internal.publish_target(p_manifest, p_files);
  p_manifest := v_target -> 'manifest';   -- its config made canonical, as publish will store it
  v_ref := v_target ->> 'ref';
  v_hash := kiwi_internal.publish_contents(p_manifest, p_files, v_ref) ->> 'content_hash';
  select * into v_tool from public.tools t
   where t.namespace = v_target ->> 'namespace' and t.tool_id = v_target ->> 'tool_id';
  v_why := kiwi_internal.command_write_reasons(v_target ->> 'namespace', p_manifest ->> 'tool_type',
             (p_manifest ->> 'is_builtin')::boolean or v_tool.is_builtin,
             (p_manifest ->> 'is_official')::boolean or v_tool.is_official);
  if not kiwi_internal.caller_is_admin() then   -- a sandbox it widens, a variable it reads ungranted
    v_exec := kiwi_internal.normalize_ref(p_manifest ->> 'executor');
    v_why := v_why || kiwi_internal.trust_problems(p_manifest -> 'config', kiwi_internal.executor_plan(v_exec), v_exec,
                        v_target ->> 'namespace',
                        array(select g.variable from public.namespace_secret_grants g
                               where g.namespace = v_target ->> 'namespace'));
  end if;
  if kiwi_internal.caller_is_admin() or cardinality(v_why) = 0 then
    raise exception 'publishing %@% needs no approval: publish it', v_ref, p_manifest ->> 'version'
      using errcode = 'PT409',
            hint = case when kiwi_internal.caller_is_admin() then 'you are an admin: kiwi --admin publish DIR'
                        else 'kiwi publish DIR (only runtimes, primitives, MCP servers, builtin or official tools, the public namespace, a wider sandbox and ungranted variables need an admin or an approval)' end;
  end if;
  if v_tool.id is not null and v_tool.tool_type <> (p_manifest ->> 'tool_type') then
    raise exception 'tool "%" is a %, not a %', v_ref, v_tool.tool_type, p_manifest ->> 'tool_type'
      using errcode = 'PT409', hint = 'a tool keeps its type; publish a new tool for another type';
  end if;
  if exists (select 1 from public.tool_versions v where v.tool_uuid = v_tool.id
              and v.version = p_manifest ->> 'version' and v.content_hash <> v_hash) then
    raise exception 'version % of tool "%" is already published with different content', p_manifest ->> 'version', v_ref
      using errcode = 'PT409', hint = 'published versions are immutable: publish this as a new version';
  end if;
  v_request := jsonb_build_object('tool_id', v_ref, 'version', p_manifest ->> 'version', 'content_hash', v_hash,
                                  'params_sha256', v_hash, 'session_id', p_session);
  v_problems := kiwi_internal.approval_request_problems(v_request);   -- the session's form
  if cardinality(v_problems) > 0 then
    raise exception 'invalid approval request: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text, hint = 'nothing was recorded';
  end if;
  -- the target as the approval records it (the tool may not exist yet), and the rule's ttl
  v_tool := null;
  v_tool.ref := v_ref;
  v_tool.namespace := v_target ->> 'namespace';
  v_policy.pattern := 'command write';
  v_policy.ttl_seconds := 3600;
  return kiwi_internal.approval_json(kiwi_internal.file_approval(v_request, v_tool, v_policy))
         || jsonb_build_object('why', array_to_string(v_why, '; '));
end
$$;
revoke execute on function kiwi_internal.request_publish_approval(jsonb, jsonb, text) from public;
-- It checks the caller itself (anon refused; publish_target: may publish into the namespace).
grant execute on function kiwi_internal.request_publish_approval(jsonb, jsonb, text) to anon, authenticated, service_role;
