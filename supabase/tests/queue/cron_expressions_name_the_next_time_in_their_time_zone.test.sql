-- The next tick of a schedule: five cron fields read in the schedule's time zone, or
-- pg_cron's "N seconds"; bad expressions are refused naming the field.
begin;
\ir ../_setup.sql
select plan(9);

select is(kiwi_internal.cron_next('*/15 9-17 * * 1-5', 'Europe/Paris', '2026-11-28 23:00Z'),
          '2026-11-30 08:00Z'::timestamptz, 'a weekday range skips the weekend, in the schedule''s time zone');
select is(kiwi_internal.cron_next('0 2 * * *', 'America/New_York', '2026-03-08 06:00Z'),
          '2026-03-08 07:00Z'::timestamptz, 'a time the clocks skip on a DST day runs just after the jump (03:00 EDT)');
select is(kiwi_internal.cron_next('30 * * * *', 'UTC', '2026-11-28 10:30Z'), '2026-11-28 11:30Z'::timestamptz,
  'the next time is strictly after the given one');
select is(kiwi_internal.cron_next('0 0 29 2 *', 'UTC', '2026-03-01Z'), '2028-02-29 00:00Z'::timestamptz,
  'the 29th of February waits for a leap year');
select is(kiwi_internal.cron_next('0 12 1 * 0', 'UTC', '2026-11-28Z'), '2026-11-29 12:00Z'::timestamptz,
  'with both day fields restricted, either matches (the next Sunday before the next 1st)');
select is(kiwi_internal.cron_next('5 seconds', 'UTC', '2026-11-28 10:00:02Z'), '2026-11-28 10:00:05Z'::timestamptz,
  '"N seconds" ticks on multiples of N');
select throws_like($$select kiwi_internal.cron_next('61 * * * *', 'UTC', now())$$, '%minute%outside 0-59%',
  'a minute past 59 is refused by name');
select throws_like($$select kiwi_internal.cron_next('* * *', 'UTC', now())$$, '%five fields%',
  'three fields are refused');
select throws_like($$select kiwi_internal.cron_next('* * * * *', 'Mars/Olympus', now())$$, '%time zone%not known%',
  'an unknown time zone is refused');

select * from finish();
rollback;
