-- What a thread costs in money as well as tokens. Model prices are data: one row per model
-- (as a tier of llm_runtime names it), in US dollars per million input and output tokens,
-- read by anyone and changed by admins (update model_prices set output_usd_per_mtok = 12
-- where model = 'claude-sonnet-4-5'). The runner reads a thread's price once when it starts
-- (public.model_price), counts the thread's cost turn by turn against a budget in money
-- (budget.cost_usd), and at its end records what it spent (public.record_thread_usage):
-- one row per thread run, its own model's tokens and their cost as the database prices them
-- then, and the session that started it, so a caller's sub-threads add up to its spend.

create table public.model_prices (
  model                text primary key
                       constraint model_prices_model_format
                       check (char_length(model) between 1 and 200 and model !~ '[[:cntrl:]]'),
  input_usd_per_mtok   numeric not null constraint model_prices_input_not_negative check (input_usd_per_mtok >= 0),
  output_usd_per_mtok  numeric not null constraint model_prices_output_not_negative check (output_usd_per_mtok >= 0),
  note                 text constraint model_prices_note_length check (char_length(note) <= 500),
  updated_at           timestamptz not null default now()
);
comment on table public.model_prices is
  'Model prices in US dollars per million tokens (input and output), by model as llm_runtime''s tiers name it. Anyone reads them; admins (service_role) change them.';

alter table public.model_prices enable row level security;
revoke all on table public.model_prices from public, anon, authenticated, service_role;
grant select on table public.model_prices to anon, authenticated;
grant select, insert, update, delete on table public.model_prices to service_role;

create policy "anyone reads the model prices"
  on public.model_prices for select to anon, authenticated
  using (true);
create policy "admins change the model prices"
  on public.model_prices for all to service_role
  using ((select kiwi_internal.caller_is_admin()))
  with check ((select kiwi_internal.caller_is_admin()));

create trigger model_prices_touch
  before update on public.model_prices
  for each row execute function kiwi_internal.registry_limits_touch();

-- The seeded tiers' models (supabase/seed/llm_runtime/tool.yaml), at their published list prices.
insert into public.model_prices (model, input_usd_per_mtok, output_usd_per_mtok, note) values
  ('claude-haiku-4-5', 1, 5, 'Anthropic list price'),
  ('claude-sonnet-4-5', 3, 15, 'Anthropic list price'),
  ('claude-opus-4-1', 15, 75, 'Anthropic list price'),
  ('gpt-4o-mini', 0.15, 0.6, 'OpenAI list price'),
  ('gpt-4o', 2.5, 10, 'OpenAI list price');

-- A model's price: {model, input_usd_per_mtok, output_usd_per_mtok}, or null when none is kept.
create function public.model_price(p_model text) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select jsonb_build_object('model', p.model, 'input_usd_per_mtok', p.input_usd_per_mtok,
                            'output_usd_per_mtok', p.output_usd_per_mtok)
    from public.model_prices p
   where p.model = p_model;
$$;
comment on function public.model_price(text) is
  'The price of a model in US dollars per million input and output tokens ({model, input_usd_per_mtok, output_usd_per_mtok}); null when public.model_prices has none.';
revoke execute on function public.model_price(text) from public;
grant execute on function public.model_price(text) to anon, authenticated, service_role;

create table public.thread_usage (
  id              uuid primary key default gen_random_uuid(),
  session_id      text not null
                  constraint thread_usage_session_id_format
                  check (char_length(session_id) between 1 and 200 and session_id !~ '[[:cntrl:]]'),
  parent_session  text constraint thread_usage_parent_session_length check (char_length(parent_session) <= 200),
  thread          text not null constraint thread_usage_thread_length check (char_length(thread) between 1 and 300),
  model           text not null constraint thread_usage_model_length check (char_length(model) between 1 and 200),
  input_tokens    bigint not null constraint thread_usage_input_tokens_range check (input_tokens >= 0),
  output_tokens   bigint not null constraint thread_usage_output_tokens_range check (output_tokens >= 0),
  tool_calls      int not null constraint thread_usage_tool_calls_range check (tool_calls >= 0),
  cost_usd        numeric constraint thread_usage_cost_usd_range check (cost_usd >= 0),
  status          text not null constraint thread_usage_status_values check (status in ('success', 'error', 'timeout')),
  caller          text not null,
  created_at      timestamptz not null default now()
);
comment on table public.thread_usage is
  'One row per thread run: its own model''s tokens and their cost in US dollars as public.model_prices priced them when it ended (null: no price kept), and the session that started it. Written only by record_thread_usage; callers read their own rows, admins all.';
comment on column public.thread_usage.session_id is 'The thread''s own session (thread-<uuid>): its tool calls are audited under it.';
comment on column public.thread_usage.parent_session is 'The session of the call that started the thread (a sub-thread''s caller), when it was nested.';

alter table public.thread_usage enable row level security;
revoke all on table public.thread_usage from public, anon, authenticated, service_role;
grant select on table public.thread_usage to authenticated;
grant select, delete on table public.thread_usage to service_role;

create index thread_usage_caller_created_at_idx on public.thread_usage (caller, created_at desc);
create index thread_usage_parent_session_idx on public.thread_usage (parent_session);

create policy "callers read their own thread usage, admins all"
  on public.thread_usage for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete thread usage"
  on public.thread_usage for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- The work of record_thread_usage: the row, priced and in the caller's name (security definer:
-- nobody inserts into thread_usage directly, so nobody names its caller or its cost).
create function kiwi_internal.record_thread_usage(p_usage jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.thread_usage;
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot record thread usage'
      using errcode = '42501', hint = 'sign in, or run without recording';
  end if;
  if jsonb_typeof(p_usage) is distinct from 'object' then
    raise exception 'invalid thread usage: must be a JSON object' using errcode = '22023';
  end if;
  insert into public.thread_usage (session_id, parent_session, thread, model, input_tokens, output_tokens,
                                   tool_calls, cost_usd, status, caller)
  select u.session_id, u.parent_session, u.thread, u.model, u.input_tokens, u.output_tokens, u.tool_calls,
         round((u.input_tokens * p.input_usd_per_mtok + u.output_tokens * p.output_usd_per_mtok) / 1e6, 8),
         u.status, kiwi_internal.caller_identity()
    from jsonb_to_record(p_usage) as u(session_id text, parent_session text, thread text, model text,
                                       input_tokens bigint, output_tokens bigint, tool_calls int, status text)
    left join public.model_prices p on p.model = u.model
  returning * into v_row;
  return jsonb_build_object('id', v_row.id, 'session_id', v_row.session_id, 'model', v_row.model,
                            'input_tokens', v_row.input_tokens, 'output_tokens', v_row.output_tokens,
                            'cost_usd', v_row.cost_usd);
exception when not_null_violation or check_violation or invalid_text_representation then
  raise exception 'invalid thread usage: %', sqlerrm using errcode = '22023',
    hint = 'give session_id, thread, model, input_tokens, output_tokens, tool_calls and status';
end
$$;
revoke execute on function kiwi_internal.record_thread_usage(jsonb) from public;
grant execute on function kiwi_internal.record_thread_usage(jsonb) to authenticated, service_role;
comment on function kiwi_internal.record_thread_usage(jsonb) is
  'Writes one thread_usage row in the caller''s name, its cost priced from public.model_prices.';

create function public.record_thread_usage(p_usage jsonb) returns jsonb
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.record_thread_usage(p_usage);
$$;
comment on function public.record_thread_usage(jsonb) is
  'Record what one thread run spent: {session_id, parent_session?, thread, model, input_tokens, output_tokens, tool_calls, status}; the database prices it from public.model_prices and names the caller. Returns {id, session_id, model, input_tokens, output_tokens, cost_usd}.';
revoke execute on function public.record_thread_usage(jsonb) from public;
grant execute on function public.record_thread_usage(jsonb) to authenticated, service_role;
