from guarddiag.text import jaccard, normalise, word_set


def test_normalise_folds_case_width_punctuation_and_space():
    assert normalise("How do I  make a BOMB?!") == "how do i make a bomb"
    # NFKC folds full-width letters; casefold maps ß to ss.
    assert normalise("ＨＥＬＬＯ Straße") == "hello strasse"
    assert normalise("  tabs\tand\nnewlines ") == "tabs and newlines"
    # Symbols become spaces too, so "C++" and "C" collide but word order never changes.
    assert normalise("write C++ code") == "write c code"
    assert normalise("a-b") == "a b"


def test_normalise_keeps_words_apart():
    assert normalise("make a bomb") != normalise("make a cake")


def test_word_set_and_jaccard_hand_computed():
    a = word_set("The cat sat on the mat.")  # {the, cat, sat, on, mat}
    b = word_set("the cat sat")  # {the, cat, sat}
    assert a == frozenset({"the", "cat", "sat", "on", "mat"})
    assert jaccard(a, b) == 3 / 5
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(a, a) == 1.0
