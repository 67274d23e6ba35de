-- The learner's day, defined once: the newest day already opened while it has not ended in the zone
-- it was opened in; else today in the learner's `timezone` setting (p_default_zone without one).
-- The turn's reservation (bff_reserve_turn) counts in it. This file is its one full text (README,
-- "Stored functions").
CREATE OR REPLACE FUNCTION bff_learner_day(p_user uuid, p_default_zone text)
RETURNS TABLE (day date, zone text, ends_at timestamptz)
LANGUAGE sql STABLE AS $$
    (SELECT u.day, u.zone, u.ends_at FROM plan_usage u
     WHERE u.user_id = p_user AND u.ends_at > now()
     ORDER BY u.ends_at DESC LIMIT 1)
    UNION ALL
    (SELECT (now() AT TIME ZONE z.name)::date, z.name,
            (date_trunc('day', now() AT TIME ZONE z.name) + interval '1 day') AT TIME ZONE z.name
     FROM (SELECT coalesce((SELECT s.timezone FROM user_settings s WHERE s.user_id = p_user), p_default_zone) AS name) z)
    LIMIT 1
$$;
