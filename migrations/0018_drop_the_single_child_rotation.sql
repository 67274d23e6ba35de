-- bff_refresh_rotate, 0006's rotation with one child, kept by 0008 as a wrapper for a release
-- that was still running during that deploy; no release calls it since. From here on the rotation
-- is migrations/functions/bff_refresh_rotate_ring.sql.
DROP FUNCTION IF EXISTS bff_refresh_rotate(bytea, bytea, text, integer, integer, integer, double precision,
                                           text, integer, double precision);
