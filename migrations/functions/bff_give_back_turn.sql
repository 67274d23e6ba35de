-- Gives a reserved tutoring turn back to the learner's day it was counted in (bff_reserve_turn):
-- its reply never reached the learner. TurnQuota.giveBack calls it, and bff_admit_turn when a turn
-- it reserved is refused after all. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_give_back_turn(p_user uuid, p_day date)
RETURNS void
LANGUAGE sql AS $$
    UPDATE plan_usage SET turns = turns - 1
    WHERE user_id = p_user AND day = p_day AND turns > 0
$$;
