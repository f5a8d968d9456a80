-- An admin-published element may widen the sandbox. The primitive closes everything
-- (network [], no host paths, its limits); a runtime an admin publishes, or a member
-- publishes with an admin's approval of its content, merges its sandbox like the rest of
-- config, the child winning, and so may open the network, mount paths and raise limits, for
-- itself and every tool on it. The environment steps' sandbox (config.environment.sandbox)
-- is the merge of the admin-published elements': python_runtime's installs reach PyPI,
-- its tools' runs do not.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(7);
select tests.make_acme();

select is(resolve_execution_plan('format_bytes') #> '{config,sandbox}',
  '{"network": [], "fs": {"read": [], "write": []},
    "limits": {"memory_mb": 1024, "pids": 256, "cpu_s": 300, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'a seeded tool runs in the primitive''s sandbox: no network, no host paths, its limits');
select is(resolve_execution_plan('format_bytes') #> '{config,environment,sandbox}',
  '{"network": ["pypi.org:443", "files.pythonhosted.org:443"]}'::jsonb,
  'while python_runtime''s environment steps reach the package index');

-- an admin's runtime widens everything
select tests.publish('acme/wide_runtime', 'runtime', 'subprocess', '1.0.0',
  '{"command": "bash", "args": ["{entrypoint}"],
    "sandbox": {"network": ["api.example:443"], "fs": {"read": ["/opt/models"], "write": ["${HOME}/.cache/wide"]},
                "limits": {"memory_mb": 8192, "cpu_s": 3600}},
    "environment": {"steps": [{"command": "true"}], "sandbox": {"network": ["mirror.example:443"]}}}');
select tests.publish('acme/wide_script', 'script', 'acme/wide_runtime');
select is(resolve_execution_plan('acme/wide_script') #> '{config,sandbox}',
  '{"network": ["api.example:443"], "fs": {"read": ["/opt/models"], "write": ["${HOME}/.cache/wide"]},
    "limits": {"memory_mb": 8192, "pids": 256, "cpu_s": 3600, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'an admin''s runtime opens the network, mounts paths and raises limits for the tools on it');
select is(resolve_execution_plan('acme/wide_script') #> '{config,environment,sandbox}',
  '{"network": ["mirror.example:443"]}'::jsonb, 'and sets its environment steps'' sandbox');

-- a member's runtime, published with an admin's approval of its content, is admin-published
create temporary table t (id uuid);
grant all on t to authenticated, service_role;
create function tests.member_runtime() returns jsonb language sql as $$
  select '{"tool_id": "acme/approved_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
           "config": {"command": "bash", "args": ["{entrypoint}"], "sandbox": {"network": ["approved.example:443"]}}}'::jsonb $$;
grant execute on function tests.member_runtime() to authenticated;
select tests.act_as_user('member');
insert into t select (request_publish_approval(tests.member_runtime(), '[]', 'member-session') ->> 'id')::uuid;
select tests.act_as_user('service_role');
select decide_approval((select id from t), true, 'reviewed');
select tests.act_as_user('member');
select publish_tool_version(tests.member_runtime(), '[]', null, null, (select id from t));
select tests.act_as_admin();
select is((select v.admin_published from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'acme/approved_runtime'),
  true, 'a version published with an admin''s approval is admin_published');
select is(resolve_execution_plan('acme/approved_runtime') #> '{config,sandbox,network}', '["approved.example:443"]'::jsonb,
  'and widens as an admin''s does');

-- a member's script asking for more on top of an admin's runtime gets only what it allows
select tests.act_as_user('member');
select is(preview_execution_plan('{"tool_id": "acme/greedy", "tool_type": "script", "executor": "acme/wide_runtime",
                                   "version": "0.1.0", "config": {"sandbox": {"network": ["api.example:443", "evil.example:443"],
                                   "fs": {"write": ["${HOME}/.cache/wide/sub", "${HOME}/.ssh"]}}}}',
                                 '[{"path": "main.sh", "content_text": "echo"}]') #> '{config,sandbox}',
  '{"network": ["api.example:443"], "fs": {"read": ["/opt/models"], "write": ["${HOME}/.cache/wide/sub"]},
    "limits": {"memory_mb": 8192, "pids": 256, "cpu_s": 3600, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'a member''s tool on it keeps only what the admin''s runtime allows');

select * from finish();
rollback;
