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

-- The misconception tags' labels, which chats and recalls show, in both languages beside the
-- web's `label` (the tag extraction's prompt keeps `label`).
ALTER TABLE tags
    ADD COLUMN label_ja text NULL CHECK (length(label_ja) BETWEEN 1 AND 200),
    ADD COLUMN label_en text NULL CHECK (length(label_en) BETWEEN 1 AND 200);

UPDATE tags AS t SET label_ja = v.ja, label_en = v.en
FROM (VALUES
    ('math.sign_error',                    '符号のミス',                         'Sign error'),
    ('math.order_of_operations',           '計算の順序',                         'Order of operations'),
    ('math.distribution_error',            'かっこの展開（分配法則）のミス',     'Incorrect distribution over brackets'),
    ('math.fraction_arithmetic',           '分数の計算',                         'Fraction arithmetic'),
    ('math.discriminant_misuse',           '判別式の使い方の誤り',               'Misuse of the discriminant'),
    ('physics.unit_conversion',            '単位の換算',                         'Unit conversion'),
    ('physics.vector_direction',           'ベクトルの向きの見落とし',           'Ignoring vector direction'),
    ('physics.force_implies_motion',       '運動には力が必要だという思い込み',   'Believing motion requires a net force'),
    ('physics.mass_weight_confusion',      '質量と重さの混同',                   'Confusing mass and weight'),
    ('physics.current_used_up',            '電流が回路で減るという思い込み',     'Believing current is used up in a circuit'),
    ('chemistry.mole_ratio',               '物質量の比の誤り',                   'Wrong mole ratio'),
    ('chemistry.unbalanced_equation',      '係数のそろっていない反応式',         'Unbalanced equation'),
    ('chemistry.ionic_covalent_confusion', 'イオン結合と共有結合の混同',         'Confusing ionic and covalent bonding'),
    ('chemistry.oxidation_state',          '酸化数の誤り',                       'Wrong oxidation state'),
    ('chemistry.ph_scale',                 'pH の読み違い',                      'Misreading the pH scale'),
    ('biology.mitosis_meiosis_confusion',  '体細胞分裂と減数分裂の混同',         'Confusing mitosis and meiosis'),
    ('biology.dominant_means_common',      '顕性（優性）は多いという思い込み',   'Believing dominant means common'),
    ('biology.lamarckian_inheritance',     '獲得形質は遺伝するという思い込み',   'Inheritance of acquired traits'),
    ('biology.plants_no_respiration',      '植物は呼吸しないという思い込み',     'Believing plants do not respire'),
    ('biology.gene_allele_confusion',      '遺伝子と対立遺伝子の混同',           'Confusing genes and alleles'),
    ('english.subject_verb_agreement',     '主語と動詞の一致',                   'Subject-verb agreement'),
    ('english.tense_consistency',          '時制の一致',                         'Tense consistency'),
    ('english.article_usage',              '冠詞の使い方（a/an/the）',           'Article usage (a/an/the)'),
    ('english.preposition_choice',         '前置詞の選び方',                     'Preposition choice'),
    ('english.false_friend',               '和製英語の誤用',                     'False friends (katakana English)'),
    ('japanese.keigo_misuse',              '敬語の誤用',                         'Misuse of honorific language'),
    ('japanese.particle_choice',           '助詞の選び方',                       'Particle choice'),
    ('japanese.kanji_reading',             '漢字の読み違い',                     'Wrong kanji reading'),
    ('japanese.classical_conjugation',     '古文の活用',                         'Classical verb conjugation'),
    ('japanese.kanbun_reading_order',      '漢文を読む順序',                     'Kanbun reading order')
) AS v (code, ja, en)
WHERE t.code = v.code;
