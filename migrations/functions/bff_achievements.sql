-- A learner's achievements in one statement (Achievements/AchievementStore.swift): the streak in
-- learner days (bff_learner_day's day and zone), the totals, the mastery per subject, and the trophies
-- of the rules passed in (p_codes, p_metrics, p_targets: Achievements/AchievementRules.swift), each
-- unlocked once, at the moment its rule first held, as the facts say.
--
-- Each call computes the answer and stores it with the fold; a read gives the stored answer again
-- while it holds (bff_stored_achievements) and calls this only when it does not. The learner's facts (bff_learner_facts) are read from `settled_through` on, in order,
-- continuing the streak and count folded there; the part older than p_settle seconds is folded in,
-- the rest read again next time: a fact committed late, stamped before the cut, would otherwise be
-- missed for good. Each computation writes its fold and answer whole, so two at once both write a
-- correct state.
--
-- Metrics a rule may name: `turns` (learner messages: the target-th one's instant), `streak` (learner
-- days in a row with a fact: the first fact of the day the run first reached the target), `recalls`
-- (finished recalls: the target-th done_at), `mastered_tags` (tags whose newest mastery, that of
-- their most recently updated chat_tags row, is at least p_mastered: the target-th such row's
-- updated_at), `mastered_subjects` (subjects all of whose tags are mastered: the latest of their
-- tags' instants). A rule added after the facts it counts were folded unlocks at the read that finds
-- it holding (their instants are no longer read). A subject's tags are those whose code starts with
-- its id and a dot, the catalogue's convention (Tutoring/TagExtraction).
--
-- `unlocked_codes` and `unlocked_at` are the learner's trophies, pairwise. This file is its one full
-- text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_achievements(
    p_user uuid, p_default_zone text, p_settle double precision, p_mastered double precision,
    p_codes text[], p_metrics text[], p_targets integer[], p_rules_key text)
RETURNS TABLE (
    learner_language text, current_streak integer, longest_streak integer, streak_today_done boolean,
    total_turns bigint, total_evaluated_chats bigint, total_recalls bigint, total_mastered_tags integer,
    total_mastered_subjects integer, subjects text[], subjects_mastered integer[], subjects_total integer[],
    unlocked_codes text[], unlocked_at timestamptz[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_today date;
    v_zone text;
    v_cut timestamptz := now() - make_interval(secs => p_settle);
    v_found boolean;
    v_through timestamptz;
    v_turns bigint := 0;
    v_last date;
    v_run integer := 0;
    v_longest integer := 0;
    -- The state after the facts stamped before v_cut: what is folded in.
    s_through timestamptz;
    s_turns bigint;
    s_last date;
    s_run integer;
    s_longest integer;
    v_locked text[];
    v_new_codes text[] := '{}';
    v_new_at timestamptz[] := '{}';
    v_rules integer := coalesce(array_length(p_codes, 1), 0);
    v_current integer;
    v_evaluated bigint;
    v_recalls bigint;
    v_mastered integer;
    v_mastered_at timestamptz[];
    v_subjects text[];
    v_subject_mastered integer[];
    v_subject_totals integer[];
    v_complete_at timestamptz[];
    v_at timestamptz;
    v_day date;
    v_ends timestamptz;
    v_codes text[];
    v_codes_at timestamptz[];
    f record;
    i integer;
BEGIN
    -- One computation per learner at a time: the second sees what the first stored, so that no
    -- stored answer lacks a trophy the other unlocked meanwhile.
    PERFORM pg_advisory_xact_lock(hashtextextended('bff_achievements:' || p_user::text, 0));
    SELECT d.day, d.zone, d.ends_at INTO v_today, v_zone, v_ends FROM bff_learner_day(p_user, p_default_zone) d;

    SELECT pr.settled_through, pr.settled_turns, pr.settled_last_day, pr.settled_run, pr.settled_longest
    INTO v_through, v_turns, v_last, v_run, v_longest
    FROM achievement_progress pr WHERE pr.user_id = p_user;
    v_found := FOUND;
    IF NOT v_found THEN
        v_through := '-infinity';
        v_turns := 0;
        v_last := NULL;
        v_run := 0;
        v_longest := 0;
    END IF;
    s_through := greatest(v_through, v_cut);
    s_turns := v_turns;
    s_last := v_last;
    s_run := v_run;
    s_longest := v_longest;
    SELECT coalesce(array_agg(c.code), '{}') INTO v_locked FROM unnest(p_codes) AS c(code)
    WHERE NOT EXISTS (SELECT 1 FROM trophy_unlocks t WHERE t.user_id = p_user AND t.code = c.code);

    FOR f IN SELECT x.at, x.kind FROM bff_learner_facts(p_user, v_through) x ORDER BY x.at LOOP
        IF f.kind = 'turn' THEN
            v_turns := v_turns + 1;
            FOR i IN 1 .. v_rules LOOP
                IF p_metrics[i] = 'turns' AND p_targets[i] = v_turns AND p_codes[i] = ANY (v_locked) THEN
                    v_new_codes := v_new_codes || p_codes[i];
                    v_new_at := v_new_at || f.at;
                    v_locked := array_remove(v_locked, p_codes[i]);
                END IF;
            END LOOP;
        END IF;
        v_day := (f.at AT TIME ZONE v_zone)::date;
        -- A day before the newest one is only seen after the time zone changed westwards: those
        -- days were counted in the zone they were lived in.
        IF v_last IS NULL OR v_day > v_last THEN
            v_run := CASE WHEN v_day = v_last + 1 THEN v_run + 1 ELSE 1 END;
            v_last := v_day;
            v_longest := greatest(v_longest, v_run);
            FOR i IN 1 .. v_rules LOOP
                IF p_metrics[i] = 'streak' AND p_targets[i] = v_run AND p_codes[i] = ANY (v_locked) THEN
                    v_new_codes := v_new_codes || p_codes[i];
                    v_new_at := v_new_at || f.at;
                    v_locked := array_remove(v_locked, p_codes[i]);
                END IF;
            END LOOP;
        END IF;
        IF f.at < v_cut THEN
            s_turns := v_turns;
            s_last := v_last;
            s_run := v_run;
            s_longest := v_longest;
        END IF;
    END LOOP;

    SELECT count(*) INTO v_evaluated FROM chat_evaluations e WHERE e.user_id = p_user;
    SELECT count(*) INTO v_recalls FROM recalls r WHERE r.user_id = p_user AND r.status = 'done';

    WITH newest AS (
        SELECT DISTINCT ON (ct.tag_id) ct.tag_id, ct.mastery >= p_mastered AS mastered, ct.updated_at
        FROM chat_tags ct WHERE ct.user_id = p_user
        ORDER BY ct.tag_id, ct.updated_at DESC, ct.mastery DESC
    ),
    per_subject AS (
        SELECT s.id, s.position, count(*)::integer AS total,
               count(*) FILTER (WHERE n.mastered)::integer AS mastered,
               CASE WHEN bool_and(coalesce(n.mastered, false)) THEN max(n.updated_at) END AS complete_at
        FROM subjects s
        JOIN tags t ON starts_with(t.code, s.id || '.')
        LEFT JOIN newest n ON n.tag_id = t.id
        GROUP BY s.id, s.position
    )
    SELECT (SELECT count(*)::integer FROM newest n WHERE n.mastered),
           (SELECT array_agg(n.updated_at ORDER BY n.updated_at) FROM newest n WHERE n.mastered),
           coalesce(array_agg(p.id ORDER BY p.position, p.id), '{}'),
           coalesce(array_agg(p.mastered ORDER BY p.position, p.id), '{}'),
           coalesce(array_agg(p.total ORDER BY p.position, p.id), '{}'),
           array_agg(p.complete_at ORDER BY p.complete_at) FILTER (WHERE p.complete_at IS NOT NULL)
    INTO v_mastered, v_mastered_at, v_subjects, v_subject_mastered, v_subject_totals, v_complete_at
    FROM per_subject p;

    FOR i IN 1 .. v_rules LOOP
        CONTINUE WHEN NOT (p_codes[i] = ANY (v_locked));
        v_at := NULL;
        IF p_metrics[i] = 'recalls' AND p_targets[i] <= v_recalls THEN
            SELECT r.done_at INTO v_at FROM recalls r
            WHERE r.user_id = p_user AND r.status = 'done'
            ORDER BY r.done_at OFFSET p_targets[i] - 1 LIMIT 1;
        ELSIF p_metrics[i] = 'mastered_tags' THEN
            v_at := v_mastered_at[p_targets[i]];
        ELSIF p_metrics[i] = 'mastered_subjects' THEN
            v_at := v_complete_at[p_targets[i]];
        ELSIF (p_metrics[i] = 'turns' AND p_targets[i] <= v_turns) OR (p_metrics[i] = 'streak' AND p_targets[i] <= v_longest) THEN
            -- Held already in what was folded before this rule existed.
            v_at := now();
        END IF;
        IF v_at IS NOT NULL THEN
            v_new_codes := v_new_codes || p_codes[i];
            v_new_at := v_new_at || v_at;
        END IF;
    END LOOP;

    IF cardinality(v_new_codes) > 0 THEN
        INSERT INTO trophy_unlocks (user_id, code, unlocked_at)
        SELECT p_user, n.code, n.at FROM unnest(v_new_codes, v_new_at) AS n(code, at)
        WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = p_user)
        ON CONFLICT (user_id, code) DO NOTHING;
    END IF;

    -- Today counts when done; else a run that ended yesterday is still current until today ends.
    v_current := CASE WHEN v_last >= v_today - 1 THEN v_run ELSE 0 END;
    SELECT coalesce(array_agg(u.code ORDER BY u.code), '{}'), coalesce(array_agg(u.unlocked_at ORDER BY u.code), '{}')
    INTO v_codes, v_codes_at
    FROM trophy_unlocks u WHERE u.user_id = p_user;
    INSERT INTO achievement_progress AS pr (
        user_id, settled_through, settled_turns, settled_last_day, settled_run, settled_longest,
        answered_at, answered_until, answered_rules, streak_current, streak_longest, today_done, turns,
        evaluated_chats, recalls_completed, mastered_tags, mastered_subjects, subject_ids, subject_mastered,
        subject_totals, trophy_codes, trophy_unlocked_at)
    SELECT p_user, s_through, s_turns, s_last, s_run, s_longest,
           now(), v_ends, p_rules_key, v_current, v_longest, coalesce(v_last >= v_today, false), v_turns,
           v_evaluated, v_recalls, coalesce(v_mastered, 0), coalesce(cardinality(v_complete_at), 0), v_subjects,
           v_subject_mastered, v_subject_totals, v_codes, v_codes_at
    WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = p_user)
    ON CONFLICT (user_id) DO UPDATE SET
        settled_through = excluded.settled_through, settled_turns = excluded.settled_turns,
        settled_last_day = excluded.settled_last_day, settled_run = excluded.settled_run,
        settled_longest = excluded.settled_longest, answered_at = excluded.answered_at,
        answered_until = excluded.answered_until, answered_rules = excluded.answered_rules,
        streak_current = excluded.streak_current, streak_longest = excluded.streak_longest,
        today_done = excluded.today_done, turns = excluded.turns, evaluated_chats = excluded.evaluated_chats,
        recalls_completed = excluded.recalls_completed, mastered_tags = excluded.mastered_tags,
        mastered_subjects = excluded.mastered_subjects, subject_ids = excluded.subject_ids,
        subject_mastered = excluded.subject_mastered, subject_totals = excluded.subject_totals,
        trophy_codes = excluded.trophy_codes, trophy_unlocked_at = excluded.trophy_unlocked_at;

    RETURN QUERY
    SELECT (SELECT s.language FROM user_settings s WHERE s.user_id = p_user),
           v_current, v_longest, coalesce(v_last >= v_today, false),
           v_turns, v_evaluated, v_recalls, coalesce(v_mastered, 0), coalesce(cardinality(v_complete_at), 0),
           v_subjects, v_subject_mastered, v_subject_totals, v_codes, v_codes_at;
END
$$;
