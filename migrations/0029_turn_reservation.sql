-- The learner's day as it was opened: the time zone it was opened in and the instant it ends. A
-- turn is reserved in the newest day still running (bff_learner_day), so switching the `timezone`
-- setting after the day's turns opens no other day's allowance.
ALTER TABLE plan_usage ADD COLUMN zone text, ADD COLUMN ends_at timestamptz;

UPDATE plan_usage u
SET zone = z.name, ends_at = (u.day + 1)::timestamp AT TIME ZONE z.name
FROM (
    SELECT p.user_id, p.day, coalesce(s.timezone, 'Asia/Tokyo') AS name
    FROM plan_usage p LEFT JOIN user_settings s ON s.user_id = p.user_id
) z
WHERE z.user_id = u.user_id AND z.day = u.day;

ALTER TABLE plan_usage ALTER COLUMN zone SET NOT NULL, ALTER COLUMN ends_at SET NOT NULL;
