-- registry_limits is data: anon and signed-in users read it, service_role alone changes
-- it, and a value of the wrong shape is refused.
begin;
\ir ../_setup.sql
select plan(9);

select tests.act_as('anon');
select ok((select count(*) from registry_limits) >= 13, 'anon reads the limits');
select throws_ok($$update registry_limits set value = '1' where name = 'file_bytes'$$, '42501', null,
  'anon cannot change a limit');
select tests.act_as('authenticated', tests.owner_id());
select is((select value from registry_limits where name = 'file_bytes'), '1048576'::jsonb, 'a signed-in user reads a limit');
select throws_ok($$update registry_limits set value = '1' where name = 'file_bytes'$$, '42501', null,
  'a signed-in user cannot change a limit');
select throws_ok($$delete from registry_limits$$, '42501', null, 'a signed-in user cannot lift a limit');
select tests.act_as('service_role');
select lives_ok($$update registry_limits set value = '2097152' where name = 'file_bytes'$$, 'service_role changes a limit');
select throws_ok($$update registry_limits set value = '-1' where name = 'file_bytes'$$, '23514', null,
  'a size limit is a whole number >= 0');
select throws_ok($$update registry_limits set value = '[""]' where name = 'reserved_names'$$, '23514', null,
  'reserved names are non-empty strings');
select throws_ok($$update registry_limits set value = '{"content_text": "string"}' where name = 'file_field_types'$$, '23514', null,
  'file field types keep the path');

select * from finish();
rollback;
