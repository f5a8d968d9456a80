-- tools: the stable identity of a tool. Its descriptive columns mirror the latest
-- version's manifest (kiwi_internal.refresh_latest keeps them in step); `ref` is the
-- reference people write: tool_id in the public namespace, namespace/tool_id elsewhere.

-- The reference people write: tool_id in the public namespace, namespace/tool_id elsewhere.
create function kiwi_internal.tool_ref(p_namespace text, p_tool_id text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case when p_namespace = 'public' then p_tool_id else p_namespace || '/' || p_tool_id end
$$;
revoke execute on function kiwi_internal.tool_ref(text, text) from public;
grant execute on function kiwi_internal.tool_ref(text, text) to anon, authenticated, service_role;

create table public.tools (
  id             uuid primary key default gen_random_uuid(),
  namespace      text not null default 'public'
                 references public.namespaces (namespace) on update restrict on delete restrict,
  tool_id        text not null
                 constraint tool_id_format check (tool_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$'),
  ref            text generated always as (kiwi_internal.tool_ref(namespace, tool_id)) stored,
  tool_type      text not null references public.tool_type_rules (tool_type),
  executor_id    text,
  name           text not null,
  description    text not null default '',
  category       text,
  subcategory    text,
  tags           text[] not null default '{}',
  visibility     text not null default 'public'
                 constraint visibility_values check (visibility in ('public', 'unlisted', 'private')),
  is_official    boolean not null default false,
  is_builtin     boolean not null default false,
  owner_id       uuid,
  latest_version text,
  download_count bigint not null default 0,
  run_count      bigint not null default 0,
  search_vector  tsvector not null default ''::tsvector,  -- id, name, tags, description, category
  name_vector    tsvector not null default ''::tsvector,  -- id and name only: search's first tier
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  -- search_tools' ranked document and the text the embedding is computed from (search.sql)
  search_document  tsvector not null default ''::tsvector,
  search_text      text not null default '',
  search_text_hash text,           -- sha256 (hex) of search_text: the key of its embeddings
  constraint tools_namespace_tool_id_key unique (namespace, tool_id),
  constraint tools_ref_key unique (ref),
  constraint tools_executor_fkey foreign key (executor_id)
    references public.tools (ref) on update restrict on delete restrict
);
comment on table public.tools is
  'Every tool''s identity; descriptive columns follow its latest version. Written only through publish_tool_version.';
comment on column public.tools.ref is 'The reference people write: tool_id in the public namespace, namespace/tool_id elsewhere.';
comment on column public.tools.executor_id is 'The ref of the tool that executes this one (its latest version''s executor).';

alter table public.tools enable row level security;
revoke all on table public.tools from public, anon, authenticated;
-- anon reads every column but owner_id, a user id (see 040_namespaces.sql)
grant select (id, namespace, tool_id, ref, tool_type, executor_id, name, description, category, subcategory,
              tags, visibility, is_official, is_builtin, latest_version, download_count, run_count,
              search_vector, name_vector, created_at, updated_at, search_document)
  on table public.tools to anon;
grant select on table public.tools to authenticated;
grant all on table public.tools to service_role;
comment on column public.tools.search_document is
  'search_tools'' ranked document: id and name (A), tags (B), description and category (C), parameters (D), English.';
comment on column public.tools.search_text is
  'What the tool''s embedding is computed from: id and name as words, description, tags, parameter names.';
comment on column public.tools.search_text_hash is
  'sha256 (hex) of search_text: the key of its embeddings (kiwi_internal.search_embeddings).';

create index tools_executor_id_idx on public.tools (executor_id);
create index tools_tool_type_idx on public.tools (tool_type);
create index tools_popularity_idx on public.tools ((run_count + download_count) desc);

create policy "anyone reads public tools"
  on public.tools for select to anon
  using (visibility = 'public');
create policy "members also read their namespaces' tools"
  on public.tools for select to authenticated
  using (visibility = 'public' or namespace = any ((select kiwi_internal.my_namespaces())::text[]));

-- Whether the caller may read a tool by its exact reference: public and unlisted
-- tools, a member's private tools, everything for admins.
create function kiwi_internal.can_read(p_visibility text, p_namespace text) returns boolean
  language sql stable
  set search_path = ''
as $$
  select p_visibility <> 'private' or kiwi_internal.caller_is_admin()
         or p_namespace = any (kiwi_internal.my_namespaces())
$$;
revoke execute on function kiwi_internal.can_read(text, text) from public;
grant execute on function kiwi_internal.can_read(text, text) to anon, authenticated, service_role;

-- `public/x` and ` x ` mean `x`. plpgsql, not SQL: it runs on every resolution, and a
-- SQL function with a SET clause is re-planned in each query that calls it.
create function kiwi_internal.normalize_ref(p_ref text) returns text
  language plpgsql immutable strict parallel safe
  set search_path = ''
as $$
begin
  return case when btrim(p_ref) like 'public/%' then substr(btrim(p_ref), 8) else btrim(p_ref) end;
end
$$;
revoke execute on function kiwi_internal.normalize_ref(text) from public;
grant execute on function kiwi_internal.normalize_ref(text) to anon, authenticated, service_role;

-- The executor rules, shared by tools and tool_versions: the matrix in
-- tool_type_rules, an executor that exists, and no cycle. Reads bypass RLS so that a
-- rule cannot be dodged through what the caller happens to see.
create function kiwi_internal.check_executor(p_ref text, p_tool_type text, p_executor text)
  returns void
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_rule     public.tool_type_rules;
  v_exec     record;
  v_path     text[] := array[p_ref];
  v_next     text := p_executor;
begin
  select * into v_rule from public.tool_type_rules r where r.tool_type = p_tool_type;
  if not v_rule.requires_executor then
    if p_executor is not null then
      raise exception 'tool "%" is a %: it has no executor, but names "%"', p_ref, p_tool_type, p_executor
        using errcode = '23514';
    end if;
    return;
  end if;
  if p_executor is null then
    raise exception 'tool "%" is a % and needs an executor (one of: %)',
      p_ref, p_tool_type, array_to_string(v_rule.executor_types, ', ')
      using errcode = '23502';
  end if;
  select t.ref, t.tool_type into v_exec from public.tools t where t.ref = p_executor;
  if not found then
    raise exception 'executor "%" of tool "%" does not exist', p_executor, p_ref
      using errcode = '23503', hint = 'publish the executor first, or name an existing one';
  end if;
  if not v_exec.tool_type = any (v_rule.executor_types) then
    raise exception 'tool "%" (%) cannot execute on "%" (%): a % executes on %',
      p_ref, p_tool_type, v_exec.ref, v_exec.tool_type, p_tool_type,
      array_to_string(v_rule.executor_types, ' or ')
      using errcode = '23514', hint = 'see the executor matrix: select * from tool_type_rules';
  end if;
  -- Walk the executors' own chain: reaching this tool again would close a cycle.
  while v_next is not null loop
    v_path := v_path || v_next;
    if v_next = p_ref then
      raise exception 'executor cycle: %', array_to_string(v_path, ' -> ')
        using errcode = '23514', hint = 'a tool cannot execute on itself, directly or through its executors';
    end if;
    exit when cardinality(v_path) > 64;
    select t.executor_id into v_next from public.tools t where t.ref = v_next;
  end loop;
end
$$;
revoke execute on function kiwi_internal.check_executor(text, text, text) from public;
-- Triggers run as the writer: service_role writes tables directly.
grant execute on function kiwi_internal.check_executor(text, text, text) to service_role;

-- The search document. Identifiers are split on punctuation and camelCase so that
-- `read_file`, `longRunningOperation` and `server.tool` match their words.
create function kiwi_internal.search_words_of(p_text text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select lower(regexp_replace(regexp_replace(coalesce(p_text, ''), '([a-z])([A-Z])', '\1 \2', 'g'),
                              '[^[:alnum:]]+', ' ', 'g'))
$$;
revoke execute on function kiwi_internal.search_words_of(text) from public;
grant execute on function kiwi_internal.search_words_of(text) to anon, authenticated, service_role;

create function kiwi_internal.tool_search_vector(
  p_tool_id text, p_name text, p_tags text[], p_description text, p_category text, p_subcategory text)
  returns tsvector
  language sql immutable parallel safe
  set search_path = ''
as $$
  select setweight(to_tsvector('simple', kiwi_internal.search_words_of(p_tool_id || ' ' || coalesce(p_name, ''))), 'A')
      || setweight(to_tsvector('simple', kiwi_internal.search_words_of(array_to_string(coalesce(p_tags, '{}'), ' '))), 'B')
      || setweight(to_tsvector('simple', coalesce(p_description, '')), 'C')
      || setweight(to_tsvector('simple', kiwi_internal.search_words_of(concat_ws(' ', p_category, p_subcategory))), 'D')
$$;
revoke execute on function kiwi_internal.tool_search_vector(text, text, text[], text, text, text) from public;
-- Called by the tools trigger, as the writer: publish (security definer) or service_role.
grant execute on function kiwi_internal.tool_search_vector(text, text, text[], text, text, text) to service_role;

create function kiwi_internal.tool_name_vector(p_tool_id text, p_name text) returns tsvector
  language sql immutable parallel safe
  set search_path = ''
as $$
  select to_tsvector('simple', kiwi_internal.search_words_of(p_tool_id || ' ' || coalesce(p_name, '')))
$$;
revoke execute on function kiwi_internal.tool_name_vector(text, text) from public;
-- Called by the tools trigger, as the writer.
grant execute on function kiwi_internal.tool_name_vector(text, text) to service_role;

-- Every word of ids, names, tags and categories: the vocabulary that search corrects
-- typos against (matching a misspelt word to this small table is far cheaper than
-- comparing it with every tool). Read only through search; never exposed.
create table kiwi_internal.search_words (word text primary key);
revoke all on table kiwi_internal.search_words from public, anon, authenticated, service_role;

-- The text a tool contributes to the vocabulary.
create function kiwi_internal.tool_vocabulary(p_tool_id text, p_name text, p_tags text[], p_category text,
                                              p_subcategory text) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select concat_ws(' ', p_tool_id, p_name, array_to_string(p_tags, ' '), p_category, p_subcategory)
$$;
revoke execute on function kiwi_internal.tool_vocabulary(text, text, text[], text, text) from public;
-- Called by the tools trigger, as the writer.
grant execute on function kiwi_internal.tool_vocabulary(text, text, text[], text, text) to service_role;

create function kiwi_internal.remember_search_words(p_text text) returns void
  language sql volatile security definer
  set search_path = ''
as $$
  insert into kiwi_internal.search_words (word)
  select distinct w from regexp_split_to_table(kiwi_internal.search_words_of(p_text), ' ') w
   where length(w) >= 3
  on conflict (word) do nothing
$$;
revoke execute on function kiwi_internal.remember_search_words(text) from public;
-- Triggers run as the writer: service_role writes tables directly.
grant execute on function kiwi_internal.remember_search_words(text) to service_role;

create function kiwi_internal.tools_before_write() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  if tg_op = 'UPDATE' then
    if new.namespace is distinct from old.namespace or new.tool_id is distinct from old.tool_id then
      raise exception 'tool "%" cannot be renamed or moved to another namespace', old.ref
        using errcode = '23514', hint = 'publish it under the new name instead';
    end if;
    if new.tool_type is distinct from old.tool_type then
      raise exception 'tool "%" is a %: its type cannot change to %', old.ref, old.tool_type, new.tool_type
        using errcode = '23514', hint = 'publish a new tool with the new type';
    end if;
    new.updated_at := now();
  end if;
  if tg_op = 'INSERT' or (new.name, new.description, new.tags, new.category, new.subcategory)
                          is distinct from (old.name, old.description, old.tags, old.category, old.subcategory) then
    new.search_vector := kiwi_internal.tool_search_vector(new.tool_id, new.name, new.tags, new.description,
                                                          new.category, new.subcategory);
    new.name_vector := kiwi_internal.tool_name_vector(new.tool_id, new.name);
    perform kiwi_internal.remember_search_words(
      kiwi_internal.tool_vocabulary(new.tool_id, new.name, new.tags, new.category, new.subcategory));
  end if;
  if tg_op = 'INSERT' or new.executor_id is distinct from old.executor_id then
    perform kiwi_internal.check_executor(
      kiwi_internal.tool_ref(new.namespace, new.tool_id),
      new.tool_type, new.executor_id);
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.tools_before_write() from public;
create trigger tools_before_write
  before insert or update on public.tools
  for each row execute function kiwi_internal.tools_before_write();

-- Removing a tool that others execute on is refused, naming them (the foreign keys
-- would refuse too, but without saying who depends on it).
create function kiwi_internal.tools_refuse_delete_in_use() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_named  text;
  v_hidden int;
begin
  -- Name only what the caller may read; private tools of other namespaces are counted.
  select string_agg(u.label, ', ' order by u.label) filter (where u.readable),
         count(*) filter (where not u.readable)
    into v_named, v_hidden
    from (select t.ref as label, kiwi_internal.can_read(t.visibility, t.namespace) as readable
            from public.tools t
           where t.executor_id = old.ref and t.id <> old.id
          union
          select t.ref || '@' || v.version, kiwi_internal.can_read(t.visibility, t.namespace)
            from public.tool_versions v join public.tools t on t.id = v.tool_uuid
           where v.executor_id = old.ref and t.id <> old.id and t.executor_id is distinct from old.ref) u;
  if v_named is not null or v_hidden > 0 then
    raise exception 'cannot remove tool "%": other tools execute on it: %', old.ref,
      concat_ws(' and ', v_named,
                case when v_hidden = 1 then '1 private tool'
                     when v_hidden > 1 then v_hidden || ' private tools' end)
      using errcode = '23503', hint = 'remove those tools, or publish them on another executor, first';
  end if;
  return old;
end
$$;
revoke execute on function kiwi_internal.tools_refuse_delete_in_use() from public;
create trigger tools_refuse_delete_in_use
  before delete on public.tools
  for each row execute function kiwi_internal.tools_refuse_delete_in_use();
