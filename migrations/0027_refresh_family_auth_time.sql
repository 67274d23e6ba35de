-- The IdP's `auth_time` of the login that began a session (OpenID Connect Core §2): when the
-- learner last authenticated interactively. NULL when the IdP sent none, and for families opened
-- before this column: the family's created_at stands for it. Refreshes never change it.
ALTER TABLE refresh_families ADD COLUMN auth_time timestamptz;
