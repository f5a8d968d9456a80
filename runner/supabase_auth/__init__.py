"""A hosted project's Supabase Auth, called over HTTP: the password and refresh grants and the
sign-out (`grants.py`), shared by `kiwi login` and the web console's sign-in form."""
