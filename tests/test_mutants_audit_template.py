"""The template form's slot count (guarddiag.audit.template), written against a surviving
mutant: a text needs MIN_FIXED_WORDS (4) words besides *all* its slots, however many slots it
has."""

from __future__ import annotations

from guarddiag.audit.template import template_form


def test_every_slot_is_counted_against_the_fixed_words():
    # '"Hello" by Adele' → qslot by nslot: two slots, one other word ("by") < 2: no template.
    assert template_form('"Hello" by Adele', min_words=2) is None
    # One more word ("sing"): two other words, so the form stands at a floor of two.
    assert template_form('Sing "Hello" by Adele', min_words=2) == "sing qslot by nslot"
    # One slot and two other words is enough too.
    assert template_form('Sing "Hello" now', min_words=2) == "sing qslot now"
    # The default floor is four: three other words and two slots are not enough, four are.
    assert template_form('Please sing "Hello" by Adele') is None
    assert template_form('Please sing me "Hello" by Adele') == "please sing me qslot by nslot"
