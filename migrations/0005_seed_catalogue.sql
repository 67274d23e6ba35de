-- Catalogue seed: subjects, their topics and misconception tags.
-- ON CONFLICT DO NOTHING leaves rows already provided by the web product untouched.

INSERT INTO subjects (id, name, position) VALUES
    ('math',      'Mathematics', 1),
    ('physics',   'Physics',     2),
    ('chemistry', 'Chemistry',   3),
    ('biology',   'Biology',     4),
    ('english',   'English',     5),
    ('japanese',  'Japanese',    6)
ON CONFLICT (id) DO NOTHING;

INSERT INTO topics (id, subject_id, name, position) VALUES
    ('math.linear_equations',       'math',      'Linear equations',              1),
    ('math.quadratics',             'math',      'Quadratic equations',           2),
    ('math.functions',              'math',      'Functions and graphs',          3),
    ('math.trigonometry',           'math',      'Trigonometry',                  4),
    ('math.probability',            'math',      'Probability',                   5),
    ('math.calculus',               'math',      'Differentiation and integration', 6),

    ('physics.kinematics',          'physics',   'Kinematics',                    1),
    ('physics.forces',              'physics',   'Forces and Newton''s laws',     2),
    ('physics.energy',              'physics',   'Work and energy',               3),
    ('physics.waves',               'physics',   'Waves',                         4),
    ('physics.electricity',         'physics',   'Electric circuits',             5),

    ('chemistry.atomic_structure',  'chemistry', 'Atomic structure',              1),
    ('chemistry.bonding',           'chemistry', 'Chemical bonding',              2),
    ('chemistry.moles',             'chemistry', 'The mole and stoichiometry',    3),
    ('chemistry.acids_bases',       'chemistry', 'Acids and bases',               4),
    ('chemistry.redox',             'chemistry', 'Oxidation and reduction',       5),

    ('biology.cells',               'biology',   'Cells',                         1),
    ('biology.genetics',            'biology',   'Genetics',                      2),
    ('biology.evolution',           'biology',   'Evolution',                     3),
    ('biology.ecology',             'biology',   'Ecology',                       4),
    ('biology.human_body',          'biology',   'Human body systems',            5),

    ('english.grammar',             'english',   'Grammar',                       1),
    ('english.vocabulary',          'english',   'Vocabulary',                    2),
    ('english.reading',             'english',   'Reading comprehension',         3),
    ('english.writing',             'english',   'Writing',                       4),
    ('english.listening',           'english',   'Listening',                     5),

    ('japanese.modern_reading',     'japanese',  'Modern prose reading',          1),
    ('japanese.classical',          'japanese',  'Classical Japanese (kobun)',    2),
    ('japanese.kanbun',             'japanese',  'Classical Chinese (kanbun)',    3),
    ('japanese.kanji',              'japanese',  'Kanji',                         4),
    ('japanese.essay',              'japanese',  'Essay writing',                 5)
ON CONFLICT (id) DO NOTHING;

INSERT INTO tags (code, label) VALUES
    ('math.sign_error',                    'Sign error'),
    ('math.order_of_operations',           'Order of operations'),
    ('math.distribution_error',            'Incorrect distribution over brackets'),
    ('math.fraction_arithmetic',           'Fraction arithmetic'),
    ('math.discriminant_misuse',           'Misuse of the discriminant'),

    ('physics.unit_conversion',            'Unit conversion'),
    ('physics.vector_direction',           'Ignoring vector direction'),
    ('physics.force_implies_motion',       'Believing motion requires a net force'),
    ('physics.mass_weight_confusion',      'Confusing mass and weight'),
    ('physics.current_used_up',            'Believing current is used up in a circuit'),

    ('chemistry.mole_ratio',               'Wrong mole ratio'),
    ('chemistry.unbalanced_equation',      'Unbalanced equation'),
    ('chemistry.ionic_covalent_confusion', 'Confusing ionic and covalent bonding'),
    ('chemistry.oxidation_state',          'Wrong oxidation state'),
    ('chemistry.ph_scale',                 'Misreading the pH scale'),

    ('biology.mitosis_meiosis_confusion',  'Confusing mitosis and meiosis'),
    ('biology.dominant_means_common',      'Believing dominant means common'),
    ('biology.lamarckian_inheritance',     'Inheritance of acquired traits'),
    ('biology.plants_no_respiration',      'Believing plants do not respire'),
    ('biology.gene_allele_confusion',      'Confusing genes and alleles'),

    ('english.subject_verb_agreement',     'Subject-verb agreement'),
    ('english.tense_consistency',          'Tense consistency'),
    ('english.article_usage',              'Article usage (a/an/the)'),
    ('english.preposition_choice',         'Preposition choice'),
    ('english.false_friend',               'False friends (katakana English)'),

    ('japanese.keigo_misuse',              'Misuse of honorific language'),
    ('japanese.particle_choice',           'Particle choice'),
    ('japanese.kanji_reading',             'Wrong kanji reading'),
    ('japanese.classical_conjugation',     'Classical verb conjugation'),
    ('japanese.kanbun_reading_order',      'Kanbun reading order')
ON CONFLICT (code) DO NOTHING;
