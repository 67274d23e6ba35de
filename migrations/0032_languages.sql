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

-- The seeded rows (0005) in both languages. A row the web wrote itself keeps NULLs until someone
-- translates it; `bff_catalogue_name` falls back to its `name`.
UPDATE subjects AS s SET name_ja = v.ja, name_en = v.en
FROM (VALUES
    ('math',      '数学', 'Mathematics'),
    ('physics',   '物理', 'Physics'),
    ('chemistry', '化学', 'Chemistry'),
    ('biology',   '生物', 'Biology'),
    ('english',   '英語', 'English'),
    ('japanese',  '国語', 'Japanese')
) AS v (id, ja, en)
WHERE s.id = v.id;

UPDATE topics AS t SET name_ja = v.ja, name_en = v.en
FROM (VALUES
    ('math.linear_equations',      '一次方程式',             'Linear equations'),
    ('math.quadratics',            '二次方程式',             'Quadratic equations'),
    ('math.functions',             '関数とグラフ',           'Functions and graphs'),
    ('math.trigonometry',          '三角比・三角関数',       'Trigonometry'),
    ('math.probability',           '確率',                   'Probability'),
    ('math.calculus',              '微分・積分',             'Differentiation and integration'),
    ('physics.kinematics',         '物体の運動',             'Kinematics'),
    ('physics.forces',             '力と運動の法則',         'Forces and Newton''s laws'),
    ('physics.energy',             '仕事とエネルギー',       'Work and energy'),
    ('physics.waves',              '波',                     'Waves'),
    ('physics.electricity',        '電気回路',               'Electric circuits'),
    ('chemistry.atomic_structure', '原子の構造',             'Atomic structure'),
    ('chemistry.bonding',          '化学結合',               'Chemical bonding'),
    ('chemistry.moles',            '物質量と化学反応式',     'The mole and stoichiometry'),
    ('chemistry.acids_bases',      '酸と塩基',               'Acids and bases'),
    ('chemistry.redox',            '酸化と還元',             'Oxidation and reduction'),
    ('biology.cells',              '細胞',                   'Cells'),
    ('biology.genetics',           '遺伝',                   'Genetics'),
    ('biology.evolution',          '進化',                   'Evolution'),
    ('biology.ecology',            '生態系',                 'Ecology'),
    ('biology.human_body',         'ヒトの体のしくみ',       'Human body systems'),
    ('english.grammar',            '英文法',                 'Grammar'),
    ('english.vocabulary',         '語彙',                   'Vocabulary'),
    ('english.reading',            '長文読解',               'Reading comprehension'),
    ('english.writing',            '英作文',                 'Writing'),
    ('english.listening',          'リスニング',             'Listening'),
    ('japanese.modern_reading',    '現代文',                 'Modern prose reading'),
    ('japanese.classical',         '古文',                   'Classical Japanese (kobun)'),
    ('japanese.kanbun',            '漢文',                   'Classical Chinese (kanbun)'),
    ('japanese.kanji',             '漢字',                   'Kanji'),
    ('japanese.essay',             '小論文',                 'Essay writing')
) AS v (id, ja, en)
WHERE t.id = v.id;
