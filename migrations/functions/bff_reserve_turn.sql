-- Reserves one tutoring turn in the learner's day (bff_learner_day) before the LLM is asked, in
-- one statement: the day's row is opened with 1, or counted up only while below p_allowed (the
-- row's lock orders concurrent turns, so at 19 of 20 exactly one passes). `reserved` is false when
-- the day's turns are used up; `seconds_left` is until the day ends. A turn whose reply never
-- reached the learner is given back (TurnQuota.giveBack). This file is its one full text (README,
-- "Stored functions").
CREATE OR REPLACE FUNCTION bff_reserve_turn(p_user uuid, p_allowed integer, p_default_zone text)
RETURNS TABLE (reserved boolean, day date, seconds_left double precision)
LANGUAGE sql AS $$
    WITH d AS (SELECT * FROM bff_learner_day(p_user, p_default_zone)),
    counted AS (
        INSERT INTO plan_usage (user_id, day, turns, zone, ends_at)
        SELECT p_user, d.day, 1, d.zone, d.ends_at FROM d WHERE p_allowed > 0
        ON CONFLICT (user_id, day) DO UPDATE SET turns = plan_usage.turns + 1
        WHERE plan_usage.turns < p_allowed
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM counted), d.day, extract(epoch FROM d.ends_at - now())::double precision FROM d
$$;
