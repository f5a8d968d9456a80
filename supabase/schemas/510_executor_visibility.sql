-- An executor is at least as visible as every tool on it. A public tool could run on a
-- private runtime, and its plan, chain and search rows showed the runtime's name to
-- everyone. Visibility is ordered public > unlisted > private (tools.visibility_values), and
-- a tool's visibility and executor follow its latest version (refresh_latest). So whenever a
-- tool's row gets a visibility or an executor (its first publish, a new latest version, a
-- yank that makes an older version latest), the tool must be no more visible than its
-- executor, and no tool on it more visible than it. Otherwise the write is refused (22023),
-- naming both tools and their visibility: publish changes nothing.
--
-- Rows older registries took are left as they are (the chain walker still hides a private
-- element from whoever cannot read it). An admin who must write such a row (a restore, or a
-- test of how the walker treats one) says so for one transaction:
--   set local kiwi.allow_less_visible_executor = on;
-- which nobody else can use: the setting is read only when the caller is an admin.

create function kiwi_internal.visibility_rank(p_visibility text) returns int
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case p_visibility when 'public' then 2 when 'unlisted' then 1 else 0 end
$$;
revoke execute on function kiwi_internal.visibility_rank(text) from public;
grant execute on function kiwi_internal.visibility_rank(text) to anon, authenticated, service_role;

-- Security definer: the tools on an executor may be in namespaces the writer cannot list;
-- the message names the first, which is unlisted or public.
create function kiwi_internal.tools_visibility_check() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_exec  public.tools;
  v_above public.tools;
begin
  if current_setting('kiwi.allow_less_visible_executor', true) = 'on' and kiwi_internal.caller_is_admin() then
    return null;
  end if;
  if new.executor_id is not null then
    select * into v_exec from public.tools t where t.ref = new.executor_id;
    if found and kiwi_internal.visibility_rank(new.visibility) > kiwi_internal.visibility_rank(v_exec.visibility) then
      raise exception 'visibility: a % tool ("%") cannot run on a % executor ("%"): an executor must be at least as visible as the tools on it (public > unlisted > private)',
        new.visibility, new.ref, v_exec.visibility, v_exec.ref
        using errcode = '22023',
              hint = format('make "%s" %s (visibility: %s), or publish "%s" with a wider visibility first',
                            new.ref, v_exec.visibility, v_exec.visibility, v_exec.ref);
    end if;
  end if;
  if tg_op = 'UPDATE' and kiwi_internal.visibility_rank(new.visibility) < kiwi_internal.visibility_rank(old.visibility) then
    select * into v_above from public.tools t
     where t.executor_id = new.ref
       and kiwi_internal.visibility_rank(t.visibility) > kiwi_internal.visibility_rank(new.visibility)
     order by t.ref limit 1;
    if found then
      raise exception 'visibility: "%" cannot become %: the % tool "%" runs on it, and an executor must be at least as visible as the tools on it (public > unlisted > private)',
        new.ref, new.visibility, v_above.visibility, v_above.ref   -- unlisted or public: readable by exact reference
        using errcode = '22023', hint = 'narrow the tools on it first, or keep its visibility';
    end if;
  end if;
  return null;
end
$$;
revoke execute on function kiwi_internal.tools_visibility_check() from public;

create trigger tools_visibility_check
  after insert or update of visibility, executor_id on public.tools
  for each row execute function kiwi_internal.tools_visibility_check();
