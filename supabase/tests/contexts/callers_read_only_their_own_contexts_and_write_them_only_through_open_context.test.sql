-- Contexts belong to their caller: others neither read them nor open children under
-- them; nobody writes the table directly; get_context returns one's own.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(7);

select tests.act_as_user('owner');
create temp table ctx (id uuid);
grant all on ctx to public;
insert into ctx select (public.open_context('s-own', null, null, '{"tools": ["hello_world"]}') ->> 'id')::uuid;

select is(public.get_context((select id from ctx)) #> '{permissions,tools}', '["hello_world"]'::jsonb,
  'a caller reads their own context');
select throws_ok($$insert into execution_contexts (session_id, permissions, caller) values ('x', '{}', 'x')$$,
  '42501', 'permission denied for table execution_contexts', 'nobody writes contexts directly');
select throws_ok($$update execution_contexts set permissions = '{"tools": ["*"]}'$$,
  '42501', 'permission denied for table execution_contexts', 'nobody widens a context by updating it');

select tests.act_as_user('stranger');
select is((select count(*)::int from execution_contexts where id = (select id from ctx)), 0,
  'another caller does not see it');
select throws_ok(format($$select public.get_context(%L)$$, (select id from ctx)), 'PT404', null,
  'get_context does not give another caller''s context');
select throws_ok(format($$select public.open_context('s-own', null, %L)$$, (select id from ctx)), 'PT404', null,
  'nobody opens a child under another caller''s context');

select tests.act_as_user('anon');
select throws_ok($$select public.open_context('s-anon')$$, '42501', null, 'anon opens no context');

select * from finish();
rollback;
