-- Approvals: a call of a tool that a policy marks as needing approval does not run at
-- once. A pending approval is recorded (which tool, exact version and content_hash,
-- which session, who asked; the parameters only as their sha256 and size, never their
-- values) and the call answers with its id. A person decides (`kiwi approve ID`,
-- `kiwi deny ID`, or MCP execute action=approve|deny); the approved call, repeated with
-- the same parameters and approval_id=ID, runs ONCE. Every approval expires.
--
-- Policies are data (public.approval_policies): a pattern, a tool reference or an
-- MCP `server.tool` glob where `*` matches anything (`github.*`, `acme/deploy_*`, `*`),
-- and how long an approval stays valid (ttl_seconds). Admins (service_role) write them;
-- admins, and the members of the namespace a pattern names, read them (a pattern without a
-- namespace: every signed-in user), as 540_approval_policy_visibility.sql says.
--
-- Who decides (decide_approval): admins (service_role, the dashboard's postgres, the
-- runner's direct connection), or an owner of the tool's namespace who did not ask for
-- the call (nobody approves their own request, except admins). Tools of the `public`
-- namespace have no owner: only admins decide those. Optionally the decider names its
-- session (p_decider_session), and a call is never approved from the session that
-- requested it: an agent cannot approve itself through Kiwi's MCP server.
--
-- Who uses (use_approval): only the caller who requested it, for the same tool, the same
-- parameters (sha256), and the same content_hash (an approval that recorded one is refused
-- to a call that gives none: leaving it out must not skip the "tool changed" check);
-- approved, unexpired and unused. Using it marks it used in the same statement, so it runs once however many
-- processes race for it.
--
-- Who requests (request_approval, or the gate public.check_call): a signed-in caller, for
-- a tool it may read (anything else is "not found", so nobody files requests into the
-- queue of a namespace whose tools they cannot see, nor learns that a private tool
-- exists), and only when a policy covers the tool (otherwise there is nothing to approve).
-- The approval records the tool's namespace as the tools table has it: that namespace's
-- owners decide it.
--
-- Expiry is computed on read: an approval still pending or approved after expires_at
-- is shown (and refused) as expired; the stored status is not rewritten.
--
-- Publishing a write that chooses a command (kiwi_internal.refuse_command_write,
-- 160_publish.sql: a runtime, primitive or mcp_server, a builtin or official
-- tool, anything in `public`) needs an admin, or an approval of that very publish:
-- request_publish_approval records one (policy 'command write', tool_id and namespace the
-- target, content_hash and params_sha256 both the content hash the publish would have),
-- ONLY AN ADMIN decides it (not the namespace's owners: their namespace is not the point,
-- every tool running on the executor is), and publish_tool_version(..., p_approval_id)
-- spends it once, for exactly that content (spend_command_write_approval). It lifts only
-- the command rule: the caller must still be allowed to publish into the namespace.
-- Yanking and deleting such tools stay admin-only.

create table public.approval_policies (
  id           uuid primary key default gen_random_uuid(),
  pattern      text not null
               constraint approval_policies_pattern_format
               check (char_length(pattern) between 1 and 300 and pattern !~ '[[:cntrl:]]'),
  ttl_seconds  int not null default 3600
               constraint approval_policies_ttl_seconds_range check (ttl_seconds between 1 and 2592000),
  enabled      boolean not null default true,
  description  text constraint approval_policies_description_length check (char_length(description) <= 500),
  notifier     text constraint approval_policies_notifier_length check (char_length(notifier) between 1 and 300),
  created_at   timestamptz not null default now(),
  constraint approval_policies_pattern_key unique (pattern)
);
comment on table public.approval_policies is
  'Tools whose calls need approval: pattern is a tool reference or an MCP server.tool glob (* matches anything); an approval is valid for ttl_seconds. Written by admins (service_role); read by admins and by the members of the namespace the pattern names (the part before its first /; a pattern without one is read by every signed-in user).';
comment on column public.approval_policies.pattern is
  'A tool reference (acme/deploy), or a glob over references and MCP server.tool ids: github.*, acme/deploy_*, *.';
comment on column public.approval_policies.notifier is
  'A tool run (queued, as an admin) each time an approval is requested under this policy, with {event, text, approval}: an api tool posting to a chat webhook, for example (580_approval_resume.sql).';
comment on column public.approval_policies.ttl_seconds is
  'How long an approval requested under this policy may be decided and used (1 s to 30 days).';

alter table public.approval_policies enable row level security;
revoke all on table public.approval_policies from public, anon, authenticated, service_role;
grant select on table public.approval_policies to authenticated;
grant select, insert, update, delete on table public.approval_policies to service_role;

-- Patterns are stored as references are everywhere else: public/x is x.
create function kiwi_internal.approval_policies_normalize() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  new.pattern := kiwi_internal.normalize_ref(new.pattern);
  return new;
end
$$;
revoke execute on function kiwi_internal.approval_policies_normalize() from public;
create trigger approval_policies_normalize
  before insert or update on public.approval_policies
  for each row execute function kiwi_internal.approval_policies_normalize();

-- Who reads them: 540_approval_policy_visibility.sql (not every signed-in user:
-- a pattern may name a namespace's private tools).
create policy "admins declare approval policies"
  on public.approval_policies for insert to service_role
  with check ((select kiwi_internal.caller_is_admin()));
create policy "admins change approval policies"
  on public.approval_policies for update to service_role
  using ((select kiwi_internal.caller_is_admin()))
  with check ((select kiwi_internal.caller_is_admin()));
create policy "admins remove approval policies"
  on public.approval_policies for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

create table public.approvals (
  id             uuid primary key default gen_random_uuid(),
  tool_id        text not null
                 constraint approvals_tool_id_length check (char_length(tool_id) between 1 and 300),
  namespace      text not null,
  version        text constraint approvals_version_length check (char_length(version) <= 128),
  content_hash   text constraint approvals_content_hash_format check (content_hash ~ '^[0-9a-f]{64}$'),
  params_sha256  text not null constraint approvals_params_sha256_format check (params_sha256 ~ '^[0-9a-f]{64}$'),
  params_size    int constraint approvals_params_size_range check (params_size >= 0),
  session_id     text constraint approvals_session_id_length check (char_length(session_id) between 1 and 200),
  status         text not null default 'pending'
                 constraint approvals_status_values
                 check (status in ('pending', 'approved', 'denied', 'used', 'expired')),
  policy         text,
  requested_by   text not null,
  decided_by     text,
  requested_at   timestamptz not null default clock_timestamp(),
  decided_at     timestamptz,
  expires_at     timestamptz not null,
  used_at        timestamptz,
  reason         text constraint approvals_reason_length check (char_length(reason) <= 2000),
  notice         text constraint approvals_notice_length check (char_length(notice) <= 2000),
  notice_run_id  uuid,
  constraint approvals_expire_after_request check (expires_at > requested_at),
  constraint approvals_decided_have_a_decider
    check (status in ('pending', 'expired') or (decided_by is not null and decided_at is not null)),
  constraint approvals_used_have_a_time check ((status = 'used') = (used_at is not null))
);
comment on table public.approvals is
  'Calls waiting for, or given, approval: which tool (exact version and content_hash), who asked, in which session, the parameters as sha256 and size only. Written only through request_approval, decide_approval and use_approval. Requesters read their own, namespace owners those of their tools, admins all.';
comment on column public.approvals.status is
  'pending, approved, denied or used as stored; an approval past expires_at that is still pending or approved is expired (computed on read: see pending_approvals and the RPCs'' answers).';
comment on column public.approvals.requested_by is 'Set by the database (kiwi_internal.caller_identity()): the only caller who may use the approval.';
comment on column public.approvals.decided_by is 'Who approved or denied it, set by the database.';
comment on column public.approvals.policy is
  'The approval_policies pattern that required it, or ''command write'' for a publish only an admin may otherwise make (request_publish_approval; only admins decide those).';
comment on column public.approvals.reason is 'Why it was approved or denied, as the decider wrote it.';
comment on column public.approvals.notice is
  'What became of the policy''s notifier for this request (580_approval_resume.sql): queued, sent, failed and why, or not sent because the same call was notified moments ago; null when the policy names no notifier.';
comment on column public.approvals.notice_run_id is 'The queued run of the notifier told of this request, if one was queued.';

alter table public.approvals enable row level security;
revoke all on table public.approvals from public, anon, authenticated, service_role;
grant select on table public.approvals to authenticated;
grant select, delete on table public.approvals to service_role;
comment on column public.approvals.params_sha256 is 'sha256 (hex) of the parameters as the runner serialised them; never the values. use_approval requires the same.';

create index approvals_requested_by_idx on public.approvals (requested_by, requested_at desc);
create index approvals_pending_idx on public.approvals (expires_at) where status = 'pending';
create index approvals_namespace_idx on public.approvals (namespace);
create index approvals_notice_run_idx on public.approvals (notice_run_id) where notice_run_id is not null;

create policy "requesters, namespace owners and admins read approvals"
  on public.approvals for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin())
         or requested_by = (select kiwi_internal.caller_identity())
         or namespace = any ((select kiwi_internal.my_namespaces(true))::text[]));
create policy "admins delete approvals"
  on public.approvals for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- The status as a reader should see it: expired once past expires_at while still open.
create function kiwi_internal.approval_status(p_status text, p_expires_at timestamptz) returns text
  language sql stable
  set search_path = ''
as $$
  select case when p_status in ('pending', 'approved') and clock_timestamp() > p_expires_at then 'expired'
              else p_status end
$$;
revoke execute on function kiwi_internal.approval_status(text, timestamptz) from public;
grant execute on function kiwi_internal.approval_status(text, timestamptz) to authenticated, service_role;

-- The command that decides an approval: an admin's for a command write.
create function kiwi_internal.approval_decide_command(p_row public.approvals, p_verb text) returns text
  language sql immutable
  set search_path = ''
as $$
  select format('kiwi %s%s %s', case when p_row.policy = 'command write' then '--admin ' else '' end, p_verb, p_row.id)
$$;
revoke execute on function kiwi_internal.approval_decide_command(public.approvals, text) from public;
-- Called by approval_json and the pending_approvals view (security invoker: its readers).
grant execute on function kiwi_internal.approval_decide_command(public.approvals, text) to authenticated, service_role;

create function kiwi_internal.approval_json(p_row public.approvals) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select to_jsonb(p_row) || jsonb_build_object(
    'status', kiwi_internal.approval_status(p_row.status, p_row.expires_at),
    'decide', format('%s   (or: %s)', kiwi_internal.approval_decide_command(p_row, 'approve'),
                     kiwi_internal.approval_decide_command(p_row, 'deny')))
$$;
revoke execute on function kiwi_internal.approval_json(public.approvals) from public;
-- Called by the approval RPCs (security definer) only.
grant execute on function kiwi_internal.approval_json(public.approvals) to service_role;

-- The enabled policy that applies to a tool: the shortest ttl when several match.
-- Security invoker: the security definer functions that call it (request_approval,
-- check_call, approval_required) read every policy as their owner; anyone else calling it
-- sees only the policies they may read.
create function kiwi_internal.approval_policy_for(p_tool_id text) returns public.approval_policies
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_tool   text := kiwi_internal.normalize_ref(p_tool_id);
  v_policy public.approval_policies;
begin
  select * into v_policy
    from public.approval_policies p
   where p.enabled
     and v_tool like replace(replace(replace(replace(p.pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%')
   order by p.ttl_seconds, char_length(p.pattern) desc, p.pattern
   limit 1;
  return v_policy;
end
$$;
revoke execute on function kiwi_internal.approval_policy_for(text) from public;
grant execute on function kiwi_internal.approval_policy_for(text) to authenticated, service_role;

create function public.approval_required(p_tool_id text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  -- kiwi_internal.approval_required: 540_approval_policy_visibility.sql
  return kiwi_internal.approval_required(p_tool_id);
end
$$;
comment on function public.approval_required(text) is
  'Whether calls of p_tool_id (a tool reference or MCP server.tool) need approval, as the gate decides for you: {required, tool_id, policy (the matching pattern), policy_id, ttl_seconds}. For a tool you cannot read, only a policy you may read counts.';
revoke execute on function public.approval_required(text) from public;
grant execute on function public.approval_required(text) to authenticated, service_role;

-- The fields a call carries wherever it is named (an approval request, the gate's check):
-- what is wrong with each, in the same words everywhere.
create function kiwi_internal.call_field_problems(p jsonb) returns text[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  v_problems text[] := '{}';
begin
  if jsonb_typeof(p -> 'params_sha256') is distinct from 'string' or (p ->> 'params_sha256') !~ '^[0-9a-f]{64}$' then
    v_problems := v_problems || 'params_sha256: required, a sha256 in lower-case hex (64 characters)'::text;
  end if;
  if jsonb_typeof(p -> 'content_hash') not in ('string', 'null')
     or (jsonb_typeof(p -> 'content_hash') = 'string' and (p ->> 'content_hash') !~ '^[0-9a-f]{64}$') then
    v_problems := v_problems || 'content_hash: must be a sha256 in lower-case hex (64 characters)'::text;
  end if;
  if jsonb_typeof(p -> 'version') not in ('string', 'null') or char_length(p ->> 'version') > 128 then
    v_problems := v_problems || 'version: must be a string of at most 128 characters'::text;
  end if;
  if jsonb_typeof(p -> 'session_id') not in ('string', 'null')
     or (jsonb_typeof(p -> 'session_id') = 'string'
         and (btrim(p ->> 'session_id') = '' or char_length(p ->> 'session_id') > 200
              or (p ->> 'session_id') ~ '[[:cntrl:]]')) then
    v_problems := v_problems || 'session_id: at most 200 characters, no control characters'::text;
  end if;
  if jsonb_typeof(p -> 'params_size') not in ('number', 'null')
     or (jsonb_typeof(p -> 'params_size') = 'number'
         and ((p ->> 'params_size')::numeric <> trunc((p ->> 'params_size')::numeric)
              or (p ->> 'params_size')::numeric not between 0 and 2147483647)) then
    v_problems := v_problems || 'params_size: must be a whole number of bytes, 0 or more'::text;
  end if;
  return v_problems;
end
$$;
revoke execute on function kiwi_internal.call_field_problems(jsonb) from public;
-- Called by the problems checks of security-definer code only.
grant execute on function kiwi_internal.call_field_problems(jsonb) to service_role;

-- What is wrong with a request, each problem named by its field.
create function kiwi_internal.approval_request_problems(p jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_problems text[] := '{}';
  v_key      text;
  v_allowed  constant text[] := array['tool_id', 'version', 'content_hash', 'params_sha256', 'params_size',
                                      'session_id'];
begin
  if p is null or jsonb_typeof(p) <> 'object' then
    return array['request: must be a JSON object'];
  end if;
  for v_key in select jsonb_object_keys(p) loop
    if not v_key = any (v_allowed) then
      v_problems := v_problems || format('%s: unknown field (allowed: %s; parameter values are never taken)',
                                         v_key, array_to_string(v_allowed, ', '));
    end if;
  end loop;
  if jsonb_typeof(p -> 'tool_id') is distinct from 'string' or kiwi_internal.normalize_ref(p ->> 'tool_id') = ''
     or char_length(p ->> 'tool_id') > 300 or (p ->> 'tool_id') ~ '[[:cntrl:]]' then
    v_problems := v_problems || 'tool_id: required, the tool reference being called (at most 300 characters)'::text;
  end if;
  v_problems := v_problems || kiwi_internal.call_field_problems(p);
  return v_problems;
end
$$;
revoke execute on function kiwi_internal.approval_request_problems(jsonb) from public;
-- Called by request_approval (security definer) only.
grant execute on function kiwi_internal.approval_request_problems(jsonb) to service_role;

-- The tool the caller may read by this reference (public, unlisted, a member's private;
-- any for admins), or a row of nulls. Approvals are only ever for such a tool. Called by
-- security definer code, which reads every row and so must ask can_read.
create function kiwi_internal.readable_tool(p_ref text) returns public.tools
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_tool public.tools;
begin
  select * into v_tool from public.tools t
   where t.ref = kiwi_internal.normalize_ref(p_ref)
     and kiwi_internal.can_read(t.visibility, t.namespace);
  return v_tool;
end
$$;
revoke execute on function kiwi_internal.readable_tool(text) from public, anon, authenticated, service_role;

-- Record a pending approval of a call (p: a checked request) of p_tool under p_policy, as
-- requested by the caller; it expires after the policy's ttl. Shared by request_approval
-- and check_call, which have checked the caller, the tool and the policy.
create function kiwi_internal.file_approval(p jsonb, p_tool public.tools, p_policy public.approval_policies)
  returns public.approvals
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_row public.approvals;
begin
  insert into public.approvals (tool_id, namespace, version, content_hash, params_sha256, params_size, session_id,
                                policy, requested_by, requested_at, expires_at)
  values (p_tool.ref, p_tool.namespace, p ->> 'version', p ->> 'content_hash', p ->> 'params_sha256',
          (p ->> 'params_size')::int, p ->> 'session_id', p_policy.pattern, kiwi_internal.caller_identity(),
          v_now, v_now + make_interval(secs => p_policy.ttl_seconds))
  returning * into v_row;
  return v_row;
end
$$;
revoke execute on function kiwi_internal.file_approval(jsonb, public.tools, public.approval_policies)
  from public, anon, authenticated, service_role;

create function kiwi_internal.request_approval(p jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_problems text[] := kiwi_internal.approval_request_problems(p);
  v_tool     public.tools;
  v_policy   public.approval_policies;
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot request approvals' using errcode = '42501', hint = 'sign in';
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid approval request: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was recorded';
  end if;
  v_tool := kiwi_internal.readable_tool(p ->> 'tool_id');
  if v_tool.id is null then
    raise exception 'tool "%" not found', p ->> 'tool_id' using errcode = 'PT404',
      hint = 'approvals are requested for tools you can read: search_tools finds them';
  end if;
  v_policy := kiwi_internal.approval_policy_for(v_tool.ref);
  if v_policy.id is null then
    raise exception 'tool "%" needs no approval: no approval policy covers it, so there is nothing to approve', v_tool.ref
      using errcode = 'PT409', hint = 'run it without an approval; the policies are in public.approval_policies';
  end if;
  return kiwi_internal.approval_json(kiwi_internal.file_approval(p, v_tool, v_policy));
end
$$;
revoke execute on function kiwi_internal.request_approval(jsonb) from public;
grant execute on function kiwi_internal.request_approval(jsonb) to authenticated, service_role;

create function public.request_approval(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.request_approval(p);
end
$$;
comment on function public.request_approval(jsonb) is
  'Record a pending approval for a call: {tool_id, params_sha256 (required), version, content_hash, params_size, session_id}; never parameter values. The tool must be one you can read (PT404 otherwise) and a policy must cover it (PT409 otherwise); the approval belongs to the tool''s namespace and expires after the policy''s ttl_seconds. Returns the approval (id, status, expires_at, decide: how to decide it).';
revoke execute on function public.request_approval(jsonb) from public;
grant execute on function public.request_approval(jsonb) to authenticated, service_role;

create function kiwi_internal.decide_approval(p_id uuid, p_approve boolean, p_reason text, p_decider_session text)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row    public.approvals;
  v_me     text := kiwi_internal.caller_identity();
  v_admin  boolean := kiwi_internal.caller_is_admin();
  v_status text;
begin
  if p_id is null or p_approve is null then
    raise exception 'decide_approval: p_id and p_approve are required' using errcode = '22023';
  end if;
  if char_length(p_reason) > 2000 then
    raise exception 'p_reason: at most 2000 characters' using errcode = '22023';
  end if;
  select * into v_row from public.approvals a where a.id = p_id for update;
  if not found or not (v_admin or v_row.requested_by = v_me
                       or v_row.namespace = any (kiwi_internal.my_namespaces(true))) then
    raise exception 'approval % not found', p_id using errcode = 'PT404',
      hint = 'list pending approvals with `kiwi approvals` (select * from pending_approvals)';
  end if;
  if v_row.policy = 'command write' and not v_admin then
    raise exception 'only an admin decides approval % (publishing %@%: a write that chooses a command)',
      p_id, v_row.tool_id, v_row.version
      using errcode = '42501',
            hint = 'namespace owners do not decide these; an admin does: kiwi --admin approve ' || p_id;
  end if;
  if not (v_admin or (v_row.namespace = any (kiwi_internal.my_namespaces(true)) and v_row.requested_by <> v_me)) then
    raise exception 'you cannot decide approval % of %', p_id, v_row.tool_id using errcode = '42501',
      hint = 'an owner of the tool''s namespace (not the requester) or an admin decides';
  end if;
  if p_approve and p_decider_session is not null and v_row.session_id = p_decider_session then
    raise exception 'approval % cannot be approved from the session that requested it', p_id
      using errcode = '42501', hint = 'a person approves it: kiwi approve ' || p_id;
  end if;
  v_status := kiwi_internal.approval_status(v_row.status, v_row.expires_at);
  if v_status <> 'pending' then
    raise exception 'approval % is %, not pending: it cannot be decided again', p_id, v_status
      using errcode = 'PT409',
      hint = case when v_status <> 'expired' then 'list pending approvals with `kiwi approvals`'
                  when v_row.policy = 'command write' then 'the requester asks again: kiwi publish DIR --request-approval'
                  else 'call the tool again for a new approval' end;
  end if;
  update public.approvals a
     set status = case when p_approve then 'approved' else 'denied' end,
         decided_by = v_me, decided_at = clock_timestamp(), reason = nullif(btrim(p_reason), '')
   where a.id = p_id
  returning * into v_row;
  return kiwi_internal.approval_json(v_row);
end
$$;
revoke execute on function kiwi_internal.decide_approval(uuid, boolean, text, text) from public;
grant execute on function kiwi_internal.decide_approval(uuid, boolean, text, text) to authenticated, service_role;

create function public.decide_approval(p_id uuid, p_approve boolean, p_reason text default null,
                                       p_decider_session text default null) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.decide_approval(p_id, p_approve, p_reason, p_decider_session);
end
$$;
comment on function public.decide_approval(uuid, boolean, text, text) is
  'Approve (p_approve true) or deny a pending approval, with an optional reason. Admins decide any; an owner of the tool''s namespace decides those of others. Never from the session that requested it (p_decider_session). Returns the approval.';
revoke execute on function public.decide_approval(uuid, boolean, text, text) from public;
grant execute on function public.decide_approval(uuid, boolean, text, text) to authenticated, service_role;

-- Why an approval as it stands cannot be used (pending, denied, expired, used), or null.
-- p_once says what one use is ("an approval runs one call").
create function kiwi_internal.approval_unusable(p_row public.approvals, p_once text) returns text
  language sql stable
  set search_path = ''
as $$
  select case kiwi_internal.approval_status(p_row.status, p_row.expires_at)
    when 'pending' then 'it is still pending: nobody has approved it yet'
    when 'denied' then 'it was denied' || coalesce(': ' || p_row.reason, '')
    when 'expired' then format('it expired at %s', p_row.expires_at)
    when 'used' then format('it was already used at %s: %s', p_row.used_at, p_once)
  end
$$;
revoke execute on function kiwi_internal.approval_unusable(public.approvals, text)
  from public, anon, authenticated, service_role;

-- Use approval p_id for one call: it must be the caller's, approved, unexpired, unused, for
-- the same tool and parameters (sha256) and the same content: when the approval recorded a
-- content_hash, p_content_hash must be that one (null is refused, not a pass). Marks it used and answers {approval}, or answers why not:
-- {refused: {message, errcode, hint}}. use_approval raises that; check_call returns it.
create function kiwi_internal.spend_approval(p_id uuid, p_tool_id text, p_params_sha256 text, p_content_hash text)
  returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row    public.approvals;
  v_status text;
  v_why    text;
begin
  select * into v_row from public.approvals a where a.id = p_id for update;
  if not found or v_row.requested_by <> kiwi_internal.caller_identity() then
    return jsonb_build_object('refused', jsonb_build_object(
      'message', format('approval %s not found', p_id), 'errcode', 'PT404',
      'hint', 'an approval is used by the caller who requested it; call the tool without approval_id for a new one'));
  end if;
  v_status := kiwi_internal.approval_status(v_row.status, v_row.expires_at);
  v_why := case
    when v_row.policy = 'command write' then format('it approves publishing %s, not a call', v_row.tool_id)
    when kiwi_internal.approval_unusable(v_row, 'an approval runs one call') is not null
      then kiwi_internal.approval_unusable(v_row, 'an approval runs one call')
    when v_row.tool_id <> kiwi_internal.normalize_ref(p_tool_id) then format('it is for %s, not %s', v_row.tool_id, p_tool_id)
    when p_params_sha256 is distinct from v_row.params_sha256 then 'it was given for different parameters'
    when v_row.content_hash is not null and p_content_hash is null
      then format('it approved content_hash %s, and the call gives none: give the content_hash of the version called',
                  v_row.content_hash)
    when v_row.content_hash is not null and p_content_hash <> v_row.content_hash
      then 'the tool changed since it was requested (another content_hash)'
  end;
  if v_why is not null then
    return jsonb_build_object('refused', jsonb_build_object(
      'message', format('approval %s cannot be used: %s', p_id, v_why), 'errcode', 'PT409',
      'hint', case v_status when 'pending' then 'a person approves it: kiwi approve ' || p_id
                            when 'approved' then 'call with exactly the approved tool and parameters'
                            else 'call the tool again without approval_id for a new approval' end));
  end if;
  update public.approvals a set status = 'used', used_at = clock_timestamp()
   where a.id = p_id
  returning * into v_row;
  return jsonb_build_object('approval', kiwi_internal.approval_json(v_row));
end
$$;
revoke execute on function kiwi_internal.spend_approval(uuid, text, text, text)
  from public, anon, authenticated, service_role;

create function kiwi_internal.use_approval(p_id uuid, p_tool_id text, p_params_sha256 text, p_content_hash text)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_used jsonb;
begin
  if p_id is null then
    raise exception 'use_approval: p_id is required' using errcode = '22023';
  end if;
  v_used := kiwi_internal.spend_approval(p_id, p_tool_id, p_params_sha256, p_content_hash);
  if v_used ? 'refused' then
    raise exception '%', v_used #>> '{refused,message}'
      using errcode = v_used #>> '{refused,errcode}', hint = v_used #>> '{refused,hint}';
  end if;
  return v_used -> 'approval';
end
$$;
revoke execute on function kiwi_internal.use_approval(uuid, text, text, text) from public;
grant execute on function kiwi_internal.use_approval(uuid, text, text, text) to authenticated, service_role;

create function public.use_approval(p_id uuid, p_tool_id text, p_params_sha256 text,
                                    p_content_hash text default null) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.use_approval(p_id, p_tool_id, p_params_sha256, p_content_hash);
end
$$;
comment on function public.use_approval(uuid, text, text, text) is
  'Use an approval for one call, atomically: it must be yours, approved, unexpired, unused, for the same tool and parameters (sha256) and the same content (p_content_hash: required when the approval recorded one, a null is refused); it is then marked used. Otherwise refused (PT409) saying why: pending, denied, expired, used, another tool, different parameters, other or no content.';
revoke execute on function public.use_approval(uuid, text, text, text) from public;
grant execute on function public.use_approval(uuid, text, text, text) to authenticated, service_role;

-- Spend approval p_id on publishing p_ref with content p_content_hash (called by
-- kiwi_internal.publish, 160_publish.sql, for a write the command rule would
-- refuse the caller): the caller's own, a 'command write' approval, approved (by an
-- admin: decide_approval lets no one else), unexpired, unused, for this tool and this
-- content. It is marked used, in the publish's transaction: a publish refused later
-- leaves it unused. Anything else raises, saying why; nothing is published.
create function kiwi_internal.spend_command_write_approval(p_id uuid, p_ref text, p_content_hash text)
  returns public.approvals
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row    public.approvals;
  v_status text;
  v_why    text;
begin
  select * into v_row from public.approvals a where a.id = p_id for update;
  if not found or v_row.requested_by <> kiwi_internal.caller_identity() then
    raise exception 'approval % not found', p_id using errcode = 'PT404',
      hint = 'an approval is used by the caller who requested it: kiwi publish DIR --request-approval files one';
  end if;
  v_status := kiwi_internal.approval_status(v_row.status, v_row.expires_at);
  v_why := coalesce(
    case when v_row.policy is distinct from 'command write' then format('it approves a call of %s, not a publish', v_row.tool_id) end,
    kiwi_internal.approval_unusable(v_row, 'an approval publishes once'),
    case when v_row.tool_id <> p_ref then format('it is for publishing %s, not %s', v_row.tool_id, p_ref)
         when v_row.content_hash is distinct from p_content_hash
           then format('it approved other content (%s@%s with content_hash %s), not this content_hash %s',
                       v_row.tool_id, v_row.version, v_row.content_hash, p_content_hash) end);
  if v_why is not null then
    raise exception 'approval % cannot be used: %', p_id, v_why
      using errcode = 'PT409',
            hint = case when v_row.policy is distinct from 'command write' then 'request one for the publish: kiwi publish DIR --request-approval'
                        when v_status = 'pending' then 'an admin approves it: kiwi --admin approve ' || p_id
                        when v_status = 'approved' then 'publish exactly the approved content, or request a new approval for this one (kiwi publish DIR --request-approval)'
                        else 'request a new approval: kiwi publish DIR --request-approval' end;
  end if;
  update public.approvals a set status = 'used', used_at = clock_timestamp()
   where a.id = p_id
  returning * into v_row;
  return v_row;
end
$$;
revoke execute on function kiwi_internal.spend_command_write_approval(uuid, text, text)
  from public, anon, authenticated, service_role;

-- Ask for an approval of publishing p_manifest and p_files, which the command rule refuses
-- the caller. Validated and named exactly as publish_tool_version would (publish_target,
-- publish_contents): the caller must be allowed to publish into the namespace, and the
-- approval names the content_hash the publish will have. A publish that needs no approval
-- (an ordinary tool, or an admin's) is refused: publish it.

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
revoke execute on function kiwi_internal.request_publish_approval(jsonb, jsonb, text) from public;
-- It checks the caller itself (anon refused; publish_target: may publish into the namespace).
grant execute on function kiwi_internal.request_publish_approval(jsonb, jsonb, text) to anon, authenticated, service_role;

create function public.request_publish_approval(p_manifest jsonb, p_files jsonb default '[]',
                                                p_session text default null) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.request_publish_approval(p_manifest, p_files, p_session);
end
$$;
comment on function public.request_publish_approval(jsonb, jsonb, text) is
  'Ask an admin to approve a publish only an admin may otherwise make (a runtime, primitive, MCP server, builtin or official tool, the public namespace), of exactly this manifest and files: validated as publish_tool_version validates, recorded as a pending approval (policy ''command write'', content_hash of what would be published) that expires in an hour. Only admins decide it (kiwi --admin approve ID); then publish_tool_version(..., p_approval_id => ID) publishes that content once. An ordinary publish needs none (PT409).';
revoke execute on function public.request_publish_approval(jsonb, jsonb, text) from public;
grant execute on function public.request_publish_approval(jsonb, jsonb, text) to anon, authenticated, service_role;

-- For the dashboard (and `kiwi approvals`): what is waiting for a decision, oldest first.
create view public.pending_approvals with (security_invoker = true) as
select a.id, a.tool_id, a.version, a.requested_by, a.session_id, a.requested_at, a.expires_at,
       round(extract(epoch from a.expires_at - clock_timestamp())::numeric, 0) as expires_in_s,
       a.policy, a.params_sha256, a.params_size, a.content_hash,
       kiwi_internal.approval_decide_command(a, 'approve') as approve,
       kiwi_internal.approval_decide_command(a, 'deny') as deny,
       a.notice
  from public.approvals a
 where kiwi_internal.approval_status(a.status, a.expires_at) = 'pending'
 order by a.requested_at, a.id;
comment on view public.pending_approvals is
  'Approvals you may read that wait for a decision and have not expired, oldest first, with the command that decides each and what became of its notifier (notice).';
grant select on public.pending_approvals to authenticated, service_role;
