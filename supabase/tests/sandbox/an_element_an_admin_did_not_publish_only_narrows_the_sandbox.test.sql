-- An element an admin did not publish only narrows the sandbox. A plan's config.sandbox is
-- folded from the primitive up (410_sandbox_narrowing.sql): an admin's runtime
-- may open the network, host paths and limits; a member's script on it keeps only what the
-- runtime allows. Even a version whose manifest was written past publish (a restore, a
-- manual edit) cannot widen its plan, cached or computed live: a network entry not allowed
-- below is dropped, a path outside (or climbing out of) one allowed below too, a limit is
-- the lower of the two, an unknown key and a non-admin's environment.sandbox vanish. And a
-- runtime republished narrower narrows the tools already on it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(12);
select tests.make_acme();

-- an admin's runtime that opens a little
select tests.publish('acme/net_runtime', 'runtime', 'subprocess', '1.0.0',
  '{"command": "bash", "args": ["{entrypoint}"],
    "sandbox": {"network": ["api.example:443"], "fs": {"read": ["/data"], "write": ["/scratch"]},
                "limits": {"memory_mb": 2048}}}');
select is((select v.admin_published from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'acme/net_runtime'),
  true, 'a version an admin publishes is admin_published');

-- a member's script on it, asking for what the runtime allows and less
select tests.act_as_user('member');
select tests.publish('acme/narrow', 'script', 'acme/net_runtime', '1.0.0',
  '{"sandbox": {"network": ["api.example:443"], "fs": {"read": ["/data/sub", "/scratch/x"], "write": ["/scratch/out"]},
                "limits": {"memory_mb": 512}}}');
select is(resolve_execution_plan('acme/narrow') #> '{config,sandbox}',
  '{"network": ["api.example:443"], "fs": {"read": ["/data/sub", "/scratch/x"], "write": ["/scratch/out"]},
    "limits": {"memory_mb": 512, "pids": 256, "cpu_s": 300, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'a member''s script narrows within its runtime: paths under the allowed ones (a read under a write path too), a lower limit');
select tests.act_as_admin();
select is((select v.admin_published from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'acme/narrow'),
  false, 'a member''s version is not admin_published');

-- the same version, its manifest widened past publish
set local session_replication_role = replica;
update tool_versions v set manifest = jsonb_set(v.manifest, '{config}', $json${
    "sandbox": {"network": ["api.example:443", "evil.example:443"],
                "fs": {"read": ["/etc", "/data/../etc", "/data/${HOME}", "/data/ok", "/scratch"], "write": ["/data/w", "/scratch/w"]},
                "limits": {"memory_mb": 99999, "pids": 99999, "cpu_s": 1, "nice": -20},
                "privileged": true},
    "environment": {"sandbox": {"network": ["evil.example:443"]}}}$json$::jsonb)
  from tools t where t.id = v.tool_uuid and t.ref = 'acme/narrow';
update tool_versions v set content_hash = kiwi_internal.content_hash(v.manifest,
         (select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256)) from tool_version_files f where f.version_id = v.id))
  from tools t where t.id = v.tool_uuid and t.ref = 'acme/narrow';   -- a consistent row, as a restore would write it
set local session_replication_role = origin;
select kiwi_internal.rebuild_plans();

create function tests.widened_profile() returns jsonb language sql as $$
  select '{"network": ["api.example:443"], "fs": {"read": ["/data/ok", "/scratch"], "write": ["/scratch/w"]},
           "limits": {"memory_mb": 2048, "pids": 256, "cpu_s": 1, "file_mb": 512, "open_files": 1024}}'::jsonb $$;
grant execute on function tests.widened_profile() to anon, authenticated, service_role;

select is((select plan #> '{config,sandbox}' from kiwi_internal.plan_cache where tool_ref = 'acme/narrow'),
  tests.widened_profile(), 'the cached plan of a widened row keeps only what the runtime allows');
select tests.act_as_user('member');
select is(resolve_execution_plan('acme/narrow') #> '{config,sandbox}', tests.widened_profile(),
  'and so does the plan served from it');
select is(resolve_execution_plan('acme/narrow') #> '{config,environment}', null,
  'a non-admin''s environment.sandbox is dropped');
select tests.act_as_admin();
delete from kiwi_internal.plan_cache where tool_ref = 'acme/narrow';
select tests.act_as_user('stranger');
select is(resolve_execution_plan('acme/narrow') #> '{config,sandbox}', tests.widened_profile(),
  'a plan computed live narrows the same way');
select ok(not (resolve_execution_plan('acme/narrow') #> '{config,sandbox,network}') ? 'evil.example:443',
  'the network entry its runtime does not allow is gone');
select ok(not (resolve_execution_plan('acme/narrow') #> '{config,sandbox,fs,read}') ?| array['/etc', '/data/../etc', '/data/${HOME}'],
  'so are a path outside the allowed ones and paths that could climb out of one');

-- the same fold, from a preview: a member's local tool is not admin-published
select tests.act_as_user('member');
select is(preview_execution_plan('{"tool_id": "acme/local_wide", "tool_type": "script", "executor": "acme/net_runtime",
                                   "version": "0.1.0", "config": {"sandbox": {"network": ["evil.example:443"],
                                   "limits": {"memory_mb": 4096, "pids": 16}}}}',
                                 '[{"path": "main.sh", "content_text": "echo"}]') #> '{config,sandbox}',
  '{"network": [], "fs": {"read": ["/data"], "write": ["/scratch"]},
    "limits": {"memory_mb": 2048, "pids": 16, "cpu_s": 300, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'a member''s preview of a local tool narrows the same way');

-- the runtime republished narrower: the script on it is narrowed with it
select tests.act_as_admin();
select tests.publish('acme/net_runtime', 'runtime', 'subprocess', '1.1.0',
  '{"command": "bash", "args": ["{entrypoint}"], "sandbox": {"fs": {"read": ["/data"]}, "limits": {"memory_mb": 256}}}');
set constraints all immediate;
set constraints all deferred;
select is((select plan #> '{config,sandbox}' from kiwi_internal.plan_cache where tool_ref = 'acme/narrow'),
  '{"network": [], "fs": {"read": ["/data/ok"], "write": []},
    "limits": {"memory_mb": 256, "pids": 256, "cpu_s": 1, "file_mb": 512, "open_files": 1024}}'::jsonb,
  'a runtime republished narrower narrows the cached plans of the tools on it');
select tests.act_as_user('member');
select is(resolve_execution_plan('acme/narrow') #> '{config,sandbox,network}', '[]'::jsonb,
  'its network is closed again');

select * from finish();
rollback;
