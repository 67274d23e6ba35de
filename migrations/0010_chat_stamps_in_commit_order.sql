-- The updated_at of every change to a user's chats, for the delta pull (`updated_at > since`,
-- ascending). A stamp of now() is the transaction's start, and transactions commit in another
-- order: a delete that stamped 55.688 and committed after a rename stamped 56.202 was never
-- pulled by a client that had seen the rename. Two changes in one millisecond shared a stamp, and
-- a pull that had seen the first never got the second.
--
-- bff_chat_stamp takes a per-user transaction lock, held until commit, and returns the clock at
-- that moment to the millisecond, at least 1 ms past the user's latest stamp. The stamps of the
-- writers that use it then increase in commit order, so a pull that saw a change also saw every
-- such change with a smaller stamp. A writer that still stamps with now() (the previous release
-- during a rolling deploy; the web product, until it calls this function too) is outside that. A writer calls it before it locks any of the user's chat rows (an UPDATE computes
-- its SET before it locks the row), so two writers cannot hold the two locks crosswise. Writers of
-- one learner wait for each other; nobody else does.
CREATE FUNCTION bff_chat_stamp(p_user_id uuid) RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('bff_chat_stamp:' || p_user_id::text, 0));
    -- A statement of its own, so its snapshot (READ COMMITTED) includes the commit waited for.
    RETURN greatest(date_trunc('milliseconds', clock_timestamp()),
                    (SELECT max(c.updated_at) FROM chats c WHERE c.user_id = p_user_id) + interval '1 millisecond');
END
$$;
