-- list_items (Kiwi's MCP prompts/list and resources/list): the directives or knowledge
-- entries RLS lets the caller read, never another namespace's private or unlisted ones,
-- a page at a time after a reference, each with its latest version's parameters and its
-- entrypoint's media type.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(12);
select tests.make_acme();

do $$
declare
  v_vis text;
begin
  foreach v_vis in array array['public', 'unlisted', 'private'] loop
    perform public.publish_tool_version(
      jsonb_build_object('tool_id', 'acme/d_' || v_vis, 'tool_type', 'directive', 'executor', 'directive_runtime',
                         'version', '1.0.0', 'visibility', v_vis, 'entrypoint', 'd.md',
                         'parameters', jsonb_build_array(jsonb_build_object('name', 'topic', 'required', true))),
      jsonb_build_array(jsonb_build_object('path', 'd.md', 'content_text', 'Do {topic}.', 'is_entrypoint', true)));
    perform public.publish_tool_version(
      jsonb_build_object('tool_id', 'acme/k_' || v_vis, 'tool_type', 'knowledge',
                         'version', '1.0.0', 'visibility', v_vis, 'entrypoint', 'k.txt'),
      jsonb_build_array(jsonb_build_object('path', 'k.txt', 'content_text', 'know', 'is_entrypoint', true)));
  end loop;
  perform public.publish_tool_version(  -- a newer version: the listing shows it
    jsonb_build_object('tool_id', 'acme/k_public', 'tool_type', 'knowledge', 'version', '1.1.0', 'visibility', 'public',
                       'entrypoint', 'k.md'),
    jsonb_build_array(jsonb_build_object('path', 'k.md', 'content_text', 'know more', 'is_entrypoint', true)));
end $$;

select tests.act_as_user('anon');
select results_eq($$select tool_id from list_items('directive') where tool_id like 'acme/%'$$,
  $$values ('acme/d_public')$$, 'anon lists the public directive, not the unlisted or private ones');
select results_eq($$select tool_id, latest_version, media_type, size_bytes from list_items('knowledge') where tool_id like 'acme/%'$$,
  $$values ('acme/k_public', '1.1.0', 'text/markdown', 9::bigint)$$,
  'anon lists the public knowledge entry at its latest version, with its entrypoint''s media type and size');

select tests.act_as_user('stranger');
select results_eq($$select tool_id from list_items('knowledge') where tool_id like 'acme/%'$$,
  $$values ('acme/k_public')$$, 'a signed-in stranger lists nothing private or unlisted of acme');
select results_eq($$select tool_id from list_items('directive') where tool_id like 'acme/%'$$,
  $$values ('acme/d_public')$$, 'nor its directives');

select tests.act_as_user('member');
select results_eq($$select tool_id from list_items('directive') where tool_id like 'acme/%'$$,
  $$values ('acme/d_private'), ('acme/d_public'), ('acme/d_unlisted')$$,
  'a member lists every acme directive, in reference order');
select is((select parameters from list_items('directive') where tool_id = 'acme/d_private'),
  '{"type": "object", "required": ["topic"], "properties": {"topic": {"type": "string"}}, "additionalProperties": false}'::jsonb,
  'with its parameters as a JSON Schema');
select results_eq($$select tool_id from list_items('directive', 'acme/d_private', 1)$$,
  $$values ('acme/d_public')$$, 'a page starts after the reference given and holds at most p_limit');
select results_eq($$select tool_id from list_items('directive', 'acme/d_unlisted', 200) where tool_id like 'acme/%'$$,
  $$select 'x'::text where false$$, 'the page after the last one holds none of them');
select is((select count(*)::int from list_items('directive', null, 0)), 1, 'p_limit is at least 1');
select is_empty($$select 1 from list_items('script')$$, 'only directives and knowledge are listed');

select tests.act_as_user('owner');
select results_eq($$select tool_id from list_items('knowledge') where tool_id like 'acme/%'$$,
  $$values ('acme/k_private'), ('acme/k_public'), ('acme/k_unlisted')$$, 'the owner lists every acme entry');

select tests.act_as_user('service_role');
select is((select count(*)::int from list_items('knowledge') where tool_id like 'acme/%'), 3,
  'service_role lists everything');

select * from finish();
rollback;
