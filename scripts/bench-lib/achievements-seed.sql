-- Data of the achievements benchmark (Benchmarks/README.md), on top of the list's (seed.sql: 1,000
-- users x 100 chats): what achievements are made of, as a learner of half a year has it.
--   - each chat's messages (its message_count, learner and tutor by turns, spread from its creation
--     to its last change): about 2.1 million messages, 1,050 explanations per learner;
--   - the ended chats' self-evaluations (25 per learner), two finished recalls each (50);
--   - two misconception tags of its subject per chat that has one (about 134 per learner);
--   - two explanations 40 and 35 minutes ago in each learner's newest chat: facts newer than the
--     hour after which they are folded in, read again by every computation (the stored answer
--     still holds: they are older than its two minutes).
-- Run by scripts/bench after seed.sql; the first read of each learner (the phase's warm-up) folds
-- the history once.
INSERT INTO messages (chat_id, user_id, role, content, created_at)
SELECT c.id, c.user_id, CASE WHEN k % 2 = 0 THEN 'user' ELSE 'assistant' END,
       CASE WHEN k % 2 = 0 THEN 'So the ball keeps moving because no net force acts on it (' || k || ')'
            ELSE 'Then what happens when friction acts on it? (' || k || ')' END,
       date_trunc('milliseconds', c.created_at + (c.updated_at - c.created_at) * (k::float8 / c.message_count))
FROM chats c CROSS JOIN LATERAL generate_series(0, c.message_count - 1) AS k;

INSERT INTO chat_evaluations (chat_id, user_id, score, created_at, updated_at)
SELECT id, user_id, 1 + abs(hashtext(id::text)) % 5, updated_at, updated_at FROM chats WHERE status = 'ended';

INSERT INTO recalls (user_id, chat_id, status, step, interval_seconds, target_at, due_at, sent_at, opened_at, done_at, score)
SELECT c.user_id, c.id, 'done', k, 86400, t.at, t.at, t.at, t.at, t.at, 4
FROM chats c CROSS JOIN generate_series(1, 2) AS k
CROSS JOIN LATERAL (SELECT least(c.updated_at + k * interval '1 day', now() - interval '2 hours' - k * interval '1 minute') AS at) t
WHERE c.status = 'ended';

INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery, updated_at)
SELECT c.id, t.id, c.user_id, (abs(hashtext(c.id::text || t.code)) % 100) / 100.0, c.updated_at
FROM chats c
CROSS JOIN LATERAL (
    SELECT id, code FROM tags WHERE starts_with(code, c.subject_id || '.') ORDER BY md5(c.id::text || code) LIMIT 2
) t
WHERE c.subject_id IS NOT NULL;

WITH newest AS (
    SELECT DISTINCT ON (user_id) id, user_id FROM chats WHERE deleted_at IS NULL ORDER BY user_id, updated_at DESC, id DESC
), recent AS (
    UPDATE chats c SET updated_at = date_trunc('milliseconds', now() - interval '34 minutes'),
        message_count = c.message_count + 4
    FROM newest n WHERE c.id = n.id
    RETURNING c.id, c.user_id
)
INSERT INTO messages (chat_id, user_id, role, content, created_at)
SELECT r.id, r.user_id, m.role, m.content, date_trunc('milliseconds', now() - m.ago)
FROM recent r
CROSS JOIN (VALUES ('user', 'And with friction it slows down.', interval '40 minutes'),
                   ('assistant', 'Why does it slow down?', interval '40 minutes' - interval '1 millisecond'),
                   ('user', 'Because friction is a force against the motion.', interval '35 minutes'),
                   ('assistant', 'So is a force needed to keep it moving?', interval '35 minutes' - interval '1 millisecond')) AS m(role, content, ago);

VACUUM ANALYZE messages;
VACUUM ANALYZE chats;
VACUUM ANALYZE chat_evaluations;
VACUUM ANALYZE recalls;
VACUUM ANALYZE chat_tags;
