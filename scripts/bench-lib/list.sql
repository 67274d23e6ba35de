\set n random(1, 1000)
SELECT id, title, subject_id, topic_id, status, created_at, updated_at, message_count, last_message_preview FROM chats WHERE user_id = md5('bench-user-' || :n)::uuid AND deleted_at IS NULL ORDER BY updated_at DESC, id DESC LIMIT 21;
