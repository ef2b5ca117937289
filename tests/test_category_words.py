"""The category lexicon (issue 21, item 3): general Chinese vocabulary, consistent with itself."""

from memory._recall.category_words import CATEGORIES, NOT_A_KIND, SCOPE, SET_FORMS, WIDER, WORK, WORK_KINDS


def test_every_kind_referred_to_is_a_kind():
    kinds = set(CATEGORIES)
    assert WORK_KINDS <= kinds and SCOPE <= kinds and WORK not in kinds
    for kind, wider in WIDER.items():
        assert kind in kinds and wider <= kinds and kind not in wider


def test_every_kind_has_names_and_every_word_is_normalised():
    for kind, spec in CATEGORIES.items():
        assert spec.names, kind
        for word in spec.names | spec.cues | spec.title_cues:
            assert word == word.casefold().strip() and word, (kind, word)
    assert all(form == form.strip() and form for form in SET_FORMS)


def test_not_a_kind_words_each_hold_a_one_character_word_of_the_lexicon():
    single = {w for spec in CATEGORIES.values() for w in spec.names | spec.cues | spec.title_cues if len(w) == 1}
    for word in NOT_A_KIND:
        assert len(word) > 1 and any(ch in single for ch in word), word
