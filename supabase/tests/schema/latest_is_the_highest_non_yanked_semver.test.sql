begin;
\ir ../_setup.sql
select plan(13);

select is(kiwi_internal.is_semver(v), false, format('%s is not a semver', v))
  from unnest(array['1.0', '01.0.0', '1.0.0+build', 'v1.0.0', '1.0.0-', '1.0.0-01']) v;

-- precedence from semver.org 2.0.0 §11
select is(
  (select array_agg(v order by kiwi_internal.semver_key(v)) from unnest(array[
     '1.0.0', '1.0.0-rc.1', '1.0.0-beta.11', '1.0.0-beta.2', '1.0.0-beta', '1.0.0-alpha.beta',
     '1.0.0-alpha.1', '1.0.0-alpha', '0.9.9', '1.10.0', '1.2.0']) v),
  array['0.9.9', '1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-alpha.beta', '1.0.0-beta', '1.0.0-beta.2',
        '1.0.0-beta.11', '1.0.0-rc.1', '1.0.0', '1.2.0', '1.10.0'],
  'versions sort by semver precedence');

select tests.publish('sv', 'runtime', 'subprocess', '1.10.0');
select tests.publish('sv', 'runtime', 'subprocess', '1.9.0');
select tests.publish('sv', 'runtime', 'subprocess', '2.0.0-rc.1');
select is((select latest_version from tools where ref = 'sv'), '2.0.0-rc.1',
  'latest is the highest semver, not the newest insert (1.9.0 came last)');
select tests.publish('sv', 'runtime', 'subprocess', '2.0.0');
select is((select latest_version from tools where ref = 'sv'), '2.0.0', 'a release outranks its pre-release');
select is((select count(*)::int from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'sv' and v.is_latest),
  1, 'exactly one version is latest');

select yank_tool_version('sv', '2.0.0', 'regression');
select is((select latest_version from tools where ref = 'sv'), '2.0.0-rc.1', 'yanking the latest moves latest down');
select unyank_tool_version('sv', '2.0.0');
select is((select latest_version from tools where ref = 'sv'), '2.0.0', 'un-yanking moves it back');
select throws_ok($$ update tool_versions set is_latest = true
                     where version = '1.9.0' and tool_uuid = (select id from tools where ref = 'sv') $$,
  '23505', null, 'a second latest is refused by the database');

select * from finish();
rollback;
