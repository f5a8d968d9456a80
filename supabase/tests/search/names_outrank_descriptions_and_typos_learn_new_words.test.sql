begin;
\ir ../_setup.sql
select plan(7);

select public.publish_tool_version(
  '{"tool_id": "analyze_invoice", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Reads one document."}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "convert_receipt", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Turns an invoice into a receipt."}', '[{"path": "a.sh", "content_text": "echo"}]');
update tools set run_count = 1000 where ref = 'convert_receipt';

select is((select tool_id from search_tools('invoice') limit 1), 'analyze_invoice',
  'a word in the name outranks the same word in a description, however popular that tool');
select is((select array_agg(tool_id) from search_tools('invoice')), array['analyze_invoice', 'convert_receipt'],
  'and both are found');
select is((select tool_id from search_tools('invoce') limit 1), 'analyze_invoice',
  'a typo is corrected against the vocabulary, names still first');
select ok((select rank from search_tools('invoice') limit 1) > (select rank from search_tools('invoice') offset 1 limit 1),
  'rank follows the order of the results');

select is(cardinality(kiwi_internal.similar_search_words('zebraphone')), 0, 'an unknown word has no correction');
select tests.publish('zebraphone_dialer', 'runtime', 'subprocess');
select is(kiwi_internal.similar_search_words('zebrafone'), array['zebraphone'],
  'publishing a tool teaches search its words');
select is((select tool_id from search_tools('zebrafone dialr') limit 1), 'zebraphone_dialer',
  'so a misspelt query finds it at once');

select * from finish();
rollback;
