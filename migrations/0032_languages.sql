-- Japanese first, English second (issue 34, requirements §2.3): the learner's language, which a
-- push (it has no request) and a request without a usable Accept-Language are answered in, and
-- the catalogue's names in both languages.
--
-- The catalogue is shared with the web, whose `name` stays as the web wrote it; name_ja and
-- name_en sit beside it, NULL where nobody has translated a row yet (the API then falls back to
-- `name`). The seeded rows get the high-school curriculum's usual terms.
ALTER TABLE user_settings
    ADD COLUMN language text NOT NULL DEFAULT 'ja' CHECK (language IN ('ja', 'en'));

ALTER TABLE subjects
    ADD COLUMN name_ja text NULL CHECK (length(name_ja) BETWEEN 1 AND 100),
    ADD COLUMN name_en text NULL CHECK (length(name_en) BETWEEN 1 AND 100);

ALTER TABLE topics
    ADD COLUMN name_ja text NULL CHECK (length(name_ja) BETWEEN 1 AND 100),
    ADD COLUMN name_en text NULL CHECK (length(name_en) BETWEEN 1 AND 100);
