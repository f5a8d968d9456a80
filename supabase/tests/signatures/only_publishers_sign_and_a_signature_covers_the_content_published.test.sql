-- A signature names the content_hash it covers, which must be the version's; only
-- those who may publish into the namespace sign; signatures never change; a publish
-- whose signature does not cover its content publishes nothing.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(12);

select tests.make_acme();
create temp table v (hash text);
grant all on v to public;
insert into v select content_hash from tool_versions tv join tools t on t.id = tv.tool_uuid
 where t.ref = 'acme/public_tool';

-- syntactically valid Ed25519 material (the registry checks shape; runners check the maths)
create function pg_temp.key() returns text language sql as $$ select repeat('A', 43) || '=' $$;
create function pg_temp.sig() returns text language sql as $$ select repeat('B', 86) || '==' $$;

select tests.act_as_user('stranger');
select throws_ok(format($$select sign_tool_version('acme/public_tool', '1.0.0', %L, %L, %L)$$,
  (select hash from v), pg_temp.key(), pg_temp.sig()), '42501', null,
  'a signed-in stranger cannot sign a tool of a namespace they do not publish into');

select tests.act_as_user('member');
select throws_ok(format($$select sign_tool_version('acme/public_tool', '1.0.0', %L, %L, %L)$$,
  repeat('0', 64), pg_temp.key(), pg_temp.sig()), 'PT409', null,
  'a signature over another content_hash is refused');
select throws_ok(format($$select sign_tool_version('acme/public_tool', '1.0.0', %L, 'not-a-key', %L)$$,
  (select hash from v), pg_temp.sig()), '22023', null,
  'a public key that is not 32 bytes of base64 is refused, naming the field');
select is(sign_tool_version('acme/public_tool', '1.0.0', (select hash from v), pg_temp.key(), pg_temp.sig()) ->> 'created',
  'true', 'a member signs the version''s own content_hash');
select is(sign_tool_version('acme/public_tool', '1.0.0', (select hash from v), pg_temp.key(), pg_temp.sig()) ->> 'created',
  'false', 'signing again with the same key changes nothing');
select is((select key_fingerprint from tool_version_signatures),
  encode(sha256(decode(pg_temp.key(), 'base64')), 'hex'), 'the fingerprint is the SHA-256 of the raw key');
select throws_ok($$insert into tool_version_signatures (version_id, content_hash, public_key, signature)
  select id, content_hash, repeat('C', 43) || '=', repeat('D', 86) || '==' from tool_versions limit 1$$,
  '42501', null, 'nobody writes signatures directly');

select tests.act_as_user('anon');
select is((select jsonb_array_length(signatures) from signature_states(array['acme/public_tool'])), 1,
  'anyone who reads a tool reads its signatures');
select is((select signatures -> 0 ->> 'key_fingerprint' from resolve_chain_attestations('acme/public_tool') where depth = 0),
  encode(sha256(decode(pg_temp.key(), 'base64')), 'hex'), 'the attestations of a chain carry its signatures');

select tests.act_as_admin();
select throws_ok($$update tool_version_signatures set signature = repeat('E', 86) || '=='$$, 'PT409', null,
  'a signature never changes, not even for an admin');

select tests.act_as_user('member');
select throws_ok(format($$select publish_tool_version(
    '{"tool_id": "acme/signed", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
    '[{"path": "main.sh", "content_text": "echo hi"}]', null,
    jsonb_build_object('content_hash', repeat('1', 64), 'public_key', %L, 'signature', %L))$$,
  pg_temp.key(), pg_temp.sig()), 'PT409', null,
  'a publish whose signature covers other content is refused');
select tests.act_as_admin();
select is((select count(*)::int from tools where ref = 'acme/signed'), 0, '... and publishes nothing');

select * from finish();
rollback;
