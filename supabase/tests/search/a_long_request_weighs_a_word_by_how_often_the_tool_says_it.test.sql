-- For a long request, each word's part of a tool's rank grows with how often the tool says it
-- (BM25's term frequency), over the length factor search_tools applies already; a word said
-- once, a word the tool lacks, or a document without positions keeps its part as it is.
begin;
\ir ../_setup.sql
select plan(6);

select is(kiwi_internal.search_tf_weighted(to_tsvector('english', 'the error page'), '{2}', '{error}', '{0,1}',
                                           '{NULL}', 1.5, 0.85, 32),
          2::float8, 'a word said once keeps its part');
select ok(kiwi_internal.search_tf_weighted(to_tsvector('english', 'error, errors and the error page'), '{2}',
                                           '{error}', '{0,1}', '{NULL}', 1.5, 0.85, 32) > 2,
          'a word said three times weighs more than its part');
select ok(kiwi_internal.search_tf_weighted(to_tsvector('english', 'error, errors and the error page'), '{2}',
                                           '{error}', '{0,1}', '{NULL}', 1.5, 0.85, 32)
          > kiwi_internal.search_tf_weighted(to_tsvector('english', 'error and the error page'), '{2}',
                                             '{error}', '{0,1}', '{NULL}', 1.5, 0.85, 32),
          'three times weighs more than twice');
select is(kiwi_internal.search_tf_weighted(to_tsvector('english', 'errors everywhere: an error, an erroneous page'),
                                           '{1, 0}', '{}', '{0,0,0}', '{err, page}', 1.5, 0, 32),
          3::float8 * (1.5 + 1) / (3 + 1.5),
          'a prefix counts every word it starts, and at b 0 the factor is BM25''s over its k1 alone');
select is(kiwi_internal.search_tf_weighted(strip(to_tsvector('english', 'error error error')), '{2}', '{error}',
                                           '{0,1}', '{NULL}', 1.5, 0.85, 32),
          2::float8, 'a document without positions keeps the part');
select is(kiwi_internal.search_tf_weighted(to_tsvector('english', 'error error error page'), '{0, 1.5}',
                                           '{error,page}', '{0,1,2}', '{NULL,NULL}', 1.5, 0.85, 32),
          1.5::float8, 'a word the tool lacks (part 0) adds nothing, and one it says once keeps its part');

select * from finish();
rollback;
