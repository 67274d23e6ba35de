-- One page of the streak push's sweep (Achievements/StreakSweep.swift): of the p_limit learners with
-- push tokens after p_after (by id), those whose streak would break tonight get one job of p_kind
-- each (bff_enqueue_jobs), unique per learner and learner day, so that a page seen twice queues
-- nothing twice. A learner qualifies when
--   - notifications are on and no streak push is recorded for their day yet (streak_pushes);
--   - the evening part of their notification window has just begun: the last p_lead minutes of it
--     (the whole window when shorter), begun less than p_lookback minutes ago, so that each learner
--     is looked at in one or two sweeps a day, not in every one (settings absent: the defaults
--     passed in, as NotificationWindow.default);
--   - something counted yesterday and nothing yet today, in bff_learner_day's day and zone, from
--     their facts since yesterday began (bff_learner_facts: index ranges, not their history).
-- Returns the page's last learner (NULL for an empty page), how many learners the page held, and
-- how many jobs it queued. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_streak_sweep(
    p_after uuid, p_limit integer, p_default_zone text, p_default_start time, p_default_end time,
    p_lead integer, p_lookback integer, p_kind text, p_channel text)
RETURNS TABLE (last_user uuid, learners integer, queued integer)
LANGUAGE sql AS $$
    WITH page AS (
        SELECT DISTINCT t.user_id FROM push_tokens t WHERE t.user_id > p_after ORDER BY t.user_id LIMIT p_limit
    ),
    learners AS (
        SELECT g.user_id, d.day, d.zone,
               (extract(hour FROM now() AT TIME ZONE coalesce(s.timezone, p_default_zone)) * 60
                + extract(minute FROM now() AT TIME ZONE coalesce(s.timezone, p_default_zone)))::integer AS m,
               (extract(hour FROM coalesce(s.notify_start, p_default_start)) * 60
                + extract(minute FROM coalesce(s.notify_start, p_default_start)))::integer AS w_start,
               (extract(hour FROM coalesce(s.notify_end, p_default_end)) * 60
                + extract(minute FROM coalesce(s.notify_end, p_default_end)))::integer AS w_end
        FROM page g
        LEFT JOIN user_settings s ON s.user_id = g.user_id
        CROSS JOIN LATERAL bff_learner_day(g.user_id, p_default_zone) d
        WHERE coalesce(s.notifications_enabled, true)
          AND NOT EXISTS (SELECT 1 FROM streak_pushes sp WHERE sp.user_id = g.user_id AND sp.day = d.day)
    ),
    windows AS (
        -- An end at or before the start spans midnight (NotificationWindow); equal ends make a whole day.
        SELECT l.*, CASE WHEN l.w_end > l.w_start THEN l.w_end - l.w_start ELSE l.w_end - l.w_start + 1440 END AS length
        FROM learners l
    ),
    evening AS (
        -- Minutes since the evening part began: the window's last p_lead minutes.
        SELECT w.user_id, w.day, w.zone
        FROM windows w
        WHERE (((w.m - (w.w_start + w.length - least(w.length, p_lead))) % 1440) + 1440) % 1440
              < least(w.length, p_lead, p_lookback)
    ),
    at_risk AS (
        SELECT e.user_id, e.day
        FROM evening e
        CROSS JOIN LATERAL (
            SELECT bool_or((f.at AT TIME ZONE e.zone)::date = e.day - 1) AS yesterday,
                   bool_or((f.at AT TIME ZONE e.zone)::date >= e.day) AS today
            FROM bff_learner_facts(e.user_id, (e.day - 1)::timestamp AT TIME ZONE e.zone) f
        ) a
        WHERE a.yesterday AND NOT coalesce(a.today, false)
    )
    SELECT (SELECT g.user_id FROM page g ORDER BY g.user_id DESC LIMIT 1), (SELECT count(*)::integer FROM page),
           coalesce((SELECT bff_enqueue_jobs(
                         p_kind, array_agg(jsonb_build_object('day', a.day)), array_agg(a.user_id),
                         array_agg(a.user_id::text || '@' || a.day::text), array_agg(NULL::timestamptz), 5, p_channel)
                     FROM at_risk a HAVING count(*) > 0), 0)
$$;
