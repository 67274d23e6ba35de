-- The learner's achievements as bff_achievements last stored them, while they still hold: the learner
-- day they were computed for has not ended, the rules are the same (p_rules_key), and nothing they are
-- made of changed since. Every change to what they read stamps a row a probe here finds: a message
-- stamps its chat, as do an evaluation, a recall's re-evaluation and a deletion; tags, evaluations,
-- finished recalls and the settings (the time zone) carry their own time. A change committed after
-- the answer's snapshot but stamped before it (a transaction's now() is its start) is caught by
-- looking p_fresh seconds further back. No row: the caller computes (Achievements/AchievementStore.swift).
-- The language is the learner's setting as it is now (NULL without settings).
-- This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_stored_achievements(p_user uuid, p_fresh double precision, p_rules_key text)
RETURNS TABLE (
    learner_language text, current_streak integer, longest_streak integer, streak_today_done boolean,
    total_turns bigint, total_evaluated_chats bigint, total_recalls bigint, total_mastered_tags integer,
    total_mastered_subjects integer, subjects text[], subjects_mastered integer[], subjects_total integer[],
    unlocked_codes text[], unlocked_at timestamptz[])
LANGUAGE sql STABLE AS $$
    SELECT s.language, pr.streak_current, pr.streak_longest, pr.today_done, pr.turns, pr.evaluated_chats,
           pr.recalls_completed, pr.mastered_tags, pr.mastered_subjects, pr.subject_ids, pr.subject_mastered,
           pr.subject_totals, pr.trophy_codes, pr.trophy_unlocked_at
    FROM achievement_progress pr
    LEFT JOIN user_settings s ON s.user_id = pr.user_id
    WHERE pr.user_id = p_user AND pr.answered_until > now() AND pr.answered_rules = p_rules_key
      AND (s.updated_at IS NULL OR s.updated_at < pr.answered_at - make_interval(secs => p_fresh))
      AND NOT EXISTS (
          SELECT 1 FROM chats c WHERE c.user_id = p_user AND c.updated_at >= pr.answered_at - make_interval(secs => p_fresh))
      AND NOT EXISTS (
          SELECT 1 FROM chat_tags ct WHERE ct.user_id = p_user AND ct.updated_at >= pr.answered_at - make_interval(secs => p_fresh))
      AND NOT EXISTS (
          SELECT 1 FROM chat_evaluations e
          WHERE e.user_id = p_user AND e.updated_at >= pr.answered_at - make_interval(secs => p_fresh))
      AND NOT EXISTS (
          SELECT 1 FROM recalls r
          WHERE r.user_id = p_user AND r.status = 'done' AND r.done_at >= pr.answered_at - make_interval(secs => p_fresh))
$$;
