begin;
\ir ../_setup.sql
select plan(20);

select is(kiwi_internal.is_safe_path(p), false, format('%s is refused', to_jsonb(p)))
  from unnest(array['', '../x', '/etc/passwd', 'a/../../b', 'a/..', 'a//b', './a', 'a/', '.',
                    'C:\x', 'C:/x', 'a\b', E'a\tb', E'a\nb', repeat('a', 1025)]) p;
select is(kiwi_internal.is_safe_path(p), true, format('%s is allowed', to_jsonb(p)))
  from unnest(array['a', 'src/main.py', '.hidden/x', 'a..b']) p;

select throws_ok($$ insert into tool_version_files (version_id, path, content_text)
                    select v.id, '../escape', 'x' from tool_versions v limit 1 $$,
  '23514', null, 'the table refuses an unsafe path even from an admin');

select * from finish();
rollback;
