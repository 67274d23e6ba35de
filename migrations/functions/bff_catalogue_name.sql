-- A catalogue row's name (subjects, topics) in a language (issue 34): its name_ja or name_en, else
-- the web's own `name` for a row nobody has translated yet. Every read that shows a catalogue name
-- to a learner goes through it, so the fallback is decided once. This file is its one full text
-- (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_catalogue_name(p_language text, p_name text, p_name_ja text, p_name_en text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(CASE p_language WHEN 'ja' THEN p_name_ja WHEN 'en' THEN p_name_en END, p_name)
$$;
