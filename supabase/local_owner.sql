-- The local stack's owner: the identity `kiwi` acts as on the local database when no
-- KIWI_ACCESS_TOKEN is given (runner/principal.py LOCAL_OWNER_ID; tests check they agree).
-- It owns namespace `local`, where it publishes without --admin. Applied by scripts/stack
-- after every reset; never part of seed.sql, which a hosted project also receives.
insert into public.namespaces (namespace, display_name, description, owner_id)
values ('local', 'Local', 'The local stack owner''s namespace (kiwi acts as its owner by default).',
        '866e9377-288f-586a-84f4-9598007609a5')
on conflict (namespace) do nothing;
