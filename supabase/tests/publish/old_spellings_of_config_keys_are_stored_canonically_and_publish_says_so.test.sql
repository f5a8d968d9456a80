-- Today's spellings are aliases the contracts declare (x-aliases): publish stores the
-- canonical keys of the design documents and lists what it rewrote.
begin;
\ir ../_setup.sql
select plan(13);

create temporary table published (name text primary key, answer jsonb) on commit drop;
create function tests.stored(p_ref text) returns jsonb language sql as $$
  select v.manifest -> 'config' from public.tool_versions v join public.tools t on t.id = v.tool_uuid
   where t.ref = p_ref and v.is_latest
$$;

insert into published values ('script', public.publish_tool_version(
  '{"tool_id": "old_script", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config": {"timeout_s": 5}}', '[{"path": "main.sh", "content_text": "echo"}]'));
select is(tests.stored('old_script'), '{"timeout": 5}'::jsonb, 'timeout_s: 5 is stored as timeout: 5');
select is((select answer -> 'normalised' from published where name = 'script'),
          '["config.timeout_s -> config.timeout"]'::jsonb, 'and the answer says so');
select is((select v.content_hash from public.tool_versions v join public.tools t on t.id = v.tool_uuid
            where t.ref = 'old_script'),
          (select kiwi_internal.content_hash(v.manifest,
                    (select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256))
                       from public.tool_version_files f where f.version_id = v.id))
             from public.tool_versions v join public.tools t on t.id = v.tool_uuid where t.ref = 'old_script'),
          'the canonical manifest is the one hashed');
select is((public.publish_tool_version(
  '{"tool_id": "old_script", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config": {"timeout_s": 5}}', '[{"path": "main.sh", "content_text": "echo"}]')) ->> 'unchanged', 'true',
  'publishing the same old spelling again is the same version');

insert into published values ('api', public.publish_tool_version(
  '{"tool_id": "old_api", "tool_type": "api", "executor": "http_client", "version": "1.0.0",
    "config": {"url": "http://example.test", "retry": {"attempts": 4, "backoff_s": 0.5, "on_status": [500, 503]}}}'));
select is(tests.stored('old_api'),
          '{"url": "http://example.test", "retries": 3, "retry_delay": 0.5, "retryable_statuses": [500, 503]}'::jsonb,
          'retry {attempts, backoff_s, on_status} becomes retries (attempts - 1), retry_delay, retryable_statuses');
select is((select answer -> 'normalised' from published where name = 'api'),
          '["config.retry -> config.retries, config.retry_delay, config.retryable_statuses"]'::jsonb,
          'and the answer names the keys it became');

insert into published values ('runtime', public.publish_tool_version(
  '{"tool_id": "old_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config": {"command": "bash", "args": ["{entrypoint}"],
               "validation": {"syntax_check": {"command": "bash", "args": ["-n", "{entrypoint}"], "timeout_s": 9},
                              "patterns": [{"pattern": "rm -rf /", "action": "block", "message": "not the root"},
                                           {"pattern": "eval", "action": "warn"}]}}}'));
select is(tests.stored('old_rt') -> 'validation',
          '{"rules": [{"type": "pattern_check", "patterns": {"dangerous": ["rm -rf /"]}, "block": true, "message": "not the root"},
                      {"type": "pattern_check", "patterns": {"dangerous": ["eval"]}, "warn_only": true},
                      {"type": "syntax_check", "command": "bash", "args": ["-n", "{entrypoint}"], "timeout": 9}]}'::jsonb,
          'validation {syntax_check, patterns} becomes rules in the documents'' format');
select is((select answer -> 'normalised' from published where name = 'runtime'),
          '["config.validation.patterns -> config.validation.rules", "config.validation.syntax_check -> config.validation.rules"]'::jsonb,
          'and the answer says which old keys became rules');

select throws_like($$select public.publish_tool_version(
  '{"tool_id": "both_keys", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config": {"timeout_s": 5, "timeout": 6}}', '[{"path": "main.sh", "content_text": "echo"}]')$$,
  '%config.timeout_s: an old spelling of timeout, which is given too: keep one%',
  'an old spelling beside its canonical key is refused');
select throws_like($$select public.publish_tool_version(
  '{"tool_id": "bad_action", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config": {"validation": {"patterns": [{"pattern": "x", "action": "explode"}]}}}')$$,
  '%config.validation.patterns[1].action: "explode" is not one of block, warn%',
  'an old value with no canonical meaning is refused by its path');

select is((public.preview_execution_plan(
  '{"tool_id": "old_local", "tool_type": "script", "executor": "bash_runtime", "version": "0.1.0",
    "config": {"timeout_s": 3}}', '[{"path": "main.sh", "content_text": "echo"}]')) #> '{manifest,config}',
  '{"timeout": 3}'::jsonb, 'a preview makes the config canonical as publish would');
select is((public.preview_execution_plan(
  '{"tool_id": "old_local", "tool_type": "script", "executor": "bash_runtime", "version": "0.1.0",
    "config": {"timeout_s": 3}}', '[{"path": "main.sh", "content_text": "echo"}]')) -> 'normalised',
  '["config.timeout_s -> config.timeout"]'::jsonb, 'and says so');

select throws_like($$select public.publish_tool_version(
  '{"tool_id": "signed_old", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config": {"timeout_s": 5}}', '[{"path": "main.sh", "content_text": "echo"}]', null,
  jsonb_build_object('content_hash', repeat('a', 64), 'public_key', 'x', 'signature', 'y'))$$,
  'the signature covers the manifest as written, but publish rewrites its config (config.timeout_s -> config.timeout)%',
  'a signature over the manifest as written is refused, saying why');

select * from finish();
rollback;
