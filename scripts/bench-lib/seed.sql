-- Data of the list benchmark (Benchmarks/README.md): 1,000 users x 100 chats, updated_at spread over
-- half a year (millisecond precision, as the server writes them), a third of the chats without
-- subject/topic. User n has the id md5('bench-user-' || n)::uuid, so that pgbench can bind a
-- random user's id into the one SELECT (\set n random(1, 1000)) as the server binds the uuid
-- of the token, without a lookup; bench_users lists them for the token file.
-- Run by scripts/bench on its throwaway database, after `bff migrate`.
DROP TABLE IF EXISTS bench_users;
CREATE TABLE bench_users (
    n  integer PRIMARY KEY,
    id uuid    NOT NULL UNIQUE
);

INSERT INTO bench_users (n, id)
SELECT n, md5('bench-user-' || n)::uuid FROM generate_series(1, 1000) AS n;

INSERT INTO users (id, issuer, subject, email, display_name)
SELECT id, 'urn:bff:bench', 'bench-user-' || n, 'bench' || n || '@example.com', 'Bench User ' || n
FROM bench_users;

WITH t AS (
    SELECT row_number() OVER (ORDER BY id) - 1 AS k, id, subject_id FROM topics
), tc AS (
    SELECT count(*) AS c FROM t
), gen AS (
    SELECT u.id AS user_id, u.n, c,
           date_trunc('milliseconds', now() - random() * interval '180 days') AS updated_at,
           date_trunc('milliseconds', random() * interval '7 days') AS age
    FROM bench_users u CROSS JOIN generate_series(1, 100) AS c
)
INSERT INTO chats (user_id, title, subject_id, topic_id, status, message_count,
                   last_message_preview, created_at, updated_at)
SELECT gen.user_id,
       'Chat ' || gen.c || ' of user ' || gen.n,
       CASE WHEN gen.c % 3 = 0 THEN NULL ELSE t.subject_id END,
       CASE WHEN gen.c % 3 = 0 THEN NULL ELSE t.id END,
       CASE WHEN gen.c % 4 = 0 THEN 'ended' ELSE 'in_progress' END,
       2 + (gen.c * 7 + gen.n) % 39,
       'So the reason the ball keeps moving is that no net force acts on it, right? (' || gen.c || ')',
       gen.updated_at - gen.age,
       gen.updated_at
FROM gen CROSS JOIN tc
JOIN t ON t.k = (gen.n * 100 + gen.c) % tc.c;

VACUUM ANALYZE bench_users;
VACUUM ANALYZE users;
VACUUM ANALYZE chats;
