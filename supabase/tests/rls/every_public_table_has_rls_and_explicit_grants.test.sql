-- The grants half of the matrix: which API role holds which privilege on every table
-- and RPC of schema public, and that nothing is left to PUBLIC or to defaults. The
-- behaviour behind each grant (what RLS lets each caller see and do) is tested per
-- table in *_matrix_by_role.test.sql.
begin;
\ir ../_setup.sql
select plan(121);
select tests.make_acme();

-- The tables of the matrix: a new table must join it (and this list).
select tables_are('public',
  array['namespaces', 'namespace_members', 'tools', 'tool_versions', 'tool_version_files', 'tool_type_rules',
        'tool_version_signatures', 'tool_runs', 'audit_log', 'rate_limits', 'registry_limits',
        'registry_quotas', 'execution_contexts',
        'approval_policies', 'approvals', 'namespace_secret_grants',
        'queued_runs', 'queued_run_events', 'queue_workers', 'schedules', 'run_checkpoints', 'model_prices',
        'thread_usage', 'mcp_tool_changes'],
  'schema public holds exactly the tables of the RLS matrix');
select is_empty(
  $$select c.relname from pg_catalog.pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relrowsecurity$$,
  'row level security is enabled on every table in public');
select is_empty(
  $$select c.relname from pg_catalog.pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relkind = 'v'
       and not coalesce('security_invoker=true' = any (c.reloptions), false)$$,
  'every view in public is security_invoker, so RLS applies to its readers');
select is_empty(
  $$select c.relname from pg_catalog.pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v')
       and has_table_privilege('public', c.oid, 'select, insert, update, delete, truncate, references, trigger')$$,
  'PUBLIC holds no privilege on any table or view in public');
select is_empty(
  $$select p.oid::regprocedure::text from pg_catalog.pg_proc p
     where p.pronamespace = 'public'::regnamespace and has_function_privilege('public', p.oid, 'execute')$$,
  'PUBLIC may execute no function in public: every grant is explicit');
select is_empty(
  $$select p.oid::regprocedure::text from pg_catalog.pg_proc p
     where p.pronamespace = 'public'::regnamespace and p.prosecdef$$,
  'every function in public is security invoker');

-- Table privileges, role by role (authenticated covers owner, member and stranger).
select table_privs_are('public', 'namespaces', 'anon', array[]::text[],
  'anon holds no table-wide privilege on namespaces: it selects them column by column');
select column_privs_are('public', 'namespaces', 'namespace', 'anon', array['SELECT'],
  'anon reads the namespace directory');
select column_privs_are('public', 'namespaces', 'owner_id', 'anon', array[]::text[],
  'anon cannot read who owns a namespace (a user id)');
select table_privs_are('public', 'namespaces', 'authenticated', array['SELECT', 'DELETE'],
  'authenticated may select and delete namespaces (insert and update are granted per column)');
select table_privs_are('public', 'namespaces', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on namespaces');
select table_privs_are('public', 'namespace_members', 'anon', array[]::text[],
  'anon holds no privilege on namespace_members');
select table_privs_are('public', 'namespace_members', 'authenticated', array['SELECT', 'DELETE'],
  'authenticated may select and delete memberships (insert is granted per column)');
select table_privs_are('public', 'namespace_members', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on namespace_members');
select table_privs_are('public', 'tools', 'anon', array[]::text[],
  'anon holds no table-wide privilege on tools: it selects them column by column');
select column_privs_are('public', 'tools', 'ref', 'anon', array['SELECT'],
  'anon reads tools');
select column_privs_are('public', 'tools', 'owner_id', 'anon', array[]::text[],
  'anon cannot read who published a tool (a user id)');
select table_privs_are('public', 'tools', 'authenticated', array['SELECT'],
  'authenticated may only select tools: writes go through publish_tool_version');
select table_privs_are('public', 'tools', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on tools');
select table_privs_are('public', 'tool_versions', 'anon', array[]::text[],
  'anon holds no table-wide privilege on tool_versions: it selects them column by column');
select column_privs_are('public', 'tool_versions', 'manifest', 'anon', array['SELECT'],
  'anon reads versions');
select column_privs_are('public', 'tool_versions', 'published_by', 'anon', array[]::text[],
  'anon cannot read who published a version (a user id)');
select table_privs_are('public', 'tool_versions', 'authenticated', array['SELECT'],
  'authenticated may only select tool_versions');
select table_privs_are('public', 'tool_versions', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on tool_versions');
select table_privs_are('public', 'tool_version_signatures', 'anon', array[]::text[],
  'anon holds no table-wide privilege on tool_version_signatures: it selects them column by column');
select column_privs_are('public', 'tool_version_signatures', 'signature', 'anon', array['SELECT'],
  'anon reads signatures');
select column_privs_are('public', 'tool_version_signatures', 'signed_by', 'anon', array[]::text[],
  'anon cannot read who signed a version (a user id)');
select table_privs_are('public', 'tool_version_signatures', 'authenticated', array['SELECT'],
  'authenticated may only select tool_version_signatures: signing goes through sign_tool_version');
select table_privs_are('public', 'tool_version_signatures', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on tool_version_signatures');
select table_privs_are('public', 'tool_version_files', 'anon', array['SELECT'],
  'anon may only select tool_version_files');
select table_privs_are('public', 'tool_version_files', 'authenticated', array['SELECT'],
  'authenticated may only select tool_version_files');
select table_privs_are('public', 'tool_version_files', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on tool_version_files');
select table_privs_are('public', 'tool_type_rules', 'anon', array['SELECT'],
  'anon may only select tool_type_rules');
select table_privs_are('public', 'tool_type_rules', 'authenticated', array['SELECT'],
  'authenticated may only select tool_type_rules');
select table_privs_are('public', 'tool_type_rules', 'service_role',
  array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'],
  'service_role holds every privilege on tool_type_rules');
select table_privs_are('public', 'tool_runs', 'anon', array[]::text[],
  'anon holds no privilege on tool_runs');
select table_privs_are('public', 'tool_runs', 'authenticated', array['SELECT'],
  'authenticated may only select tool_runs: runs are written through record_run');
select table_privs_are('public', 'tool_runs', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete runs (retention), never write them directly');
select table_privs_are('public', 'audit_log', 'anon', array[]::text[],
  'anon holds no privilege on audit_log');
select table_privs_are('public', 'audit_log', 'authenticated', array['SELECT'],
  'authenticated may only select audit_log: calls are audited through record_audit');
select table_privs_are('public', 'audit_log', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete audit rows (retention), never write them directly');
select table_privs_are('public', 'rate_limits', 'anon', array[]::text[],
  'anon holds no privilege on rate_limits');
select table_privs_are('public', 'rate_limits', 'authenticated', array['SELECT'],
  'authenticated may only read rate_limits');
select table_privs_are('public', 'rate_limits', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  'service_role declares, changes and removes rate limits');
select table_privs_are('public', 'registry_limits', 'anon', array['SELECT'],
  'anon may only read registry_limits');
select table_privs_are('public', 'registry_limits', 'authenticated', array['SELECT'],
  'authenticated may only read registry_limits');
select table_privs_are('public', 'registry_limits', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  'service_role sets, changes and removes registry limits');
select table_privs_are('public', 'registry_quotas', 'anon', array['SELECT'],
  'anon may only read registry_quotas');
select table_privs_are('public', 'registry_quotas', 'authenticated', array['SELECT'],
  'authenticated may only read registry_quotas');
select table_privs_are('public', 'registry_quotas', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  'service_role sets, changes and removes registry quotas');
-- the run queue (560-590): read through RLS, written only through its functions
select table_privs_are('public', 'queued_runs', 'anon', array[]::text[], 'anon holds no privilege on queued_runs');
select table_privs_are('public', 'queued_runs', 'authenticated', array['SELECT'],
  'authenticated may only select queued_runs: runs are queued through enqueue_run');
select table_privs_are('public', 'queued_runs', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete queued_runs');
select table_privs_are('public', 'queued_run_events', 'anon', array[]::text[],
  'anon holds no privilege on queued_run_events');
select table_privs_are('public', 'queued_run_events', 'authenticated', array['SELECT'],
  'authenticated may only select queued_run_events');
select table_privs_are('public', 'queued_run_events', 'service_role', array['SELECT'],
  'service_role may only select queued_run_events: workers write them through worker_event');
select table_privs_are('public', 'queue_workers', 'anon', array[]::text[], 'anon holds no privilege on queue_workers');
select table_privs_are('public', 'queue_workers', 'authenticated', array[]::text[],
  'authenticated holds no privilege on queue_workers');
select table_privs_are('public', 'queue_workers', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete queue_workers');
select table_privs_are('public', 'schedules', 'anon', array[]::text[], 'anon holds no privilege on schedules');
select table_privs_are('public', 'schedules', 'authenticated', array['SELECT'],
  'authenticated may only select schedules: they are written through add_schedule');
select table_privs_are('public', 'schedules', 'service_role', array['SELECT'],
  'service_role may only select schedules: they are written through add_schedule');
select table_privs_are('public', 'mcp_tool_changes', 'anon', array[]::text[], 'anon holds no privilege on mcp_tool_changes');
select table_privs_are('public', 'mcp_tool_changes', 'authenticated', array['SELECT'],
  'authenticated may only select held MCP tool changes: they are written through hold_mcp_tool_change');
select table_privs_are('public', 'mcp_tool_changes', 'service_role', array['SELECT'],
  'service_role may only select held MCP tool changes: they are decided through decide_mcp_tool_change');
select table_privs_are('public', 'execution_contexts', 'anon', array[]::text[],
  'anon holds no privilege on execution_contexts');
select table_privs_are('public', 'execution_contexts', 'authenticated', array['SELECT'],
  'authenticated may only select execution_contexts: contexts are opened through open_context');
select table_privs_are('public', 'execution_contexts', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete contexts (retention), never write them directly');
select table_privs_are('public', 'approval_policies', 'anon', array[]::text[],
  'anon holds no privilege on approval_policies');
select table_privs_are('public', 'approval_policies', 'authenticated', array['SELECT'],
  'authenticated may only read approval_policies');
select table_privs_are('public', 'approval_policies', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  'service_role declares, changes and removes approval policies');
select table_privs_are('public', 'approvals', 'anon', array[]::text[],
  'anon holds no privilege on approvals');
select table_privs_are('public', 'approvals', 'authenticated', array['SELECT'],
  'authenticated may only select approvals: they change through request/decide/use_approval');
select table_privs_are('public', 'approvals', 'service_role', array['SELECT', 'DELETE'],
  'service_role may select and delete approvals (retention), never write them directly');
select table_privs_are('public', 'namespace_secret_grants', 'anon', array[]::text[],
  'anon holds no privilege on namespace_secret_grants');
select table_privs_are('public', 'namespace_secret_grants', 'authenticated', array['SELECT'],
  'authenticated may only read namespace_secret_grants: admins grant through grant_secret');
select table_privs_are('public', 'namespace_secret_grants', 'service_role', array['SELECT', 'INSERT', 'DELETE'],
  'service_role grants and revokes variables, never changes a grant');

-- Column grants: what authenticated may write into namespaces and namespace_members.
select column_privs_are('public', 'namespaces', 'namespace', 'authenticated', array['SELECT', 'INSERT'],
  'authenticated may name a new namespace but never rename one');
select column_privs_are('public', 'namespaces', 'owner_id', 'authenticated', array['SELECT', 'INSERT'],
  'authenticated may set owner_id on insert but never change it');
select column_privs_are('public', 'namespaces', 'display_name', 'authenticated', array['SELECT', 'INSERT', 'UPDATE'],
  'authenticated may set and change display_name');
select column_privs_are('public', 'namespaces', 'description', 'authenticated', array['SELECT', 'INSERT', 'UPDATE'],
  'authenticated may set and change description');
select column_privs_are('public', 'namespaces', 'created_at', 'authenticated', array['SELECT'],
  'authenticated cannot write created_at of a namespace');
select column_privs_are('public', 'namespace_members', 'role', 'authenticated', array['SELECT', 'INSERT'],
  'authenticated may give a role when adding a member but never update it');
select column_privs_are('public', 'namespace_members', 'created_at', 'authenticated', array['SELECT'],
  'authenticated cannot write created_at of a membership');

-- RPCs: reading is for everyone, lifecycle changes need a signed-in caller.
select function_privs_are('public', 'resolve_executor_chain', array['text', 'text'], 'anon', array['EXECUTE'],
  'anon may resolve executor chains');
select function_privs_are('public', 'resolve_executor_chains_batch', array['text[]'], 'anon', array['EXECUTE'],
  'anon may resolve chains in batch');
select function_privs_are('public', 'resolve_execution_plan', array['text', 'text'], 'anon', array['EXECUTE'],
  'anon may ask for execution plans');
select function_privs_are('public', 'search_tools', array['text', 'text', 'text', 'integer', 'real[]', 'text'], 'anon', array['EXECUTE'],
  'anon may search tools');
select function_privs_are('public', 'publish_tool_version', array['jsonb', 'jsonb', 'text', 'jsonb', 'uuid'], 'anon', array['EXECUTE'],
  'anon may call publish_tool_version (which then refuses it)');
select function_privs_are('public', 'request_publish_approval', array['jsonb', 'jsonb', 'text'], 'anon', array['EXECUTE'],
  'anon may call request_publish_approval (which then refuses it: sign in)');
select function_privs_are('public', 'request_publish_approval', array['jsonb', 'jsonb', 'text'], 'authenticated', array['EXECUTE'],
  'authenticated may execute request_publish_approval');
select function_privs_are('public', 'yank_tool_version', array['text', 'text', 'text'], 'anon', array[]::text[],
  'anon may not execute yank_tool_version');
select function_privs_are('public', 'unyank_tool_version', array['text', 'text'], 'anon', array[]::text[],
  'anon may not execute unyank_tool_version');
select function_privs_are('public', 'deprecate_tool_version', array['text', 'text', 'text'], 'anon', array[]::text[],
  'anon may not execute deprecate_tool_version');
select function_privs_are('public', 'delete_tool', array['text'], 'anon', array[]::text[],
  'anon may not execute delete_tool');
select function_privs_are('public', 'publish_tool_version', array['jsonb', 'jsonb', 'text', 'jsonb', 'uuid'], 'authenticated', array['EXECUTE'],
  'authenticated may execute publish_tool_version');
select function_privs_are('public', 'yank_tool_version', array['text', 'text', 'text'], 'authenticated', array['EXECUTE'],
  'authenticated may execute yank_tool_version');
select function_privs_are('public', 'unyank_tool_version', array['text', 'text'], 'authenticated', array['EXECUTE'],
  'authenticated may execute unyank_tool_version');
select function_privs_are('public', 'deprecate_tool_version', array['text', 'text', 'text'], 'authenticated', array['EXECUTE'],
  'authenticated may execute deprecate_tool_version');
select function_privs_are('public', 'delete_tool', array['text'], 'authenticated', array['EXECUTE'],
  'authenticated may execute delete_tool');
select function_privs_are('public', 'delete_tool', array['text'], 'service_role', array['EXECUTE'],
  'service_role may execute delete_tool');
select function_privs_are('public', 'record_run', array['jsonb'], 'anon', array[]::text[],
  'anon may not execute record_run');
select function_privs_are('public', 'record_run', array['jsonb'], 'authenticated', array['EXECUTE'],
  'authenticated may execute record_run');
select function_privs_are('public', 'record_run', array['jsonb'], 'service_role', array['EXECUTE'],
  'service_role may execute record_run');
select function_privs_are('public', 'record_audit', array['jsonb'], 'anon', array['EXECUTE'],
  'anon may execute record_audit (as role:anon, within a budget a minute)');
select function_privs_are('public', 'record_audit', array['jsonb'], 'authenticated', array['EXECUTE'],
  'authenticated may execute record_audit');
select function_privs_are('public', 'take_rate_limit', array['text', 'text', 'text'], 'anon', array['EXECUTE'],
  'anon may take from rate limits (its own buckets: anonymous calls are limited too)');
select function_privs_are('public', 'check_call', array['jsonb'], 'anon', array['EXECUTE'],
  'anon may pass the gate (its own buckets, never an approval)');
select function_privs_are('public', 'sign_tool_version', array['text', 'text', 'text', 'text', 'text'], 'anon', array['EXECUTE'],
  'anon may call sign_tool_version (which then refuses it)');
select function_privs_are('public', 'record_runs', array['jsonb'], 'anon', array[]::text[],
  'anon may not execute record_runs');
select function_privs_are('public', 'record_runs', array['jsonb'], 'authenticated', array['EXECUTE'],
  'authenticated may execute record_runs');
select table_privs_are('public', 'model_prices', 'anon', array['SELECT'], 'anon may only read model_prices');
select table_privs_are('public', 'model_prices', 'authenticated', array['SELECT'],
  'authenticated may only read model_prices');
select table_privs_are('public', 'model_prices', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  'service_role changes model_prices (its policy: admins only)');
select table_privs_are('public', 'thread_usage', 'anon', array[]::text[], 'anon holds nothing on thread_usage');
select table_privs_are('public', 'thread_usage', 'authenticated', array['SELECT'],
  'authenticated may only read thread_usage (record_thread_usage writes it)');
select table_privs_are('public', 'thread_usage', 'service_role', array['SELECT', 'DELETE'],
  'service_role reads and deletes thread_usage');

select table_privs_are('public', 'run_checkpoints', 'anon', array[]::text[],
  'anon holds no privilege on run_checkpoints');
select table_privs_are('public', 'run_checkpoints', 'authenticated', array['SELECT', 'INSERT'],
  'authenticated may select and insert run_checkpoints (its own, by RLS) and update only restored_at');
select table_privs_are('public', 'run_checkpoints', 'service_role', array['SELECT', 'INSERT'],
  'service_role may select and insert run_checkpoints, and update only restored_at');
select function_privs_are('public', 'rollback_checkpoint', array['uuid'], 'anon', array[]::text[],
  'anon may not execute rollback_checkpoint');
select * from finish();
rollback;
