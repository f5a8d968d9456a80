-- quality_score: how far a tool can be relied on, from what the registry knows of it, kept
-- on public.tools (0.00 .. 1.00) and used by search as one of its signals
-- (kiwi_internal.search_weights, 170_search.sql):
--
--   0.50 x success   its runs from the registry that succeeded, smoothed: (successes + 1) / (runs + 2),
--                    so a tool never run is at 0.5 and one failure among few runs does not sink it
--   0.25 x signed    1 when its latest version carries a signature, else 0
--   0.25 x use       ln(1 + runs + downloads) / ln(1001), at most 1: a thousand uses is as used as it gets
--
-- Runs are counted as their records arrive (one statement-level trigger per batch of
-- records; runs of a local space's copy, source project or user, are not the registry's
-- tool and do not count), and the score is written only when its rounded value changes.
-- A new latest version and a new signature recompute it. Anyone who can see a tool reads
-- its score; nobody writes it directly.

alter table public.tools add column quality_score numeric(3, 2) not null default 0.25
  constraint tools_quality_score_range check (quality_score between 0 and 1);
comment on column public.tools.quality_score is
  'How far the tool can be relied on (0..1): 0.5 x its runs'' success rate (smoothed), 0.25 x whether its latest version is signed, 0.25 x its use (log-scaled); kept by the registry, a search signal.';
grant select (quality_score) on table public.tools to anon;

-- What the score is computed from: a tool's registry runs, counted as they are recorded.
create table kiwi_internal.tool_run_counts (
  tool_uuid uuid primary key references public.tools (id) on delete cascade,
  runs      bigint not null default 0,
  successes bigint not null default 0
);
revoke all on table kiwi_internal.tool_run_counts from public, anon, authenticated, service_role;

-- The formula, from the counts: one definition, for the score and for the run trigger's test
-- of whether a batch of runs can have changed it.
create function kiwi_internal.quality_formula(p_runs bigint, p_successes bigint, p_signed boolean, p_downloads bigint)
  returns numeric
  language sql immutable
  set search_path = ''
as $$
  select round((0.5 * (p_successes + 1)::numeric / (p_runs + 2)
              + 0.25 * p_signed::int
              + 0.25 * least(1, ln(1 + p_runs + p_downloads) / ln(1001)))::numeric, 2)
$$;
revoke execute on function kiwi_internal.quality_formula(bigint, bigint, boolean, bigint) from public;

create function kiwi_internal.quality_score(p_tool_uuid uuid, p_latest text, p_downloads bigint)
  returns numeric
  language sql stable security definer
  set search_path = ''
as $$
  select kiwi_internal.quality_formula(
           coalesce(c.runs, 0), coalesce(c.successes, 0),
           exists (select 1 from public.tool_versions v
                     join public.tool_version_signatures s on s.version_id = v.id
                    where v.tool_uuid = p_tool_uuid and v.version = p_latest),
           coalesce(p_downloads, 0))
    from (select 1) one
    left join kiwi_internal.tool_run_counts c on c.tool_uuid = p_tool_uuid
$$;
revoke execute on function kiwi_internal.quality_score(uuid, text, bigint) from public;

-- A new latest version (or a new tool) is scored as it is written: its signature, if any,
-- comes after, and rescores it (below). A score written by hand is recomputed the same way.
create function kiwi_internal.tools_score_quality() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  new.quality_score := kiwi_internal.quality_score(new.id, new.latest_version, new.download_count);
  return new;
end
$$;
revoke execute on function kiwi_internal.tools_score_quality() from public;
create trigger tools_score_quality
  before insert or update of latest_version, download_count, quality_score on public.tools
  for each row execute function kiwi_internal.tools_score_quality();

-- Rescore tools, writing only the scores that changed (tools_score_quality computes the value).
create function kiwi_internal.rescore_tools(p_tool_uuids uuid[]) returns void
  language sql volatile security definer
  set search_path = ''
as $$
  update public.tools t
     set quality_score = t.quality_score
   where t.id = any (p_tool_uuids)
     and t.quality_score is distinct from kiwi_internal.quality_score(t.id, t.latest_version, t.download_count)
$$;
revoke execute on function kiwi_internal.rescore_tools(uuid[]) from public;

create function kiwi_internal.signatures_score_quality() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.rescore_tools(array(select distinct v.tool_uuid from added a
                                              join public.tool_versions v on v.id = a.version_id));
  return null;
end
$$;
revoke execute on function kiwi_internal.signatures_score_quality() from public;
create trigger signatures_score_quality
  after insert on public.tool_version_signatures
  referencing new table as added
  for each statement execute function kiwi_internal.signatures_score_quality();

-- A batch of runs rescores only the tools whose score it can have moved: whether the latest
-- version is signed or not, the formula over the counts before and after the batch gives the
-- same rounded score for most runs of a tool run often (reading the signatures each run was
-- most of what a run's record cost).
create function kiwi_internal.runs_score_quality() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_tools uuid[];
begin
  -- the tools' rows first, in one order: deleting a tool takes its row, then its count row,
  -- and a record that took the count row first, then the tool's (to rescore it, or for the
  -- count row's foreign key), deadlocked with it
  perform 1 from public.tools t
   where t.ref in (select r.tool_id from added r where r.source = 'registry')
   order by t.id
     for no key update of t;
  with counted as (
    select t.id, t.download_count, count(*) as runs, count(*) filter (where r.status = 'success') as successes
      from added r join public.tools t on t.ref = r.tool_id
     where r.source = 'registry'
     group by t.id, t.download_count),
  stored as (
    insert into kiwi_internal.tool_run_counts as c (tool_uuid, runs, successes)
    select id, runs, successes from counted
    on conflict (tool_uuid) do update
      set runs = c.runs + excluded.runs, successes = c.successes + excluded.successes
    returning c.tool_uuid, c.runs, c.successes)
  select array_agg(s.tool_uuid order by s.tool_uuid) into v_tools
    from stored s join counted k on k.id = s.tool_uuid
   where exists (select 1 from (values (false), (true)) as v(signed)
                  where kiwi_internal.quality_formula(s.runs, s.successes, v.signed, k.download_count)
                        <> kiwi_internal.quality_formula(s.runs - k.runs, s.successes - k.successes, v.signed,
                                                         k.download_count));
  if v_tools is not null then
    perform kiwi_internal.rescore_tools(v_tools);
  end if;
  return null;
end
$$;
revoke execute on function kiwi_internal.runs_score_quality() from public;
create trigger runs_score_quality
  after insert on public.tool_runs
  referencing new table as added
  for each statement execute function kiwi_internal.runs_score_quality();
